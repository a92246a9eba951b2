// Package logstore is sagebox's CloudWatch-Logs-like store: log groups hold
// log streams, streams hold events (epoch-millisecond timestamp, message,
// ingestion time). Training jobs write one stream per host into
// sagebox.TrainingLogGroup; endpoints will write theirs the same way. The
// controlplane package serves it as DescribeLogStreams, GetLogEvents and
// FilterLogEvents.
//
// # Storage
//
// One SQLite database, <data-dir>/logs/logs.db, rather than append-only
// files per stream. The reads CloudWatch's API needs are ordered range
// scans: events of one stream from a timestamp on, forwards or backwards
// from a token; events of many streams interleaved by timestamp; streams by
// name prefix or by last event time. An index on (stream, timestamp) and one
// on (group, timestamp) answer all of them without a per-stream index format
// of our own, and stream statistics (first/last event, bytes) are updated in
// the same transaction as the events they describe, so they are never out of
// step after a crash.
//
// Each Append is one transaction (a prepared insert per event), so tens of
// thousands of lines per job cost a few milliseconds per batch. Appends to
// different streams share SQLite's single writer; they queue on one
// connection for the length of a batch insert, which is far below the rate
// a training process produces lines at. Readers use their own connections
// and never block appends (WAL).
//
// # Durability
//
// WAL journal with synchronous=NORMAL: when Append returns, its events are in
// the WAL file (written with write(2)), so they survive SIGKILL of the server.
// A power loss may drop the last moments of logs; an fsync per batch would
// cost more than the guarantee is worth for logs.
//
// # Ordering and tokens
//
// Events are ordered by (timestamp, id), id being the order of arrival, so
// equal timestamps keep their arrival order. GetLogEvents tokens name a gap
// between two events: "f/<timestamp>/<id>" reads forwards from the gap
// before event key (timestamp, id), "b/<timestamp>/<id>" reads backwards
// from it. A forward read that finds nothing new returns the token it was
// given, unchanged, as CloudWatch does.
package logstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	"github.com/sagebox/sagebox/internal/sqldb"
)

// Errors returned (unwrapped) by Store methods.
var (
	ErrGroupNotFound  = errors.New("logstore: log group not found")
	ErrStreamNotFound = errors.New("logstore: log stream not found")
	ErrGroupExists    = errors.New("logstore: log group already exists")
	ErrStreamExists   = errors.New("logstore: log stream already exists")
	ErrInvalidToken   = errors.New("logstore: invalid token")
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Store is the log store. It is safe for concurrent use.
type Store struct {
	// Now stamps ingestion and creation times; Open sets it to time.Now.
	// Replace it (tests do) right after Open, before the store is shared.
	Now func() time.Time

	sql *sqldb.DB

	mu  sync.Mutex
	ids map[streamKey]streamIDs // streams known to exist; rows are never deleted
}

type streamKey struct{ group, stream string }

type streamIDs struct{ group, stream int64 }

// Open opens the store in dir (normally <data-dir>/logs), creating dir and
// dir/logs.db as needed.
func Open(ctx context.Context, dir string) (*Store, error) {
	migrations, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("open log store: %w", err)
	}
	db, err := sqldb.Open(ctx, filepath.Join(dir, "logs.db"), sqldb.Options{Synchronous: sqldb.SyncNormal, Migrations: migrations})
	if err != nil {
		return nil, fmt.Errorf("open log store: %w", err)
	}
	return &Store{Now: time.Now, sql: db, ids: map[streamKey]streamIDs{}}, nil
}

// Close closes the store.
func (s *Store) Close() error {
	if err := s.sql.Close(); err != nil {
		return fmt.Errorf("close log store: %w", err)
	}
	return nil
}
