package sigv4

import (
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Limits applied by the verifier.
const (
	// MaxSkew is how far a signing time may be from the server's clock.
	MaxSkew = 15 * time.Minute
	// MaxPresignExpiry is the longest X-Amz-Expires accepted (7 days).
	MaxPresignExpiry = 7 * 24 * time.Hour
	// DefaultMaxBody bounds the body of a non-S3 request when the Route
	// names no cap: the verifier reads it whole to hash it, and only after
	// everything the headers can prove has been checked. It is the control
	// plane's own limit (1 MiB).
	DefaultMaxBody = 1 << 20
	// globalRegion is the region IAM (a global service) is always signed for.
	globalRegion = "us-east-1"
)

// Verifier checks SigV4 signatures against a fixed table of credentials.
// It is safe for concurrent use.
type Verifier struct {
	creds  map[string]string
	now    func() time.Time
	region string
	keys   func(accessKeyID string) (secret string, ok bool)
}

// Option configures a Verifier.
type Option func(*Verifier)

// WithRegion makes the verifier refuse a credential scope for any other
// region (IAM, a global service, is also accepted in us-east-1). Without
// it any region is accepted.
func WithRegion(region string) Option {
	return func(v *Verifier) { v.region = region }
}

// WithKeySource adds keys beyond the fixed table: lookup returns the secret
// of an access key id the table lacks (derived per training job, say). It
// must be safe for concurrent use.
func WithKeySource(lookup func(accessKeyID string) (secret string, ok bool)) Option {
	return func(v *Verifier) { v.keys = lookup }
}

// secret returns the secret access key of id.
func (v *Verifier) secret(id string) (string, bool) {
	if s, ok := v.creds[id]; ok {
		return s, true
	}
	if v.keys != nil {
		return v.keys(id)
	}
	return "", false
}

// NewVerifier returns a verifier for creds (access key id → secret access
// key). now is the clock for skew and expiry checks; nil means time.Now.
func NewVerifier(creds map[string]string, now func() time.Time, opts ...Option) *Verifier {
	if now == nil {
		now = time.Now
	}
	c := make(map[string]string, len(creds))
	for k, v := range creds {
		c[k] = v
	}
	v := &Verifier{creds: c, now: now}
	for _, o := range opts {
		o(v)
	}
	return v
}

// Route is what the addressed API expects of a request's signature.
type Route struct {
	// Services are the credential-scope services the API answers to
	// ("sagemaker", "logs", "s3", ...). Empty accepts any.
	Services []string
	// MaxBody is the most body bytes a non-S3 request may carry (the
	// route's real limit); the verifier refuses a longer one before or
	// while hashing it, never holding more. 0 means DefaultMaxBody.
	MaxBody int64
}

func (rt Route) maxBody() int64 {
	if rt.MaxBody > 0 {
		return rt.MaxBody
	}
	return DefaultMaxBody
}

// Result describes a request whose signature checked out. It carries what
// is needed to verify the chunk signatures of a streaming body.
type Result struct {
	AccessKeyID  string
	SessionToken string
	Service      string
	Region       string
	// Time is the signing time (X-Amz-Date).
	Time time.Time
	// Scope is "<yyyymmdd>/<region>/<service>/aws4_request".
	Scope string
	// Signature is the request's hex signature: the seed of a streaming
	// body's chunk signatures.
	Signature string
	// SigningKey is the derived key for Scope.
	SigningKey []byte
	// PayloadHash is the payload hash that was signed: hex, or one of
	// UnsignedPayload, StreamingPayload, StreamingPayloadTrailer,
	// StreamingUnsignedPayloadTrailer.
	PayloadHash string
	// Presigned is true for the query-string form.
	Presigned bool
}

// ChunkSigner returns a verifier for the chunk signatures of this
// request's aws-chunked body, seeded with the request signature.
func (r *Result) ChunkSigner() *ChunkSigner {
	return NewChunkSigner(r.SigningKey, r.Time, r.Scope, r.Signature)
}

// Credential is the parsed credential of a request, before verification.
type Credential struct {
	AccessKeyID string
	Date        string // yyyymmdd
	Region      string
	Service     string
}

// Scope is the credential scope string.
func (c Credential) Scope() string {
	return c.Date + "/" + c.Region + "/" + c.Service + "/aws4_request"
}

func parseCredential(s string) (Credential, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" || parts[0] == "" || len(parts[1]) != 8 || parts[3] == "" {
		return Credential{}, false
	}
	return Credential{AccessKeyID: parts[0], Date: parts[1], Region: parts[2], Service: parts[3]}, true
}

