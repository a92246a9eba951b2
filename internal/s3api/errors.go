package s3api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/sigv4"
)

// apiError is an S3 error response: code, message and HTTP status.
type apiError struct {
	Code    string
	Message string
	Status  int
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// newError builds an apiError.
func newError(status int, code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...), Status: status}
}

// Errors with fixed wording, as S3 words them.
var (
	errAccessDenied         = newError(http.StatusForbidden, "AccessDenied", "Access Denied")
	errBucketAlreadyOwned   = newError(http.StatusConflict, "BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded and you already own it.")
	errBucketNotEmpty       = newError(http.StatusConflict, "BucketNotEmpty", "The bucket you tried to delete is not empty")
	errEntityTooSmall       = newError(http.StatusBadRequest, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed object size.")
	errInternal             = newError(http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	errInvalidBucketName    = newError(http.StatusBadRequest, "InvalidBucketName", "The specified bucket is not valid.")
	errInvalidDigest        = newError(http.StatusBadRequest, "InvalidDigest", "The Content-MD5 you specified is not valid.")
	errBadDigest            = newError(http.StatusBadRequest, "BadDigest", "The Content-MD5 you specified did not match what we received.")
	errSHA256Mismatch       = newError(http.StatusBadRequest, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.")
	errInvalidPart          = newError(http.StatusBadRequest, "InvalidPart", "One or more of the specified parts could not be found. The part might not have been uploaded, or the specified entity tag might not have matched the part's entity tag.")
	errInvalidPartOrder     = newError(http.StatusBadRequest, "InvalidPartOrder", "The list of parts was not in ascending order. Parts must be ordered by part number.")
	errInvalidPartNumberArg = newError(http.StatusBadRequest, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive")
	errInvalidPartNumber    = newError(http.StatusRequestedRangeNotSatisfiable, "InvalidPartNumber", "The requested partnumber is not satisfiable")
	errInvalidRange         = newError(http.StatusRequestedRangeNotSatisfiable, "InvalidRange", "The requested range is not satisfiable")
	errKeyTooLong           = newError(http.StatusBadRequest, "KeyTooLongError", "Your key is too long")
	errMalformedXML         = newError(http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema")
	errMethodNotAllowed     = newError(http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.")
	errNoSuchBucket         = newError(http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
	errNoSuchKey            = newError(http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
	errNoSuchUpload         = newError(http.StatusNotFound, "NoSuchUpload", "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.")
	errPreconditionFailed   = newError(http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	errIncompleteBody       = newError(http.StatusBadRequest, "IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header.")
	errMetadataTooLarge     = newError(http.StatusBadRequest, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size.")
	errRequestTimeout       = newError(http.StatusBadRequest, "RequestTimeout", "Your socket connection to the server was not read from or written to within the timeout period.")
)

// toAPIError maps any error from the store, the decoders or the verifier
// to the S3 error a client should see.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var se *sigv4.Error
	if errors.As(err, &se) {
		code, status := se.S3()
		msg := se.Message
		if se.Kind == sigv4.KindSignatureMismatch {
			msg = "The request signature we calculated does not match the signature you provided. Check your key and signing method."
		}
		return &apiError{Code: code, Message: msg, Status: status}
	}
	var cm *objectstore.ChecksumMismatchError
	if errors.As(err, &cm) {
		return newError(http.StatusBadRequest, "BadDigest", "The %s you specified did not match the calculated checksum.", cm.Algorithm)
	}
	switch {
	case errors.Is(err, objectstore.ErrNoSuchBucket):
		return errNoSuchBucket
	case errors.Is(err, objectstore.ErrNoSuchKey):
		return errNoSuchKey
	case errors.Is(err, objectstore.ErrNoSuchUpload):
		return errNoSuchUpload
	case errors.Is(err, objectstore.ErrBucketExists):
		return errBucketAlreadyOwned
	case errors.Is(err, objectstore.ErrBucketNotEmpty):
		return errBucketNotEmpty
	case errors.Is(err, objectstore.ErrInvalidBucketName):
		return errInvalidBucketName
	case errors.Is(err, objectstore.ErrKeyTooLong):
		return errKeyTooLong
	case errors.Is(err, objectstore.ErrInvalidKey):
		return newError(http.StatusBadRequest, "InvalidArgument", "%s", err.Error())
	case errors.Is(err, objectstore.ErrInvalidPart):
		return errInvalidPart
	case errors.Is(err, objectstore.ErrInvalidPartOrder):
		return errInvalidPartOrder
	case errors.Is(err, objectstore.ErrInvalidPartNumber):
		return errInvalidPartNumberArg
	case errors.Is(err, objectstore.ErrEntityTooSmall):
		return errEntityTooSmall
	case errors.Is(err, objectstore.ErrBadDigest):
		return errBadDigest
	case errors.Is(err, objectstore.ErrSHA256Mismatch):
		return errSHA256Mismatch
	case errors.Is(err, objectstore.ErrInvalidChecksum):
		return newError(http.StatusBadRequest, "InvalidRequest", "%s", err.Error())
	case errors.Is(err, objectstore.ErrPreconditionFailed):
		return errPreconditionFailed
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errIncompleteBody
	case errors.Is(err, context.DeadlineExceeded):
		return errRequestTimeout
	}
	return errInternal
}

// errorXML is the body of every S3 error response.
type errorXML struct {
	XMLName    struct{} `xml:"Error"`
	Code       string
	Message    string
	Key        string `xml:",omitempty"`
	BucketName string `xml:",omitempty"`
	Resource   string
	RequestID  string `xml:"RequestId"`
	HostID     string `xml:"HostId"`
}

// WriteError answers r with err as an S3 XML error, the way the S3 API
// does, including for *sigv4.Error values (SignatureDoesNotMatch, ...).
// The server's routing uses it for S3 requests that fail verification
// before they reach the Handler. HEAD requests get no body.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	id := w.Header().Get("x-amz-request-id")
	if id == "" {
		id = setRequestID(w)
	}
	writeErrorBody(w, r, toAPIError(err), "", "", id)
}

func writeErrorBody(w http.ResponseWriter, r *http.Request, ae *apiError, bucket, key, id string) {
	h := w.Header()
	// Headers set for a success that turned into an error must not leak.
	for _, k := range []string{"ETag", "Last-Modified", "Content-Length", "Accept-Ranges", "Content-Type"} {
		h.Del(k)
	}
	if ae.Status != http.StatusRequestedRangeNotSatisfiable {
		h.Del("Content-Range") // a 416 keeps "bytes */<size>"
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(ae.Status)
		return
	}
	body := errorXML{
		Code:      ae.Code,
		Message:   ae.Message,
		Resource:  r.URL.Path,
		RequestID: id,
		HostID:    h.Get("x-amz-id-2"),
	}
	switch ae.Code {
	case "NoSuchKey":
		body.Key = key
	case "NoSuchBucket", "BucketNotEmpty", "BucketAlreadyOwnedByYou", "InvalidBucketName":
		body.BucketName = bucket
	}
	h.Set("Content-Type", "application/xml")
	w.WriteHeader(ae.Status)
	encodeXML(w, body)
}
