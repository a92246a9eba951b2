package objectstore

import (
	"errors"
	"fmt"
)

// Errors returned by the store. They are sentinels; match them with
// errors.Is, since the store wraps them with context.
var (
	ErrNoSuchBucket       = errors.New("no such bucket")
	ErrBucketExists       = errors.New("bucket already exists")
	ErrBucketNotEmpty     = errors.New("bucket not empty")
	ErrInvalidBucketName  = errors.New("invalid bucket name")
	ErrNoSuchKey          = errors.New("no such key")
	ErrInvalidKey         = errors.New("invalid object key")
	ErrKeyTooLong         = errors.New("object key longer than 1024 bytes")
	ErrNoSuchUpload       = errors.New("no such multipart upload")
	ErrInvalidPart        = errors.New("invalid part")
	ErrInvalidPartOrder   = errors.New("parts not in ascending order")
	ErrInvalidPartNumber  = errors.New("part number must be between 1 and 10000")
	ErrEntityTooSmall     = errors.New("part smaller than the minimum allowed size")
	ErrBadDigest          = errors.New("Content-MD5 does not match the received data")
	ErrSHA256Mismatch     = errors.New("x-amz-content-sha256 does not match the received data")
	ErrChecksumMismatch   = errors.New("checksum does not match the received data")
	ErrInvalidChecksum    = errors.New("malformed checksum value")
	ErrPreconditionFailed = errors.New("precondition failed")
	ErrInvalidURI         = errors.New("invalid s3 URI")
	ErrClosed             = errors.New("object store closed")
)

// ChecksumMismatchError says which checksum of an upload did not match. It
// wraps ErrChecksumMismatch.
type ChecksumMismatchError struct {
	Algorithm ChecksumAlgorithm
	Expected  string // base64, as the client sent it
	Computed  string // base64, what the store computed
}

// Error describes the mismatch.
func (e *ChecksumMismatchError) Error() string {
	return fmt.Sprintf("%s checksum mismatch: expected %s, computed %s", e.Algorithm, e.Expected, e.Computed)
}

// Unwrap lets errors.Is(err, ErrChecksumMismatch) match.
func (e *ChecksumMismatchError) Unwrap() error { return ErrChecksumMismatch }
