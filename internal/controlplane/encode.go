package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sagebox/sagebox"
)

// contentType is the media type of every request and response.
const contentType = "application/x-amz-json-1.1"

// opFunc serves one operation: it decodes body and returns the value to
// encode as the response, or an error.
type opFunc func(ctx context.Context, body []byte) (any, error)

// op adapts a typed operation to an opFunc: the body is decoded into a fresh
// In with decode, and fn's result is the response.
func op[In, Out any](fn func(context.Context, *In) (Out, error)) opFunc {
	return func(ctx context.Context, body []byte) (any, error) {
		in := new(In)
		if err := decode(body, in); err != nil {
			return nil, err
		}
		return fn(ctx, in)
	}
}

// decode reads a request body into v. An empty body is the empty object;
// unknown members are ignored; anything that is not a JSON object of the
// right member types is a SerializationException.
func decode(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil
	}
	if body[0] != '{' {
		return &sagebox.Error{Code: sagebox.ErrSerialization, Message: "The request body must be a JSON object."}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return serializationError(err)
	}
	return nil
}

// serializationError describes a decoding failure for the client.
func serializationError(err error) error {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
		se        *sagebox.Error
	)
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return sagebox.Errorf(sagebox.ErrSerialization, "Member %s cannot be a JSON %s; expected %s.", typeErr.Field, typeErr.Value, jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &typeErr):
		return sagebox.Errorf(sagebox.ErrSerialization, "A JSON %s cannot be used here; expected %s.", typeErr.Value, jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &syntaxErr):
		return sagebox.Errorf(sagebox.ErrSerialization, "The request body is not valid JSON: %s (at byte %d).", syntaxErr.Error(), syntaxErr.Offset)
	default:
		return sagebox.Errorf(sagebox.ErrSerialization, "The request body could not be read: %s.", err.Error())
	}
}

// jsonKind names a Go kind the way a JSON user thinks of it.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "a list"
	case "map", "struct", "ptr":
		return "an object"
	default:
		return "a number"
	}
}

// writeJSON writes v as the response body with the given status. v is
// marshalled before anything is written, so a failure leaves w untouched
// for an error response.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return nil
}
