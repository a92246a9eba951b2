package sigv4

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// S3 still accepts Signature Version 2 for requests and presigned URLs,
// and botocore presigns S3 URLs with it unless told otherwise
// (generate_presigned_url without signature_version="s3v4"). So the
// verifier accepts the two S3 V2 forms as well:
//
//	Authorization: AWS <AccessKeyId>:<base64 HMAC-SHA1>
//	?AWSAccessKeyId=...&Expires=<epoch>&Signature=<base64 HMAC-SHA1>
//
// A V2 Result has Service "s3" and no signing key (V2 has no streaming
// signatures).

// isV2SubResource reports whether V2 signs this query parameter as part
// of the resource.
func isV2SubResource(name string) bool {
	switch name {
	case "accelerate", "acl", "cors", "defaultObjectAcl", "location", "logging", "partNumber", "policy",
		"requestPayment", "torrent", "versioning", "versionId", "versions", "website", "uploads", "uploadId",
		"response-content-type", "response-content-language", "response-expires", "response-cache-control",
		"response-content-disposition", "response-content-encoding", "delete", "lifecycle", "tagging", "restore",
		"storageClass", "notification", "replication", "analytics", "metrics", "inventory", "select",
		"select-type", "object-lock":
		return true
	}
	return false
}

// v2Resources returns the canonical resources the request may have been
// signed for: the path as sent, and, when the Host looks like
// <bucket>.<domain>, the path prefixed with that bucket (virtual-host
// style signs "/<bucket>/<key>").
func v2Resources(r *http.Request) []string {
	var sub []string
	for _, part := range strings.Split(r.URL.RawQuery, "&") {
		k, v, hasValue := strings.Cut(part, "=")
		if !isV2SubResource(k) {
			continue
		}
		if hasValue {
			sub = append(sub, k+"="+unescapePath(v))
		} else {
			sub = append(sub, k)
		}
	}
	sort.SliceStable(sub, func(i, j int) bool {
		ki, _, _ := strings.Cut(sub[i], "=")
		kj, _, _ := strings.Cut(sub[j], "=")
		return ki < kj
	})
	query := ""
	if len(sub) > 0 {
		query = "?" + strings.Join(sub, "&")
	}
	path := rawPath(r)
	out := []string{path + query}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if bucket, _, ok := strings.Cut(host, "."); ok && net.ParseIP(host) == nil && bucket != "" {
		out = append(out, "/"+bucket+path+query)
	}
	return out
}

func unescapePath(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// v2AmzHeaders renders the x-amz-* headers (and, for presigned URLs,
// x-amz-* query parameters) as V2 signs them.
func v2AmzHeaders(r *http.Request, q url.Values) string {
	m := map[string][]string{}
	for k, vs := range r.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-") {
			m[lk] = append(m[lk], vs...)
		}
	}
	for k, vs := range q {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-") {
			m[lk] = append(m[lk], vs...)
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		vals := make([]string, len(m[k]))
		for i, v := range m[k] {
			vals[i] = strings.TrimSpace(v)
		}
		b.WriteString(k + ":" + strings.Join(vals, ",") + "\n")
	}
	return b.String()
}

func v2Signature(secret, stringToSign string) []byte {
	h := hmac.New(sha1.New, []byte(secret))
	h.Write([]byte(stringToSign))
	return h.Sum(nil)
}

// checkV2 compares sig against every resource form the client may have
// signed.
func checkV2(r *http.Request, q url.Values, secret, dateLine, contentMD5, contentType, sig string) bool {
	got, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(sig, " ", "+"))
	if err != nil {
		return false
	}
	prefix := r.Method + "\n" + contentMD5 + "\n" + contentType + "\n" + dateLine + "\n" + v2AmzHeaders(r, q)
	for _, res := range v2Resources(r) {
		if hmac.Equal(v2Signature(secret, prefix+res), got) {
			return true
		}
	}
	return false
}

func (v *Verifier) verifyV2Header(r *http.Request, auth string) (*Result, *Error) {
	akid, sig, ok := strings.Cut(strings.TrimPrefix(auth, "AWS "), ":")
	if !ok || akid == "" || sig == "" {
		return nil, errorf(KindMalformed, "s3", false, "the authorization header is malformed")
	}
	secret, ok := v.secret(akid)
	if !ok {
		return nil, errorf(KindUnknownAccessKey, "s3", false, "the AWS access key id you provided does not exist in our records")
	}
	// With x-amz-date the Date line is usually empty: the time is signed
	// among the x-amz headers.
	dateLine := r.Header.Get("Date")
	t, err := requestTime(r)
	if err != nil {
		return nil, errorf(KindMalformed, "s3", false, err.Error())
	}
	if e := v.checkSkew(t, "s3", false); e != nil {
		return nil, e
	}
	if !checkV2(r, nil, secret, dateLine, r.Header.Get("Content-MD5"), r.Header.Get("Content-Type"), sig) {
		return nil, errorf(KindSignatureMismatch, "s3", false,
			"the request signature we calculated does not match the signature you provided; check your key and signing method")
	}
	return &Result{AccessKeyID: akid, Service: "s3", Time: t, Signature: sig, PayloadHash: UnsignedPayload}, nil
}

func (v *Verifier) verifyV2Presigned(r *http.Request) (*Result, *Error) {
	q := r.URL.Query()
	akid, sig, expires := q.Get("AWSAccessKeyId"), q.Get("Signature"), q.Get("Expires")
	secret, ok := v.secret(akid)
	if !ok {
		return nil, errorf(KindUnknownAccessKey, "s3", true, "the AWS access key id you provided does not exist in our records")
	}
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil {
		return nil, errorf(KindMalformed, "s3", true, "Expires must be a number of seconds since the epoch")
	}
	if v.now().After(time.Unix(exp, 0)) {
		return nil, errorf(KindExpired, "s3", true, "request has expired")
	}
	first := func(name string) string {
		if s := r.Header.Get(name); s != "" {
			return s
		}
		return q.Get(strings.ToLower(name))
	}
	if !checkV2(r, q, secret, expires, first("Content-MD5"), first("Content-Type"), sig) {
		return nil, errorf(KindSignatureMismatch, "s3", true,
			"the request signature we calculated does not match the signature you provided; check your key and signing method")
	}
	return &Result{AccessKeyID: akid, Service: "s3", Time: v.now(), Signature: sig, PayloadHash: UnsignedPayload, Presigned: true}, nil
}
