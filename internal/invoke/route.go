// Package invoke is the data plane (InvokeEndpoint). This file holds only
// the route types hosting publishes; the invoke branch owns the package
// and defines them identically (drop this file when merging it).
package invoke

// Route is how one endpoint is served: what hosting publishes for it.
type Route struct {
	// Status is the endpoint's EndpointStatus, named in the error when no
	// variant serves.
	Status string
	// Mode is "" (one container), "Serial" or "Direct".
	Mode string
	// Containers are the container hostnames in order; in Direct mode the
	// valid values of TargetContainerHostname.
	Containers []string
	// Variants are the serving fleet; empty while Creating or Failed.
	Variants []Variant
}

// Variant is one production variant of the serving fleet.
type Variant struct {
	Name      string
	Weight    float64
	Instances []Instance
}

// Instance is one model server of a variant.
type Instance struct {
	ID string
	// Addr is in the model server's --listen form: "unix:/path" or
	// "127.0.0.1:port".
	Addr string
}
