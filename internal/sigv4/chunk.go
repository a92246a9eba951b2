package sigv4

import (
	"encoding/hex"
	"time"
)

// ChunkSigner verifies the chain of signatures in a signed aws-chunked body
// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]). Every chunk, including
// the final empty one, is signed over the previous signature and the
// chunk's SHA-256; the trailer is signed over the last chunk signature and
// the SHA-256 of the trailer lines. Not safe for concurrent use.
type ChunkSigner struct {
	key     []byte
	amzDate string
	scope   string
	prev    string
}

// NewChunkSigner starts a chain from the seed (the request's signature).
func NewChunkSigner(signingKey []byte, t time.Time, scope, seed string) *ChunkSigner {
	return &ChunkSigner{key: signingKey, amzDate: t.UTC().Format(TimeFormat), scope: scope, prev: seed}
}

// Chunk returns the hex signature expected for a chunk whose SHA-256 is
// sum, and advances the chain to it.
func (c *ChunkSigner) Chunk(sum []byte) string {
	sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + c.amzDate + "\n" + c.scope + "\n" + c.prev + "\n" +
		EmptySHA256 + "\n" + hex.EncodeToString(sum)
	c.prev = hex.EncodeToString(hmacSHA256(c.key, sts))
	return c.prev
}

// Trailer returns the hex signature expected for trailer lines whose
// SHA-256 is sum ("name:value\n" per trailer, names lower-case).
func (c *ChunkSigner) Trailer(sum []byte) string {
	sts := "AWS4-HMAC-SHA256-TRAILER\n" + c.amzDate + "\n" + c.scope + "\n" + c.prev + "\n" + hex.EncodeToString(sum)
	c.prev = hex.EncodeToString(hmacSHA256(c.key, sts))
	return c.prev
}

// VerifyChunk checks a chunk signature and advances the chain. It returns
// a *Error of KindSignatureMismatch on failure.
func (c *ChunkSigner) VerifyChunk(sum []byte, signature string) error {
	want, _ := hex.DecodeString(c.Chunk(sum))
	if !equalHex(want, signature) {
		return errorf(KindSignatureMismatch, "s3", false, "the chunk signature does not match")
	}
	return nil
}

// VerifyTrailer checks the trailer signature. It returns a *Error of
// KindSignatureMismatch on failure.
func (c *ChunkSigner) VerifyTrailer(sum []byte, signature string) error {
	want, _ := hex.DecodeString(c.Trailer(sum))
	if !equalHex(want, signature) {
		return errorf(KindSignatureMismatch, "s3", false, "the trailer signature does not match")
	}
	return nil
}
