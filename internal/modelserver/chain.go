package modelserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/sagebox/sagebox/internal/wire"
)

// Multi-container models (SageMaker's CreateModel.Containers with
// InferenceExecutionConfig.Mode): every container is an Invoker of its own
// (a *Server, with its own workers and configuration), and one of these
// sits in front of them behind the same HTTP routes.
const (
	// ModeSerial runs each request through the containers in order (an
	// inference pipeline).
	ModeSerial = "Serial"
	// ModeDirect sends each request to the one container it names.
	ModeDirect = "Direct"

	// HeaderContainer names, on an answer that failed, the container that
	// failed it. The data plane turns it into ModelError's "from <container>".
	HeaderContainer = "X-Sagebox-Container"
	// HeaderTargetContainer is InvokeEndpoint's TargetContainerHostname:
	// the container a Direct request is for.
	HeaderTargetContainer = "X-Amzn-SageMaker-Target-Container-Hostname"
)

// Container is one container of a multi-container model.
type Container struct {
	Hostname string
	Invoker  Invoker
}

// Serial is an inference pipeline: an Invoker that runs a request through
// its containers in order.
//
//   - Container N's answer (body and Content-Type, exactly as it sent them)
//     is container N+1's request, as in SageMaker.
//   - The client's Accept goes to the last container only; the others get
//     none, so they answer in their default type (their
//     SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT, application/json unless set):
//     AWS's pipeline examples rely on JSON between containers and set that
//     variable on a stage to choose another.
//   - Every container sees the client's other request headers
//     (X-Amzn-SageMaker-Custom-Attributes included), with Content-Type and
//     Accept rewritten to its own request's. An intermediate container's
//     response headers are dropped; the last one's answer is the answer.
//   - Every container after the first gets the client's request as
//     Request.Original (context.original_request in Python); the first one's
//     request is the original.
//   - The first non-2xx answer, or error, stops the chain and is the
//     answer, with HeaderContainer naming that container.
type Serial struct{ containers []Container }

// NewSerial returns the pipeline over containers, in order.
func NewSerial(containers []Container) *Serial { return &Serial{containers: containers} }

// Invoke runs req through every container.
func (p *Serial) Invoke(ctx context.Context, req *Request, resp *Response) error {
	orig := wire.Original{ContentType: req.ContentType, Accept: req.Accept, Body: req.Body}
	last := len(p.containers) - 1
	stage := *req
	stage.Original = &orig
	for i, c := range p.containers {
		stage.Accept = ""
		if i == last {
			stage.Accept = req.Accept
		}
		stage.Headers = stageHeaders(req.Headers, stage.ContentType, stage.Accept)
		var r Response
		if err := c.Invoker.Invoke(ctx, &stage, &r); err != nil {
			resp.Headers = withContainer(r.Headers, c.Hostname)
			return err
		}
		if r.Status < 200 || r.Status > 299 || i == last {
			*resp = r
			if i < last || r.Status < 200 || r.Status > 299 {
				resp.Headers = withContainer(r.Headers, c.Hostname)
			}
			return nil
		}
		// The answer's body is not reused by the container that wrote it
		// (Response's contract), so it travels on without a copy.
		stage.Body, stage.ContentType = r.Body, r.ContentType
	}
	return nil
}

// stageHeaders is the client's headers with Content-Type and Accept set to
// a stage's own (left out when empty) and the body's length dropped.
func stageHeaders(in []wire.Header, contentType, accept string) []wire.Header {
	out := make([]wire.Header, 0, len(in)+2)
	for _, h := range in {
		switch {
		case strings.EqualFold(h.Name, "Content-Type"), strings.EqualFold(h.Name, "Accept"),
			strings.EqualFold(h.Name, "Content-Length"):
			continue
		}
		out = append(out, h)
	}
	if contentType != "" {
		out = append(out, wire.Header{Name: "Content-Type", Value: contentType})
	}
	if accept != "" {
		out = append(out, wire.Header{Name: "Accept", Value: accept})
	}
	return out
}

