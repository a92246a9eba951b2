package objectstore

import (
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"time"
)

// Multipart limits, as S3 has them.
const (
	// MinPartSize is the smallest size of every part but the last.
	MinPartSize = 5 << 20
	// MaxPartNumber is the highest part number.
	MaxPartNumber = 10000
)

// MultipartOptions carry what CreateMultipart records for the object that
// the upload will produce.
type MultipartOptions struct {
	ContentType  string
	Headers      map[string]string
	UserMetadata map[string]string
	// ChecksumAlgorithm, if set, is computed for every part and for the
	// completed object.
	ChecksumAlgorithm ChecksumAlgorithm
	// ChecksumType is ChecksumTypeComposite (the default, except for
	// CRC64NVME) or ChecksumTypeFullObject (CRC algorithms only).
	ChecksumType string
}

// Upload describes a multipart upload in progress.
type Upload struct {
	ID                string
	Bucket            string
	Key               string
	Initiated         time.Time
	ChecksumAlgorithm ChecksumAlgorithm
	ChecksumType      string
}

// PartInfo describes an uploaded part.
type PartInfo struct {
	Number       int
	Size         int64
	ETag         string // quoted MD5 hex
	Checksums    Checksums
	LastModified time.Time
}

// CompletePart names a part to assemble, as listed in a
// CompleteMultipartUpload request.
type CompletePart struct {
	Number int
	ETag   string
	// Checksums, if set, must equal what was computed for the part.
	Checksums Checksums
}

// CreateMultipart starts a multipart upload for bucket/key.
func (s *Store) CreateMultipart(ctx context.Context, bucket, key string, opts MultipartOptions) (Upload, error) {
	up, err := s.createMultipart(ctx, bucket, key, &opts)
	if err != nil {
		return Upload{}, fmt.Errorf("create multipart upload %s/%s: %w", bucket, key, err)
	}
	return up, nil
}

func (s *Store) createMultipart(ctx context.Context, bucket, key string, opts *MultipartOptions) (Upload, error) {
	if err := ValidateKey(key); err != nil {
		return Upload{}, err
	}
	up := Upload{ID: newID(), Bucket: bucket, Key: key, Initiated: s.now(), ChecksumAlgorithm: opts.ChecksumAlgorithm}
	if up.ChecksumAlgorithm != "" {
		if up.ChecksumAlgorithm.digestSize() == 0 {
			return Upload{}, fmt.Errorf("%w: unknown algorithm %q", ErrInvalidChecksum, up.ChecksumAlgorithm)
		}
		up.ChecksumType = opts.ChecksumType
		if up.ChecksumType == "" {
			up.ChecksumType = ChecksumTypeComposite
			if up.ChecksumAlgorithm == CRC64NVME {
				up.ChecksumType = ChecksumTypeFullObject
			}
		}
		switch {
		case up.ChecksumType == ChecksumTypeFullObject && !crcCombinable(up.ChecksumAlgorithm):
			return Upload{}, fmt.Errorf("%w: %s cannot be a full-object checksum", ErrInvalidChecksum, up.ChecksumAlgorithm)
		case up.ChecksumType == ChecksumTypeComposite && up.ChecksumAlgorithm == CRC64NVME:
			return Upload{}, fmt.Errorf("%w: CRC64NVME must be a full-object checksum", ErrInvalidChecksum)
		case up.ChecksumType != ChecksumTypeFullObject && up.ChecksumType != ChecksumTypeComposite:
			return Upload{}, fmt.Errorf("%w: checksum type %q", ErrInvalidChecksum, up.ChecksumType)
		}
	} else if opts.ChecksumType != "" {
		return Upload{}, fmt.Errorf("%w: checksum type without an algorithm", ErrInvalidChecksum)
	}
	ctype := opts.ContentType
	if ctype == "" {
		ctype = DefaultContentType
	}
	headers, err := json.Marshal(nonNilMap(opts.Headers))
	if err != nil {
		return Upload{}, fmt.Errorf("encode headers: %w", err)
	}
	meta, err := json.Marshal(nonNilMap(opts.UserMetadata))
	if err != nil {
		return Upload{}, fmt.Errorf("encode metadata: %w", err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if err := bucketExists(ctx, tx, bucket); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO uploads
			(id, bucket, key, created, content_type, headers, meta, checksum_algorithm, checksum_type)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			up.ID, bucket, []byte(key), up.Initiated.UnixNano(), ctype, string(headers), string(meta),
			string(up.ChecksumAlgorithm), up.ChecksumType)
		if err != nil {
			return fmt.Errorf("record upload: %w", err)
		}
		return nil
	})
	return up, err
}