// ParseCredential extracts the credential of a SigV4 request (header or
// presigned form) without verifying anything. Permissive setups use it to
// learn the region and service a client signed for.
func ParseCredential(r *http.Request) (Credential, bool) {
	if a, ok := parseAuthorization(r.Header.Get("Authorization")); ok {
		return a.cred, true
	}
	if c := r.URL.Query().Get("X-Amz-Credential"); c != "" {
		return parseCredential(c)
	}
	return Credential{}, false
}

type authorization struct {
	cred      Credential
	signed    []string
	signature string
}

// parseAuthorization parses
// "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...".
func parseAuthorization(h string) (authorization, bool) {
	rest, ok := strings.CutPrefix(h, Algorithm+" ")
	if !ok {
		return authorization{}, false
	}
	var a authorization
	var haveCred, haveSigned, haveSig bool
	for _, f := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			return authorization{}, false
		}
		switch k {
		case "Credential":
			a.cred, haveCred = parseCredential(v)
		case "SignedHeaders":
			a.signed, haveSigned = strings.Split(v, ";"), v != ""
		case "Signature":
			a.signature, haveSig = v, v != ""
		}
	}
	return a, haveCred && haveSigned && haveSig
}

// Verify checks the request's signature with no expectation of its
// service (VerifyRoute with a zero Route).
func (v *Verifier) Verify(r *http.Request) (*Result, error) {
	return v.VerifyRoute(r, Route{})
}

// VerifyRoute checks the request's signature for the API rt describes.
// Everything the headers alone can prove (key, date, skew, scope, signed
// headers, declared length) is checked before a byte of the body is read.
// On success the request is unchanged, except that a non-S3 body has been
// read (at most rt.MaxBody bytes) and replaced by an identical in-memory
// one. Errors are *Error.
func (v *Verifier) VerifyRoute(r *http.Request, rt Route) (*Result, error) {
	res, err := v.verify(r, rt)
	if err != nil {
		err.json = r.Header.Get("X-Amz-Target") != "" || strings.HasPrefix(r.URL.Path, "/endpoints/")
		return nil, err
	}
	return res, nil
}

func (v *Verifier) verify(r *http.Request, rt Route) (*Result, *Error) {
	auth := r.Header.Get("Authorization")
	q := r.URL.Query()
	switch {
	case strings.HasPrefix(auth, Algorithm+" "):
		return v.verifyHeader(r, auth, rt)
	case strings.HasPrefix(auth, "AWS "):
		if e := v.checkScope(Credential{Service: "s3", Region: v.region}, rt, false); e != nil {
			return nil, e
		}
		return v.verifyV2Header(r, auth)
	case auth != "":
		scheme, _, _ := strings.Cut(auth, " ")
		return nil, errorf(KindMalformed, "", false, fmt.Sprintf("unsupported authorization type %q; only %s is accepted", scheme, Algorithm))
	case q.Has("X-Amz-Algorithm") || q.Has("X-Amz-Signature"):
		return v.verifyPresigned(r, rt)
	case q.Has("AWSAccessKeyId") && q.Has("Signature"):
		if e := v.checkScope(Credential{Service: "s3", Region: v.region}, rt, true); e != nil {
			return nil, e
		}
		return v.verifyV2Presigned(r)
	default:
		return nil, errorf(KindMissing, "", false, "request is not signed")
	}
}

