package staging

import (
	"context"
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

// download writes bucket/key to dst, which must not exist. A failed
// download leaves no file behind.
func (s *Stager) download(ctx context.Context, bucket, key, dst string) error {
	body, _, err := s.Objects.Get(ctx, bucket, key)
	if err != nil {
		return err
	}
	defer body.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("download to %s: %w", dst, err)
	}
	if _, err := io.Copy(out, body); err != nil {
		out.Close()
		os.Remove(dst)
		return fmt.Errorf("download s3://%s/%s: %w", bucket, key, err)
	}
	if err := out.Close(); err != nil {
		os.Remove(dst)
		return fmt.Errorf("download to %s: %w", dst, err)
	}
	return nil
}

// copyOut makes dst (which must not exist) a private copy of bucket/key:
// a clone of the stored file where the store is on this machine, else a
// download. Never a hard link.
func (s *Stager) copyOut(ctx context.Context, bucket, key, dst string) error {
	if lf, ok := s.Objects.(LocalFiles); ok {
		src, err := lf.FilePath(ctx, bucket, key)
		if err != nil {
			return err
		}
		return cloneFile(src, dst)
	}
	return s.download(ctx, bucket, key, dst)
}

// copyTree copies the contents of the directory src into dst (created if
// needed), following symlinks like shutil.copytree's default. Files are
// cloned where the file system allows. allow, if not nil, judges every
// path a symlink leads to (so a link inside an allowed directory cannot
// copy what lies outside it); a directory reached twice through links (a
// cycle) is copied once.
func copyTree(src, dst string, allow func(real string) error) error {
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return copyTreeOnce(real, dst, allow, map[string]bool{})
}

func copyTreeOnce(src, dst string, allow func(string) error, seen map[string]bool) error {
	if seen[src] {
		return nil
	}
	seen[src] = true
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.Type()&fs.ModeSymlink != 0 {
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // dangling: nothing to copy
			}
			if allow != nil {
				if err := allow(real); err != nil {
					return err
				}
			}
			st, err := os.Stat(real)
			if err != nil {
				return fmt.Errorf("copy %s: %w", p, err)
			}
			if st.IsDir() {
				// A linked directory: copy what it holds (WalkDir does not
				// descend into it by itself).
				return copyTreeOnce(real, target, allow, seen)
			}
			if !st.Mode().IsRegular() {
				return nil
			}
			_ = os.Remove(target)
			return cloneFile(real, target)
		}
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		_ = os.Remove(target)
		return cloneFile(p, target)
	})
}
