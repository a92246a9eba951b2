package sagebox

import (
	"fmt"
	"time"
)

// The endpoint's status changes only through these methods: the control
// plane calls BeginCreate, BeginUpdate and BeginDelete when a request
// asks for a change, and the hosting manager calls Promote and FailPending
// when the change has happened or could not.

// BeginCreate marks a new endpoint Creating towards dep, giving dep the
// endpoint's next generation number.
func (e *Endpoint) BeginCreate(now time.Time, dep *Deployment) {
	e.Internal.Generations++
	dep.Generation = e.Internal.Generations
	e.Internal.Pending = dep
	e.EndpointStatus = EndpointCreating
	e.FailureReason = ""
	e.CreationTime = NewTime(now)
	e.LastModifiedTime = NewTime(now)
	e.EndpointConfigName = dep.EndpointConfigName
}

// BeginUpdate marks an InService endpoint Updating towards dep. An
// endpoint in any other status cannot be updated (a *Error with
// ErrValidation says why).
func (e *Endpoint) BeginUpdate(now time.Time, dep *Deployment) error {
	if e.EndpointStatus != EndpointInService {
		return Errorf(ErrValidation, "Cannot update in-progress endpoint %q: it is %s; wait until it is InService.", e.EndpointArn, e.EndpointStatus)
	}
	e.Internal.Generations++
	dep.Generation = e.Internal.Generations
	e.Internal.Pending = dep
	e.EndpointStatus = EndpointUpdating
	e.LastModifiedTime = NewTime(now)
	return nil
}

// Promote makes the pending deployment the current one: the endpoint is
// InService on it. It does nothing when gen is not the pending
// generation (a newer request replaced it).
func (e *Endpoint) Promote(now time.Time, gen int) bool {
	if e.Internal.Pending == nil || e.Internal.Pending.Generation != gen || e.EndpointStatus == EndpointDeleting {
		return false
	}
	e.Internal.Current = e.Internal.Pending
	e.Internal.Pending = nil
	e.EndpointConfigName = e.Internal.Current.EndpointConfigName
	e.EndpointStatus = EndpointInService
	e.FailureReason = ""
	e.LastModifiedTime = NewTime(now)
	return true
}

// FailPending gives up the pending deployment gen: a new endpoint becomes
// Failed, an updated one stays InService on its current deployment, both
// with reason as FailureReason (cut to MaxFailureReason), as SageMaker does.
func (e *Endpoint) FailPending(now time.Time, gen int, reason string) bool {
	if e.Internal.Pending == nil || e.Internal.Pending.Generation != gen || e.EndpointStatus == EndpointDeleting {
		return false
	}
	e.Internal.Pending = nil
	e.FailureReason = TruncateRunes(reason, MaxFailureReason)
	e.LastModifiedTime = NewTime(now)
	if e.Internal.Current != nil {
		e.EndpointStatus = EndpointInService
		e.EndpointConfigName = e.Internal.Current.EndpointConfigName
	} else {
		e.EndpointStatus = EndpointFailed
	}
	return true
}

// FailCurrent marks an endpoint whose serving fleet is gone for good (it
// could not be brought back) Failed with reason.
func (e *Endpoint) FailCurrent(now time.Time, reason string) {
	if e.EndpointStatus == EndpointDeleting {
		return
	}
	e.EndpointStatus = EndpointFailed
	e.FailureReason = TruncateRunes(reason, MaxFailureReason)
	e.LastModifiedTime = NewTime(now)
}

// BeginDelete marks the endpoint Deleting; it is removed once its
// instances are gone. Deleting twice is an error.
func (e *Endpoint) BeginDelete(now time.Time) error {
	if e.EndpointStatus == EndpointDeleting {
		return Errorf(ErrValidation, "Cannot delete endpoint %q: it is already being deleted.", e.EndpointArn)
	}
	e.EndpointStatus = EndpointDeleting
	e.LastModifiedTime = NewTime(now)
	return nil
}

// Serving is the deployment requests go to: the current one, or none.
func (e *Endpoint) Serving() *Deployment { return e.Internal.Current }

// String names the endpoint and its status, for logs.
func (e *Endpoint) String() string {
	return fmt.Sprintf("endpoint %s (%s)", e.EndpointName, e.EndpointStatus)
}
