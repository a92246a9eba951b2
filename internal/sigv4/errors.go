package sigv4

import (
	"encoding/json"
	"net/http"
)

// Kind classifies a verification failure.
type Kind int

// The kinds of verification failure.
const (
	// KindMissing: the request carries no SigV4 authentication at all.
	KindMissing Kind = iota + 1
	// KindMalformed: the Authorization header or presigned query is
	// incomplete or unparsable, or uses an unsupported scheme.
	KindMalformed
	// KindUnknownAccessKey: the access key id is not configured.
	KindUnknownAccessKey
	// KindSignatureMismatch: the signature (request, chunk or trailer)
	// does not match.
	KindSignatureMismatch
	// KindSkewed: the signing time is more than MaxSkew away from now.
	KindSkewed
	// KindExpired: a presigned URL is past its X-Amz-Expires.
	KindExpired
	// KindPayloadMismatch: the body does not hash to the signed
	// x-amz-content-sha256.
	KindPayloadMismatch
	// KindWrongScope: the credential scope names a region other than the
	// server's, or a service other than the one addressed.
	KindWrongScope
	// KindTooLarge: a body the verifier must hash is longer than the
	// route allows; it was not read (or not past the limit).
	KindTooLarge
)

// Error is a verification failure. Service is the service named in the
// credential scope when the request got that far ("s3", "sagemaker", ...).
type Error struct {
	Kind      Kind
	Message   string
	Service   string
	Presigned bool
	// json is set by Verify when the request speaks a JSON protocol
	// (X-Amz-Target, or sagemaker-runtime's /endpoints/ path) but the
	// failure came before a credential scope named the service.
	json bool
}

// Error returns the message with a "sigv4: " prefix.
func (e *Error) Error() string { return "sigv4: " + e.Message }

// S3 returns the S3 error code and HTTP status for this failure.
func (e *Error) S3() (code string, status int) {
	switch e.Kind {
	case KindMissing:
		return "AccessDenied", http.StatusForbidden
	case KindMalformed:
		if e.Presigned {
			return "AuthorizationQueryParametersError", http.StatusBadRequest
		}
		return "AuthorizationHeaderMalformed", http.StatusBadRequest
	case KindUnknownAccessKey:
		return "InvalidAccessKeyId", http.StatusForbidden
	case KindSkewed:
		return "RequestTimeTooSkewed", http.StatusForbidden
	case KindExpired:
		return "AccessDenied", http.StatusForbidden
	case KindPayloadMismatch:
		return "XAmzContentSHA256Mismatch", http.StatusBadRequest
	case KindWrongScope:
		if e.Presigned {
			return "AuthorizationQueryParametersError", http.StatusBadRequest
		}
		return "AuthorizationHeaderMalformed", http.StatusBadRequest
	case KindTooLarge:
		return "EntityTooLarge", http.StatusRequestEntityTooLarge
	default:
		return "SignatureDoesNotMatch", http.StatusForbidden
	}
}

// JSON returns the __type and HTTP status a JSON-protocol service (AWS
// JSON 1.1, REST-JSON) answers with for this failure.
func (e *Error) JSON() (errorType string, status int) {
	switch e.Kind {
	case KindMissing:
		return "MissingAuthenticationTokenException", http.StatusForbidden
	case KindMalformed:
		return "IncompleteSignatureException", http.StatusBadRequest
	case KindUnknownAccessKey:
		return "UnrecognizedClientException", http.StatusForbidden
	case KindTooLarge:
		return "RequestEntityTooLargeException", http.StatusRequestEntityTooLarge
	default:
		return "InvalidSignatureException", http.StatusForbidden
	}
}

// isJSON reports whether the failed request speaks a JSON protocol.
func (e *Error) isJSON() bool {
	if e.Service != "" {
		return e.Service != "s3"
	}
	return e.json
}

// Code is the error code to send: the S3 code for S3 requests, the JSON
// __type otherwise (decided by the credential scope's service, or, when
// the request got no further than that, by its shape).
func (e *Error) Code() string {
	if e.isJSON() {
		c, _ := e.JSON()
		return c
	}
	c, _ := e.S3()
	return c
}

// ClientMessage is what the client is told: Message without the "sigv4: "
// prefix of Error, in AWS's words where AWS's are fixed.
func (e *Error) ClientMessage() string {
	switch {
	case e.Kind == KindMissing && e.isJSON():
		return "Missing Authentication Token"
	case e.Kind == KindUnknownAccessKey && e.isJSON():
		return "The security token included in the request is invalid."
	case e.Kind == KindUnknownAccessKey:
		return "The AWS Access Key Id you provided does not exist in our records."
	}
	return e.Message
}

// Status is the HTTP status that goes with Code.
func (e *Error) Status() int {
	if e.isJSON() {
		_, s := e.JSON()
		return s
	}
	_, s := e.S3()
	return s
}

// WriteJSONError answers a JSON-protocol request with err the way AWS does:
// {"__type": ..., "message": ...} and the x-amzn-ErrorType header.
func WriteJSONError(w http.ResponseWriter, err *Error) {
	typ, status := err.JSON()
	msg := err.Message
	switch err.Kind {
	case KindMissing:
		msg = "Missing Authentication Token"
	case KindUnknownAccessKey:
		msg = "The security token included in the request is invalid."
	}
	body, _ := json.Marshal(map[string]string{"__type": typ, "message": msg})
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("x-amzn-ErrorType", typ)
	w.WriteHeader(status)
	w.Write(body)
}

func errorf(kind Kind, service string, presigned bool, msg string) *Error {
	return &Error{Kind: kind, Message: msg, Service: service, Presigned: presigned}
}