func (v *Verifier) verifyHeader(r *http.Request, auth string, rt Route) (*Result, *Error) {
	a, ok := parseAuthorization(auth)
	if !ok {
		return nil, errorf(KindMalformed, "", false, "the authorization header is malformed")
	}
	svc := a.cred.Service
	secret, ok := v.secret(a.cred.AccessKeyID)
	if !ok {
		return nil, errorf(KindUnknownAccessKey, svc, false, "the AWS access key id you provided does not exist in our records")
	}
	t, err := requestTime(r)
	if err != nil {
		return nil, errorf(KindMalformed, svc, false, err.Error())
	}
	if t.Format(DateFormat) != a.cred.Date {
		return nil, errorf(KindMalformed, svc, false, fmt.Sprintf("invalid credential date %s: it is not the date of X-Amz-Date %s", a.cred.Date, t.Format(TimeFormat)))
	}
	if e := v.checkSkew(t, svc, false); e != nil {
		return nil, e
	}
	if !contains(a.signed, "host") {
		return nil, errorf(KindMalformed, svc, false, "the host header must be signed")
	}
	if e := v.checkScope(a.cred, rt, false); e != nil {
		return nil, e
	}
	payload, e := payloadHash(r, svc, false, rt.maxBody())
	if e != nil {
		return nil, e
	}
	cr := canonicalRequest(r, svc, canonicalQuery(r.URL.RawQuery), a.signed, payload)
	key := SigningKey(secret, a.cred.Date, a.cred.Region, svc)
	want := hmacSHA256(key, stringToSign(t, a.cred.Scope(), cr))
	if !equalHex(want, a.signature) {
		return nil, errorf(KindSignatureMismatch, svc, false,
			"the request signature we calculated does not match the signature you provided; check your key and signing method")
	}
	return &Result{
		AccessKeyID:  a.cred.AccessKeyID,
		SessionToken: r.Header.Get("X-Amz-Security-Token"),
		Service:      svc,
		Region:       a.cred.Region,
		Time:         t,
		Scope:        a.cred.Scope(),
		Signature:    a.signature,
		SigningKey:   key,
		PayloadHash:  payload,
	}, nil
}

func (v *Verifier) verifyPresigned(r *http.Request, rt Route) (*Result, *Error) {
	q := r.URL.Query()
	if alg := q.Get("X-Amz-Algorithm"); alg != Algorithm {
		return nil, errorf(KindMalformed, "", true, fmt.Sprintf("X-Amz-Algorithm must be %s, not %q", Algorithm, alg))
	}
	cred, ok := parseCredential(q.Get("X-Amz-Credential"))
	if !ok {
		return nil, errorf(KindMalformed, "", true, "X-Amz-Credential is missing or malformed")
	}
	svc := cred.Service
	sig := q.Get("X-Amz-Signature")
	signedList := q.Get("X-Amz-SignedHeaders")
	if sig == "" || signedList == "" {
		return nil, errorf(KindMalformed, svc, true, "X-Amz-Signature and X-Amz-SignedHeaders are required")
	}
	secret, ok := v.secret(cred.AccessKeyID)
	if !ok {
		return nil, errorf(KindUnknownAccessKey, svc, true, "the AWS access key id you provided does not exist in our records")
	}
	t, err := time.Parse(TimeFormat, q.Get("X-Amz-Date"))
	if err != nil {
		return nil, errorf(KindMalformed, svc, true, "X-Amz-Date is missing or malformed")
	}
	if t.Format(DateFormat) != cred.Date {
		return nil, errorf(KindMalformed, svc, true, "the credential date is not the date of X-Amz-Date")
	}
	secs, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
	if err != nil || secs < 1 || time.Duration(secs)*time.Second > MaxPresignExpiry {
		return nil, errorf(KindMalformed, svc, true, "X-Amz-Expires must be between 1 and 604800 seconds")
	}
	now := v.now()
	if now.After(t.Add(time.Duration(secs) * time.Second)) {
		return nil, errorf(KindExpired, svc, true, "request has expired")
	}
	if t.After(now.Add(MaxSkew)) {
		return nil, errorf(KindSkewed, svc, true, "the request time is too far in the future")
	}
	signed := strings.Split(signedList, ";")
	if !contains(signed, "host") {
		return nil, errorf(KindMalformed, svc, true, "the host header must be signed")
	}
	if e := v.checkScope(cred, rt, true); e != nil {
		return nil, e
	}
	payload, e := payloadHash(r, svc, true, rt.maxBody())
	if e != nil {
		return nil, e
	}
	cr := canonicalRequest(r, svc, canonicalQuery(r.URL.RawQuery), signed, payload)
	key := SigningKey(secret, cred.Date, cred.Region, svc)
	want := hmacSHA256(key, stringToSign(t, cred.Scope(), cr))
	if !equalHex(want, sig) {
		return nil, errorf(KindSignatureMismatch, svc, true,
			"the request signature we calculated does not match the signature you provided; check your key and signing method")
	}
	return &Result{
		AccessKeyID:  cred.AccessKeyID,
		SessionToken: q.Get("X-Amz-Security-Token"),
		Service:      svc,
		Region:       cred.Region,
		Time:         t,
		Scope:        cred.Scope(),
		Signature:    sig,
		SigningKey:   key,
		PayloadHash:  payload,
		Presigned:    true,
	}, nil
}