// uploadRow is an upload plus what it will give the object.
type uploadRow struct {
	Upload
	contentType   string
	headers, meta map[string]string
}

// loadUpload reads an upload and checks it belongs to bucket/key.
func loadUpload(ctx context.Context, q queryer, bucket, key, id string) (uploadRow, error) {
	var (
		u                 uploadRow
		k                 []byte
		created           int64
		headers, meta, ca string
	)
	err := q.QueryRowContext(ctx, `SELECT bucket, key, created, content_type, headers, meta, checksum_algorithm, checksum_type
		FROM uploads WHERE id = ?`, id).
		Scan(&u.Bucket, &k, &created, &u.contentType, &headers, &meta, &ca, &u.ChecksumType)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && (u.Bucket != bucket || string(k) != key)) {
		if berr := bucketExists(ctx, q, bucket); berr != nil {
			return uploadRow{}, berr
		}
		return uploadRow{}, ErrNoSuchUpload
	}
	if err != nil {
		return uploadRow{}, fmt.Errorf("read upload: %w", err)
	}
	u.ID, u.Key, u.Initiated, u.ChecksumAlgorithm = id, key, time.Unix(0, created).UTC(), ChecksumAlgorithm(ca)
	if err := json.Unmarshal([]byte(headers), &u.headers); err != nil {
		return uploadRow{}, fmt.Errorf("decode headers: %w", err)
	}
	if err := json.Unmarshal([]byte(meta), &u.meta); err != nil {
		return uploadRow{}, fmt.Errorf("decode metadata: %w", err)
	}
	return u, nil
}

// UploadPart stores part number n (1..10000) of an upload, replacing an
// earlier part with the same number. The part is verified like a Put; the
// upload's checksum algorithm, if any, is always computed.
func (s *Store) UploadPart(ctx context.Context, bucket, key, uploadID string, n int, r io.Reader, in Integrity) (PartInfo, error) {
	p, err := s.uploadPart(ctx, bucket, key, uploadID, n, r, &in)
	if err != nil {
		return PartInfo{}, fmt.Errorf("upload part %d of %s/%s: %w", n, bucket, key, err)
	}
	return p, nil
}

func (s *Store) uploadPart(ctx context.Context, bucket, key, uploadID string, n int, r io.Reader, in *Integrity) (PartInfo, error) {
	if n < 1 || n > MaxPartNumber {
		return PartInfo{}, ErrInvalidPartNumber
	}
	if err := in.validate(); err != nil {
		return PartInfo{}, err
	}
	if err := s.checkOpen(); err != nil {
		return PartInfo{}, err
	}
	up, err := loadUpload(ctx, s.db, bucket, key, uploadID)
	if err != nil {
		return PartInfo{}, err
	}
	if up.ChecksumAlgorithm != "" {
		in.Algorithms = append(slices.Clip(in.Algorithms), up.ChecksumAlgorithm)
	}
	hs := newHashSet(in)
	f, size, err := s.receive(ctx, r, hs)
	if err != nil {
		return PartInfo{}, err
	}
	sums, err := hs.verify(in)
	if err != nil {
		discard(f)
		return PartInfo{}, err
	}
	rel, err := s.install(f)
	if err != nil {
		return PartInfo{}, err
	}
	p := PartInfo{
		Number:       n,
		Size:         size,
		ETag:         `"` + hex.EncodeToString(hs.md5.Sum(nil)) + `"`,
		Checksums:    sums,
		LastModified: s.now(),
	}
	sumsJSON, err := json.Marshal(sums)
	if err != nil {
		s.removeData(rel)
		return PartInfo{}, fmt.Errorf("encode checksums: %w", err)
	}
	mu := s.uploadLock(uploadID)
	mu.Lock()
	defer mu.Unlock()
	var old string
	err = s.write(ctx, func(tx *sql.Tx) error {
		if _, err := loadUpload(ctx, tx, bucket, key, uploadID); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx, `SELECT file FROM parts WHERE upload_id = ? AND number = ?`, uploadID, n).Scan(&old)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read part: %w", err)
		}
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO parts (upload_id, number, size, etag, checksums, modified, file)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, uploadID, n, size, p.ETag, string(sumsJSON), p.LastModified.UnixNano(), rel)
		if err != nil {
			return fmt.Errorf("record part: %w", err)
		}
		return nil
	})
	if err != nil {
		s.removeData(rel)
		return PartInfo{}, err
	}
	s.removeData(old)
	return p, nil
}

