package objectstore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// DefaultContentType is what S3 records when a PUT names no Content-Type.
const DefaultContentType = "binary/octet-stream"

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Bucket string
	Key    string
	Size   int64
	// ETag is the quoted entity tag exactly as S3 sends it: `"<md5 hex>"`
	// for a single PUT, `"<md5 of part md5s>-<parts>"` for a multipart
	// upload.
	ETag         string
	LastModified time.Time
	ContentType  string
	// Headers are other stored HTTP headers (Cache-Control,
	// Content-Disposition, Content-Encoding, Content-Language, Expires,
	// x-amz-server-side-encryption, x-amz-storage-class, ...), returned
	// as they were given on upload. List results leave it nil.
	Headers map[string]string
	// UserMetadata is x-amz-meta-* without the prefix; names lower-case.
	UserMetadata map[string]string
	// Checksums are the verified additional checksums (full object, or
	// composite "<b64>-<n>" for multipart uploads).
	Checksums    Checksums
	ChecksumType string
	// PartSizes holds the size of every part of a multipart object, in
	// order; nil for an object stored by a single PUT.
	PartSizes []int64
}

// PartsCount is the number of parts of a multipart object, 0 otherwise.
func (o ObjectInfo) PartsCount() int { return len(o.PartSizes) }

// PartRange returns the byte offset and length of part n (1-based). An
// object from a single PUT has exactly one part, the whole object.
func (o ObjectInfo) PartRange(n int) (offset, length int64, ok bool) {
	if len(o.PartSizes) == 0 {
		return 0, o.Size, n == 1
	}
	if n < 1 || n > len(o.PartSizes) {
		return 0, 0, false
	}
	for _, sz := range o.PartSizes[:n-1] {
		offset += sz
	}
	return offset, o.PartSizes[n-1], true
}

// Preconditions make a write conditional on the current version of the key,
// checked atomically with the commit (S3's conditional writes).
type Preconditions struct {
	// IfMatch: the current ETag must equal this (quotes optional); "*"
	// means the key must exist. A missing key is ErrNoSuchKey.
	IfMatch string
	// IfNoneMatch: "*" means the key must not exist; otherwise the current
	// ETag must differ from this.
	IfNoneMatch string
}

func (p Preconditions) check(exists bool, etag string) error {
	if p.IfMatch != "" {
		if !exists {
			return fmt.Errorf("if-match: %w", ErrNoSuchKey)
		}
		if p.IfMatch != "*" && !ETagsEqual(p.IfMatch, etag) {
			return fmt.Errorf("if-match %s, current %s: %w", p.IfMatch, etag, ErrPreconditionFailed)
		}
	}
	if p.IfNoneMatch != "" && exists && (p.IfNoneMatch == "*" || ETagsEqual(p.IfNoneMatch, etag)) {
		return fmt.Errorf("if-none-match %s: %w", p.IfNoneMatch, ErrPreconditionFailed)
	}
	return nil
}

// ETagsEqual compares entity tags ignoring quotes and a weak "W/" prefix.
func ETagsEqual(a, b string) bool { return bareETag(a) == bareETag(b) }

func bareETag(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "W/")
	return strings.Trim(s, `"`)
}

// PutOptions carry what a PUT stores besides the bytes, and what it checks.
type PutOptions struct {
	// ContentType defaults to DefaultContentType.
	ContentType  string
	Headers      map[string]string
	UserMetadata map[string]string
	Integrity
	Preconditions
}

// Object is an open object version: a reader over an immutable file plus
// its metadata. It stays readable even if the key is overwritten or deleted
// meanwhile. Close it.
type Object struct {
	Info ObjectInfo
	f    *os.File
}

// Read reads the object's bytes.
func (o *Object) Read(p []byte) (int, error) { return o.f.Read(p) }

// ReadAt reads at an offset without moving the read position.
func (o *Object) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }

// Seek moves the read position.
func (o *Object) Seek(offset int64, whence int) (int64, error) { return o.f.Seek(offset, whence) }

// Close releases the file.
func (o *Object) Close() error { return o.f.Close() }

// WriteTo copies the rest of the object to w. Going through *os.File lets
// net/http use sendfile.
func (o *Object) WriteTo(w io.Writer) (int64, error) { return io.Copy(w, o.f) }

