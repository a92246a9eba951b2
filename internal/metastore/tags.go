package metastore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sagebox/sagebox"
)

// ErrTooManyTags is returned (unwrapped) by AddTags when the resource would
// end up with more tags than allowed; nothing is changed then.
var ErrTooManyTags = errors.New("metastore: too many tags")

// Tags returns the tags of the resource named by arn, in the order their
// keys were first added; a resource without tags (or an ARN nobody tagged)
// has an empty, non-nil list. The store does not know which resources
// exist: callers check that first.
func (db *DB) Tags(ctx context.Context, arn string) ([]sagebox.Tag, error) {
	tags, err := queryTags(ctx, db.sql.R, arn)
	if err != nil {
		return nil, fmt.Errorf("list tags of %s: %w", arn, err)
	}
	return tags, nil
}

// AddTags adds tags to the resource named by arn, overwriting the value of
// a key it already has, in one transaction. If the resource would then have
// more than max tags, nothing changes and ErrTooManyTags is returned.
func (db *DB) AddTags(ctx context.Context, arn string, tags []sagebox.Tag, max int) error {
	err := db.sql.WriteTx(ctx, func(tx *sql.Tx) error {
		if err := putTags(ctx, tx, arn, tags); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tags WHERE arn = ?`, arn).Scan(&n); err != nil {
			return err
		}
		if n > max {
			return ErrTooManyTags
		}
		return nil
	})
	if errors.Is(err, ErrTooManyTags) {
		return ErrTooManyTags
	}
	if err != nil {
		return fmt.Errorf("add tags to %s: %w", arn, err)
	}
	return nil
}

// DeleteTags removes the given keys from the resource named by arn; keys it
// does not have are ignored.
func (db *DB) DeleteTags(ctx context.Context, arn string, keys []string) error {
	err := db.sql.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, k := range keys {
			if _, err := tx.ExecContext(ctx, `DELETE FROM tags WHERE arn = ? AND key = ?`, arn, k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete tags of %s: %w", arn, err)
	}
	return nil
}

// DeleteAllTags removes every tag of the resource named by arn: a resource's
// delete calls it (or deleteAllTags inside its own transaction), so a new
// resource of the same name starts untagged.
func (db *DB) DeleteAllTags(ctx context.Context, arn string) error {
	err := db.sql.WriteTx(ctx, func(tx *sql.Tx) error { return deleteAllTags(ctx, tx, arn) })
	if err != nil {
		return fmt.Errorf("delete tags of %s: %w", arn, err)
	}
	return nil
}

func deleteAllTags(ctx context.Context, tx *sql.Tx, arn string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM tags WHERE arn = ?`, arn)
	return err
}

// putTags upserts tags inside tx; an existing key keeps its position.
func putTags(ctx context.Context, tx *sql.Tx, arn string, tags []sagebox.Tag) error {
	for _, t := range tags {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO tags (arn, key, value) VALUES (?, ?, ?) ON CONFLICT (arn, key) DO UPDATE SET value = excluded.value`,
			arn, t.Key, t.Value); err != nil {
			return err
		}
	}
	return nil
}

func queryTags(ctx context.Context, q querier, arn string) ([]sagebox.Tag, error) {
	rows, err := q.QueryContext(ctx, `SELECT key, value FROM tags WHERE arn = ? ORDER BY rowid`, arn)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	tags := []sagebox.Tag{}
	for rows.Next() {
		var t sagebox.Tag
		if err := rows.Scan(&t.Key, &t.Value); err != nil {
			return nil, err
		}
		tags = append(tags, t)
	}
	return tags, rows.Err()
}
