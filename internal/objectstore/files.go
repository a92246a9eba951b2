package objectstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// dataFileMode is the permission of object and part files: read-only, so
// that a hard link handed out by FilePath or Link cannot be opened for
// writing by mistake (which would change the stored object in place).
const dataFileMode = 0o444

// copyBufferSize is the buffer for streaming request bodies to disk: large
// enough for throughput, small and pooled so memory stays flat.
const copyBufferSize = 1 << 20

// newID returns a random 128-bit hex id for files and uploads.
func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand panics internally instead)
	return hex.EncodeToString(b[:])
}

// fileRel is the path of a data file relative to data/: a two-hex-digit
// shard directory and the id. It never depends on bucket or key.
func fileRel(id string) string { return id[:2] + "/" + id }

// dataPath turns a relative data file name from the index into a path.
func (s *Store) dataPath(rel string) string {
	return filepath.Join(s.dir, dataDir, filepath.FromSlash(rel))
}

// placeFile moves or links src to the data file rel, creating its shard
// directory on first use (and making that directory entry durable).
func (s *Store) placeFile(src, rel string, move func(src, dst string) error) error {
	dst := s.dataPath(rel)
	err := move(src, dst)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(src); serr != nil {
			return err // the source is what is missing
		}
		if err := os.Mkdir(filepath.Dir(dst), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create shard: %w", err)
		}
		if err := s.syncDir(s.path(dataDir)); err != nil {
			return err
		}
		err = move(src, dst)
	}
	if err != nil {
		return err
	}
	return s.syncDir(filepath.Dir(dst))
}

// clearTmp removes whatever an earlier run left in tmp/. Only called from
// Open, while the directory lock is held and nothing else writes.
func (s *Store) clearTmp() error {
	entries, err := os.ReadDir(s.path(tmpDir))
	if err != nil {
		return fmt.Errorf("clear tmp: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(s.path(tmpDir, e.Name())); err != nil {
			return fmt.Errorf("clear tmp: %w", err)
		}
	}
	return nil
}

func (s *Store) syncDir(dir string) error {
	if s.opts.NoSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// ctxReader fails reads once ctx is done, so an abandoned upload stops.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// receive streams r into a new temp file while feeding h. On success the
// file is open and positioned at its end; on failure it is gone.
func (s *Store) receive(ctx context.Context, r io.Reader, h io.Writer) (*os.File, int64, error) {
	f, err := os.CreateTemp(s.path(tmpDir), "in-*")
	if err != nil {
		return nil, 0, fmt.Errorf("create temp file: %w", err)
	}
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	var w io.Writer = f
	if h != nil {
		w = io.MultiWriter(f, h)
	}
	n, err := io.CopyBuffer(w, ctxReader{ctx, r}, *bp)
	if err != nil {
		discard(f)
		return nil, 0, fmt.Errorf("receive data: %w", err)
	}
	return f, n, nil
}

// install makes a received temp file durable and moves it into data/ under
// a fresh id. It returns the relative name for the index. The file is
// closed either way; on failure it is removed.
func (s *Store) install(f *os.File) (string, error) {
	if err := f.Chmod(dataFileMode); err != nil {
		discard(f)
		return "", fmt.Errorf("chmod data: %w", err)
	}
	if !s.opts.NoSync {
		if err := f.Sync(); err != nil {
			discard(f)
			return "", fmt.Errorf("sync data: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("close data: %w", err)
	}
	rel := fileRel(newID())
	if err := s.placeFile(f.Name(), rel, os.Rename); err != nil {
		os.Remove(f.Name())
		s.removeData(rel)
		return "", fmt.Errorf("install data: %w", err)
	}
	return rel, nil
}

// removeData unlinks data files that the index no longer references.
// Failures only leak disk space until the next garbage collection, so they
// are logged, not returned.
func (s *Store) removeData(rels ...string) {
	for _, rel := range rels {
		if rel == "" {
			continue
		}
		if err := os.Remove(s.dataPath(rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("object store: cannot remove unreferenced file", "file", rel, "err", err)
		}
	}
}

// discard closes and removes a temp file after a failure.
func discard(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}
