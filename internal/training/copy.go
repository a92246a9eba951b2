package training

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// cloneFile makes dst a copy of src that shares no writable state with it:
// a reflink (FICLONE: instant on btrfs, XFS and other CoW file systems)
// where the file system can, otherwise a copy through copy_file_range
// (which Go's io.Copy between files uses). dst must not exist.
func cloneFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, st.Mode().Perm()|0o200)
	if err != nil {
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	if unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) != nil {
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			os.Remove(dst)
			return fmt.Errorf("copy %s to %s: %w", src, dst, err)
		}
	}
	if err := out.Close(); err != nil {
		os.Remove(dst)
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	return nil
}

// copyTree copies the contents of the directory src into dst (created if
// needed), following symlinks like shutil.copytree's default. Files are
// cloned where the file system allows.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		st, err := os.Stat(p) // follow links
		if err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		if st.IsDir() {
			if d.Type()&fs.ModeSymlink != 0 {
				// A linked directory: copy what it holds (WalkDir does not
				// descend into it by itself).
				return copyTree(p, target)
			}
			return os.MkdirAll(target, 0o755)
		}
		if !st.Mode().IsRegular() {
			return nil
		}
		_ = os.Remove(target)
		return cloneFile(p, target)
	})
}

// writeFileAtomic writes b to path through a temporary file and a rename,
// so readers (and a restarted server) never see a partial file.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeJSONAtomic is writeFileAtomic of v as JSON.
func writeJSONAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	return writeFileAtomic(path, b)
}

// readJSON reads path into v; a missing file gives an error wrapping
// fs.ErrNotExist.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
