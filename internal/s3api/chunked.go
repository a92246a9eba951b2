package s3api

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"

	"github.com/sagebox/sagebox/internal/sigv4"
)

// Limits of the aws-chunked decoder.
const (
	// maxChunkLine bounds a chunk header line (size and extensions).
	maxChunkLine = 4096
	// maxTrailerBytes bounds the trailer section.
	maxTrailerBytes = 16 << 10
)

// trailer is one trailing header of an aws-chunked body.
type trailer struct {
	name  string // lower-case
	value string
}

// chunkedReader decodes an aws-chunked body:
//
//	hex-size[;chunk-signature=<sig>]\r\n <data>\r\n ...
//	0[;chunk-signature=<sig>]\r\n
//	[name:value\r\n ... [x-amz-trailer-signature:<sig>\r\n]]
//	\r\n
//
// It yields the decoded data. Every variant parses the same way; when
// signer is set, chunk signatures (and the trailer signature, if there are
// trailers) are required and verified, each chunk as soon as its data has
// been read. The final io.EOF is returned only after the last chunk, the
// trailers, their signature and the decoded length have all checked out,
// so a consumer that commits on EOF never commits a bad body.
type chunkedReader struct {
	r           *bufio.Reader
	signer      *sigv4.ChunkSigner
	wantDecoded int64 // -1 when x-amz-decoded-content-length is absent

	inChunk   bool
	remaining int64
	chunkSig  string
	sum       hash.Hash
	decoded   int64
	trailers  []trailer
	err       error // sticky; io.EOF once done
}

func newChunkedReader(r io.Reader, signer *sigv4.ChunkSigner, wantDecoded int64) *chunkedReader {
	c := &chunkedReader{r: bufio.NewReaderSize(r, maxChunkLine), signer: signer, wantDecoded: wantDecoded}
	if signer != nil {
		c.sum = sha256.New()
	}
	return c
}

// Trailers returns the trailing headers once Read has returned io.EOF.
func (c *chunkedReader) Trailers() []trailer { return c.trailers }

func malformedChunk(format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, "InvalidRequest", "malformed aws-chunked body: "+format, args...)
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	for c.remaining == 0 {
		if c.inChunk {
			if err := c.endChunk(); err != nil {
				c.err = err
				return 0, err
			}
		}
		done, err := c.startChunk()
		if err != nil {
			c.err = err
			return 0, err
		}
		if done {
			c.err = io.EOF
			return 0, io.EOF
		}
	}
	if int64(len(p)) > c.remaining {
		p = p[:c.remaining]
	}
	n, err := c.r.Read(p)
	c.remaining -= int64(n)
	c.decoded += int64(n)
	if c.sum != nil {
		c.sum.Write(p[:n])
	}
	if c.wantDecoded >= 0 && c.decoded > c.wantDecoded {
		c.err = newError(http.StatusBadRequest, "InvalidRequest", "the aws-chunked body is longer than x-amz-decoded-content-length")
		return n, c.err
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		c.err = err
	}
	return n, err
}

// readLine reads one line without its CRLF (a bare LF is tolerated).
func (c *chunkedReader) readLine() (string, error) {
	line, err := c.r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return "", malformedChunk("line longer than %d bytes", maxChunkLine)
	case err == io.EOF && len(line) == 0:
		return "", io.EOF
	case err == io.EOF:
		return "", io.ErrUnexpectedEOF
	case err != nil:
		return "", err
	}
	s := strings.TrimSuffix(string(line[:len(line)-1]), "\r")
	return s, nil
}

// startChunk parses a chunk header. For the final chunk it also finishes
// the body and reports done.
func (c *chunkedReader) startChunk() (done bool, err error) {
	line, err := c.readLine()
	if err == io.EOF {
		return false, io.ErrUnexpectedEOF
	}
	if err != nil {
		return false, err
	}
	sizeStr, ext, _ := strings.Cut(line, ";")
	size, ok := parseHexSize(strings.TrimSpace(sizeStr))
	if !ok {
		return false, malformedChunk("bad chunk size %q", sizeStr)
	}
	c.chunkSig = ""
	for _, e := range strings.Split(ext, ";") {
		if k, v, ok := strings.Cut(strings.TrimSpace(e), "="); ok && k == "chunk-signature" {
			c.chunkSig = v
		}
	}
	if c.signer != nil && c.chunkSig == "" {
		return false, malformedChunk("chunk without chunk-signature in a signed body")
	}
	if size == 0 {
		if err := c.checkSignature(); err != nil {
			return false, err
		}
		return true, c.finish()
	}
	c.inChunk, c.remaining = true, size
	return false, nil
}

// endChunk consumes the CRLF after a chunk's data and checks its signature.
func (c *chunkedReader) endChunk() error {
	c.inChunk = false
	line, err := c.readLine()
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	if line != "" {
		return malformedChunk("chunk data longer than its declared size")
	}
	return c.checkSignature()
}

func (c *chunkedReader) checkSignature() error {
	if c.signer == nil {
		return nil
	}
	err := c.signer.VerifyChunk(c.sum.Sum(nil), c.chunkSig)
	c.sum.Reset()
	return err
}

// finish reads the trailer section after the final chunk, verifies the
// trailer signature and the decoded length.
func (c *chunkedReader) finish() error {
	var (
		signed   bytes.Buffer
		sig      string
		total    int
		sawBlank bool
	)
	for {
		line, err := c.readLine()
		if err == io.EOF {
			break // no closing blank line; tolerated
		}
		if err != nil {
			return err
		}
		if line == "" {
			sawBlank = true
			break
		}
		if total += len(line); total > maxTrailerBytes {
			return malformedChunk("trailers longer than %d bytes", maxTrailerBytes)
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return malformedChunk("bad trailer line %q", line)
		}
		name, value = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value)
		if name == "x-amz-trailer-signature" {
			sig = value
			continue
		}
		c.trailers = append(c.trailers, trailer{name, value})
		signed.WriteString(name + ":" + value + "\n")
	}
	if sawBlank {
		// Nothing may follow but stray line ends.
		rest, err := io.ReadAll(io.LimitReader(c.r, 64))
		if err != nil {
			return err
		}
		if len(bytes.Trim(rest, "\r\n")) > 0 {
			return malformedChunk("data after the final chunk")
		}
	}
	if c.signer != nil && len(c.trailers) > 0 {
		if sig == "" {
			return malformedChunk("trailers without x-amz-trailer-signature in a signed body")
		}
		sum := sha256.Sum256(signed.Bytes())
		if err := c.signer.VerifyTrailer(sum[:], sig); err != nil {
			return err
		}
	}
	if c.wantDecoded >= 0 && c.decoded != c.wantDecoded {
		return fmt.Errorf("decoded %d bytes, x-amz-decoded-content-length says %d: %w", c.decoded, c.wantDecoded, errIncompleteBody)
	}
	return nil
}

// parseHexSize parses a chunk size: 1 to 15 hex digits, nothing else.
func parseHexSize(s string) (int64, bool) {
	if s == "" || len(s) > 15 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	return n, true
}
