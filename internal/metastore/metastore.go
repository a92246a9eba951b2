// Package metastore keeps sagebox's metadata in SQLite (<data-dir>/meta.db):
// training jobs and the metric time series matched in their logs, the tags
// of every taggable resource (keyed by ARN, tags.go), and models, endpoint
// configs and endpoints (hosting.go: one generic table layout for the three
// kinds, each its own name space).
//
// Each job is stored whole, as the JSON of sagebox.TrainingJob, next to the
// columns that ListTrainingJobs filters and sorts on (name, status,
// creation_time, last_modified). The schema lives in migrations/*.sql,
// embedded and applied in order at Open (see internal/sqldb).
//
// Durability: WAL journal with synchronous=FULL. A write has reached the WAL
// file when its method returns, so it survives SIGKILL of the server, and the
// fsync at each commit makes it survive a power loss too. Metadata writes are
// a handful per job, so the fsync costs nothing that matters.
//
// Concurrency: every write goes through one connection in a transaction, so
// UpdateTrainingJob's read-modify-write can never lose a concurrent update;
// reads use a separate pool and see the last committed state.
package metastore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/sagebox/sagebox/internal/sqldb"
)

// ErrNotFound is returned (unwrapped) when the named training job does not
// exist.
var ErrNotFound = errors.New("metastore: not found")

// ErrInvalidToken is returned (unwrapped) by ListTrainingJobs when NextToken
// was not produced by an earlier call with the same sort.
var ErrInvalidToken = errors.New("metastore: invalid pagination token")

//go:embed migrations/*.sql
var migrationFiles embed.FS

// DB is sagebox's metadata database. It is safe for concurrent use.
type DB struct {
	sql *sqldb.DB
}

// Open opens the database at path (normally <data-dir>/meta.db), creating it
// and applying pending migrations.
func Open(ctx context.Context, path string) (*DB, error) {
	migrations, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("open metastore: %w", err)
	}
	db, err := sqldb.Open(ctx, path, sqldb.Options{Synchronous: sqldb.SyncFull, Migrations: migrations})
	if err != nil {
		return nil, fmt.Errorf("open metastore: %w", err)
	}
	return &DB{sql: db}, nil
}

// Close closes the database.
func (db *DB) Close() error {
	if err := db.sql.Close(); err != nil {
		return fmt.Errorf("close metastore: %w", err)
	}
	return nil
}
