package invoke

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

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

// Table maps endpoint names to their routes. Hosting is its one writer;
// every invocation reads it without a lock: a read is one atomic load of
// an immutable snapshot, and Set and Delete copy the map.
//
// Names match case-insensitively, as endpoint names are unique that way.
type Table struct {
	snap atomic.Pointer[snapshot]

	mu sync.Mutex // serialises writers
	// counters are the outstanding-request counters by instance ID. An
	// instance keeps its counter across Sets, so that requests in flight
	// to it are still counted once a new route leaves it out (draining).
	counters map[string]*counter
}

// snapshot is one immutable version of the table.
type snapshot struct {
	routes map[string]*route // by lower-cased endpoint name
}

// route is a Route prepared for picking.
type route struct {
	name       string // as Set was given it
	status     string
	mode       string
	containers []string
	variants   []*variant
	// cum are the cumulative weights of the variants that take weighted
	// traffic (weight > 0 and instances), in order; total is the last.
	cum      []float64
	weighted []*variant
	total    float64
}

type variant struct {
	name      string
	weight    float64
	instances []*instance
	// series caches the variant's metrics (metrics.of), so a request
	// does not build the lookup key.
	series atomic.Pointer[variantMetrics]
}

type instance struct {
	id   string
	addr string
	url  string // the instance's POST /invocations, host from hostOf
	n    *counter
}

// counter counts the requests in flight to one instance.
type counter struct {
	n atomic.Int64
	// goneSince is when the instance left every route (zero while it is in
	// one); written under Table.mu only.
	goneSince time.Time
}

// counterTTL is how long a counter outlives its instance's last route
// once it reads zero, before Set forgets it.
const counterTTL = time.Minute

// NewTable returns an empty table.
func NewTable() *Table {
	t := &Table{counters: map[string]*counter{}}
	t.snap.Store(&snapshot{routes: map[string]*route{}})
	return t
}

// Set replaces endpoint's route with r. r is copied; the caller may reuse
// it. A nil r is a route with nothing serving.
func (t *Table) Set(endpoint string, r *Route) {
	if r == nil {
		r = &Route{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.snap.Load()
	routes := make(map[string]*route, len(old.routes)+1)
	for k, v := range old.routes {
		routes[k] = v
	}
	routes[strings.ToLower(endpoint)] = t.prepare(endpoint, r)
	t.publish(routes)
}

// Delete removes endpoint's route: invocations answer that it does not
// exist.
func (t *Table) Delete(endpoint string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.snap.Load()
	key := strings.ToLower(endpoint)
	if _, ok := old.routes[key]; !ok {
		return
	}
	routes := make(map[string]*route, len(old.routes))
	for k, v := range old.routes {
		if k != key {
			routes[k] = v
		}
	}
	t.publish(routes)
}

// Outstanding returns the number of requests in flight to the instance,
// whether or not a route still names it. Once a Set or Delete that leaves
// the instance out has returned, Outstanding counts every request that
// can still reach it, so an instance is drained when it reads 0.
func (t *Table) Outstanding(instanceID string) int {
	t.mu.Lock()
	c := t.counters[instanceID]
	t.mu.Unlock()
	if c == nil {
		return 0
	}
	return int(c.n.Load())
}

// lookup returns the current snapshot and endpoint's route in it (nil
// when there is none).
func (t *Table) lookup(endpoint string) (*snapshot, *route) {
	s := t.snap.Load()
	r := s.routes[endpoint]
	if r == nil {
		r = s.routes[strings.ToLower(endpoint)]
	}
	return s, r
}

// prepare builds the immutable route for r, with each instance's counter.
// Called with t.mu held.
func (t *Table) prepare(name string, r *Route) *route {
	rt := &route{
		name:       name,
		status:     r.Status,
		mode:       r.Mode,
		containers: append([]string(nil), r.Containers...),
	}
	for _, v := range r.Variants {
		pv := &variant{name: v.Name, weight: v.Weight}
		for _, in := range v.Instances {
			c := t.counters[in.ID]
			if c == nil {
				c = &counter{}
				t.counters[in.ID] = c
			}
			pv.instances = append(pv.instances, &instance{id: in.ID, addr: in.Addr, url: "http://" + hostOf(in.Addr) + "/invocations", n: c})
		}
		rt.variants = append(rt.variants, pv)
		if v.Weight > 0 && len(pv.instances) > 0 {
			rt.total += v.Weight
			rt.cum = append(rt.cum, rt.total)
			rt.weighted = append(rt.weighted, pv)
		}
	}
	return rt
}

// publish stores routes as the new snapshot and ages the counters of
// instances no route names any more. Called with t.mu held.
func (t *Table) publish(routes map[string]*route) {
	t.snap.Store(&snapshot{routes: routes})
	live := map[string]bool{}
	for _, r := range routes {
		for _, v := range r.variants {
			for _, in := range v.instances {
				live[in.id] = true
			}
		}
	}
	now := time.Now()
	for id, c := range t.counters {
		switch {
		case live[id]:
			c.goneSince = time.Time{}
		case c.goneSince.IsZero():
			c.goneSince = now
		case now.Sub(c.goneSince) > counterTTL && c.n.Load() == 0:
			// Nothing can pick it: the last snapshot naming it is a
			// minute old.
			delete(t.counters, id)
		}
	}
}

// variant returns the route's variant named name (case-sensitive, as
// SageMaker's variant names are), or nil.
func (r *route) variant(name string) *variant {
	for _, v := range r.variants {
		if v.name == name {
			return v
		}
	}
	return nil
}

// serving reports whether any variant has an instance.
func (r *route) serving() bool {
	for _, v := range r.variants {
		if len(v.instances) > 0 {
			return true
		}
	}
	return false
}

// pickVariant picks a variant by weight; u is uniform in [0, 1). nil when
// no variant takes weighted traffic.
func (r *route) pickVariant(u float64) *variant {
	if len(r.weighted) == 0 {
		return nil
	}
	x := u * r.total
	for i, c := range r.cum {
		if x < c {
			return r.weighted[i]
		}
	}
	return r.weighted[len(r.weighted)-1]
}

// pickInstance returns the instance with the fewest requests in flight,
// ties broken by starting the scan at start (a random index), and counts
// one more request to it. nil when the variant has no instance.
func (v *variant) pickInstance(start int) *instance {
	n := len(v.instances)
	if n == 0 {
		return nil
	}
	var best *instance
	bestN := int64(-1)
	for i := 0; i < n; i++ {
		in := v.instances[(start+i)%n]
		c := in.n.n.Load()
		if best == nil || c < bestN {
			best, bestN = in, c
			if c == 0 {
				break
			}
		}
	}
	best.n.n.Add(1)
	return best
}

// has reports whether the route still names the instance at addr.
func (r *route) has(id string) bool {
	for _, v := range r.variants {
		for _, in := range v.instances {
			if in.id == id {
				return true
			}
		}
	}
	return false
}
