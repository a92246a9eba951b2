package staging

import "fmt"

// ClientError is a failure caused by the job's own configuration or data.
// Its text, "ClientError: " and the message, is the job's FailureReason.
type ClientError struct{ Err error }

func (e *ClientError) Error() string { return "ClientError: " + e.Err.Error() }
func (e *ClientError) Unwrap() error { return e.Err }

func clientErrorf(format string, args ...any) error {
	return &ClientError{Err: fmt.Errorf(format, args...)}
}
