// Package sqldb opens the SQLite databases sagebox keeps (meta.db and
// logs/logs.db) the same way: modernc.org/sqlite (pure Go, no cgo), WAL
// journal, a busy timeout, foreign keys on, embedded migrations recorded in a
// schema_migrations table, and two connection pools.
//
// The write pool has exactly one connection, so writers inside this process
// queue in database/sql instead of spinning on SQLITE_BUSY, and a
// read-modify-write transaction cannot be interleaved with another writer.
// The read pool has several connections; under WAL, readers see the last
// committed state and never block the writer.
//
// Durability: in WAL mode a committed transaction has been written to the
// -wal file with write(2) before Commit returns, so it survives SIGKILL of
// the process at any synchronous level above OFF. synchronous=FULL
// additionally fsyncs the WAL at every commit, which makes commits survive a
// power loss or kernel crash too, at the cost of one fsync per commit.
package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Synchronous levels for Options.Synchronous.
const (
	// SyncNormal survives a crash of the process, not of the machine.
	SyncNormal = "NORMAL"
	// SyncFull survives a crash of the machine as well (one fsync per commit).
	SyncFull = "FULL"
)

// Options says how to open a database.
type Options struct {
	// Synchronous is SyncNormal or SyncFull; empty means SyncFull.
	Synchronous string
	// Migrations holds files named NNNN_description.sql at its root. Each
	// is applied once, in version order, inside its own transaction.
	Migrations fs.FS
	// Readers is the size of the read pool; 0 means 4.
	Readers int
	// BusyTimeout bounds how long a statement waits for a lock held by
	// another process; 0 means 10s.
	BusyTimeout time.Duration
}

// DB is an open SQLite database: a single-connection write pool and a read
// pool on the same file.
type DB struct {
	// W is the write pool (one connection). Use it for every statement that
	// writes, and for reads that must see the transaction's own writes.
	W *sql.DB
	// R is the read pool. Prefer Read, which admits queries fairly.
	R *sql.DB

	admit *gate // one unit per read connection
	bulk  *gate // Readers-1 units: bulk reads leave a connection for point reads
}

// ReadKind says how a read uses the pool.
type ReadKind int

const (
	// PointRead is a short lookup (one row by key).
	PointRead ReadKind = iota
	// BulkRead is a listing or a scan, which holds its connection longer.
	BulkRead
)

// Read runs fn on the read pool once admitted, in arrival order. Left to
// itself, database/sql hands a freed connection to a random waiter, so
// under saturation a few queries waited many times longer than the rest
// (ListTrainingJobs with 500 callers: p50 1.1 s, p99 6.1 s). Bulk reads may
// hold at most Readers-1 connections between them, so a point read (a
// describe) never queues behind more than that many listings. fn must be
// done with the pool when it returns (rows closed).
func (db *DB) Read(ctx context.Context, kind ReadKind, fn func(*sql.DB) error) error {
	if kind == BulkRead && db.bulk != nil {
		if err := db.bulk.acquire(ctx); err != nil {
			return err
		}
		defer db.bulk.release()
	}
	if err := db.admit.acquire(ctx); err != nil {
		return err
	}
	defer db.admit.release()
	return fn(db.R)
}

// Waiting is how many reads wait for admission (bulk reads waiting for
// their share count too).
func (db *DB) Waiting() int {
	n := db.admit.waiting()
	if db.bulk != nil {
		n += db.bulk.waiting()
	}
	return n
}

// Open opens (creating if needed) the database file at file, applies pending
// migrations and returns it. The directory holding file is created.
func Open(ctx context.Context, file string, opts Options) (*DB, error) {
	if strings.ContainsAny(file, "?#") {
		return nil, fmt.Errorf("open %s: database path must not contain '?' or '#'", file)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, fmt.Errorf("create database directory: %w", err)
	}
	sync := opts.Synchronous
	if sync == "" {
		sync = SyncFull
	}
	busy := opts.BusyTimeout
	if busy == 0 {
		busy = 10 * time.Second
	}
	readers := opts.Readers
	if readers <= 0 {
		readers = 4
	}
	dsn := file + "?_busy_timeout=" + strconv.FormatInt(busy.Milliseconds(), 10) +
		"&_journal_mode=WAL&_synchronous=" + sync + "&_foreign_keys=1&_txlock=immediate"

	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", file, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", file, err)
	}
	if opts.Migrations != nil {
		if err := migrate(ctx, w, opts.Migrations); err != nil {
			w.Close()
			return nil, fmt.Errorf("migrate %s: %w", file, err)
		}
	}

	r, err := sql.Open("sqlite", dsn+"&_query_only=1")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s for reading: %w", file, err)
	}
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	db := &DB{W: w, R: r, admit: newGate(readers)}
	if readers > 1 {
		db.bulk = newGate(readers - 1)
	}
	return db, nil
}

// Close closes both pools. With the last connection closed SQLite
// checkpoints the WAL into the main file.
func (db *DB) Close() error {
	return errors.Join(db.R.Close(), db.W.Close())
}

// WriteTx runs fn in a write transaction and commits it when fn returns nil.
// fn's error (or a commit error) rolls the transaction back and is returned.
// fn must not use db.W itself: the write pool has one connection and fn's
// transaction holds it.
func (db *DB) WriteTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.W.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

type migration struct {
	version int
	name    string
}

// migrate applies the migrations in fsys that schema_migrations does not
// list yet.
func migrate(ctx context.Context, w *sql.DB, fsys fs.FS) error {
	if _, err := w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return fmt.Errorf("list migrations: %w", err)
	}
	var todo []migration
	for _, name := range names {
		num, _, ok := strings.Cut(path.Base(name), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return fmt.Errorf("migration %s: name must be NNNN_description.sql", name)
		}
		todo = append(todo, migration{version: v, name: name})
	}
	sort.Slice(todo, func(i, j int) bool { return todo[i].version < todo[j].version })

	var current int
	if err := w.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	for i, m := range todo {
		if i > 0 && todo[i-1].version == m.version {
			return fmt.Errorf("migrations %s and %s share version %d", todo[i-1].name, m.name, m.version)
		}
		if m.version <= current {
			continue
		}
		body, err := fs.ReadFile(fsys, m.name)
		if err != nil {
			return fmt.Errorf("read migration %s: %w", m.name, err)
		}
		tx, err := w.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin migration %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, time.Now().UnixMilli()); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("record migration %s: %w", m.name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit migration %s: %w", m.name, err)
		}
	}
	return nil
}
