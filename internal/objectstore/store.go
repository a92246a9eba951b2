package objectstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite" for the index
)

const (
	indexFile   = "index.db"
	dataDir     = "data"
	tmpDir      = "tmp"
	lockFile    = "LOCK"
	cleanMarker = "clean-shutdown"

	schemaVersion = 1
)

// Options tune a Store. The zero value is what production uses.
type Options struct {
	// NoSync skips every fsync (object files, directories, the index). Only
	// for tests and scratch stores: a crash may then lose recent writes or
	// leave an index row whose file is truncated.
	NoSync bool
	// Logger receives background notices (garbage collection, failed
	// cleanups). Nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock for LastModified and upload times. Nil means time.Now.
	Now func() time.Time
}

// Store is an open object store. It is safe for concurrent use by multiple
// goroutines; only one process may open a directory at a time.
type Store struct {
	dir  string
	db   *sql.DB
	opts Options
	log  *slog.Logger
	lock *os.File

	// wmu serializes write transactions on the index, so they never
	// contend for SQLite's write lock. Data is written outside it.
	wmu sync.Mutex
	// uploads serializes the state changes of one multipart upload
	// (commit of a part, complete, abort), striped by upload id.
	uploads [64]sync.Mutex

	bufs   sync.Pool
	closed atomic.Bool
}

// Open opens (creating if needed) the store rooted at dir, normally
// <data-dir>/s3.
func Open(dir string) (*Store, error) { return OpenWithOptions(dir, Options{}) }

// OpenWithOptions is Open with tuning options.
func OpenWithOptions(dir string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open object store: %w", err)
	}
	s := &Store{dir: abs, opts: opts, log: opts.Logger}
	s.bufs.New = func() any { b := make([]byte, copyBufferSize); return &b }

	for _, d := range []string{abs, s.path(dataDir), s.path(tmpDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("open object store: %w", err)
		}
	}
	if s.lock, err = lockDir(s.path(lockFile)); err != nil {
		return nil, fmt.Errorf("open object store %s: %w", abs, err)
	}
	ok := false
	defer func() {
		if !ok {
			s.closeDB()
			unlockDir(s.lock)
		}
	}()

	// The marker says the previous run closed cleanly. Remove it now, so
	// that a crash during this run makes the next Open collect garbage.
	clean := true
	if err := os.Remove(s.path(cleanMarker)); errors.Is(err, fs.ErrNotExist) {
		clean = false
	} else if err != nil {
		return nil, fmt.Errorf("open object store: %w", err)
	} else if err := s.syncDir(abs); err != nil {
		return nil, fmt.Errorf("open object store: %w", err)
	}
	if err := s.clearTmp(); err != nil {
		return nil, fmt.Errorf("open object store: %w", err)
	}
	if err := s.openDB(); err != nil {
		return nil, fmt.Errorf("open object store: %w", err)
	}
	if !clean {
		if err := s.collectGarbage(context.Background()); err != nil {
			return nil, fmt.Errorf("open object store: %w", err)
		}
	}
	ok = true
	return s, nil
}

// Dir is the directory the store was opened on, made absolute.
func (s *Store) Dir() string { return s.dir }

// Close closes the index and releases the directory. Operations still in
// flight may fail; the caller stops using the store first.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	err := s.closeDB()
	if err == nil {
		// Only a fully closed index counts as a clean shutdown.
		if f, ferr := os.Create(s.path(cleanMarker)); ferr == nil {
			f.Close()
			err = s.syncDir(s.dir)
		} else {
			err = ferr
		}
	}
	unlockDir(s.lock)
	if err != nil {
		return fmt.Errorf("close object store: %w", err)
	}
	return nil
}

func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (s *Store) path(elem ...string) string {
	return filepath.Join(append([]string{s.dir}, elem...)...)
}

func (s *Store) closeDB() error {
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	return err
}

func (s *Store) openDB() error {
	syncMode := "FULL"
	if s.opts.NoSync {
		syncMode = "OFF"
	}
	dsn := s.path(indexFile) +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(" + syncMode + ")"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fmt.Errorf("open index: %w", err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	s.db = db
	if err := s.migrate(context.Background()); err != nil {
		return fmt.Errorf("open index: %w", err)
	}
	return nil
}

const schema = `
CREATE TABLE IF NOT EXISTS buckets (
	name    TEXT PRIMARY KEY,
	created INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS objects (
	bucket        TEXT    NOT NULL,
	key           BLOB    NOT NULL,
	size          INTEGER NOT NULL,
	etag          TEXT    NOT NULL,
	modified      INTEGER NOT NULL,
	file          TEXT    NOT NULL,
	content_type  TEXT    NOT NULL,
	headers       TEXT    NOT NULL,
	meta          TEXT    NOT NULL,
	checksums     TEXT    NOT NULL,
	checksum_type TEXT    NOT NULL,
	parts         TEXT    NOT NULL,
	PRIMARY KEY (bucket, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS objects_file ON objects(file);

CREATE TABLE IF NOT EXISTS uploads (
	id                 TEXT    PRIMARY KEY,
	bucket             TEXT    NOT NULL,
	key                BLOB    NOT NULL,
	created            INTEGER NOT NULL,
	content_type       TEXT    NOT NULL,
	headers            TEXT    NOT NULL,
	meta               TEXT    NOT NULL,
	checksum_algorithm TEXT    NOT NULL,
	checksum_type      TEXT    NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS uploads_bucket_key ON uploads(bucket, key, created);

CREATE TABLE IF NOT EXISTS parts (
	upload_id TEXT    NOT NULL,
	number    INTEGER NOT NULL,
	size      INTEGER NOT NULL,
	etag      TEXT    NOT NULL,
	checksums TEXT    NOT NULL,
	modified  INTEGER NOT NULL,
	file      TEXT    NOT NULL,
	PRIMARY KEY (upload_id, number)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS parts_file ON parts(file);
`

func (s *Store) migrate(ctx context.Context) error {
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > schemaVersion {
		return fmt.Errorf("index schema version %d is newer than this sagebox (%d)", v, schemaVersion)
	}
	if _, err := s.db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	return nil
}

// write runs fn in a write transaction, serialized with every other write.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// read runs fn in a read-only transaction: a consistent snapshot.
func (s *Store) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	return fn(tx)
}

func (s *Store) uploadLock(id string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	return &s.uploads[h.Sum32()%uint32(len(s.uploads))]
}

// collectGarbage removes files in data/ that no index row references: what
// a crash between writing a file and committing (or between committing an
// overwrite and unlinking the old file) leaves behind. It runs only in Open,
// before the store is shared, and only after an unclean shutdown.
func (s *Store) collectGarbage(ctx context.Context) error {
	removed := 0
	for i := 0; i < 256; i++ {
		shard := fmt.Sprintf("%02x", i)
		entries, err := os.ReadDir(s.path(dataDir, shard))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("collect garbage: %w", err)
		}
		for _, e := range entries {
			rel := shard + "/" + e.Name()
			var one int
			err := s.db.QueryRowContext(ctx,
				`SELECT 1 FROM objects WHERE file = ? UNION ALL SELECT 1 FROM parts WHERE file = ? LIMIT 1`,
				rel, rel).Scan(&one)
			if err == nil {
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("collect garbage: %w", err)
			}
			if err := os.Remove(s.path(dataDir, shard, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("collect garbage: %w", err)
			}
			removed++
		}
	}
	if removed > 0 {
		s.log.Info("object store: removed unreferenced files after an unclean shutdown", "dir", s.dir, "files", removed)
	}
	return nil
}
