package sigv4

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

var (
	testNow   = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	testCreds = aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
)

func testVerifier() *Verifier {
	return NewVerifier(map[string]string{testCreds.AccessKeyID: testCreds.SecretAccessKey}, func() time.Time { return testNow })
}

// verifyServer answers 200 with the verified service, or the S3 error code,
// so requests travel over a real connection and reach the verifier exactly
// as a server sees them.
func verifyServer(t *testing.T, v *Verifier) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok := FromContext(r.Context())
		if !ok {
			t.Error("no Result in the request context")
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Service", res.Service)
		w.Header().Set("X-Body-Sha256", hexSHA256(body))
		w.WriteHeader(http.StatusOK)
	}), func(w http.ResponseWriter, r *http.Request, e *Error) {
		code, status := e.S3()
		w.Header().Set("X-Error", code)
		w.WriteHeader(status)
		io.WriteString(w, e.Message)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestVerifyHeaderS3(t *testing.T) {
	srv := verifyServer(t, testVerifier())
	s3Signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	tests := []struct {
		name   string
		method string
		path   string // as it goes on the wire
		query  string
		body   string
		hash   string // x-amz-content-sha256; "" means the body's hash
		header map[string][]string
	}{
		{name: "list buckets", method: "GET", path: "/"},
		{name: "simple put", method: "PUT", path: "/bucket/key.txt", body: "hello"},
		{name: "escaped key", method: "PUT", path: "/bucket/dir/a%20b%2Bc%25d%3F%23%C3%BC", body: "x"},
		{name: "dot segments", method: "GET", path: "/bucket/a/../b/./c"},
		{name: "double slash", method: "GET", path: "/bucket//x//"},
		{name: "list v2 query", method: "GET", path: "/bucket", query: "list-type=2&prefix=a%20b%2Fc&delimiter=%2F&encoding-type=url&max-keys=10"},
		{name: "valueless subresource", method: "POST", path: "/bucket/k", query: "uploads"},
		{name: "repeated query keys", method: "GET", path: "/bucket", query: "b=2&a=1&b=1"},
		{name: "unsigned payload", method: "PUT", path: "/bucket/k", body: "abc", hash: UnsignedPayload},
		{name: "metadata and multi-value headers", method: "PUT", path: "/bucket/k", body: "abc", header: map[string][]string{
			"X-Amz-Meta-Note": {"  spaced   out  value "},
			"X-Amz-Meta-Many": {"one", "two"},
			"Content-Type":    {"text/plain"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := srv.URL + tt.path
			if tt.query != "" {
				u += "?" + tt.query
			}
			req, err := http.NewRequest(tt.method, u, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.body == "" {
				req.Body, req.ContentLength = http.NoBody, 0
			}
			for k, vs := range tt.header {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			hash := tt.hash
			if hash == "" {
				hash = sha([]byte(tt.body))
			}
			req.Header.Set("X-Amz-Content-Sha256", hash)
			if err := s3Signer.SignHTTP(context.Background(), testCreds, req, hash, "s3", "us-east-1", testNow); err != nil {
				t.Fatal(err)
			}
			resp, msg := do(t, req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("X-Error"), msg)
			}
			if resp.Header.Get("X-Service") != "s3" {
				t.Fatalf("service %q", resp.Header.Get("X-Service"))
			}
		})
	}
}

func TestVerifyHeaderJSONService(t *testing.T) {
	srv := verifyServer(t, testVerifier())
	signer := v4.NewSigner()
	tests := []struct {
		name, service, path, body string
	}{
		{"sagemaker control plane", "sagemaker", "/", `{"TrainingJobName":"j"}`},
		{"runtime with escapes", "sagemaker", "/endpoints/my-end%3Apoint/invocations", `[[1,2,3]]`},
		{"logs", "logs", "/", `{"logGroupName":"/aws/sagemaker/TrainingJobs"}`},
		{"empty body", "sts", "/", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/x-amz-json-1.1")
			req.Header.Set("X-Amz-Target", "SageMaker.DescribeTrainingJob")
			if err := signer.SignHTTP(context.Background(), testCreds, req, sha([]byte(tt.body)), tt.service, "eu-west-1", testNow); err != nil {
				t.Fatal(err)
			}
			resp, msg := do(t, req)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("X-Error"), msg)
			}
			// The handler still gets the whole body after verification.
			if got := resp.Header.Get("X-Body-Sha256"); got != sha([]byte(tt.body)) {
				t.Fatalf("handler saw a different body")
			}
		})
	}
}