// CopyRange copies length bytes starting at offset to w, keeping the
// sendfile path open for net/http (it recognizes an io.LimitedReader over
// an *os.File).
func (o *Object) CopyRange(w io.Writer, offset, length int64) (int64, error) {
	if _, err := o.f.Seek(offset, io.SeekStart); err != nil {
		return 0, fmt.Errorf("copy range: %w", err)
	}
	n, err := io.Copy(w, &io.LimitedReader{R: o.f, N: length})
	if err == nil && n < length {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Put stores the bytes of r as bucket/key, replacing any current version
// once, and only once, every byte has been received, verified and made
// durable. It never holds the object in memory.
func (s *Store) Put(ctx context.Context, bucket, key string, r io.Reader, opts PutOptions) (ObjectInfo, error) {
	info, err := s.put(ctx, bucket, key, r, &opts)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("put object %s/%s: %w", bucket, key, err)
	}
	return info, nil
}

func (s *Store) put(ctx context.Context, bucket, key string, r io.Reader, opts *PutOptions) (ObjectInfo, error) {
	if err := ValidateKey(key); err != nil {
		return ObjectInfo{}, err
	}
	if err := opts.Integrity.validate(); err != nil {
		return ObjectInfo{}, err
	}
	if err := s.requireBucket(ctx, bucket); err != nil {
		return ObjectInfo{}, err
	}
	if opts.Preconditions != (Preconditions{}) {
		// Fail fast, before receiving the body; checked again at commit.
		cur, err := s.stat(ctx, bucket, key)
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNoSuchKey) {
			return ObjectInfo{}, err
		}
		if err := opts.Preconditions.check(exists, cur.ETag); err != nil {
			return ObjectInfo{}, err
		}
	}
	hs := newHashSet(&opts.Integrity)
	f, size, err := s.receive(ctx, r, hs)
	if err != nil {
		return ObjectInfo{}, err
	}
	sums, err := hs.verify(&opts.Integrity)
	if err != nil {
		discard(f)
		return ObjectInfo{}, err
	}
	rel, err := s.install(f)
	if err != nil {
		return ObjectInfo{}, err
	}
	info := ObjectInfo{
		Bucket:       bucket,
		Key:          key,
		Size:         size,
		ETag:         `"` + hex.EncodeToString(hs.md5.Sum(nil)) + `"`,
		LastModified: s.now(),
		ContentType:  opts.ContentType,
		Headers:      opts.Headers,
		UserMetadata: opts.UserMetadata,
		Checksums:    sums,
	}
	if info.ContentType == "" {
		info.ContentType = DefaultContentType
	}
	if err := s.commitObject(ctx, &info, rel, opts.Preconditions, nil); err != nil {
		s.removeData(rel)
		return ObjectInfo{}, err
	}
	return info, nil
}

// now is the store clock, truncated to milliseconds (what S3 shows).
func (s *Store) now() time.Time { return s.opts.Now().UTC().Truncate(time.Millisecond) }

