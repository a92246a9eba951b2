// Package localobj adapts the on-disk object store (*objectstore.Store) to
// staging.Objects, with the local fast paths staging looks for: Link (a
// hard link to the stored, immutable file) and FilePath (for reflinks and
// copy_file_range). The server's training runner stages through it.
package localobj

import (
	"context"
	"errors"
	"io"

	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/staging"
)

// pageSize is how many keys one List page returns.
const pageSize = 1000

// Objects is a *objectstore.Store seen as staging.Objects.
type Objects struct{ Store *objectstore.Store }

// New returns the adapter for store.
func New(store *objectstore.Store) *Objects { return &Objects{Store: store} }

var (
	_ staging.Objects    = (*Objects)(nil)
	_ staging.Linker     = (*Objects)(nil)
	_ staging.LocalFiles = (*Objects)(nil)
)

// mark makes the store's not-found errors match staging's sentinels,
// keeping the store's text.
func mark(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, objectstore.ErrNoSuchKey):
		return staging.NotFound(staging.ErrNoSuchKey, err)
	case errors.Is(err, objectstore.ErrNoSuchBucket):
		return staging.NotFound(staging.ErrNoSuchBucket, err)
	}
	return err
}

// Get opens bucket/key.
func (o *Objects) Get(ctx context.Context, bucket, key string) (io.ReadCloser, staging.ObjectMeta, error) {
	obj, err := o.Store.Get(ctx, bucket, key)
	if err != nil {
		return nil, staging.ObjectMeta{}, mark(err)
	}
	return obj, staging.ObjectMeta{Key: obj.Info.Key, Size: obj.Info.Size}, nil
}

// List lists one page; the token is the store's NextMarker.
func (o *Objects) List(ctx context.Context, bucket, prefix, token string) (staging.Page, error) {
	res, err := o.Store.List(ctx, bucket, objectstore.ListOptions{Prefix: prefix, StartAfter: token, MaxKeys: pageSize})
	if err != nil {
		return staging.Page{}, mark(err)
	}
	page := staging.Page{Objects: make([]staging.ObjectMeta, len(res.Objects))}
	for i, info := range res.Objects {
		page.Objects[i] = staging.ObjectMeta{Key: info.Key, Size: info.Size}
	}
	if res.IsTruncated {
		page.Next = res.NextMarker
	}
	return page, nil
}

// Put stores r at bucket/key.
func (o *Objects) Put(ctx context.Context, bucket, key string, r io.Reader, opts staging.PutOptions) error {
	_, err := o.Store.Put(ctx, bucket, key, r, objectstore.PutOptions{ContentType: opts.ContentType})
	return mark(err)
}

// Link hard-links the object's immutable file to dst.
func (o *Objects) Link(ctx context.Context, bucket, key, dst string) error {
	_, err := o.Store.Link(ctx, bucket, key, dst)
	return mark(err)
}

// FilePath is the object's immutable file.
func (o *Objects) FilePath(ctx context.Context, bucket, key string) (string, error) {
	p, err := o.Store.FilePath(ctx, bucket, key)
	return p, mark(err)
}