// checkScope refuses a credential scoped to a service the route does not
// serve or to a region other than the server's, with AWS's wording.
func (v *Verifier) checkScope(c Credential, rt Route, presigned bool) *Error {
	if len(rt.Services) > 0 && !contains(rt.Services, c.Service) {
		want := rt.Services[0]
		// The error is rendered in the protocol of the API addressed.
		if want == "s3" {
			return errorf(KindWrongScope, want, presigned, fmt.Sprintf(
				"the authorization is malformed; incorrect service %q: this endpoint belongs to %q", c.Service, want))
		}
		return errorf(KindWrongScope, want, presigned, fmt.Sprintf("Credential should be scoped to correct service: '%s'.", want))
	}
	if v.region == "" || c.Region == v.region || c.Service == "iam" && c.Region == globalRegion {
		return nil
	}
	if c.Service == "s3" {
		return errorf(KindWrongScope, c.Service, presigned, fmt.Sprintf(
			"the authorization is malformed; the region %q is wrong; expecting %q", c.Region, v.region))
	}
	return errorf(KindWrongScope, c.Service, presigned, "Credential should be scoped to a valid region.")
}

func (v *Verifier) checkSkew(t time.Time, svc string, presigned bool) *Error {
	d := v.now().Sub(t)
	if d < 0 {
		d = -d
	}
	if d > MaxSkew {
		return errorf(KindSkewed, svc, presigned, fmt.Sprintf(
			"the difference between the request time (%s) and the server time (%s) is too large",
			t.UTC().Format(TimeFormat), v.now().UTC().Format(TimeFormat)))
	}
	return nil
}

// requestTime reads X-Amz-Date, or failing that the Date header.
func requestTime(r *http.Request) (time.Time, error) {
	if s := r.Header.Get("X-Amz-Date"); s != "" {
		t, err := time.Parse(TimeFormat, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("X-Amz-Date %q is not in the format %s", s, TimeFormat)
		}
		return t, nil
	}
	if s := r.Header.Get("Date"); s != "" {
		t, err := http.ParseTime(s)
		if err != nil {
			return time.Time{}, fmt.Errorf("Date %q is not an HTTP date", s)
		}
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("a valid Date or X-Amz-Date header is required")
}

// payloadHash is the payload hash the client must have signed. For S3 it
// is x-amz-content-sha256 (required in the header form; a presigned URL
// defaults to UNSIGNED-PAYLOAD). For other services the body is always
// hashed, UNSIGNED-PAYLOAD or not (AWS signs JSON and Query bodies): it is
// refused unread when its declared length exceeds max, and otherwise read
// through a limit of max bytes, hashed and put back.
func payloadHash(r *http.Request, svc string, presigned bool, max int64) (string, *Error) {
	if svc == "s3" {
		if presigned {
			if h := r.URL.Query().Get("X-Amz-Content-Sha256"); h != "" {
				return h, nil
			}
			return UnsignedPayload, nil
		}
		h := r.Header.Get("X-Amz-Content-Sha256")
		if h == "" {
			return "", errorf(KindMalformed, svc, false, "missing required header for this request: x-amz-content-sha256")
		}
		return h, nil
	}
	if r.ContentLength > max {
		return "", errorf(KindTooLarge, svc, presigned, fmt.Sprintf("the request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, max))
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
		if err != nil {
			r.Body.Close()
			return "", errorf(KindMalformed, svc, presigned, "cannot read the request body: "+err.Error())
		}
		if int64(len(b)) > max {
			r.Body.Close()
			return "", errorf(KindTooLarge, svc, presigned, fmt.Sprintf("the request body exceeds the limit of %d bytes", max))
		}
		r.Body.Close()
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	sum := hexSHA256(body)
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && !strings.EqualFold(h, sum) {
		return "", errorf(KindPayloadMismatch, svc, presigned, "the provided x-amz-content-sha256 does not match what was computed")
	}
	return sum, nil
}

func equalHex(want []byte, got string) bool {
	g, err := hex.DecodeString(got)
	return err == nil && hmac.Equal(want, g)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
