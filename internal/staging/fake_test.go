package staging_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/staging/localobj"
)

// memObjects is an in-memory staging.Objects with tiny list pages, so
// every listing pages. It has no local fast path: staging must download.
type memObjects struct {
	mu      sync.Mutex
	buckets map[string]map[string][]byte
	puts    map[string]int // key → how often it was put
}

func newMem(buckets ...string) *memObjects {
	m := &memObjects{buckets: map[string]map[string][]byte{}, puts: map[string]int{}}
	for _, b := range buckets {
		m.buckets[b] = map[string][]byte{}
	}
	return m
}

const memPage = 2

func (m *memObjects) Get(ctx context.Context, bucket, key string) (io.ReadCloser, staging.ObjectMeta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.buckets[bucket]
	if !ok {
		return nil, staging.ObjectMeta{}, staging.NotFound(staging.ErrNoSuchBucket, fmt.Errorf("mem: no bucket %s", bucket))
	}
	body, ok := b[key]
	if !ok {
		return nil, staging.ObjectMeta{}, staging.NotFound(staging.ErrNoSuchKey, fmt.Errorf("mem: no key %s/%s", bucket, key))
	}
	return io.NopCloser(bytes.NewReader(body)), staging.ObjectMeta{Key: key, Size: int64(len(body))}, nil
}

func (m *memObjects) List(ctx context.Context, bucket, prefix, token string) (staging.Page, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.buckets[bucket]
	if !ok {
		return staging.Page{}, staging.NotFound(staging.ErrNoSuchBucket, fmt.Errorf("mem: no bucket %s", bucket))
	}
	var keys []string
	for k := range b {
		if strings.HasPrefix(k, prefix) && k > token {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var page staging.Page
	for i, k := range keys {
		if i == memPage {
			page.Next = keys[i-1]
			break
		}
		page.Objects = append(page.Objects, staging.ObjectMeta{Key: k, Size: int64(len(b[k]))})
	}
	return page, nil
}

func (m *memObjects) Put(ctx context.Context, bucket, key string, r io.Reader, opts staging.PutOptions) error {
	body, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if opts.Size >= 0 && int64(len(body)) != opts.Size {
		return fmt.Errorf("mem: put %s: %d bytes, size said %d", key, len(body), opts.Size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.buckets[bucket]
	if !ok {
		return staging.NotFound(staging.ErrNoSuchBucket, fmt.Errorf("mem: no bucket %s", bucket))
	}
	b[key] = body
	m.puts[key]++
	return nil
}

func (m *memObjects) put(bucket, key string, body []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buckets[bucket][key] = body
}

func (m *memObjects) get(bucket, key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.buckets[bucket][key]
	return b, ok
}

// backend is one Objects under test with a way to seed and read it.
type backend struct {
	name    string
	objects staging.Objects
	put     func(t testing.TB, bucket, key string, body []byte)
	get     func(t testing.TB, bucket, key string) ([]byte, bool)
	store   *objectstore.Store // localobj only
}

// backends are the fake and the on-disk store's adapter, each with the
// buckets "bkt" and "out".
func backends(t *testing.T) []backend {
	t.Helper()
	mem := newMem("bkt", "out")
	store, err := objectstore.OpenWithOptions(filepath.Join(t.TempDir(), "s3"), objectstore.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for _, b := range []string{"bkt", "out"} {
		if err := store.CreateBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return []backend{
		{
			name: "mem", objects: mem,
			put: func(t testing.TB, bucket, key string, body []byte) { mem.put(bucket, key, body) },
			get: func(t testing.TB, bucket, key string) ([]byte, bool) { return mem.get(bucket, key) },
		},
		{
			name: "localobj", objects: localobj.New(store), store: store,
			put: func(t testing.TB, bucket, key string, body []byte) {
				t.Helper()
				if _, err := store.Put(context.Background(), bucket, key, bytes.NewReader(body), objectstore.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			get: func(t testing.TB, bucket, key string) ([]byte, bool) {
				t.Helper()
				obj, err := store.Get(context.Background(), bucket, key)
				if err != nil {
					return nil, false
				}
				defer obj.Close()
				b, err := io.ReadAll(obj)
				if err != nil {
					t.Fatal(err)
				}
				return b, true
			},
		},
	}
}

// forEach runs f as a subtest per backend.
func forEach(t *testing.T, f func(t *testing.T, be backend)) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) { f(t, be) })
	}
}