// commitObject records info (backed by data file rel) as the current
// version of its key, checking pre atomically, and unlinks the file of the
// version it replaces. extra, if set, runs inside the same transaction.
func (s *Store) commitObject(ctx context.Context, info *ObjectInfo, rel string, pre Preconditions, extra func(*sql.Tx) error) error {
	headers, meta, sums, parts, err := encodeInfo(info)
	if err != nil {
		return err
	}
	var old string
	err = s.write(ctx, func(tx *sql.Tx) error {
		if err := bucketExists(ctx, tx, info.Bucket); err != nil {
			return err
		}
		var oldETag string
		err := tx.QueryRowContext(ctx, `SELECT file, etag FROM objects WHERE bucket = ? AND key = ?`,
			info.Bucket, []byte(info.Key)).Scan(&old, &oldETag)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read current version: %w", err)
		}
		if err := pre.check(err == nil, oldETag); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO objects
			(bucket, key, size, etag, modified, file, content_type, headers, meta, checksums, checksum_type, parts)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			info.Bucket, []byte(info.Key), info.Size, info.ETag, info.LastModified.UnixNano(), rel,
			info.ContentType, headers, meta, sums, info.ChecksumType, parts); err != nil {
			return fmt.Errorf("record object: %w", err)
		}
		if extra != nil {
			return extra(tx)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if old != rel {
		s.removeData(old)
	}
	return nil
}

func encodeInfo(info *ObjectInfo) (headers, meta, sums, parts string, err error) {
	enc := func(v any) string {
		if err != nil {
			return ""
		}
		var b []byte
		b, err = json.Marshal(v)
		return string(b)
	}
	headers = enc(nonNilMap(info.Headers))
	meta = enc(nonNilMap(info.UserMetadata))
	sums = enc(info.Checksums)
	if info.PartSizes != nil {
		parts = enc(info.PartSizes)
	}
	if err != nil {
		return "", "", "", "", fmt.Errorf("encode metadata: %w", err)
	}
	return headers, meta, sums, parts, nil
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// queryer is what both *sql.DB and *sql.Tx offer.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// statRow reads the full metadata of a key and the name of its data file.
func statRow(ctx context.Context, q queryer, bucket, key string) (ObjectInfo, string, error) {
	var (
		info                                  ObjectInfo
		modified                              int64
		rel, headers, meta, sums, parts, ctyp string
	)
	err := q.QueryRowContext(ctx, `SELECT size, etag, modified, file, content_type, headers, meta, checksums, checksum_type, parts
		FROM objects WHERE bucket = ? AND key = ?`, bucket, []byte(key)).
		Scan(&info.Size, &info.ETag, &modified, &rel, &ctyp, &headers, &meta, &sums, &info.ChecksumType, &parts)
	if errors.Is(err, sql.ErrNoRows) {
		return ObjectInfo{}, "", ErrNoSuchKey
	}
	if err != nil {
		return ObjectInfo{}, "", fmt.Errorf("read object: %w", err)
	}
	info.Bucket, info.Key, info.ContentType = bucket, key, ctyp
	info.LastModified = time.Unix(0, modified).UTC()
	if err := json.Unmarshal([]byte(headers), &info.Headers); err != nil {
		return ObjectInfo{}, "", fmt.Errorf("decode headers: %w", err)
	}
	if err := json.Unmarshal([]byte(meta), &info.UserMetadata); err != nil {
		return ObjectInfo{}, "", fmt.Errorf("decode metadata: %w", err)
	}
	if err := json.Unmarshal([]byte(sums), &info.Checksums); err != nil {
		return ObjectInfo{}, "", fmt.Errorf("decode checksums: %w", err)
	}
	if parts != "" {
		if err := json.Unmarshal([]byte(parts), &info.PartSizes); err != nil {
			return ObjectInfo{}, "", fmt.Errorf("decode parts: %w", err)
		}
	}
	return info, rel, nil
}

// stat returns the metadata of a key, checking the bucket when the key is
// missing so that callers get ErrNoSuchBucket where it applies.
func (s *Store) stat(ctx context.Context, bucket, key string) (ObjectInfo, error) {
	info, _, err := s.statFile(ctx, bucket, key)
	return info, err
}

func (s *Store) statFile(ctx context.Context, bucket, key string) (ObjectInfo, string, error) {
	if err := s.checkOpen(); err != nil {
		return ObjectInfo{}, "", err
	}
	var (
		info ObjectInfo
		rel  string
	)
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		info, rel, err = statRow(ctx, tx, bucket, key)
		if errors.Is(err, ErrNoSuchKey) {
			if berr := bucketExists(ctx, tx, bucket); berr != nil {
				return berr
			}
		}
		return err
	})
	return info, rel, err
}

// Stat returns the metadata of bucket/key.
func (s *Store) Stat(ctx context.Context, bucket, key string) (ObjectInfo, error) {
	info, err := s.stat(ctx, bucket, key)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("stat object %s/%s: %w", bucket, key, err)
	}
	return info, nil
}

// openRetries bounds how often Get and friends retry when an overwrite
// unlinks the file between reading the index and opening it.
const openRetries = 8

// Get opens the current version of bucket/key for reading.
func (s *Store) Get(ctx context.Context, bucket, key string) (*Object, error) {
	for i := 0; ; i++ {
		info, rel, err := s.statFile(ctx, bucket, key)
		if err != nil {
			return nil, fmt.Errorf("get object %s/%s: %w", bucket, key, err)
		}
		f, err := os.Open(s.dataPath(rel))
		if errors.Is(err, fs.ErrNotExist) && i < openRetries {
			continue // replaced meanwhile; read the index again
		}
		if err != nil {
			return nil, fmt.Errorf("get object %s/%s: %w", bucket, key, err)
		}
		return &Object{Info: info, f: f}, nil
	}
}

// FilePath returns the path of the file that holds the current version of
// bucket/key. The file is never modified in place (an overwrite installs a
// new file and unlinks this one), so a hard link to it (os.Link) is a
// consistent snapshot. Treat it as read-only. Between this call and the
// link an overwrite may unlink the path; Link does the retry for you.
func (s *Store) FilePath(ctx context.Context, bucket, key string) (string, error) {
	_, rel, err := s.statFile(ctx, bucket, key)
	if err != nil {
		return "", fmt.Errorf("object path %s/%s: %w", bucket, key, err)
	}
	return s.dataPath(rel), nil
}

