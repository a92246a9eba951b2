package objectstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// DefaultMaxKeys is the page size when ListOptions.MaxKeys is 0.
const DefaultMaxKeys = 1000

// ListOptions select and page a listing.
type ListOptions struct {
	// Prefix limits the listing to keys that start with it.
	Prefix string
	// Delimiter, if set, rolls keys that contain it after the prefix up
	// into one common prefix each (up to and including the delimiter).
	Delimiter string
	// StartAfter lists only entries that sort after it: pass the
	// NextMarker of the previous page (or a ListObjectsV2 start-after, or a
	// ListObjects marker). A common prefix counts as listed once it is
	// the marker or sorts before it.
	StartAfter string
	// MaxKeys bounds keys plus common prefixes returned; 0 means
	// DefaultMaxKeys, a negative value returns nothing.
	MaxKeys int
}

// ListResult is one page of a listing, in byte order of keys.
type ListResult struct {
	// Objects carry Bucket, Key, Size, ETag and LastModified only.
	Objects        []ObjectInfo
	CommonPrefixes []string
	IsTruncated    bool
	// NextMarker is the last key or common prefix returned when the
	// listing is truncated; pass it as StartAfter for the next page.
	NextMarker string
}

// listBatch is how many index rows one query fetches.
const listBatch = 256

// List lists a bucket. Keys are in byte order of their UTF-8 bytes. Each
// page costs one range scan of the index plus one seek per common prefix,
// however many keys the prefixes hold.
func (s *Store) List(ctx context.Context, bucket string, opts ListOptions) (ListResult, error) {
	var res ListResult
	err := s.read(ctx, func(tx *sql.Tx) error {
		if err := bucketExists(ctx, tx, bucket); err != nil {
			return err
		}
		var err error
		res, err = list(ctx, tx, bucket, opts)
		if !res.IsTruncated {
			res.NextMarker = ""
		}
		return err
	})
	if err != nil {
		return ListResult{}, fmt.Errorf("list %s: %w", bucket, err)
	}
	return res, nil
}

// cursor is a position in the key space: keys > key (or >= when inclusive).
type cursor struct {
	key       string
	inclusive bool
	set       bool
}

func list(ctx context.Context, tx *sql.Tx, bucket string, opts ListOptions) (ListResult, error) {
	var res ListResult
	max := opts.MaxKeys
	if max == 0 {
		max = DefaultMaxKeys
	}
	if max < 0 {
		return res, nil
	}
	// The scan covers [prefix, prefixEnd) intersected with (StartAfter, ∞).
	end, bounded := prefixEnd(opts.Prefix)
	var cur cursor
	if opts.Prefix != "" {
		cur = cursor{key: opts.Prefix, inclusive: true, set: true}
	}
	if opts.StartAfter != "" && opts.StartAfter >= opts.Prefix {
		cur = cursor{key: opts.StartAfter, set: true}
	}
	marker := opts.StartAfter
	count := 0
	for {
		rows, err := scan(ctx, tx, bucket, cur, end, bounded, listBatch)
		if err != nil {
			return res, err
		}
		if len(rows) == 0 {
			return res, nil
		}
		reseek := false
		for _, o := range rows {
			if cp, ok := commonPrefix(o.Key, opts.Prefix, opts.Delimiter); ok {
				next, more := prefixEnd(cp)
				if cp > marker {
					if count == max {
						res.IsTruncated = true
						return res, nil
					}
					res.CommonPrefixes = append(res.CommonPrefixes, cp)
					res.NextMarker = cp
					count++
				}
				if !more {
					return res, nil
				}
				// Skip everything else under cp with one seek.
				cur = cursor{key: next, inclusive: true, set: true}
				reseek = true
				break
			}
			if count == max {
				res.IsTruncated = true
				return res, nil
			}
			o.Bucket = bucket
			res.Objects = append(res.Objects, o)
			res.NextMarker = o.Key
			count++
			cur = cursor{key: o.Key, set: true}
		}
		if !reseek && len(rows) < listBatch {
			return res, nil
		}
	}
}

// scan fetches up to n rows from the cursor on, below end when bounded.
func scan(ctx context.Context, tx *sql.Tx, bucket string, cur cursor, end string, bounded bool, n int) ([]ObjectInfo, error) {
	var q strings.Builder
	args := []any{bucket}
	q.WriteString(`SELECT key, size, etag, modified FROM objects WHERE bucket = ?`)
	if cur.set {
		if cur.inclusive {
			q.WriteString(` AND key >= ?`)
		} else {
			q.WriteString(` AND key > ?`)
		}
		args = append(args, []byte(cur.key))
	}
	if bounded {
		q.WriteString(` AND key < ?`)
		args = append(args, []byte(end))
	}
	q.WriteString(` ORDER BY key LIMIT ?`)
	args = append(args, n)
	rows, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("scan index: %w", err)
	}
	defer rows.Close()
	out := make([]ObjectInfo, 0, n)
	for rows.Next() {
		var (
			key      []byte
			o        ObjectInfo
			modified int64
		)
		if err := rows.Scan(&key, &o.Size, &o.ETag, &modified); err != nil {
			return nil, fmt.Errorf("scan index: %w", err)
		}
		o.Key = string(key)
		o.LastModified = time.Unix(0, modified).UTC()
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("scan index: %w", err)
	}
	return out, nil
}

// commonPrefix returns the prefix key rolls up into: everything up to and
// including the first delimiter after prefix.
func commonPrefix(key, prefix, delim string) (string, bool) {
	if delim == "" || !strings.HasPrefix(key, prefix) {
		return "", false
	}
	i := strings.Index(key[len(prefix):], delim)
	if i < 0 {
		return "", false
	}
	return key[:len(prefix)+i+len(delim)], true
}

// prefixEnd returns the smallest byte string greater than every string that
// starts with p. ok is false when there is none (p empty or all 0xff).
func prefixEnd(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}
