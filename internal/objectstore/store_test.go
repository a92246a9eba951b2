package objectstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// newTestStore opens a store in a fresh directory. Tests that are about
// durability use OpenWithOptions directly with syncing on.
func newTestStore(t testing.TB) *Store {
	t.Helper()
	s, err := OpenWithOptions(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustBucket(t testing.TB, s *Store, name string) {
	t.Helper()
	if err := s.CreateBucket(context.Background(), name); err != nil {
		t.Fatal(err)
	}
}

func mustPut(t testing.TB, s *Store, bucket, key, body string) ObjectInfo {
	t.Helper()
	info, err := s.Put(context.Background(), bucket, key, strings.NewReader(body), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func mustGet(t testing.TB, s *Store, bucket, key string) string {
	t.Helper()
	o, err := s.Get(context.Background(), bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dataFiles counts the files under data/ and tmp/.
func dataFiles(t testing.TB, s *Store) (data, tmp int) {
	t.Helper()
	err := filepath.WalkDir(s.path(dataDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(s.path(tmpDir))
	if err != nil {
		t.Fatal(err)
	}
	return data, len(entries)
}

func md5ETag(s string) string {
	sum := md5.Sum([]byte(s))
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

func TestValidateBucketName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"abc", true},
		{"my-bucket.v2", true},
		{"sagemaker-us-east-1-123456789012", true},
		{strings.Repeat("a", 63), true},
		{"ab", false},
		{strings.Repeat("a", 64), false},
		{"_sagebox", false},
		{"Upper", false},
		{"under_score", false},
		{"-start", false},
		{"end-", false},
		{".start", false},
		{"a..b", false},
		{"a.-b", false},
		{"192.168.1.1", false},
		{"xn--bucket", false},
		{"bucket-s3alias", false},
		{"has space", false},
		{"slash/es", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateBucketName(tt.name)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateBucketName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidBucketName) {
				t.Fatalf("error %v does not wrap ErrInvalidBucketName", err)
			}
		})
	}
}

func TestParseURI(t *testing.T) {
	tests := []struct {
		uri, bucket, key string
		ok               bool
	}{
		{"s3://bucket/prefix/key.txt", "bucket", "prefix/key.txt", true},
		{"s3://bucket", "bucket", "", true},
		{"s3://bucket/", "bucket", "", true},
		{"s3://bucket/a b+c%20", "bucket", "a b+c%20", true},
		{"s3://bucket//double", "bucket", "/double", true},
		{"http://bucket/key", "", "", false},
		{"s3://", "", "", false},
		{"s3://Bad_Bucket/key", "", "", false},
		{"bucket/key", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			b, k, err := ParseURI(tt.uri)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseURI(%q) error = %v, want ok=%v", tt.uri, err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidURI) {
					t.Fatalf("error %v does not wrap ErrInvalidURI", err)
				}
				return
			}
			if b != tt.bucket || k != tt.key {
				t.Fatalf("ParseURI(%q) = %q, %q; want %q, %q", tt.uri, b, k, tt.bucket, tt.key)
			}
			if got := FormatURI(b, k); tt.key != "" && got != tt.uri {
				t.Fatalf("FormatURI = %q, want %q", got, tt.uri)
			}
		})
	}
}

func TestBuckets(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	for _, n := range []string{"zeta", "alpha", "mid.dle"} {
		mustBucket(t, s, n)
	}
	if err := s.CreateBucket(ctx, "alpha"); !errors.Is(err, ErrBucketExists) {
		t.Fatalf("second create: %v, want ErrBucketExists", err)
	}
	if err := s.CreateBucket(ctx, "_sagebox"); !errors.Is(err, ErrInvalidBucketName) {
		t.Fatalf("create _sagebox: %v, want ErrInvalidBucketName", err)
	}
	list, err := s.ListBuckets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range list {
		names = append(names, b.Name)
		if b.CreationDate.IsZero() {
			t.Errorf("bucket %s has no creation date", b.Name)
		}
	}
	if got := strings.Join(names, ","); got != "alpha,mid.dle,zeta" {
		t.Fatalf("ListBuckets = %s", got)
	}
	if _, err := s.HeadBucket(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.HeadBucket(ctx, "nope"); !errors.Is(err, ErrNoSuchBucket) {
		t.Fatalf("HeadBucket(nope) = %v", err)
	}
	mustPut(t, s, "alpha", "k", "v")
	if err := s.DeleteBucket(ctx, "alpha"); !errors.Is(err, ErrBucketNotEmpty) {
		t.Fatalf("DeleteBucket(non-empty) = %v", err)
	}
	// An upload in progress does not keep a bucket alive; it is aborted.
	up, err := s.CreateMultipart(ctx, "zeta", "big", MultipartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UploadPart(ctx, "zeta", "big", up.ID, 1, strings.NewReader("part"), Integrity{}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBucket(ctx, "zeta"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "alpha", "k"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBucket(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBucket(ctx, "alpha"); !errors.Is(err, ErrNoSuchBucket) {
		t.Fatalf("DeleteBucket(gone) = %v", err)
	}
	if data, _ := dataFiles(t, s); data != 0 {
		t.Fatalf("%d data files left after deleting everything", data)
	}
}

func TestPutGetOverwrite(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	info, err := s.Put(ctx, "bkt", "k", strings.NewReader("hello"), PutOptions{
		ContentType:  "text/plain",
		Headers:      map[string]string{"Cache-Control": "no-cache"},
		UserMetadata: map[string]string{"owner": "me"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag != md5ETag("hello") || info.Size != 5 {
		t.Fatalf("Put info = %+v", info)
	}
	st, err := s.Stat(ctx, "bkt", "k")
	if err != nil {
		t.Fatal(err)
	}
	if st.ContentType != "text/plain" || st.Headers["Cache-Control"] != "no-cache" || st.UserMetadata["owner"] != "me" ||
		st.ETag != info.ETag || !st.LastModified.Equal(info.LastModified) || st.PartsCount() != 0 {
		t.Fatalf("Stat = %+v", st)
	}
	mustPut(t, s, "bkt", "k", "world!")
	if got := mustGet(t, s, "bkt", "k"); got != "world!" {
		t.Fatalf("after overwrite Get = %q", got)
	}
	st, _ = s.Stat(ctx, "bkt", "k")
	if st.ContentType != DefaultContentType || len(st.UserMetadata) != 0 {
		t.Fatalf("overwrite kept old metadata: %+v", st)
	}
	if data, tmp := dataFiles(t, s); data != 1 || tmp != 0 {
		t.Fatalf("data files %d (want 1), tmp files %d (want 0)", data, tmp)
	}
	if _, err := s.Get(ctx, "bkt", "missing"); !errors.Is(err, ErrNoSuchKey) {
		t.Fatalf("Get(missing) = %v", err)
	}
	if _, err := s.Get(ctx, "nobucket", "k"); !errors.Is(err, ErrNoSuchBucket) {
		t.Fatalf("Get(no bucket) = %v", err)
	}
	if _, err := s.Put(ctx, "nobucket", "k", strings.NewReader("x"), PutOptions{}); !errors.Is(err, ErrNoSuchBucket) {
		t.Fatalf("Put(no bucket) = %v", err)
	}
	if err := s.Delete(ctx, "bkt", "missing"); err != nil {
		t.Fatalf("Delete(missing) = %v", err)
	}
	if err := s.Delete(ctx, "nobucket", "k"); !errors.Is(err, ErrNoSuchBucket) {
		t.Fatalf("Delete(no bucket) = %v", err)
	}
	if err := s.Delete(ctx, "bkt", "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "bkt", "k"); !errors.Is(err, ErrNoSuchKey) {
		t.Fatalf("Stat after delete = %v", err)
	}
	if data, _ := dataFiles(t, s); data != 0 {
		t.Fatalf("%d data files after delete", data)
	}
}

func TestEmptyObject(t *testing.T) {
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	info := mustPut(t, s, "bkt", "empty", "")
	if info.Size != 0 || info.ETag != `"d41d8cd98f00b204e9800998ecf8427e"` {
		t.Fatalf("empty object info = %+v", info)
	}
	if got := mustGet(t, s, "bkt", "empty"); got != "" {
		t.Fatalf("Get = %q", got)
	}
}

func TestKeysAreNotPaths(t *testing.T) {
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	keys := []string{
		"a", "a/b", "a/b/c", "a/", "a//b", "/leading", "trailing/",
		"with space", "plus+sign", "percent%2F", "../../../etc/passwd", "..", ".", "./x", "a/../b",
		"ünïcødé/文字", "tab\tnewline\n", strings.Repeat("long", 256), strings.Repeat("x", 300) + "/" + strings.Repeat("y", 300),
	}
	for i, k := range keys {
		mustPut(t, s, "bkt", k, fmt.Sprintf("body-%d", i))
	}
	root, _ := filepath.Abs(s.Dir())
	for i, k := range keys {
		if got := mustGet(t, s, "bkt", k); got != fmt.Sprintf("body-%d", i) {
			t.Errorf("key %q: got %q", k, got)
		}
		p, err := s.FilePath(context.Background(), "bkt", k)
		if err != nil {
			t.Fatal(err)
		}
		if rel, err := filepath.Rel(filepath.Join(root, dataDir), p); err != nil || strings.HasPrefix(rel, "..") {
			t.Errorf("key %q maps outside the data directory: %s", k, p)
		}
	}
	if _, err := s.Put(context.Background(), "bkt", strings.Repeat("x", MaxKeyLength+1), strings.NewReader(""), PutOptions{}); !errors.Is(err, ErrKeyTooLong) {
		t.Fatalf("1025-byte key: %v", err)
	}
	if _, err := s.Put(context.Background(), "bkt", "bad\xffutf8", strings.NewReader(""), PutOptions{}); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("invalid UTF-8 key: %v", err)
	}
	if _, err := s.Put(context.Background(), "bkt", "", strings.NewReader(""), PutOptions{}); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
}

func TestFilePathIsSnapshot(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	mustPut(t, s, "bkt", "model.tar.gz", "version 1")
	dir := t.TempDir()
	p, err := s.FilePath(ctx, "bkt", "model.tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != dataFileMode {
		t.Fatalf("object file mode %v, %v; want read-only", fi.Mode(), err)
	}
	if err := os.Link(p, filepath.Join(dir, "v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Link(ctx, "bkt", "model.tar.gz", filepath.Join(dir, "v1-again")); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "bkt", "model.tar.gz", "version 2 is longer")
	if err := s.Delete(ctx, "bkt", "model.tar.gz"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"v1", "v1-again"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != "version 1" {
			t.Fatalf("%s after overwrite and delete: %q, %v", name, b, err)
		}
	}
	if _, err := s.FilePath(ctx, "bkt", "model.tar.gz"); !errors.Is(err, ErrNoSuchKey) {
		t.Fatalf("FilePath(deleted) = %v", err)
	}
}

func TestOpenObjectSurvivesOverwrite(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	mustPut(t, s, "bkt", "k", "old contents")
	o, err := s.Get(ctx, "bkt", "k")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	mustPut(t, s, "bkt", "k", "new")
	b, err := io.ReadAll(o)
	if err != nil || string(b) != "old contents" {
		t.Fatalf("read after overwrite: %q, %v", b, err)
	}
	var buf bytes.Buffer
	if n, err := o.CopyRange(&buf, 4, 3); err != nil || n != 3 || buf.String() != "con" {
		t.Fatalf("CopyRange = %d, %v, %q", n, err, buf.String())
	}
}

func TestPreconditions(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	put := func(key string, p Preconditions) error {
		_, err := s.Put(ctx, "bkt", key, strings.NewReader("x"), PutOptions{Preconditions: p})
		return err
	}
	if err := put("k", Preconditions{IfNoneMatch: "*"}); err != nil {
		t.Fatalf("create-only put of a new key: %v", err)
	}
	etag := md5ETag("x")
	tests := []struct {
		name string
		key  string
		pre  Preconditions
		want error
	}{
		{"if-none-match star on existing", "k", Preconditions{IfNoneMatch: "*"}, ErrPreconditionFailed},
		{"if-match right etag", "k", Preconditions{IfMatch: etag}, nil},
		{"if-match unquoted etag", "k", Preconditions{IfMatch: strings.Trim(etag, `"`)}, nil},
		{"if-match wrong etag", "k", Preconditions{IfMatch: `"0123"`}, ErrPreconditionFailed},
		{"if-match missing key", "nokey", Preconditions{IfMatch: etag}, ErrNoSuchKey},
		{"if-none-match etag matches", "k", Preconditions{IfNoneMatch: etag}, ErrPreconditionFailed},
		{"if-none-match other etag", "k", Preconditions{IfNoneMatch: `"0123"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := put(tt.key, tt.pre)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("put = %v, want %v", err, tt.want)
			}
		})
	}
	if _, tmp := dataFiles(t, s); tmp != 0 {
		t.Fatalf("%d temp files left", tmp)
	}
}

// failingReader yields some data and then an error, like a client that
// disconnects half way.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("connection reset")
	}
	n := min(len(p), f.n)
	for i := range p[:n] {
		p[i] = 'z'
	}
	f.n -= n
	return n, nil
}

func TestFailedUploadLeavesNothing(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	mustPut(t, s, "bkt", "k", "original")
	if _, err := s.Put(ctx, "bkt", "k", &failingReader{n: 3 << 20}, PutOptions{}); err == nil {
		t.Fatal("put from a failing reader succeeded")
	}
	if got := mustGet(t, s, "bkt", "k"); got != "original" {
		t.Fatalf("object changed by a failed put: %q", got)
	}
	if data, tmp := dataFiles(t, s); data != 1 || tmp != 0 {
		t.Fatalf("data=%d tmp=%d after failed put", data, tmp)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Put(cctx, "bkt", "k2", strings.NewReader("data"), PutOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("put with canceled context = %v", err)
	}
}

// crash closes the index and the lock without the clean-shutdown marker,
// the state a killed process leaves.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.closed.Store(true)
	if err := s.closeDB(); err != nil {
		t.Fatal(err)
	}
	unlockDir(s.lock)
}

func TestRecoveryAfterCrash(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustBucket(t, s, "bkt")
	mustPut(t, s, "bkt", "kept", "durable")
	// What a crash mid-write leaves: a temp file, and a data file renamed
	// into place whose index row was never committed.
	if err := os.WriteFile(filepath.Join(dir, tmpDir, "in-123"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	orphan := s.dataPath(fileRel(newID()))
	if err := os.MkdirAll(filepath.Dir(orphan), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("uncommitted"), 0o644); err != nil {
		t.Fatal(err)
	}
	crash(t, s)

	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := mustGet(t, s, "bkt", "kept"); got != "durable" {
		t.Fatalf("after crash: %q", got)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("orphan data file survived recovery: %v", err)
	}
	if data, tmp := dataFiles(t, s); data != 1 || tmp != 0 {
		t.Fatalf("after recovery data=%d tmp=%d", data, tmp)
	}
	res, err := s.List(context.Background(), "bkt", ListOptions{})
	if err != nil || len(res.Objects) != 1 {
		t.Fatalf("List after recovery = %+v, %v", res, err)
	}
}

func TestCleanReopenKeepsData(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustBucket(t, s, "bkt")
	mustPut(t, s, "bkt", "k", "v")
	if _, err := Open(dir); err == nil {
		t.Fatal("a second Open of a store in use succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(context.Background(), "bkt", "k"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Stat on closed store = %v", err)
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := mustGet(t, s, "bkt", "k"); got != "v" {
		t.Fatalf("after reopen: %q", got)
	}
}

// versionBody is a body that identifies its writer in every byte, so a
// reader can tell a torn object from a whole one.
func versionBody(v int) string { return strings.Repeat(string(rune('A'+v%26)), 64<<10+v) }

func TestConcurrentPutsSameKey(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	mustPut(t, s, "bkt", "k", versionBody(0))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 1; w <= 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				if _, err := s.Put(ctx, "bkt", "k", strings.NewReader(versionBody(w)), PutOptions{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				o, err := s.Get(ctx, "bkt", "k")
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(o)
				o.Close()
				if err != nil {
					errs <- err
					return
				}
				if int64(len(b)) != o.Info.Size || md5ETag(string(b)) != o.Info.ETag || strings.Trim(string(b), string(b[:1])) != "" {
					errs <- fmt.Errorf("torn read: %d bytes, info %+v", len(b), o.Info)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := mustGet(t, s, "bkt", "k")
	st, _ := s.Stat(ctx, "bkt", "k")
	if md5ETag(got) != st.ETag {
		t.Fatal("final object does not match its ETag")
	}
	if data, tmp := dataFiles(t, s); data != 1 || tmp != 0 {
		t.Fatalf("data=%d tmp=%d after concurrent puts", data, tmp)
	}
}

func TestCopy(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	mustBucket(t, s, "src")
	mustBucket(t, s, "dst")
	if _, err := s.Put(ctx, "src", "a", strings.NewReader("payload"), PutOptions{
		ContentType: "text/x", UserMetadata: map[string]string{"m": "1"},
	}); err != nil {
		t.Fatal(err)
	}
	info, err := s.Copy(ctx, "src", "a", "dst", "bkt", CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag != md5ETag("payload") || info.ContentType != "text/x" || info.UserMetadata["m"] != "1" {
		t.Fatalf("copy info = %+v", info)
	}
	info, err = s.Copy(ctx, "src", "a", "dst", "c", CopyOptions{ReplaceMetadata: true, ContentType: "text/y"})
	if err != nil || info.ContentType != "text/y" || len(info.UserMetadata) != 0 {
		t.Fatalf("copy with REPLACE = %+v, %v", info, err)
	}
	mustPut(t, s, "src", "a", "changed")
	if got := mustGet(t, s, "dst", "bkt"); got != "payload" {
		t.Fatalf("copy changed with its source: %q", got)
	}
	if _, err := s.Copy(ctx, "src", "missing", "dst", "x", CopyOptions{}); !errors.Is(err, ErrNoSuchKey) {
		t.Fatalf("copy of missing key = %v", err)
	}
	if _, err := s.Copy(ctx, "src", "a", "dst", "x", CopyOptions{SourceIfMatch: `"nope"`}); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("copy with failing source if-match = %v", err)
	}
}
