package s3api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/sigv4"
)

var chunkCreds = aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// chunkedBody describes an aws-chunked request to build.
type chunkedBody struct {
	data      []byte
	chunk     int
	signed    bool
	trailer   bool   // send x-amz-checksum-crc32 as a trailer
	crc       string // trailer value; computed when empty
	encoding  string // Content-Encoding, default "aws-chunked"
	decodedCL string // x-amz-decoded-content-length, default len(data)
	streamed  bool   // no Content-Length (Transfer-Encoding: chunked)
	tamper    func(body []byte) []byte
	badTrSig  bool
}

func hmacHex(key []byte, s string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(s))
	return h.Sum(nil)
}

// request builds the request; signing uses the SDK's signer for the
// header signature and its StreamSigner for the chunk signatures.
func (c chunkedBody) request(t *testing.T, url string, creds aws.Credentials) *http.Request {
	t.Helper()
	now := time.Now().UTC()
	if c.chunk == 0 {
		c.chunk = 64 << 10
	}
	var chunks [][]byte
	for rest := c.data; len(rest) > 0; {
		n := min(c.chunk, len(rest))
		chunks = append(chunks, rest[:n])
		rest = rest[n:]
	}
	crc := c.crc
	if crc == "" {
		crc, _ = objectstore.ComputeChecksum(objectstore.CRC32, bytes.NewReader(c.data))
	}
	trailerLine := "x-amz-checksum-crc32:" + crc
	sigExt := 0
	if c.signed {
		sigExt = len(";chunk-signature=") + 64
	}
	length := 0
	for _, ch := range chunks {
		length += len(strconv.FormatInt(int64(len(ch)), 16)) + sigExt + 2 + len(ch) + 2
	}
	length += 1 + sigExt + 2
	if c.trailer {
		length += len(trailerLine) + 2
		if c.signed {
			length += len("x-amz-trailer-signature:") + 64 + 2
		}
	}
	length += 2

	sha := sigv4.StreamingUnsignedPayloadTrailer
	switch {
	case c.signed && c.trailer:
		sha = sigv4.StreamingPayloadTrailer
	case c.signed:
		sha = sigv4.StreamingPayload
	}
	req, err := http.NewRequest("PUT", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Content-Sha256", sha)
	enc := c.encoding
	if enc == "" {
		enc = "aws-chunked"
	}
	req.Header.Set("Content-Encoding", enc)
	decoded := c.decodedCL
	if decoded == "" {
		decoded = strconv.Itoa(len(c.data))
	}
	req.Header.Set("X-Amz-Decoded-Content-Length", decoded)
	if c.trailer {
		req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
	}
	req.ContentLength = int64(length)
	if c.streamed {
		req.ContentLength = -1
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), creds, req, sha, "s3", "us-east-1", now); err != nil {
		t.Fatal(err)
	}
	auth := req.Header.Get("Authorization")
	seed, _ := hex.DecodeString(auth[strings.LastIndex(auth, "Signature=")+len("Signature="):])
	ss := v4.NewStreamSigner(creds, "s3", "us-east-1", seed)

	var body bytes.Buffer
	var last []byte
	writeChunk := func(ch []byte) {
		fmt.Fprintf(&body, "%x", len(ch))
		if c.signed {
			sig, err := ss.GetSignature(context.Background(), nil, ch, now)
			if err != nil {
				t.Fatal(err)
			}
			last = sig
			fmt.Fprintf(&body, ";chunk-signature=%x", sig)
		}
		body.WriteString("\r\n")
		body.Write(ch)
		if len(ch) > 0 {
			body.WriteString("\r\n")
		}
	}
	for _, ch := range chunks {
		writeChunk(ch)
	}
	writeChunk(nil)
	if c.trailer {
		body.WriteString(trailerLine + "\r\n")
		if c.signed {
			date := now.Format("20060102")
			key := hmacHex([]byte("AWS4"+creds.SecretAccessKey), date)
			key = hmacHex(key, "us-east-1")
			key = hmacHex(key, "s3")
			key = hmacHex(key, "aws4_request")
			sum := sha256.Sum256([]byte(trailerLine + "\n"))
			sts := "AWS4-HMAC-SHA256-TRAILER\n" + now.Format("20060102T150405Z") + "\n" + date + "/us-east-1/s3/aws4_request\n" +
				hex.EncodeToString(last) + "\n" + hex.EncodeToString(sum[:])
			sig := hmacHex(key, sts)
			if c.badTrSig {
				sig[0] ^= 1
			}
			fmt.Fprintf(&body, "x-amz-trailer-signature:%x\r\n", sig)
		}
	}
	body.WriteString("\r\n")
	if body.Len() != length {
		t.Fatalf("built %d bytes, computed %d", body.Len(), length)
	}
	b := body.Bytes()
	if c.tamper != nil {
		b = c.tamper(bytes.Clone(b))
	}
	if c.streamed {
		req.Body = io.NopCloser(struct{ io.Reader }{bytes.NewReader(b)})
	} else {
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	return req
}

func TestAWSChunkedUploads(t *testing.T) {
	verifier := sigv4.NewVerifier(map[string]string{"test": "test"}, time.Now)
	data := randomBytes(200_000, 7)
	flip := func(at int) func([]byte) []byte {
		return func(b []byte) []byte { b[at] ^= 0xff; return b }
	}
	tests := []struct {
		name     string
		body     chunkedBody
		auth     bool
		status   int
		code     string
		encoding string // stored Content-Encoding
	}{
		{name: "unsigned trailer", body: chunkedBody{data: data, trailer: true}, auth: true, status: 200},
		{name: "unsigned trailer, odd chunks", body: chunkedBody{data: data, chunk: 8191, trailer: true}, auth: true, status: 200},
		{name: "unsigned trailer, wrong crc", body: chunkedBody{data: data, trailer: true, crc: "AAAAAA=="}, auth: true, status: 400, code: "BadDigest"},
		{name: "unsigned trailer, tampered data", body: chunkedBody{data: data, trailer: true, tamper: flip(100)}, auth: true, status: 400, code: "BadDigest"},
		{name: "unsigned, no content-length", body: chunkedBody{data: data, trailer: true, streamed: true}, auth: true, status: 200},
		{name: "aws-chunked combined with gzip", body: chunkedBody{data: data, trailer: true, encoding: "aws-chunked,gzip"}, auth: true, status: 200, encoding: "gzip"},
		{name: "signed", body: chunkedBody{data: data, signed: true}, auth: true, status: 200},
		{name: "signed, one big chunk", body: chunkedBody{data: data, chunk: len(data), signed: true}, auth: true, status: 200},
		{name: "signed, empty object", body: chunkedBody{data: nil, signed: true}, auth: true, status: 200},
		{name: "signed, tampered data", body: chunkedBody{data: data, signed: true, tamper: flip(200)}, auth: true, status: 403, code: "SignatureDoesNotMatch"},
		{name: "signed, tampered later chunk", body: chunkedBody{data: data, signed: true, tamper: flip(len("10000;chunk-signature=") + 64 + 2 + 65536 + 2 + len("10000;chunk-signature=") + 64 + 2 + 70000)}, auth: true, status: 403, code: "SignatureDoesNotMatch"},
		{name: "signed trailer", body: chunkedBody{data: data, signed: true, trailer: true}, auth: true, status: 200},
		{name: "signed trailer, bad trailer signature", body: chunkedBody{data: data, signed: true, trailer: true, badTrSig: true}, auth: true, status: 403, code: "SignatureDoesNotMatch"},
		{name: "signed trailer, wrong crc", body: chunkedBody{data: data, signed: true, trailer: true, crc: "AAAAAA=="}, auth: true, status: 400, code: "BadDigest"},
		{name: "decoded length too small", body: chunkedBody{data: data, signed: true, decodedCL: "100"}, auth: true, status: 400, code: "InvalidRequest"},
		{name: "decoded length too large", body: chunkedBody{data: data, signed: true, decodedCL: "300000"}, auth: true, status: 400, code: "IncompleteBody"},
		{name: "truncated", body: chunkedBody{data: data, trailer: true, streamed: true, tamper: func(b []byte) []byte { return b[:len(b)/2] }}, auth: true, status: 400, code: "IncompleteBody"},
		{name: "signed without auth: parsed, not checked", body: chunkedBody{data: data, signed: true, tamper: func(b []byte) []byte {
			i := bytes.Index(b, []byte("chunk-signature=")) + len("chunk-signature=")
			copy(b[i:], strings.Repeat("0", 64))
			return b
		}}, status: 200},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{}
			if tt.auth {
				cfg.Verifier = verifier
			}
			e := newEnv(t, cfg)
			e.mkBucket(t, "bkt")
			key := fmt.Sprintf("obj%d", i)
			req := tt.body.request(t, e.srv.URL+"/bkt/"+key, chunkCreds)
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			st, serr := e.store.Stat(context.Background(), "bkt", key)
			if tt.status != 200 {
				if got := errorCode(t, string(b)); got != tt.code {
					t.Fatalf("code %s, want %s", got, tt.code)
				}
				if serr == nil {
					t.Fatal("object stored despite the error")
				}
				return
			}
			if serr != nil {
				t.Fatal(serr)
			}
			o, err := e.store.Get(context.Background(), "bkt", key)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(o)
			o.Close()
			if !bytes.Equal(got, tt.body.data) {
				t.Fatalf("stored %d bytes that differ from the %d sent", len(got), len(tt.body.data))
			}
			if tt.body.trailer {
				want, _ := objectstore.ComputeChecksum(objectstore.CRC32, bytes.NewReader(tt.body.data))
				if st.Checksums.CRC32 != want {
					t.Fatalf("stored crc32 %q, want %q", st.Checksums.CRC32, want)
				}
			}
			if st.Headers["Content-Encoding"] != tt.encoding {
				t.Fatalf("stored Content-Encoding %q, want %q", st.Headers["Content-Encoding"], tt.encoding)
			}
		})
	}
}

