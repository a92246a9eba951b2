package objectstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// BucketInfo describes a bucket.
type BucketInfo struct {
	Name         string
	CreationDate time.Time
}

// bucketExists returns ErrNoSuchBucket unless the bucket exists.
func bucketExists(ctx context.Context, q queryer, name string) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM buckets WHERE name = ?`, name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNoSuchBucket
	}
	if err != nil {
		return fmt.Errorf("read bucket: %w", err)
	}
	return nil
}

// requireBucket checks the bucket name and existence before a write starts
// receiving data.
func (s *Store) requireBucket(ctx context.Context, name string) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if ValidateBucketName(name) != nil {
		return ErrNoSuchBucket
	}
	return bucketExists(ctx, s.db, name)
}

// CreateBucket creates a bucket. It returns ErrBucketExists if it is
// already there and ErrInvalidBucketName if the name breaks S3's rules.
func (s *Store) CreateBucket(ctx context.Context, name string) error {
	if err := ValidateBucketName(name); err != nil {
		return fmt.Errorf("create bucket: %w", err)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := bucketExists(ctx, tx, name); err == nil {
			return ErrBucketExists
		} else if !errors.Is(err, ErrNoSuchBucket) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO buckets (name, created) VALUES (?, ?)`, name, s.now().UnixNano()); err != nil {
			return fmt.Errorf("record bucket: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

// HeadBucket returns a bucket's info, or ErrNoSuchBucket.
func (s *Store) HeadBucket(ctx context.Context, name string) (BucketInfo, error) {
	if err := s.checkOpen(); err != nil {
		return BucketInfo{}, err
	}
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT created FROM buckets WHERE name = ?`, name).Scan(&created)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNoSuchBucket
	}
	if err != nil {
		return BucketInfo{}, fmt.Errorf("head bucket %s: %w", name, err)
	}
	return BucketInfo{Name: name, CreationDate: time.Unix(0, created).UTC()}, nil
}

// ListBuckets returns every bucket, sorted by name.
func (s *Store) ListBuckets(ctx context.Context) ([]BucketInfo, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT name, created FROM buckets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list buckets: %w", err)
	}
	defer rows.Close()
	var out []BucketInfo
	for rows.Next() {
		var b BucketInfo
		var created int64
		if err := rows.Scan(&b.Name, &created); err != nil {
			return nil, fmt.Errorf("list buckets: %w", err)
		}
		b.CreationDate = time.Unix(0, created).UTC()
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list buckets: %w", err)
	}
	return out, nil
}

// DeleteBucket removes an empty bucket (ErrBucketNotEmpty otherwise). Any
// multipart uploads still in progress in it are aborted.
func (s *Store) DeleteBucket(ctx context.Context, name string) error {
	var files []string
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := bucketExists(ctx, tx, name); err != nil {
			return err
		}
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM objects WHERE bucket = ? LIMIT 1`, name).Scan(&one)
		if err == nil {
			return ErrBucketNotEmpty
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("check objects: %w", err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT p.file FROM parts p JOIN uploads u ON u.id = p.upload_id WHERE u.bucket = ?`, name)
		if err != nil {
			return fmt.Errorf("find parts: %w", err)
		}
		for rows.Next() {
			var f string
			if err := rows.Scan(&f); err != nil {
				rows.Close()
				return fmt.Errorf("find parts: %w", err)
			}
			files = append(files, f)
		}
		rows.Close()
		for _, q := range []string{
			`DELETE FROM parts WHERE upload_id IN (SELECT id FROM uploads WHERE bucket = ?)`,
			`DELETE FROM uploads WHERE bucket = ?`,
			`DELETE FROM buckets WHERE name = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, name); err != nil {
				return fmt.Errorf("delete bucket rows: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete bucket %s: %w", name, err)
	}
	s.removeData(files...)
	return nil
}