func TestVerifyRejects(t *testing.T) {
	v := testVerifier()
	s3Signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	newS3 := func(signTime time.Time, creds aws.Credentials) *http.Request {
		req := httptest.NewRequest("GET", "http://example.com/bucket/key?x=1", nil)
		req.Header.Set("X-Amz-Content-Sha256", EmptySHA256)
		if err := s3Signer.SignHTTP(context.Background(), creds, req, EmptySHA256, "s3", "us-east-1", signTime); err != nil {
			t.Fatal(err)
		}
		return req
	}
	wrongSecret := testCreds
	wrongSecret.SecretAccessKey = "nope"
	unknown := testCreds
	unknown.AccessKeyID = "AKIDUNKNOWN"
	tests := []struct {
		name     string
		req      func() *http.Request
		kind     Kind
		s3Code   string
		jsonType string
	}{
		{"unsigned", func() *http.Request { return httptest.NewRequest("GET", "/bucket", nil) }, KindMissing, "AccessDenied", "MissingAuthenticationTokenException"},
		{"wrong secret", func() *http.Request { return newS3(testNow, wrongSecret) }, KindSignatureMismatch, "SignatureDoesNotMatch", "InvalidSignatureException"},
		{"unknown key", func() *http.Request { return newS3(testNow, unknown) }, KindUnknownAccessKey, "InvalidAccessKeyId", "UnrecognizedClientException"},
		{"16 minutes slow", func() *http.Request { return newS3(testNow.Add(-16*time.Minute), testCreds) }, KindSkewed, "RequestTimeTooSkewed", "InvalidSignatureException"},
		{"16 minutes fast", func() *http.Request { return newS3(testNow.Add(16*time.Minute), testCreds) }, KindSkewed, "RequestTimeTooSkewed", "InvalidSignatureException"},
		{"tampered query", func() *http.Request {
			r := newS3(testNow, testCreds)
			r.URL.RawQuery = "x=2"
			return r
		}, KindSignatureMismatch, "SignatureDoesNotMatch", "InvalidSignatureException"},
		{"tampered path", func() *http.Request {
			r := newS3(testNow, testCreds)
			r.RequestURI = "/bucket/other?x=1"
			r.URL.Path = "/bucket/other"
			return r
		}, KindSignatureMismatch, "SignatureDoesNotMatch", "InvalidSignatureException"},
		{"tampered payload hash", func() *http.Request {
			r := newS3(testNow, testCreds)
			r.Header.Set("X-Amz-Content-Sha256", UnsignedPayload)
			return r
		}, KindSignatureMismatch, "SignatureDoesNotMatch", "InvalidSignatureException"},
		{"missing content sha256", func() *http.Request {
			r := newS3(testNow, testCreds)
			r.Header.Del("X-Amz-Content-Sha256")
			return r
		}, KindMalformed, "AuthorizationHeaderMalformed", "IncompleteSignatureException"},
		{"garbage authorization", func() *http.Request {
			r := httptest.NewRequest("GET", "/bucket", nil)
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x")
			return r
		}, KindMalformed, "AuthorizationHeaderMalformed", "IncompleteSignatureException"},
		{"signature v2 without a date", func() *http.Request {
			r := httptest.NewRequest("GET", "/bucket", nil)
			r.Header.Set("Authorization", "AWS AKIDEXAMPLE:c2lnbmF0dXJl")
			return r
		}, KindMalformed, "AuthorizationHeaderMalformed", "IncompleteSignatureException"},
		{"signature v2 wrong", func() *http.Request {
			r := httptest.NewRequest("GET", "/bucket", nil)
			r.Header.Set("Date", testNow.Format(http.TimeFormat))
			r.Header.Set("Authorization", "AWS AKIDEXAMPLE:c2lnbmF0dXJl")
			return r
		}, KindSignatureMismatch, "SignatureDoesNotMatch", "InvalidSignatureException"},
		{"unknown scheme", func() *http.Request {
			r := httptest.NewRequest("GET", "/bucket", nil)
			r.Header.Set("Authorization", "Bearer abc")
			return r
		}, KindMalformed, "AuthorizationHeaderMalformed", "IncompleteSignatureException"},
		{"scope date differs", func() *http.Request {
			r := newS3(testNow, testCreds)
			r.Header.Set("X-Amz-Date", testNow.Add(24*time.Hour).Format(TimeFormat))
			return r
		}, KindMalformed, "AuthorizationHeaderMalformed", "IncompleteSignatureException"},
		{"json body tampered", func() *http.Request {
			r := httptest.NewRequest("POST", "http://example.com/", strings.NewReader(`{"a":1}`))
			v4.NewSigner().SignHTTP(context.Background(), testCreds, r, sha([]byte(`{"a":1}`)), "sagemaker", "us-east-1", testNow)
			r.Body = io.NopCloser(strings.NewReader(`{"a":2}`))
			return r
		}, KindSignatureMismatch, "SignatureDoesNotMatch", "InvalidSignatureException"},
		{"json with s3-style path escaping", func() *http.Request {
			r := httptest.NewRequest("POST", "http://example.com/endpoints/a%3Ab/invocations", strings.NewReader(`x`))
			s3Signer.SignHTTP(context.Background(), testCreds, r, sha([]byte(`x`)), "sagemaker", "us-east-1", testNow)
			return r
		}, KindSignatureMismatch, "SignatureDoesNotMatch", "InvalidSignatureException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Verify(tt.req())
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Verify = %v, want *Error", err)
			}
			if e.Kind != tt.kind {
				t.Fatalf("kind %d (%s), want %d", e.Kind, e.Message, tt.kind)
			}
			if code, status := e.S3(); code != tt.s3Code || status < 400 {
				t.Fatalf("S3() = %s %d, want %s", code, status, tt.s3Code)
			}
			if typ, status := e.JSON(); typ != tt.jsonType || status < 400 {
				t.Fatalf("JSON() = %s %d, want %s", typ, status, tt.jsonType)
			}
		})
	}
}

