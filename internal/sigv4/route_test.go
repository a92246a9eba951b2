package sigv4

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

func regionVerifier(region string) *Verifier {
	return NewVerifier(map[string]string{testCreds.AccessKeyID: testCreds.SecretAccessKey},
		func() time.Time { return testNow }, WithRegion(region))
}

// signedJSON is a SageMaker-shaped request signed by the Go SDK's signer
// for service and region.
func signedJSON(t *testing.T, service, region, body string) *http.Request {
	t.Helper()
	r := httptest.NewRequest("POST", "http://example.com/", strings.NewReader(body))
	r.Header.Set("X-Amz-Target", "SageMaker.ListTrainingJobs")
	r.Header.Set("Content-Type", "application/x-amz-json-1.1")
	if err := v4.NewSigner().SignHTTP(context.Background(), testCreds, r, sha([]byte(body)), service, region, testNow); err != nil {
		t.Fatal(err)
	}
	return r
}

func signedS3(t *testing.T, region string) *http.Request {
	t.Helper()
	r := httptest.NewRequest("GET", "http://example.com/bucket/key", nil)
	r.Header.Set("X-Amz-Content-Sha256", EmptySHA256)
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := s.SignHTTP(context.Background(), testCreds, r, EmptySHA256, "s3", region, testNow); err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	sagemakerRoute = Route{Services: []string{"sagemaker"}, MaxBody: 1 << 20}
	s3Route        = Route{Services: []string{"s3"}}
)

func wantErr(t *testing.T, err error, kind Kind, code string, status int, msg string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *Error", err)
	}
	if e.Kind != kind || e.Code() != code || e.Status() != status || !strings.Contains(e.Message, msg) {
		t.Fatalf("got kind %d %s %d %q, want kind %d %s %d containing %q", e.Kind, e.Code(), e.Status(), e.Message, kind, code, status, msg)
	}
}

func TestScopeMustMatchServerAndRoute(t *testing.T) {
	v := regionVerifier("us-east-1")
	if _, err := v.VerifyRoute(signedJSON(t, "sagemaker", "us-east-1", "{}"), sagemakerRoute); err != nil {
		t.Fatalf("well-scoped request refused: %v", err)
	}
	_, err := v.VerifyRoute(signedJSON(t, "sagemaker", "eu-west-1", "{}"), sagemakerRoute)
	wantErr(t, err, KindWrongScope, "InvalidSignatureException", 403, "Credential should be scoped to a valid region.")
	_, err = v.VerifyRoute(signedJSON(t, "s3", "us-east-1", "{}"), sagemakerRoute)
	wantErr(t, err, KindWrongScope, "InvalidSignatureException", 403, "Credential should be scoped to correct service: 'sagemaker'.")
	_, err = v.VerifyRoute(signedJSON(t, "logs", "us-east-1", "{}"), sagemakerRoute)
	wantErr(t, err, KindWrongScope, "InvalidSignatureException", 403, "correct service: 'sagemaker'")

	if _, err := v.VerifyRoute(signedS3(t, "us-east-1"), s3Route); err != nil {
		t.Fatalf("well-scoped S3 request refused: %v", err)
	}
	_, err = v.VerifyRoute(signedS3(t, "eu-west-1"), s3Route)
	wantErr(t, err, KindWrongScope, "AuthorizationHeaderMalformed", 400, `the region "eu-west-1" is wrong; expecting "us-east-1"`)
	// An S3 signature does not open the SageMaker API, nor one for
	// SageMaker the S3 API.
	_, err = v.VerifyRoute(signedS3(t, "us-east-1"), sagemakerRoute)
	wantErr(t, err, KindWrongScope, "InvalidSignatureException", 403, "correct service")
	_, err = v.VerifyRoute(signedJSON(t, "sagemaker", "us-east-1", "{}"), s3Route)
	wantErr(t, err, KindWrongScope, "AuthorizationHeaderMalformed", 400, `incorrect service "sagemaker"`)

	// IAM is global: signed for us-east-1 whatever the server's region.
	query := Route{Services: []string{"sts", "iam"}, MaxBody: 64 << 10}
	eu := regionVerifier("eu-west-1")
	if _, err := eu.VerifyRoute(signedJSON(t, "iam", "us-east-1", "Action=GetRole"), query); err != nil {
		t.Fatalf("IAM in us-east-1 refused by an eu-west-1 server: %v", err)
	}
	_, err = eu.VerifyRoute(signedJSON(t, "sts", "us-east-1", "Action=GetCallerIdentity"), query)
	wantErr(t, err, KindWrongScope, "InvalidSignatureException", 403, "valid region")

	// Without WithRegion any region is accepted (tests, permissive setups).
	if _, err := testVerifier().VerifyRoute(signedJSON(t, "sagemaker", "ap-south-1", "{}"), sagemakerRoute); err != nil {
		t.Fatalf("no region configured, yet refused: %v", err)
	}
}

func TestPresignedScope(t *testing.T) {
	v := regionVerifier("us-east-1")
	presign := func(region string) *http.Request {
		r := httptest.NewRequest("GET", "http://example.com/bucket/key", nil)
		q := url.Values{"X-Amz-Expires": {"300"}}
		r.URL.RawQuery = q.Encode()
		s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		u, _, err := s.PresignHTTP(context.Background(), testCreds, r, UnsignedPayload, "s3", region, testNow)
		if err != nil {
			t.Fatal(err)
		}
		pu, _ := url.Parse(u)
		return httptest.NewRequest("GET", pu.RequestURI(), nil)
	}
	if _, err := v.VerifyRoute(presign("us-east-1"), s3Route); err != nil {
		t.Fatalf("presigned URL refused: %v", err)
	}
	_, err := v.VerifyRoute(presign("eu-west-1"), s3Route)
	wantErr(t, err, KindWrongScope, "AuthorizationQueryParametersError", 400, "is wrong")
}

