package sigv4

import (
	"context"
	"errors"
	"net/http"
)

type ctxKey struct{}

// NewContext returns ctx carrying a verification result.
func NewContext(ctx context.Context, r *Result) context.Context {
	return context.WithValue(ctx, ctxKey{}, r)
}

// FromContext returns the verification result the middleware stored.
func FromContext(ctx context.Context) (*Result, bool) {
	r, ok := ctx.Value(ctxKey{}).(*Result)
	return r, ok
}

// Middleware verifies every request before next sees it and stores the
// Result in the request context (see FromContext), where the S3 handler
// finds what it needs to verify signed streaming bodies. A request that
// fails is answered by onError, which renders the *Error in the protocol
// the request speaks (S3 XML or JSON; Error.Service tells which service
// the client signed for, when known).
func (v *Verifier) Middleware(next http.Handler, onError func(http.ResponseWriter, *http.Request, *Error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := v.Verify(r)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				e = errorf(KindSignatureMismatch, "", false, err.Error())
			}
			onError(w, r, e)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), res)))
	})
}
