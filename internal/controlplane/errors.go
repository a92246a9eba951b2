package controlplane

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/sagebox/sagebox"
)

// Error codes that exist only on the wire; the domain's codes are in package
// sagebox.
const (
	codeLogsNotFound       = "ResourceNotFoundException"
	codeLogsInvalid        = "InvalidParameterException"
	codeLogsAlreadyExists  = "ResourceAlreadyExistsException"
	codeRequestTooLarge    = "RequestEntityTooLargeException"
	codeMethodNotAllowed   = "MethodNotAllowedException"
	codeServiceUnavailable = "ServiceUnavailable"
)

// internalMessage is all a client learns about an internal error.
const internalMessage = "An internal error occurred. The request id identifies it in the server log."

// statusOf maps an error code to its HTTP status. This is the only place
// that does.
func statusOf(code string) int {
	switch code {
	case sagebox.ErrInternal:
		return http.StatusInternalServerError
	case codeRequestTooLarge:
		return http.StatusRequestEntityTooLarge
	case codeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case codeServiceUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusBadRequest
	}
}

// errorBody is an AWS JSON error.
type errorBody struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// writeError writes err as an AWS JSON error. An error that carries no
// *sagebox.Error is internal: it is logged with the request id and the
// client gets a generic InternalFailure.
func (h *Handler) writeError(w http.ResponseWriter, requestID, target string, err error) {
	var se *sagebox.Error
	if !errors.As(err, &se) {
		if errors.Is(err, context.Canceled) {
			// The client hung up before the answer: nothing failed here.
			h.logger.Debug("request abandoned by the client", slog.String("request_id", requestID), slog.String("op", target))
		} else {
			h.logger.Error("request failed", slog.String("request_id", requestID), slog.String("op", target), slog.Any("err", err))
		}
		se = &sagebox.Error{Code: sagebox.ErrInternal, Message: internalMessage}
	}
	w.Header().Set("X-Amzn-ErrorType", se.Code)
	// An errorBody of two strings always marshals.
	_ = writeJSON(w, statusOf(se.Code), errorBody{Type: se.Code, Message: se.Message})
}