func TestVerifyPresigned(t *testing.T) {
	srv := verifyServer(t, testVerifier())
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	presign := func(t *testing.T, signTime time.Time, expires int, path string) string {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		q := req.URL.Query()
		q.Set("X-Amz-Expires", strconv.Itoa(expires))
		q.Set("response-content-type", "text/plain; charset=utf-8")
		req.URL.RawQuery = q.Encode()
		u, _, err := signer.PresignHTTP(context.Background(), testCreds, req, UnsignedPayload, "s3", "us-west-2", signTime)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	tests := []struct {
		name     string
		signTime time.Time
		expires  int
		path     string
		status   int
		code     string
	}{
		{"fresh", testNow.Add(-time.Minute), 300, "/bucket/a%20key", 200, ""},
		{"week-long", testNow.Add(-6 * 24 * time.Hour), 604800, "/bucket/k", 200, ""},
		{"expired", testNow.Add(-10 * time.Minute), 300, "/bucket/k", 403, "AccessDenied"},
		{"too long", testNow, 604801, "/bucket/k", 400, "AuthorizationQueryParametersError"},
		{"from the future", testNow.Add(time.Hour), 300, "/bucket/k", 403, "RequestTimeTooSkewed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := presign(t, tt.signTime, tt.expires, tt.path)
			req, _ := http.NewRequest("GET", u, nil)
			resp, msg := do(t, req)
			if resp.StatusCode != tt.status || resp.Header.Get("X-Error") != tt.code {
				t.Fatalf("status %d %s (%s), want %d %s", resp.StatusCode, resp.Header.Get("X-Error"), msg, tt.status, tt.code)
			}
		})
	}
	t.Run("tampered", func(t *testing.T) {
		u := presign(t, testNow, 300, "/bucket/k")
		req, _ := http.NewRequest("GET", strings.Replace(u, "/bucket/k", "/bucket/other", 1), nil)
		if resp, _ := do(t, req); resp.Header.Get("X-Error") != "SignatureDoesNotMatch" {
			t.Fatalf("tampered URL: %d %s", resp.StatusCode, resp.Header.Get("X-Error"))
		}
	})
}