// Link hard-links the current version of bucket/key to dst (which must not
// exist and must be on the same file system) and returns the metadata of
// the version linked. It retries if an overwrite races with it.
func (s *Store) Link(ctx context.Context, bucket, key, dst string) (ObjectInfo, error) {
	for i := 0; ; i++ {
		info, rel, err := s.statFile(ctx, bucket, key)
		if err != nil {
			return ObjectInfo{}, fmt.Errorf("link object %s/%s: %w", bucket, key, err)
		}
		err = os.Link(s.dataPath(rel), dst)
		if err != nil && i < openRetries {
			if _, serr := os.Stat(s.dataPath(rel)); errors.Is(serr, fs.ErrNotExist) {
				continue
			}
		}
		if err != nil {
			return ObjectInfo{}, fmt.Errorf("link object %s/%s: %w", bucket, key, err)
		}
		return info, nil
	}
}

// Delete removes bucket/key. Deleting a missing key is not an error; a
// missing bucket is.
func (s *Store) Delete(ctx context.Context, bucket, key string) error {
	var old string
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := bucketExists(ctx, tx, bucket); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx, `SELECT file FROM objects WHERE bucket = ? AND key = ?`, bucket, []byte(key)).Scan(&old)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read object: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM objects WHERE bucket = ? AND key = ?`, bucket, []byte(key)); err != nil {
			return fmt.Errorf("delete row: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete object %s/%s: %w", bucket, key, err)
	}
	s.removeData(old)
	return nil
}

// CopyOptions control Copy.
type CopyOptions struct {
	// ReplaceMetadata takes ContentType, Headers and UserMetadata from
	// these options (x-amz-metadata-directive: REPLACE); otherwise the
	// source's are kept.
	ReplaceMetadata bool
	ContentType     string
	Headers         map[string]string
	UserMetadata    map[string]string
	// SourceIfMatch, if set, must match the source's ETag.
	SourceIfMatch string
	Preconditions
}

// Copy makes dstBucket/dstKey a copy of srcBucket/srcKey. The bytes are
// shared through a hard link (files are immutable), so a copy costs no I/O
// whatever the size. ETag, checksums and part layout carry over.
func (s *Store) Copy(ctx context.Context, srcBucket, srcKey, dstBucket, dstKey string, opts CopyOptions) (ObjectInfo, error) {
	info, err := s.copyObject(ctx, srcBucket, srcKey, dstBucket, dstKey, &opts)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("copy object %s/%s to %s/%s: %w", srcBucket, srcKey, dstBucket, dstKey, err)
	}
	return info, nil
}

func (s *Store) copyObject(ctx context.Context, srcBucket, srcKey, dstBucket, dstKey string, opts *CopyOptions) (ObjectInfo, error) {
	if err := ValidateKey(dstKey); err != nil {
		return ObjectInfo{}, err
	}
	if err := s.requireBucket(ctx, dstBucket); err != nil {
		return ObjectInfo{}, err
	}
	for i := 0; ; i++ {
		src, rel, err := s.statFile(ctx, srcBucket, srcKey)
		if err != nil {
			return ObjectInfo{}, err
		}
		if opts.SourceIfMatch != "" && !ETagsEqual(opts.SourceIfMatch, src.ETag) {
			return ObjectInfo{}, fmt.Errorf("source if-match: %w", ErrPreconditionFailed)
		}
		newRel := fileRel(newID())
		if err := s.placeFile(s.dataPath(rel), newRel, os.Link); err != nil {
			s.removeData(newRel)
			if errors.Is(err, fs.ErrNotExist) && i < openRetries {
				continue
			}
			return ObjectInfo{}, fmt.Errorf("link data: %w", err)
		}
		dst := src
		dst.Bucket, dst.Key, dst.LastModified = dstBucket, dstKey, s.now()
		if opts.ReplaceMetadata {
			dst.ContentType, dst.Headers, dst.UserMetadata = opts.ContentType, opts.Headers, opts.UserMetadata
			if dst.ContentType == "" {
				dst.ContentType = DefaultContentType
			}
		}
		if err := s.commitObject(ctx, &dst, newRel, opts.Preconditions, nil); err != nil {
			s.removeData(newRel)
			return ObjectInfo{}, err
		}
		return dst, nil
	}
}