func TestChunkedReaderMalformed(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string // substring of the error; "" means success
		data string
	}{
		{"minimal", "3\r\nabc\r\n0\r\n\r\n", "", "abc"},
		{"bare LF tolerated", "3\nabc\n0\n\n", "", "abc"},
		{"no closing blank line", "3\r\nabc\r\n0\r\n", "", "abc"},
		{"extensions ignored", "3;foo=bar\r\nabc\r\n0;x=y\r\n\r\n", "", "abc"},
		{"upper-case hex", "A\r\n0123456789\r\n0\r\n\r\n", "", "0123456789"},
		{"trailers", "1\r\nx\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\nother:v\r\n\r\n", "", "x"},
		{"bad size", "zz\r\nabc\r\n0\r\n\r\n", "bad chunk size", ""},
		{"signed size", "+3\r\nabc\r\n0\r\n\r\n", "bad chunk size", ""},
		{"huge size", "fffffffffffffffff\r\n", "bad chunk size", ""},
		{"data longer than size", "2\r\nabc\r\n0\r\n\r\n", "longer than its declared size", ""},
		{"data shorter than size", "5\r\nabc\r\n", "unexpected EOF", ""},
		{"no final chunk", "3\r\nabc\r\n", "unexpected EOF", ""},
		{"empty body", "", "unexpected EOF", ""},
		{"garbage after end", "1\r\nx\r\n0\r\n\r\nmore", "data after the final chunk", ""},
		{"bad trailer line", "1\r\nx\r\n0\r\nno-colon\r\n\r\n", "bad trailer line", ""},
		{"line too long", strings.Repeat("1", 5000) + "\r\n", "line longer", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := newChunkedReader(strings.NewReader(tt.body), nil, -1)
			got, err := io.ReadAll(cr)
			if tt.want == "" {
				if err != nil || string(got) != tt.data {
					t.Fatalf("got %q, %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	// A signed reader refuses chunks without signatures.
	seed := strings.Repeat("a", 64)
	signer := sigv4.NewChunkSigner([]byte("k"), time.Now(), "20260101/us-east-1/s3/aws4_request", seed)
	_, err := io.ReadAll(newChunkedReader(strings.NewReader("3\r\nabc\r\n0\r\n\r\n"), signer, -1))
	if err == nil || !strings.Contains(err.Error(), "without chunk-signature") {
		t.Fatalf("unsigned chunk in a signed body: %v", err)
	}
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("error is not a 400 apiError: %v", err)
	}
}
