package training

import (
	"errors"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// failureReason gives the FailureReason for err.
func failureReason(err error) string {
	if reason, ok := jobReason(err); ok {
		return sagebox.TruncateRunes(reason, sagebox.MaxFailureReason)
	}
	return sagebox.TruncateRunes("InternalServerError: "+err.Error(), sagebox.MaxFailureReason)
}

// jobReason is the formatted FailureReason err carries, if any: a
// *toolkit.Error's, or a staging.ClientError's ("ClientError: ...").
func jobReason(err error) (string, bool) {
	if reason, ok := toolkit.Reason(err); ok {
		return reason, true
	}
	var ce *staging.ClientError
	if errors.As(err, &ce) {
		return ce.Error(), true
	}
	return "", false
}
