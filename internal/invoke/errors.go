package invoke

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Error codes of sagemaker-runtime (REST-JSON; the code travels in the
// X-Amzn-ErrorType header and the body's __type).
const (
	CodeValidation   = "ValidationError"
	CodeModel        = "ModelError"
	CodeTooLarge     = "RequestEntityTooLargeException"
	CodeUnavailable  = "ServiceUnavailable"
	CodeInternal     = "InternalFailure"
	containerPrimary = "primary"
)

// HeaderContainer is the instance response header naming the container
// that failed (a pipeline's stage); "primary" when absent.
const HeaderContainer = "X-Sagebox-Container"

// apiError is an answer of sagebox's own (not the model's).
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func validationf(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: CodeValidation, msg: fmt.Sprintf(format, args...)}
}

// errorBody is the AWS JSON error shape the rest of sagebox writes.
type errorBody struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// modelErrorBody is sagemaker-runtime's ModelError: the modeled members
// (Message, OriginalStatusCode, OriginalMessage, LogStreamArn) that
// botocore and the Go SDK parse into the error, and AWS's ErrorCode.
type modelErrorBody struct {
	Type               string `json:"__type"`
	ErrorCode          string `json:"ErrorCode"`
	Message            string `json:"Message"`
	OriginalStatusCode int    `json:"OriginalStatusCode"`
	OriginalMessage    string `json:"OriginalMessage"`
	LogStreamArn       string `json:"LogStreamArn"`
}

// writeJSONError writes an error answer: the code in X-Amzn-ErrorType
// (where botocore's REST-JSON parser and the Go SDK read it first) and in
// the body's __type.
func writeJSONError(w http.ResponseWriter, requestID string, status int, code string, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(`{"__type":"InternalFailure","message":"encode error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Amzn-ErrorType", code)
	h.Set("X-Amzn-RequestId", requestID)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

func (h *Handler) writeAPIError(w http.ResponseWriter, requestID string, e *apiError) {
	writeJSONError(w, requestID, e.status, e.code, errorBody{Type: e.code, Message: e.msg})
}

// modelError is the 424 answer for an instance's failure: status is the
// instance's (0 when it gave none: a timeout or a connection that broke),
// body what it said (or what went wrong).
func (h *Handler) modelError(endpoint, container string, status int, body string) modelErrorBody {
	kind, code := "client", "CLIENT_ERROR_FROM_MODEL"
	if status >= 500 || status < 400 {
		kind, code = "server", "SERVER_ERROR_FROM_MODEL"
	}
	arn := h.logGroupArn(endpoint)
	return modelErrorBody{
		Type:      CodeModel,
		ErrorCode: code,
		Message: fmt.Sprintf("Received %s error (%d) from %s with message \"%s\". See %s in account %s for more information.",
			kind, status, container, body, arn, h.cfg.AccountID),
		OriginalStatusCode: status,
		OriginalMessage:    body,
		LogStreamArn:       arn,
	}
}

func (h *Handler) logGroupArn(endpoint string) string {
	return "arn:aws:logs:" + h.cfg.Region + ":" + h.cfg.AccountID + ":log-group:/aws/sagemaker/Endpoints/" + endpoint
}
