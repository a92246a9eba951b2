package s3api

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/sigv4"
)

// payload is a request body ready to store: aws-chunked framing removed,
// and what must be verified about the decoded bytes.
type payload struct {
	body      io.Reader
	integrity objectstore.Integrity
}

// isAWSChunked reports whether the body uses aws-chunked framing.
func isAWSChunked(r *http.Request) bool {
	if strings.HasPrefix(r.Header.Get("x-amz-content-sha256"), "STREAMING-") {
		return true
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "aws-chunked") {
				return true
			}
		}
	}
	return false
}

// storedContentEncoding is Content-Encoding without the aws-chunked token,
// which describes the transfer, not the object.
func storedContentEncoding(r *http.Request) string {
	var keep []string
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, tok := range strings.Split(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" && !strings.EqualFold(tok, "aws-chunked") {
				keep = append(keep, tok)
			}
		}
	}
	return strings.Join(keep, ",")
}

// openPayload prepares the body of rq for storing.
func (h *Handler) openPayload(rq *request) (*payload, error) {
	r := rq.r
	p := &payload{body: r.Body}
	in := &p.integrity

	if v := r.Header.Get("Content-MD5"); v != "" {
		sum, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(sum) != 16 {
			return nil, errInvalidDigest
		}
		in.ContentMD5 = sum
	}
	for _, a := range objectstore.AllChecksumAlgorithms() {
		if v := r.Header.Get(a.Header()); v != "" {
			in.Checksums.Set(a, v)
		}
	}
	for _, name := range []string{"x-amz-sdk-checksum-algorithm", "x-amz-checksum-algorithm"} {
		if v := r.Header.Get(name); v != "" {
			a, ok := objectstore.ParseChecksumAlgorithm(v)
			if !ok {
				return nil, newError(http.StatusBadRequest, "InvalidRequest", "Checksum algorithm %q is not supported.", v)
			}
			in.Algorithms = append(in.Algorithms, a)
		}
	}

	sha := r.Header.Get("x-amz-content-sha256")
	if !isAWSChunked(r) {
		switch {
		case sha == "" || sha == sigv4.UnsignedPayload:
		case len(sha) == 64:
			sum, err := hex.DecodeString(sha)
			if err != nil {
				return nil, errBadContentSHA256(sha)
			}
			in.ContentSHA256 = sum
		default:
			return nil, errBadContentSHA256(sha)
		}
		return p, nil
	}

	// aws-chunked.
	want := int64(-1)
	if v := r.Header.Get("x-amz-decoded-content-length"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, newError(http.StatusBadRequest, "InvalidArgument", "x-amz-decoded-content-length %q is not a length", v)
		}
		want = n
	}
	var signer *sigv4.ChunkSigner
	switch sha {
	case sigv4.StreamingPayload, sigv4.StreamingPayloadTrailer:
		if rq.auth != nil && rq.auth.PayloadHash == sha {
			signer = rq.auth.ChunkSigner()
		}
	case "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD", "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER":
		if rq.auth != nil {
			return nil, notImplemented("SigV4a (ECDSA) chunk signatures")
		}
	}
	cr := newChunkedReader(r.Body, signer, want)
	p.body = cr

	var announced []string
	for _, v := range r.Header.Values("x-amz-trailer") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" {
				announced = append(announced, name)
			}
		}
	}
	for _, name := range announced {
		if alg, ok := checksumHeaderAlgorithm(name); ok {
			in.Algorithms = append(in.Algorithms, alg)
		}
	}
	in.Trailer = func() (objectstore.Checksums, error) {
		var sums objectstore.Checksums
		got := map[string]bool{}
		for _, t := range cr.Trailers() {
			got[t.name] = true
			if alg, ok := checksumHeaderAlgorithm(t.name); ok {
				sums.Set(alg, t.value)
			}
		}
		for _, name := range announced {
			if !got[name] {
				return sums, newError(http.StatusBadRequest, "InvalidRequest", "The trailer %s was announced in x-amz-trailer but not sent.", name)
			}
		}
		return sums, nil
	}
	return p, nil
}

func errBadContentSHA256(v string) *apiError {
	return newError(http.StatusBadRequest, "InvalidArgument",
		"x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-..., or a valid sha256 value, not %q", v)
}

// checksumHeaderAlgorithm maps "x-amz-checksum-crc32" to CRC32.
func checksumHeaderAlgorithm(name string) (objectstore.ChecksumAlgorithm, bool) {
	a, ok := strings.CutPrefix(strings.ToLower(name), "x-amz-checksum-")
	if !ok || a == "mode" || a == "algorithm" || a == "type" {
		return "", false
	}
	return objectstore.ParseChecksumAlgorithm(a)
}

// readSmallBody reads and verifies a request body that is not stored (an
// XML document), up to limit bytes.
func (h *Handler) readSmallBody(rq *request, limit int64) ([]byte, error) {
	p, err := h.openPayload(rq)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(p.body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, newError(http.StatusBadRequest, "MaxMessageLengthExceeded", "Your request was too big.")
	}
	if _, err := objectstore.CheckIntegrity(bytes.NewReader(b), p.integrity); err != nil {
		return nil, err
	}
	return b, nil
}
