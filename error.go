package sagebox

import (
	"errors"
	"fmt"
)

// Error codes as AWS puts them on the wire (the "__type" of a JSON error or
// the <Code> of an S3 XML error). The HTTP status for each lives in the API
// layer, in one place.
const (
	ErrValidation       = "ValidationException"
	ErrResourceNotFound = "ResourceNotFound"
	ErrResourceInUse    = "ResourceInUse"
	ErrResourceLimit    = "ResourceLimitExceeded"
	ErrUnknownOperation = "UnknownOperationException"
	ErrInternal         = "InternalFailure"
	ErrSerialization    = "SerializationException"
)

// Error is a failure that carries an AWS error code and a message meant for
// the client. Anything else that reaches an API handler is an internal error.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// ErrInternal when there is none.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ErrInternal
}
