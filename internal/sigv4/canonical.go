package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Signing constants.
const (
	Algorithm = "AWS4-HMAC-SHA256"
	// TimeFormat is the layout of X-Amz-Date.
	TimeFormat = "20060102T150405Z"
	// DateFormat is the layout of the date in a credential scope.
	DateFormat = "20060102"
	// EmptySHA256 is the hex SHA-256 of an empty payload.
	EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

	// Payload hash values S3 accepts instead of a hex digest.
	UnsignedPayload                 = "UNSIGNED-PAYLOAD"
	StreamingPayload                = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	StreamingPayloadTrailer         = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	StreamingUnsignedPayloadTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
)

// SigningKey derives the SigV4 signing key for a secret, scope date
// (yyyymmdd), region and service.
func SigningKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, "aws4_request")
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// stringToSign builds the string to sign for a canonical request.
func stringToSign(t time.Time, scope, canonicalRequest string) string {
	return Algorithm + "\n" + t.UTC().Format(TimeFormat) + "\n" + scope + "\n" + hexSHA256([]byte(canonicalRequest))
}

// rawPath is the request path exactly as the client sent it (still
// percent-encoded), which is what S3 signs.
func rawPath(r *http.Request) string {
	p := r.RequestURI
	if strings.HasPrefix(p, "/") {
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p = p[:i]
		}
	} else {
		p = r.URL.EscapedPath()
	}
	if p == "" {
		p = "/"
	}
	return p
}

// canonicalURI is the path as signed: as sent for S3, escaped once more
// (every byte outside the unreserved set and "/") for every other service.
func canonicalURI(r *http.Request, service string) string {
	p := rawPath(r)
	if service == "s3" {
		return p
	}
	return escape(p, true)
}

// escape percent-encodes everything outside RFC 3986's unreserved set
// (A-Z a-z 0-9 - _ . ~), keeping "/" when keepSlash.
func escape(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' || c == '/' && keepSlash {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// canonicalQuery decodes the raw query, re-encodes keys and values with the
// strict SigV4 rules and sorts them (by key, then value). The presigned
// signature parameter is left out.
func canonicalQuery(rawQuery string) string {
	type kv struct{ k, v string }
	var pairs []kv
	for _, part := range strings.Split(rawQuery, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		k, v = unescape(k), unescape(v)
		if k == "X-Amz-Signature" {
			continue
		}
		pairs = append(pairs, kv{escape(k, false), escape(v, false)})
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].k != pairs[j].k {
			return pairs[i].k < pairs[j].k
		}
		return pairs[i].v < pairs[j].v
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

func unescape(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// canonicalHeaders renders the headers the client listed as signed, in the
// client's order, each "name:value\n", values trimmed with inner runs of
// spaces collapsed and repeated headers joined by ",".
func canonicalHeaders(r *http.Request, signed []string) string {
	var b strings.Builder
	for _, name := range signed {
		var values []string
		switch name {
		case "host":
			values = []string{r.Host}
		case "content-length":
			values = r.Header.Values("Content-Length")
			if len(values) == 0 && r.ContentLength >= 0 {
				values = []string{strconv.FormatInt(r.ContentLength, 10)}
			}
		case "transfer-encoding":
			values = r.Header.Values("Transfer-Encoding")
			if len(values) == 0 {
				values = r.TransferEncoding
			}
		default:
			values = r.Header.Values(name)
		}
		b.WriteString(name)
		b.WriteByte(':')
		for i, v := range values {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(collapseSpaces(v))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func collapseSpaces(v string) string {
	v = strings.TrimSpace(v)
	if !strings.Contains(v, "  ") {
		return v
	}
	var b strings.Builder
	space := false
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// canonicalRequest assembles the canonical request.
func canonicalRequest(r *http.Request, service, query string, signed []string, payloadHash string) string {
	return r.Method + "\n" +
		canonicalURI(r, service) + "\n" +
		query + "\n" +
		canonicalHeaders(r, signed) + "\n" +
		strings.Join(signed, ";") + "\n" +
		payloadHash
}
