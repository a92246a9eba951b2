package controlplane

import (
	"context"

	"github.com/sagebox/sagebox"
)

// Hosting runs endpoints: the control plane stores what an endpoint should
// serve (its Pending deployment) and hosting moves it there, reporting
// through the metastore (Promote, FailPending). *hosting.Manager
// implements it.
type Hosting interface {
	// Reserve checks and holds capacity for dep before the control plane
	// stores it. A refusal is a *sagebox.Error with code
	// ResourceLimitExceeded naming the limit and what uses it. release
	// gives the reservation back (call it when storing fails); Deploy takes
	// it over.
	Reserve(ctx context.Context, endpoint string, dep *sagebox.Deployment) (release func(), err error)
	// Deploy starts moving the endpoint to its stored Pending deployment
	// (after CreateEndpoint, UpdateEndpoint or
	// UpdateEndpointWeightsAndCapacities stored it). Returns promptly.
	Deploy(ctx context.Context, endpoint string) error
	// Delete stops the endpoint's instances, then removes its record
	// (DeleteEndpoint stored Deleting).
	Delete(ctx context.Context, endpoint string) error
}

// Resource kinds of ARNs, as they appear in arn:aws:sagemaker:…:<kind>/<name>.
const (
	kindTrainingJob    = "training-job"
	kindModel          = "model"
	kindEndpointConfig = "endpoint-config"
	kindEndpoint       = "endpoint"
)

// noun names a kind in SageMaker's messages.
func noun(kind string) string {
	if kind == kindEndpointConfig {
		return "endpoint configuration"
	}
	return kind
}

// errNotFound is SageMaker's answer for a missing model, endpoint
// configuration or endpoint: `Could not find endpoint "arn:…:endpoint/x".`.
// The SageMaker SDK matches "Could not find" with the code
// ValidationException to tell that a resource is absent.
func (h *Handler) errNotFound(kind, name string) error {
	return sagebox.Errorf(sagebox.ErrValidation, "Could not find %s %q.", noun(kind), h.arn(kind, name))
}

// errExists is SageMaker's answer for a Create of a name already taken:
// `Cannot create already existing model "arn:…:model/x".`. The SageMaker
// SDK ignores it (with a warning) for CreateModel.
func (h *Handler) errExists(kind, name string) error {
	return sagebox.Errorf(sagebox.ErrValidation, "Cannot create already existing %s %q.", noun(kind), h.arn(kind, name))
}

// errNoHosting answers the endpoint operations that need hosting when the
// handler has none.
func errNoHosting() error {
	return sagebox.Errorf(codeServiceUnavailable, "This sagebox server was started without endpoint hosting: it cannot create, update or delete endpoints.")
}
