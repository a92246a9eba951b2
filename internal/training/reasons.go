package training

import (
	"errors"

	"github.com/sagebox/sagebox"
)

// failureReason gives the FailureReason for err.
func failureReason(err error) string {
	if reason, ok := jobReason(err); ok {
		return sagebox.TruncateRunes(reason, sagebox.MaxFailureReason)
	}
	return sagebox.TruncateRunes("InternalServerError: "+err.Error(), sagebox.MaxFailureReason)
}

// reasoned is an error that carries the job's FailureReason, already
// formatted: the toolkit's (*toolkit.Error) and staging's ClientError
// are, and a driver's own errors may be.
type reasoned interface{ FailureReason() string }

// jobReason is the formatted FailureReason err carries, if any.
func jobReason(err error) (string, bool) {
	var r reasoned
	if errors.As(err, &r) {
		return r.FailureReason(), true
	}
	return "", false
}
