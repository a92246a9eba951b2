// Package s3obj adapts an S3 endpoint, reached with aws-sdk-go-v2's S3
// client, to staging.Objects. It is what `sagebox stage` and `sagebox
// collect` use in a process that has nothing but an endpoint URL (a
// Kubernetes pod's init container or sidecar). It has none of the local
// fast paths: every channel file is downloaded.
package s3obj

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/sagebox/sagebox/internal/staging"
)

// defaultPageSize is how many keys one ListObjectsV2 call asks for.
const defaultPageSize = 1000

// Objects is an S3 client seen as staging.Objects.
type Objects struct {
	Client *s3.Client
	// TempDir holds uploads of unknown length (a packed archive) while
	// they are spooled, since a SigV4 PUT over plain HTTP needs a body it
	// can read twice. Empty means os.TempDir().
	TempDir string
	// PageSize is ListObjectsV2's MaxKeys; 0 means 1000.
	PageSize int32
}

// New returns the adapter for client (which should use path-style
// addressing for sagebox and most S3-compatible stores).
func New(client *s3.Client) *Objects { return &Objects{Client: client} }

var _ staging.Objects = (*Objects)(nil)

// mark makes S3's NoSuchKey/NoSuchBucket errors match staging's sentinels.
func mark(err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return staging.NotFound(staging.ErrNoSuchKey, err)
		case "NoSuchBucket":
			return staging.NotFound(staging.ErrNoSuchBucket, err)
		}
	}
	return err
}

// Get opens bucket/key with GetObject.
func (o *Objects) Get(ctx context.Context, bucket, key string) (io.ReadCloser, staging.ObjectMeta, error) {
	out, err := o.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, staging.ObjectMeta{}, mark(fmt.Errorf("get s3://%s/%s: %w", bucket, key, err))
	}
	return out.Body, staging.ObjectMeta{Key: key, Size: aws.ToInt64(out.ContentLength)}, nil
}

// List lists one page with ListObjectsV2; the token is its continuation
// token.
func (o *Objects) List(ctx context.Context, bucket, prefix, token string) (staging.Page, error) {
	n := o.PageSize
	if n <= 0 {
		n = defaultPageSize
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(n)}
	if token != "" {
		in.ContinuationToken = aws.String(token)
	}
	out, err := o.Client.ListObjectsV2(ctx, in)
	if err != nil {
		return staging.Page{}, mark(fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err))
	}
	page := staging.Page{Objects: make([]staging.ObjectMeta, len(out.Contents))}
	for i, c := range out.Contents {
		page.Objects[i] = staging.ObjectMeta{Key: aws.ToString(c.Key), Size: aws.ToInt64(c.Size)}
	}
	if aws.ToBool(out.IsTruncated) {
		page.Next = aws.ToString(out.NextContinuationToken)
		if page.Next == "" {
			return staging.Page{}, fmt.Errorf("list s3://%s/%s: truncated listing without a continuation token", bucket, prefix)
		}
	}
	return page, nil
}

// Put stores r with one PutObject. A body that is not seekable, or whose
// size is unknown, is spooled to a temporary file first. (One PUT holds
// up to 5 GiB on AWS; sagebox's own server has no such limit.)
func (o *Objects) Put(ctx context.Context, bucket, key string, r io.Reader, opts staging.PutOptions) error {
	body, size := r, opts.Size
	if _, seekable := r.(io.ReadSeeker); !seekable || size < 0 {
		f, err := os.CreateTemp(o.TempDir, "sagebox-upload-")
		if err != nil {
			return fmt.Errorf("spool upload: %w", err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		n, err := io.Copy(f, r)
		if err != nil {
			return fmt.Errorf("spool upload: %w", err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("spool upload: %w", err)
		}
		body, size = f, n
	}
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: body, ContentLength: aws.Int64(size)}
	if opts.ContentType != "" {
		in.ContentType = aws.String(opts.ContentType)
	}
	if _, err := o.Client.PutObject(ctx, in); err != nil {
		return mark(fmt.Errorf("put s3://%s/%s: %w", bucket, key, err))
	}
	return nil
}