func TestSignatureV2OnlyForS3(t *testing.T) {
	r := httptest.NewRequest("POST", "http://example.com/", strings.NewReader("{}"))
	r.Header.Set("X-Amz-Target", "SageMaker.ListTrainingJobs")
	r.Header.Set("Date", testNow.Format(http.TimeFormat))
	r.Header.Set("Authorization", "AWS AKIDEXAMPLE:c2lnbmF0dXJl")
	_, err := regionVerifier("us-east-1").VerifyRoute(r, sagemakerRoute)
	wantErr(t, err, KindWrongScope, "InvalidSignatureException", 403, "correct service")
}

func TestUnsignedPayloadOnlyForS3(t *testing.T) {
	// A JSON request signed over UNSIGNED-PAYLOAD leaves its body open to
	// replacement; AWS hashes JSON bodies, so must the verifier.
	for _, body := range []string{`{"MaxResults": 1}`, `{"MaxResults": 2}`} {
		r := httptest.NewRequest("POST", "http://example.com/", strings.NewReader(body))
		r.Header.Set("X-Amz-Target", "SageMaker.ListTrainingJobs")
		r.Header.Set("X-Amz-Content-Sha256", UnsignedPayload)
		if err := v4.NewSigner().SignHTTP(context.Background(), testCreds, r, UnsignedPayload, "sagemaker", "us-east-1", testNow); err != nil {
			t.Fatal(err)
		}
		_, err := regionVerifier("us-east-1").VerifyRoute(r, sagemakerRoute)
		var e *Error
		if !errors.As(err, &e) || e.Code() != "InvalidSignatureException" {
			t.Fatalf("UNSIGNED-PAYLOAD on SageMaker: err = %v, want InvalidSignatureException", err)
		}
	}
}

// countingBody records how many bytes the verifier pulled from the client.
type countingBody struct {
	r    io.Reader
	read int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	return n, err
}
func (c *countingBody) Close() error { return nil }

// endless is a body that never ends: what a forger streams.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func TestForgedBodiesAreNotRead(t *testing.T) {
	const limit = 1 << 20
	route := Route{Services: []string{"sagemaker"}, MaxBody: limit}
	v := regionVerifier("us-east-1")
	forged := func(mut func(r *http.Request), contentLength int64) (*countingBody, error) {
		r := signedJSON(t, "sagemaker", "us-east-1", "{}")
		mut(r)
		var src io.Reader = endless{}
		if contentLength >= 0 { // as net/http delivers it
			src = io.LimitReader(src, contentLength)
		}
		body := &countingBody{r: src}
		r.Body, r.ContentLength = body, contentLength
		_, err := v.VerifyRoute(r, route)
		return body, err
	}
	none := func(*http.Request) {}
	header := func(name, value string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set(name, value) }
	}
	auth := func(old, new string) func(*http.Request) {
		return func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), old, new, 1))
		}
	}
	cases := []struct {
		name     string
		mut      func(*http.Request)
		length   int64
		maxRead  int64
		wantKind Kind
	}{
		// Whatever the headers can refuse costs no body byte.
		{"64 MB declared", none, 64 << 20, 0, KindTooLarge},
		{"unknown key", auth("AKIDEXAMPLE/", "AKIDOTHER/"), 1000, 0, KindUnknownAccessKey},
		{"stale date", header("X-Amz-Date", testNow.Add(-time.Hour).Format(TimeFormat)), 1000, 0, KindSkewed},
		{"other region", auth("/us-east-1/", "/eu-west-1/"), 1000, 0, KindWrongScope},
		{"other service", auth("/sagemaker/", "/s3/"), 64 << 20, 0, KindWrongScope},
		// A chunked body of unknown length is cut at the cap.
		{"chunked, endless", none, -1, limit + 1, KindTooLarge},
		// A wrong signature over a body within the cap cannot be told
		// without hashing the body: at most the cap is read.
		{"wrong signature", auth("Signature=", "Signature=0"), limit, limit + 1, KindSignatureMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, err := forged(c.mut, c.length)
			var e *Error
			if !errors.As(err, &e) || e.Kind != c.wantKind {
				t.Fatalf("err = %v, want kind %d", err, c.wantKind)
			}
			if body.read > c.maxRead {
				t.Fatalf("verifier read %d body bytes before refusing, want at most %d", body.read, c.maxRead)
			}
		})
	}
	// The refusal of a too-large body speaks the API's language.
	_, err := forged(none, 64<<20)
	wantErr(t, err, KindTooLarge, "RequestEntityTooLargeException", http.StatusRequestEntityTooLarge, "exceeds the limit of 1048576 bytes")
}

func TestBodyAtTheCapIsAccepted(t *testing.T) {
	body := strings.Repeat("x", 1<<20)
	r := signedJSON(t, "sagemaker", "us-east-1", body)
	if _, err := regionVerifier("us-east-1").VerifyRoute(r, sagemakerRoute); err != nil {
		t.Fatalf("body of exactly the cap refused: %v", err)
	}
	got, _ := io.ReadAll(r.Body)
	if string(got) != body {
		t.Fatalf("handler gets %d bytes, want the %d signed", len(got), len(body))
	}
}