func TestChunkSignerMatchesSDK(t *testing.T) {
	seed := bytes.Repeat([]byte{0xab}, 32)
	sdk := v4.NewStreamSigner(testCreds, "s3", "us-east-1", seed)
	cred := Credential{Date: testNow.Format(DateFormat), Region: "us-east-1", Service: "s3"}
	ours := NewChunkSigner(SigningKey(testCreds.SecretAccessKey, cred.Date, cred.Region, cred.Service), testNow, cred.Scope(), hex.EncodeToString(seed))
	for i, chunk := range [][]byte{bytes.Repeat([]byte("a"), 65536), []byte("tail"), nil} {
		want, err := sdk.GetSignature(context.Background(), nil, chunk, testNow)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(chunk)
		if err := ours.VerifyChunk(sum[:], hex.EncodeToString(want)); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	sum := sha256.Sum256([]byte("junk"))
	var e *Error
	if err := ours.VerifyChunk(sum[:], strings.Repeat("0", 64)); !errors.As(err, &e) || e.Kind != KindSignatureMismatch {
		t.Fatalf("bad chunk signature: %v", err)
	}
}

func TestParseCredential(t *testing.T) {
	req := httptest.NewRequest("GET", "/bucket", nil)
	if _, ok := ParseCredential(req); ok {
		t.Fatal("credential parsed from an unsigned request")
	}
	v4.NewSigner().SignHTTP(context.Background(), testCreds, req, EmptySHA256, "s3", "ap-south-1", testNow)
	c, ok := ParseCredential(req)
	if !ok || c.Region != "ap-south-1" || c.Service != "s3" || c.AccessKeyID != testCreds.AccessKeyID || c.Date != "20260314" {
		t.Fatalf("ParseCredential = %+v, %v", c, ok)
	}
}

func TestErrorCodeFollowsProtocol(t *testing.T) {
	v := testVerifier()
	tests := []struct {
		name   string
		req    func() *http.Request
		code   string
		status int
	}{
		{"unsigned S3", func() *http.Request { return httptest.NewRequest("GET", "/bucket/key", nil) }, "AccessDenied", 403},
		{"unsigned JSON", func() *http.Request {
			r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
			r.Header.Set("X-Amz-Target", "SageMaker.ListModels")
			return r
		}, "MissingAuthenticationTokenException", 403},
		{"unsigned runtime", func() *http.Request {
			return httptest.NewRequest("POST", "/endpoints/e/invocations", strings.NewReader("{}"))
		}, "MissingAuthenticationTokenException", 403},
		{"bad JSON signature", func() *http.Request {
			r := httptest.NewRequest("POST", "http://example.com/", strings.NewReader("{}"))
			v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testCreds.AccessKeyID, SecretAccessKey: "x"}, r, sha([]byte("{}")), "sagemaker", "us-east-1", testNow)
			return r
		}, "InvalidSignatureException", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Verify(tt.req())
			var e *Error
			if !errors.As(err, &e) || e.Code() != tt.code || e.Status() != tt.status {
				t.Fatalf("Verify = %v; Code %q Status %d, want %s %d", err, e.Code(), e.Status(), tt.code, tt.status)
			}
		})
	}
}

