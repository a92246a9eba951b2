package objectstore

import (
	"fmt"
	"strings"
)

// ParseURI splits "s3://bucket/key/prefix" into its bucket and key. The key is
// everything after the first "/" following the bucket, taken literally (S3
// URIs are not percent-encoded), and may be empty ("s3://bucket" and
// "s3://bucket/"). The bucket name is validated.
func ParseURI(uri string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%w: %q does not start with s3://", ErrInvalidURI, uri)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if err := ValidateBucketName(bucket); err != nil {
		return "", "", fmt.Errorf("%w: %q: %w", ErrInvalidURI, uri, err)
	}
	return bucket, key, nil
}

// FormatURI is the inverse of ParseURI.
func FormatURI(bucket, key string) string { return "s3://" + bucket + "/" + key }