// withContainer returns hs plus HeaderContainer naming host, without
// changing hs's backing array.
func withContainer(hs []wire.Header, host string) []wire.Header {
	out := make([]wire.Header, 0, len(hs)+1)
	out = append(out, hs...)
	return append(out, wire.Header{Name: HeaderContainer, Value: host})
}

// Health is ready when every container is (containersHealth).
func (p *Serial) Health() Health { return containersHealth(p.containers) }

// Direct sends each request to the container its HeaderTargetContainer
// names (SageMaker's Direct mode); a request naming none, or one that is
// not there, is a 400 that lists the containers. A failed answer carries
// HeaderContainer, as in Serial.
type Direct struct {
	containers []Container
	names      string // "c1, c2", for messages
}

// NewDirect returns the router over containers.
func NewDirect(containers []Container) *Direct {
	hosts := make([]string, len(containers))
	for i, c := range containers {
		hosts[i] = c.Hostname
	}
	return &Direct{containers: containers, names: strings.Join(hosts, ", ")}
}

// Invoke sends req to its target container.
func (d *Direct) Invoke(ctx context.Context, req *Request, resp *Response) error {
	target, ok := "", false
	for _, h := range req.Headers {
		if strings.EqualFold(h.Name, HeaderTargetContainer) {
			target, ok = strings.TrimSpace(h.Value), true
			break
		}
	}
	if !ok || target == "" {
		return errorf(http.StatusBadRequest, TypeBadRequest,
			"this model's containers are invoked directly (Direct mode): name one with TargetContainerHostname "+
				"(the %s header); its containers are %s", HeaderTargetContainer, d.names)
	}
	for _, c := range d.containers {
		if c.Hostname != target {
			continue
		}
		var r Response
		if err := c.Invoker.Invoke(ctx, req, &r); err != nil {
			resp.Headers = withContainer(r.Headers, c.Hostname)
			return err
		}
		*resp = r
		if r.Status < 200 || r.Status > 299 {
			resp.Headers = withContainer(r.Headers, c.Hostname)
		}
		return nil
	}
	return errorf(http.StatusBadRequest, TypeBadRequest,
		"TargetContainerHostname %q is not a container of this model; its containers are %s", target, d.names)
}

// Health is ready when every container is (containersHealth).
func (d *Direct) Health() Health { return containersHealth(d.containers) }

// ContainerHealth is one container's part of a multi-container Health.
type ContainerHealth struct {
	Hostname string `json:"hostname"`
	Ready    bool   `json:"ready"`
	Phase    string `json:"phase"`
	Message  string `json:"message,omitempty"`
}

// phaseRank orders phases from the healthiest; a multi-container model is
// in the least healthy of its containers' phases.
var phaseRank = map[string]int{
	PhaseRunning: 0, PhaseNew: 1, PhasePreparing: 2, PhaseStopping: 3, PhaseStopped: 4, PhaseFailed: 5,
}

// containersHealth combines the containers' health: ready only when every
// container is; the message and error are the first failing container's
// (else the first not ready's), prefixed with "container <hostname>: ";
// workers are listed with their container's hostname.
func containersHealth(cs []Container) Health {
	h := Health{Ready: true, Phase: PhaseRunning, Workers: []WorkerStatus{}}
	notReady := ""
	for _, c := range cs {
		ch := c.Invoker.Health()
		h.Containers = append(h.Containers, ContainerHealth{Hostname: c.Hostname, Ready: ch.Ready, Phase: ch.Phase, Message: ch.Message})
		for _, w := range ch.Workers {
			w.Container = c.Hostname
			h.Workers = append(h.Workers, w)
		}
		if phaseRank[ch.Phase] > phaseRank[h.Phase] {
			h.Phase = ch.Phase
		}
		if ch.Err != nil && h.Err == nil {
			h.Err = fmt.Errorf("container %s: %w", c.Hostname, ch.Err)
		}
		if !ch.Ready {
			h.Ready = false
			if notReady == "" {
				notReady = "container " + c.Hostname + ": " + ch.Message
			}
		}
	}
	switch {
	case h.Err != nil:
		h.Message = h.Err.Error()
	case !h.Ready:
		h.Message = notReady
	}
	return h
}