type partRow struct {
	PartInfo
	file string
}

func loadParts(ctx context.Context, tx *sql.Tx, uploadID string, after, limit int) ([]partRow, error) {
	rows, err := tx.QueryContext(ctx, `SELECT number, size, etag, checksums, modified, file FROM parts
		WHERE upload_id = ? AND number > ? ORDER BY number LIMIT ?`, uploadID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read parts: %w", err)
	}
	defer rows.Close()
	var out []partRow
	for rows.Next() {
		var (
			p        partRow
			sums     string
			modified int64
		)
		if err := rows.Scan(&p.Number, &p.Size, &p.ETag, &sums, &modified, &p.file); err != nil {
			return nil, fmt.Errorf("read parts: %w", err)
		}
		if err := json.Unmarshal([]byte(sums), &p.Checksums); err != nil {
			return nil, fmt.Errorf("decode part checksums: %w", err)
		}
		p.LastModified = time.Unix(0, modified).UTC()
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read parts: %w", err)
	}
	return out, nil
}

// CompleteMultipart assembles the listed parts, in order, into bucket/key
// and ends the upload. Parts must be listed in strictly ascending order
// (ErrInvalidPartOrder), must exist with the given ETag (ErrInvalidPart),
// and all but the last must be at least MinPartSize (ErrEntityTooSmall).
// Parts not listed are discarded. The ETag is the MD5 of the concatenated
// binary part MD5s, then "-<number of parts>".
func (s *Store) CompleteMultipart(ctx context.Context, bucket, key, uploadID string, parts []CompletePart) (ObjectInfo, error) {
	info, err := s.completeMultipart(ctx, bucket, key, uploadID, parts)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("complete multipart upload %s/%s: %w", bucket, key, err)
	}
	return info, nil
}

