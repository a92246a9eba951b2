package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sagebox/sagebox"
)

// Append adds events to stream in group, in one transaction, creating the
// group and the stream on first use (also when events is empty, so a stream
// can be made visible before its first line). Events need not be in
// timestamp order; readers order by timestamp, then arrival. Once Append
// returns nil the events survive a crash of the process.
func (s *Store) Append(ctx context.Context, group, stream string, events []sagebox.LogEvent) error {
	if group == "" || stream == "" {
		return errors.New("append logs: group and stream names are required")
	}
	key := streamKey{group, stream}
	s.mu.Lock()
	ids, known := s.ids[key]
	s.mu.Unlock()
	now := s.Now().UnixMilli()

	err := s.sql.WriteTx(ctx, func(tx *sql.Tx) error {
		if !known {
			var err error
			if ids, err = ensureStream(ctx, tx, group, stream, now); err != nil {
				return err
			}
		}
		return insertEvents(ctx, tx, ids, events, now)
	})
	if err != nil {
		return fmt.Errorf("append logs to %s/%s: %w", group, stream, err)
	}
	if !known {
		s.mu.Lock()
		s.ids[key] = ids
		s.mu.Unlock()
	}
	return nil
}

// CreateGroup creates an empty log group, or returns ErrGroupExists.
func (s *Store) CreateGroup(ctx context.Context, group string) error {
	err := s.sql.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`INSERT INTO log_groups (name, creation_time) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
			group, s.Now().UnixMilli())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrGroupExists
		}
		return nil
	})
	if errors.Is(err, ErrGroupExists) {
		return ErrGroupExists
	}
	if err != nil {
		return fmt.Errorf("create log group %s: %w", group, err)
	}
	return nil
}

// CreateStream creates an empty stream in an existing group, or returns
// ErrGroupNotFound or ErrStreamExists.
func (s *Store) CreateStream(ctx context.Context, group, stream string) error {
	err := s.sql.WriteTx(ctx, func(tx *sql.Tx) error {
		gid, err := groupID(ctx, tx, group)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx,
			`INSERT INTO log_streams (group_id, name, creation_time) VALUES (?, ?, ?) ON CONFLICT (group_id, name) DO NOTHING`,
			gid, stream, s.Now().UnixMilli())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrStreamExists
		}
		return nil
	})
	switch {
	case errors.Is(err, ErrGroupNotFound):
		return ErrGroupNotFound
	case errors.Is(err, ErrStreamExists):
		return ErrStreamExists
	case err != nil:
		return fmt.Errorf("create log stream %s/%s: %w", group, stream, err)
	}
	return nil
}

// ensureStream returns the ids of group and stream, creating either.
func ensureStream(ctx context.Context, tx *sql.Tx, group, stream string, now int64) (streamIDs, error) {
	var ids streamIDs
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO log_groups (name, creation_time) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, group, now); err != nil {
		return ids, err
	}
	if err := tx.QueryRowContext(ctx, `SELECT id FROM log_groups WHERE name = ?`, group).Scan(&ids.group); err != nil {
		return ids, err
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO log_streams (group_id, name, creation_time) VALUES (?, ?, ?) ON CONFLICT (group_id, name) DO NOTHING`,
		ids.group, stream, now); err != nil {
		return ids, err
	}
	err := tx.QueryRowContext(ctx, `SELECT id FROM log_streams WHERE group_id = ? AND name = ?`, ids.group, stream).Scan(&ids.stream)
	return ids, err
}

const (
	insertChunk  = 100 // 500 parameters, well under SQLite's limit
	insertPrefix = `INSERT INTO log_events (group_id, stream_id, timestamp, ingestion_time, message) VALUES (?, ?, ?, ?, ?)`
)

// insertEvents inserts events and folds them into the stream's and group's
// statistics.
func insertEvents(ctx context.Context, tx *sql.Tx, ids streamIDs, events []sagebox.LogEvent, now int64) error {
	if len(events) == 0 {
		return nil
	}
	// Multi-row inserts of up to insertChunk events: far fewer statement
	// executions than one insert per event.
	first, last := events[0].Timestamp, events[0].Timestamp
	var size int64
	for chunk := range slices.Chunk(events, insertChunk) {
		query := insertPrefix + strings.Repeat(", (?, ?, ?, ?, ?)", len(chunk)-1)
		args := make([]any, 0, 5*len(chunk))
		for _, ev := range chunk {
			args = append(args, ids.group, ids.stream, ev.Timestamp, now, ev.Message)
			first, last = min(first, ev.Timestamp), max(last, ev.Timestamp)
			size += int64(len(ev.Message))
		}
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE log_streams SET
			first_event = MIN(COALESCE(first_event, ?1), ?1),
			last_event = MAX(COALESCE(last_event, ?2), ?2),
			last_ingestion = ?3,
			stored_bytes = stored_bytes + ?4
		WHERE id = ?5`, first, last, now, size, ids.stream); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE log_groups SET stored_bytes = stored_bytes + ? WHERE id = ?`, size, ids.group)
	return err
}

func groupID(ctx context.Context, q querier, group string) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, `SELECT id FROM log_groups WHERE name = ?`, group).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrGroupNotFound
	}
	return id, err
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}
