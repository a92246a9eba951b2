package modelserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sagebox/sagebox/internal/batch"
	"github.com/valyala/fasthttp"
)

// Error types that appear in the "type" field of error bodies produced by
// the front end itself. Errors raised by handler code carry the Python
// exception's type instead.
const (
	TypeNotFound         = "NotFound"
	TypeMethodNotAllowed = "MethodNotAllowed"
	TypePayloadTooLarge  = "PayloadTooLarge"
	TypeBadRequest       = "BadRequest"
	TypeQueueFull        = "QueueFull"
	TypeUnavailable      = "ServiceUnavailable"
	TypeWorkerTimeout    = "WorkerTimeout"
	TypeWorkerDied       = "WorkerDied"
	TypeInternal         = "InternalServerError"
	TypeClientGone       = "ClientClosedRequest"
	// TypeResponseStatus: the handler set a status of 400 or more through
	// the context; its body, content type and headers are the answer.
	TypeResponseStatus = "ResponseStatus"
)

// StatusClientClosedRequest is the status (nginx's 499) recorded for a
// request dropped because its client hung up before a worker took it. No
// one reads it; it shows in the logs and the request metrics.
const StatusClientClosedRequest = 499

// Error is a failed invocation as the client sees it: an HTTP status and
// the JSON body {"code", "type", "message"[, "traceback"]}.
type Error struct {
	Code      int    `json:"code"`
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
}

// Error formats e as "code type: message".
func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Code, e.Type, e.Message) }

func errorf(code int, typ, format string, args ...any) *Error {
	return &Error{Code: code, Type: typ, Message: fmt.Sprintf(format, args...)}
}

// queueError maps an error from batch.Queue.Push to what the client sees.
func queueError(err error) *Error {
	var full *batch.FullError
	switch {
	case errors.As(err, &full):
		return errorf(http.StatusServiceUnavailable, TypeQueueFull,
			"model queue is full (%d waiting); retry later or raise SAGEBOX_QUEUE_SIZE", full.Waiting)
	case errors.Is(err, batch.ErrClosed):
		return errorf(http.StatusServiceUnavailable, TypeUnavailable, "the model server is shutting down")
	}
	return errorf(http.StatusInternalServerError, TypeInternal, "queue request: %v", err)
}

// writeError writes e as the response. The traceback is included only when
// withTraceback is set.
func writeError(ctx *fasthttp.RequestCtx, e *Error, withTraceback bool) {
	body := *e
	if !withTraceback {
		body.Traceback = ""
	}
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(`{"code":500,"type":"InternalServerError","message":"encode error"}`)
	}
	ctx.SetContentType("application/json")
	ctx.SetStatusCode(e.Code)
	ctx.SetBody(append(b, '\n'))
}

// slogLevelFor logs server-side failures as errors and client mistakes as
// warnings.
func slogLevelFor(code int) slog.Level {
	if code >= 500 {
		return slog.LevelError
	}
	return slog.LevelWarn
}