func (s *Store) completeMultipart(ctx context.Context, bucket, key, uploadID string, parts []CompletePart) (ObjectInfo, error) {
	if len(parts) == 0 {
		return ObjectInfo{}, fmt.Errorf("%w: no parts given", ErrInvalidPart)
	}
	mu := s.uploadLock(uploadID)
	mu.Lock()
	defer mu.Unlock()

	var (
		up     uploadRow
		stored []partRow
	)
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		if up, err = loadUpload(ctx, tx, bucket, key, uploadID); err != nil {
			return err
		}
		stored, err = loadParts(ctx, tx, uploadID, 0, MaxPartNumber)
		return err
	})
	if err != nil {
		return ObjectInfo{}, err
	}
	byNumber := make(map[int]partRow, len(stored))
	for _, p := range stored {
		byNumber[p.Number] = p
	}
	use := make([]partRow, len(parts))
	for i, cp := range parts {
		if i > 0 && cp.Number <= parts[i-1].Number {
			return ObjectInfo{}, ErrInvalidPartOrder
		}
		p, ok := byNumber[cp.Number]
		if !ok {
			return ObjectInfo{}, fmt.Errorf("%w: part %d was not uploaded", ErrInvalidPart, cp.Number)
		}
		if !ETagsEqual(cp.ETag, p.ETag) {
			return ObjectInfo{}, fmt.Errorf("%w: part %d has ETag %s, not %s", ErrInvalidPart, cp.Number, p.ETag, cp.ETag)
		}
		var bad error
		cp.Checksums.Each(func(a ChecksumAlgorithm, v string) {
			if got := p.Checksums.Get(a); bad == nil && got != v {
				bad = fmt.Errorf("%w: part %d %s is %s, not %s", ErrInvalidPart, cp.Number, a, got, v)
			}
		})
		if bad != nil {
			return ObjectInfo{}, bad
		}
		use[i] = p
	}
	for _, p := range use[:len(use)-1] {
		if p.Size < MinPartSize {
			return ObjectInfo{}, fmt.Errorf("%w: part %d is %d bytes", ErrEntityTooSmall, p.Number, p.Size)
		}
	}

	etagHash := md5.New()
	sizes := make([]int64, len(use))
	var total int64
	partSums := make([]string, len(use))
	for i, p := range use {
		raw, err := hex.DecodeString(bareETag(p.ETag))
		if err != nil {
			return ObjectInfo{}, fmt.Errorf("%w: stored ETag %s", ErrInvalidPart, p.ETag)
		}
		etagHash.Write(raw)
		sizes[i] = p.Size
		total += p.Size
		if up.ChecksumAlgorithm != "" {
			partSums[i] = p.Checksums.Get(up.ChecksumAlgorithm)
		}
	}

	info := ObjectInfo{
		Bucket:       bucket,
		Key:          key,
		Size:         total,
		ETag:         fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(etagHash.Sum(nil)), len(use)),
		ContentType:  up.contentType,
		Headers:      up.headers,
		UserMetadata: up.meta,
		PartSizes:    sizes,
	}
	var full hash.Hash
	if a := up.ChecksumAlgorithm; a != "" {
		info.ChecksumType = up.ChecksumType
		if up.ChecksumType == ChecksumTypeFullObject {
			full = a.NewHash()
		} else {
			v, err := compositeChecksum(a, partSums)
			if err != nil {
				return ObjectInfo{}, err
			}
			info.Checksums.Set(a, v)
		}
	}

	// One part: its file becomes the object's file, no copy needed.
	var rel string
	reused := len(use) == 1 && full == nil
	if reused {
		rel = use[0].file
	} else {
		if rel, err = s.concat(ctx, use, full); err != nil {
			return ObjectInfo{}, err
		}
		if full != nil {
			info.Checksums.Set(up.ChecksumAlgorithm, base64.StdEncoding.EncodeToString(full.Sum(nil)))
		}
	}
	info.LastModified = s.now()
	err = s.commitObject(ctx, &info, rel, Preconditions{}, func(tx *sql.Tx) error {
		for _, q := range []string{`DELETE FROM parts WHERE upload_id = ?`, `DELETE FROM uploads WHERE id = ?`} {
			if _, err := tx.ExecContext(ctx, q, uploadID); err != nil {
				return fmt.Errorf("end upload: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		if !reused {
			s.removeData(rel)
		}
		return ObjectInfo{}, err
	}
	for _, p := range stored {
		if p.file != rel {
			s.removeData(p.file)
		}
	}
	return info, nil
}

// concat writes the parts one after another into a new data file. Without
// a full-object checksum to compute, io.Copy between files lets the kernel
// copy (copy_file_range, a reflink where the file system can).
func (s *Store) concat(ctx context.Context, parts []partRow, full hash.Hash) (string, error) {
	out, err := os.CreateTemp(s.path(tmpDir), "mp-*")
	if err != nil {
		return "", fmt.Errorf("create temp file: %w", err)
	}
	var w io.Writer = out
	if full != nil {
		w = io.MultiWriter(out, full)
	}
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			discard(out)
			return "", err
		}
		in, err := os.Open(s.dataPath(p.file))
		if err != nil {
			discard(out)
			return "", fmt.Errorf("open part %d: %w", p.Number, err)
		}
		var n int64
		if full == nil {
			n, err = io.Copy(out, in)
		} else {
			bp := s.bufs.Get().(*[]byte)
			n, err = io.CopyBuffer(w, in, *bp)
			s.bufs.Put(bp)
		}
		in.Close()
		if err == nil && n != p.Size {
			err = fmt.Errorf("part %d file has %d bytes, index says %d", p.Number, n, p.Size)
		}
		if err != nil {
			discard(out)
			return "", fmt.Errorf("assemble parts: %w", err)
		}
	}
	return s.install(out)
}