func TestWriteJSONError(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteJSONError(rec, &Error{Kind: KindUnknownAccessKey, Message: "x"})
	if rec.Code != 403 || rec.Header().Get("x-amzn-ErrorType") != "UnrecognizedClientException" ||
		!strings.Contains(rec.Body.String(), `"__type":"UnrecognizedClientException"`) {
		t.Fatalf("got %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

func FuzzCanonicalQuery(f *testing.F) {
	for _, s := range []string{"a=1&b=2", "uploads", "x=%zz&&=", "k=a+b%20c", "X-Amz-Signature=abc&z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c := canonicalQuery(raw)
		// Canonical form is a fixed point and never carries the signature.
		if again := canonicalQuery(c); again != c {
			t.Fatalf("canonicalQuery not idempotent: %q -> %q -> %q", raw, c, again)
		}
		if strings.Contains(c, "X-Amz-Signature=") {
			t.Fatalf("signature kept: %q", c)
		}
	})
}

// signV2 computes an S3 Signature Version 2 independently of the verifier.
func signV2(secret, stringToSign string) string {
	h := hmac.New(sha1.New, []byte(secret))
	h.Write([]byte(stringToSign))
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

func TestVerifyV2(t *testing.T) {
	v := testVerifier()
	secret := testCreds.SecretAccessKey
	date := testNow.Format(http.TimeFormat)
	tests := []struct {
		name string
		req  func() *http.Request
		kind Kind // 0: success
	}{
		{"header form", func() *http.Request {
			r := httptest.NewRequest("PUT", "/bucket/a%20b?uploadId=x%2By&partNumber=2&ignored=1", strings.NewReader("x"))
			r.Header.Set("Date", date)
			r.Header.Set("Content-Type", "text/plain")
			r.Header.Set("Content-MD5", "abc=")
			r.Header.Set("X-Amz-Meta-B", "2")
			r.Header.Set("X-Amz-Meta-A", " 1 ")
			sts := "PUT\nabc=\ntext/plain\n" + date + "\nx-amz-meta-a:1\nx-amz-meta-b:2\n/bucket/a%20b?partNumber=2&uploadId=x+y"
			r.Header.Set("Authorization", "AWS "+testCreds.AccessKeyID+":"+signV2(secret, sts))
			return r
		}, 0},
		{"header form, virtual host", func() *http.Request {
			r := httptest.NewRequest("GET", "http://bucket.localhost.test/key", nil)
			r.Header.Set("Date", date)
			r.Header.Set("Authorization", "AWS "+testCreds.AccessKeyID+":"+signV2(secret, "GET\n\n\n"+date+"\n/bucket/key"))
			return r
		}, 0},
		{"header form, skewed", func() *http.Request {
			d := testNow.Add(-time.Hour).Format(http.TimeFormat)
			r := httptest.NewRequest("GET", "/bucket/key", nil)
			r.Header.Set("Date", d)
			r.Header.Set("Authorization", "AWS "+testCreds.AccessKeyID+":"+signV2(secret, "GET\n\n\n"+d+"\n/bucket/key"))
			return r
		}, KindSkewed},
		{"presigned", func() *http.Request {
			exp := strconv.FormatInt(testNow.Add(time.Minute).Unix(), 10)
			sig := signV2(secret, "GET\n\n\n"+exp+"\n/bucket/key")
			return httptest.NewRequest("GET", "/bucket/key?AWSAccessKeyId="+testCreds.AccessKeyID+"&Expires="+exp+"&Signature="+url.QueryEscape(sig), nil)
		}, 0},
		{"presigned, expired", func() *http.Request {
			exp := strconv.FormatInt(testNow.Add(-time.Minute).Unix(), 10)
			sig := signV2(secret, "GET\n\n\n"+exp+"\n/bucket/key")
			return httptest.NewRequest("GET", "/bucket/key?AWSAccessKeyId="+testCreds.AccessKeyID+"&Expires="+exp+"&Signature="+url.QueryEscape(sig), nil)
		}, KindExpired},
		{"presigned, tampered", func() *http.Request {
			exp := strconv.FormatInt(testNow.Add(time.Minute).Unix(), 10)
			sig := signV2(secret, "GET\n\n\n"+exp+"\n/bucket/key")
			return httptest.NewRequest("GET", "/bucket/other?AWSAccessKeyId="+testCreds.AccessKeyID+"&Expires="+exp+"&Signature="+url.QueryEscape(sig), nil)
		}, KindSignatureMismatch},
		{"presigned, unknown key", func() *http.Request {
			return httptest.NewRequest("GET", "/bucket/key?AWSAccessKeyId=NOPE&Expires=1&Signature=x", nil)
		}, KindUnknownAccessKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := v.Verify(tt.req())
			if tt.kind == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if res.Service != "s3" || res.AccessKeyID != testCreds.AccessKeyID {
					t.Fatalf("result %+v", res)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Kind != tt.kind {
				t.Fatalf("Verify = %v, want kind %d", err, tt.kind)
			}
		})
	}
}
