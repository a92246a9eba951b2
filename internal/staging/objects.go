package staging

import (
	"context"
	"errors"
	"io"
)

// Objects is the object store as staging uses it: S3's bucket/key space.
// Errors for a missing bucket or key must match ErrNoSuchBucket or
// ErrNoSuchKey (errors.Is); NotFound marks an error so.
type Objects interface {
	// Get opens bucket/key for reading. Close the reader.
	Get(ctx context.Context, bucket, key string) (io.ReadCloser, ObjectMeta, error)
	// List returns one page of the objects whose keys start with prefix,
	// in key order, from the page token ("" for the first page). The last
	// page has Next == "".
	List(ctx context.Context, bucket, prefix, token string) (Page, error)
	// Put stores r's bytes at bucket/key, replacing what is there.
	Put(ctx context.Context, bucket, key string, r io.Reader, opts PutOptions) error
}

// ObjectMeta describes a stored object.
type ObjectMeta struct {
	Key  string
	Size int64
}

// Page is one page of a listing.
type Page struct {
	Objects []ObjectMeta
	// Next is the token of the next page, "" when this is the last.
	Next string
}

// PutOptions say what staging knows about an upload.
type PutOptions struct {
	// Size is the body's length, or -1 when it is not known in advance
	// (an archive streamed while it is packed).
	Size int64
	// ContentType is empty for the store's default.
	ContentType string
}

// Linker is an optional fast path of an Objects whose objects are
// immutable files on this machine: Link makes dst (which must not exist) a
// hard link to the stored file, a free and consistent snapshot. An error
// other than a missing key makes staging fall back to LocalFiles or Get.
type Linker interface {
	Link(ctx context.Context, bucket, key, dst string) error
}

// LocalFiles is an optional fast path of an Objects whose objects are
// files on this machine: FilePath names the object's file, which staging
// reflinks or copies with copy_file_range and never modifies.
type LocalFiles interface {
	FilePath(ctx context.Context, bucket, key string) (string, error)
}

// Errors an Objects returns (wrapped) for missing buckets and keys.
var (
	ErrNoSuchBucket = errors.New("no such bucket")
	ErrNoSuchKey    = errors.New("no such key")
)

// NotFound returns err marked as kind (ErrNoSuchBucket or ErrNoSuchKey)
// with err's own text, so an adapter keeps its store's message.
func NotFound(kind, err error) error { return &notFound{kind: kind, err: err} }

type notFound struct{ kind, err error }

func (e *notFound) Error() string        { return e.err.Error() }
func (e *notFound) Unwrap() []error      { return []error{e.kind, e.err} }
func (e *notFound) Is(target error) bool { return target == e.kind }
