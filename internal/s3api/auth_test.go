package s3api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/sigv4"
)

// TestBehindMiddleware wires the handler the way the server does when
// credentials are configured: sigv4's middleware in front, rendering its
// failures with WriteError, and the handler finding the verification
// result in the request context (for chunk signatures).
func TestBehindMiddleware(t *testing.T) {
	e := newEnv(t, Config{})
	v := sigv4.NewVerifier(map[string]string{"test": "test"}, time.Now)
	e.srv.Config.Handler = v.Middleware(e.h, func(w http.ResponseWriter, r *http.Request, err *sigv4.Error) {
		WriteError(w, r, err)
	})
	e.mkBucket(t, "bkt")
	ctx := context.Background()

	c := sdkClient(e, aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"})
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("signed")}); err != nil {
		t.Fatal(err)
	}
	bad := sdkClient(e, aws.Credentials{AccessKeyID: "test", SecretAccessKey: "nope"})
	if _, err := bad.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")}); apiCode(err) != "SignatureDoesNotMatch" {
		t.Fatalf("bad secret: %v", err)
	}
	if _, err := bad.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")}); err == nil {
		t.Fatal("HEAD with a bad secret succeeded")
	}
	r := e.call(t, "GET", "/bkt/k", nil, nil)
	if r.status != 403 || errorCode(t, r.body) != "AccessDenied" {
		t.Fatalf("anonymous: %d %s", r.status, r.body)
	}
	if r := e.call(t, "HEAD", "/bkt/k", nil, nil); r.status != 403 || r.body != "" {
		t.Fatalf("anonymous HEAD: %d %q", r.status, r.body)
	}

	// Signed chunks are checked with the result the middleware stored.
	data := randomBytes(100_000, 3)
	for _, tc := range []struct {
		name   string
		tamper func([]byte) []byte
		status int
	}{
		{"intact", nil, 200},
		{"tampered", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := chunkedBody{data: data, signed: true, trailer: true, tamper: tc.tamper}.request(t, e.srv.URL+"/bkt/chunked-"+tc.name, chunkCreds)
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status == 200 {
				assertStored(t, e, "bkt", "chunked-"+tc.name, data)
			}
		})
	}
}

func TestWriteError(t *testing.T) {
	tests := []struct {
		name   string
		method string
		err    error
		status int
		code   string
	}{
		{"signature", "GET", &sigv4.Error{Kind: sigv4.KindSignatureMismatch}, 403, "SignatureDoesNotMatch"},
		{"unknown key", "PUT", &sigv4.Error{Kind: sigv4.KindUnknownAccessKey}, 403, "InvalidAccessKeyId"},
		{"skew", "GET", &sigv4.Error{Kind: sigv4.KindSkewed}, 403, "RequestTimeTooSkewed"},
		{"missing", "GET", &sigv4.Error{Kind: sigv4.KindMissing}, 403, "AccessDenied"},
		{"store error", "GET", objectstore.ErrNoSuchBucket, 404, "NoSuchBucket"},
		{"head has no body", "HEAD", &sigv4.Error{Kind: sigv4.KindSignatureMismatch}, 403, ""},
		{"anything else", "GET", io.ErrClosedPipe, 500, "InternalError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteError(rec, httptest.NewRequest(tt.method, "/bkt/key", nil), tt.err)
			if rec.Code != tt.status || rec.Header().Get("x-amz-request-id") == "" {
				t.Fatalf("%d %v", rec.Code, rec.Header())
			}
			if tt.code == "" {
				if rec.Body.Len() != 0 {
					t.Fatalf("body on HEAD: %q", rec.Body)
				}
				return
			}
			if got := errorCode(t, rec.Body.String()); got != tt.code || !bytes.Contains(rec.Body.Bytes(), []byte("<Resource>/bkt/key</Resource>")) {
				t.Fatalf("code %s: %s", got, rec.Body)
			}
		})
	}
}