// AbortMultipart ends an upload and discards its parts.
func (s *Store) AbortMultipart(ctx context.Context, bucket, key, uploadID string) error {
	mu := s.uploadLock(uploadID)
	mu.Lock()
	defer mu.Unlock()
	var files []string
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := loadUpload(ctx, tx, bucket, key, uploadID); err != nil {
			return err
		}
		parts, err := loadParts(ctx, tx, uploadID, 0, MaxPartNumber)
		if err != nil {
			return err
		}
		for _, p := range parts {
			files = append(files, p.file)
		}
		for _, q := range []string{`DELETE FROM parts WHERE upload_id = ?`, `DELETE FROM uploads WHERE id = ?`} {
			if _, err := tx.ExecContext(ctx, q, uploadID); err != nil {
				return fmt.Errorf("end upload: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("abort multipart upload %s/%s: %w", bucket, key, err)
	}
	s.removeData(files...)
	return nil
}

// ListPartsResult is one page of an upload's parts.
type ListPartsResult struct {
	Upload      Upload
	Parts       []PartInfo
	IsTruncated bool
	// NextMarker is the last part number returned; pass it as
	// PartNumberMarker for the next page.
	NextMarker int
}

// ListParts lists the parts of an upload with numbers above marker, at most
// max of them (0 means 1000).
func (s *Store) ListParts(ctx context.Context, bucket, key, uploadID string, marker, max int) (ListPartsResult, error) {
	if max <= 0 || max > 1000 {
		max = 1000
	}
	var res ListPartsResult
	err := s.read(ctx, func(tx *sql.Tx) error {
		up, err := loadUpload(ctx, tx, bucket, key, uploadID)
		if err != nil {
			return err
		}
		res.Upload = up.Upload
		rows, err := loadParts(ctx, tx, uploadID, marker, max+1)
		if err != nil {
			return err
		}
		if len(rows) > max {
			res.IsTruncated = true
			rows = rows[:max]
		}
		for _, p := range rows {
			res.Parts = append(res.Parts, p.PartInfo)
			res.NextMarker = p.Number
		}
		return nil
	})
	if err != nil {
		return ListPartsResult{}, fmt.Errorf("list parts of %s/%s: %w", bucket, key, err)
	}
	return res, nil
}

// ListUploads lists the multipart uploads in progress in a bucket whose
// keys start with prefix, by key then initiation time, at most max (0 means
// 1000). truncated says whether more exist.
func (s *Store) ListUploads(ctx context.Context, bucket, prefix string, max int) (uploads []Upload, truncated bool, err error) {
	if max <= 0 || max > 1000 {
		max = 1000
	}
	err = s.read(ctx, func(tx *sql.Tx) error {
		if err := bucketExists(ctx, tx, bucket); err != nil {
			return err
		}
		q := `SELECT id, key, created, checksum_algorithm, checksum_type FROM uploads WHERE bucket = ?`
		args := []any{bucket}
		if prefix != "" {
			q += ` AND key >= ?`
			args = append(args, []byte(prefix))
			if end, ok := prefixEnd(prefix); ok {
				q += ` AND key < ?`
				args = append(args, []byte(end))
			}
		}
		q += ` ORDER BY key, created LIMIT ?`
		args = append(args, max+1)
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("read uploads: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				u       Upload
				k       []byte
				created int64
				ca      string
			)
			if err := rows.Scan(&u.ID, &k, &created, &ca, &u.ChecksumType); err != nil {
				return fmt.Errorf("read uploads: %w", err)
			}
			u.Bucket, u.Key, u.Initiated, u.ChecksumAlgorithm = bucket, string(k), time.Unix(0, created).UTC(), ChecksumAlgorithm(ca)
			uploads = append(uploads, u)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, false, fmt.Errorf("list uploads of %s: %w", bucket, err)
	}
	if len(uploads) > max {
		uploads, truncated = uploads[:max], true
	}
	return uploads, truncated, nil
}
