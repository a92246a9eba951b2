// Package archive reads and writes the tar archives sagebox moves around:
// sourcedir.tar.gz, model.tar.gz and output.tar.gz.
//
// Extraction is defensive: archives come from users and from S3, so an
// entry whose path is absolute, climbs out with "..", or goes through a
// symlink that points outside the destination is refused, and nothing is
// ever written outside the destination directory.
package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/klauspost/pgzip"
)

// ErrUnsafePath is wrapped by Extract's error when an entry would land
// outside the destination directory.
var ErrUnsafePath = errors.New("unsafe path in archive")

// Limits bound what one extraction may create, so that a small archive
// cannot fill the disk (a tar bomb). Zero fields mean no limit.
type Limits struct {
	// MaxBytes bounds the total size of the files, counted as their
	// apparent size (a sparse file counts in full, though its holes are
	// kept as holes on disk).
	MaxBytes int64
	// MaxEntries bounds the number of entries of any kind.
	MaxEntries int
}

// LimitError is Extract's error when an archive goes past a limit. It
// wraps ErrLimit.
type LimitError struct {
	What  string // "size" or "entries"
	Max   int64  // the limit: bytes or entries
	Entry string // the entry that went past it
}

// ErrLimit is wrapped by every LimitError.
var ErrLimit = errors.New("archive exceeds its extraction limit")

func (e *LimitError) Error() string {
	if e.What == "entries" {
		return fmt.Sprintf("archive has more than %d entries (stopped at %q)", e.Max, e.Entry)
	}
	return fmt.Sprintf("archive unpacks to more than %s (stopped at %q)", humanBytes(e.Max), e.Entry)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, suffix := float64(n), "KMGTPE"
	i := -1
	for v >= unit && i < len(suffix)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", v, suffix[i], n)
}

// Extract unpacks a tar archive, gzip-compressed or not (detected from the
// first bytes), into dest, creating it if needed, with no limits. Regular
// files (GNU sparse ones too, with their holes), directories, and symlinks
// and hard links that stay inside dest are supported; device nodes and
// FIFOs are skipped. Ownership is not restored.
func Extract(ctx context.Context, r io.Reader, dest string) error {
	return ExtractLimited(ctx, r, dest, Limits{})
}

// ExtractLimited is Extract that stops with a *LimitError once the archive
// goes past lim. What was extracted up to then stays in dest.
func ExtractLimited(ctx context.Context, r io.Reader, dest string, lim Limits) error {
	br := bufio.NewReaderSize(r, 1<<16)
	var src io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		// pgzip decompresses ahead of the tar reader in its own goroutine.
		zr, err := pgzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("read gzip header: %w", err)
		}
		defer zr.Close()
		src = zr
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dest, err)
	}
	root, err := filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", dest, err)
	}
	x := &extractor{root: root, lim: lim}
	err = x.run(ctx, tar.NewReader(src))
	// Links are checked even after a failed entry: a half-extracted tree
	// must not keep a link out either.
	if lerr := x.checkSymlinks(); err == nil {
		err = lerr
	}
	return err
}

func (x *extractor) run(ctx context.Context, tr *tar.Reader) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		if err := x.extractEntry(hdr, tr); err != nil {
			return err
		}
	}
}

// extractor carries what one Extract call has created so far.
type extractor struct {
	root    string
	lim     Limits
	entries int
	bytes   int64
	zero    []byte // a chunk of zeros, to find holes
	// symlinks are the links created, checked again once every entry is in
	// place: a link that looks inside root by its text can still resolve
	// outside through an earlier link ("a" -> ".", then "b" -> "a/..").
	symlinks []string
}

// checkSymlinks resolves every symlink the archive created and refuses (and
// removes) any that resolves outside root. Dangling links are allowed; their
// text was already checked not to climb out.
func (x *extractor) checkSymlinks() error {
	if len(x.symlinks) == 0 {
		return nil
	}
	realRoot, err := filepath.EvalSymlinks(x.root)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", x.root, err)
	}
	var bad error
	for _, p := range x.symlinks {
		resolved, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue // dangling or a loop: points nowhere, so nowhere outside
		}
		if !within(realRoot, resolved) {
			_ = os.Remove(p)
			if bad == nil {
				rel, _ := filepath.Rel(x.root, p)
				bad = fmt.Errorf("%w: symlink %q resolves outside the archive", ErrUnsafePath, filepath.ToSlash(rel))
			}
		}
	}
	return bad
}

// within reports whether p is root or lies under it (both clean, absolute).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// ExtractFile is Extract on the archive at path.
func ExtractFile(ctx context.Context, archivePath, dest string) error {
	return ExtractFileLimited(ctx, archivePath, dest, Limits{})
}

// ExtractFileLimited is ExtractLimited on the archive at path.
func ExtractFileLimited(ctx context.Context, archivePath, dest string, lim Limits) error {
	f, err := os.Open(archivePath)
	if err != nil {
		return fmt.Errorf("open archive: %w", err)
	}
	defer f.Close()
	return ExtractLimited(ctx, f, dest, lim)
}

// target maps an entry name to a path inside root, or says why it cannot:
// "is absolute" or "climbs out with ..".
func target(root, name string) (string, string) {
	clean := path.Clean("/" + strings.TrimPrefix(name, "./"))
	if filepath.IsAbs(name) || strings.HasPrefix(name, "/") {
		return "", "is absolute"
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", "climbs out with .."
		}
	}
	if clean == "/" {
		return root, ""
	}
	return filepath.Join(root, filepath.FromSlash(clean[1:])), ""
}

// symlinkParent returns the first of p's parent directories under root
// that is a symlink, as a name in the archive, or "": writing through one
// could land outside root.
func symlinkParent(root, p string) string {
	rel, err := filepath.Rel(root, filepath.Dir(p))
	if err != nil || rel == "." {
		return ""
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		st, err := os.Lstat(cur)
		if err != nil {
			return "" // not there yet: MkdirAll will create a real directory
		}
		if st.Mode()&os.ModeSymlink != 0 {
			name, _ := filepath.Rel(root, cur)
			return filepath.ToSlash(name)
		}
	}
	return ""
}

func (x *extractor) extractEntry(hdr *tar.Header, r io.Reader) error {
	root := x.root
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader, tar.TypeXHeader:
		return nil
	}
	x.entries++
	if x.lim.MaxEntries > 0 && x.entries > x.lim.MaxEntries {
		return &LimitError{What: "entries", Max: int64(x.lim.MaxEntries), Entry: hdr.Name}
	}
	if hdr.Typeflag == tar.TypeDir && path.Clean("/"+hdr.Name) == "/" {
		// The destination itself: the SageMaker SDK's repack writes its
		// model.tar.gz with a first entry "/" (tarfile's arcname of the
		// root), which names nothing outside.
		return nil
	}
	p, why := target(root, hdr.Name)
	if why != "" {
		return fmt.Errorf("%w: %q %s", ErrUnsafePath, hdr.Name, why)
	}
	if p == root {
		if hdr.Typeflag == tar.TypeDir || hdr.Typeflag == tar.TypeXGlobalHeader || hdr.Typeflag == tar.TypeXHeader {
			return nil
		}
		return fmt.Errorf("%w: %q would replace the destination itself", ErrUnsafePath, hdr.Name)
	}
	if link := symlinkParent(root, p); link != "" {
		return fmt.Errorf("%w: %q goes through the symlink %q", ErrUnsafePath, hdr.Name, link)
	}
	mode := os.FileMode(hdr.Mode).Perm()
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("create dir %s: %w", hdr.Name, err)
		}
		return nil
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		// archive/tar expands a GNU sparse member's holes into zeros as it
		// is read; writeFile turns runs of zeros back into holes.
		if x.lim.MaxBytes > 0 && x.bytes+hdr.Size > x.lim.MaxBytes {
			return &LimitError{What: "size", Max: x.lim.MaxBytes, Entry: hdr.Name}
		}
		x.bytes += hdr.Size
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("create dir for %s: %w", hdr.Name, err)
		}
		// Replace rather than write through whatever is there (it could be a
		// symlink planted by an earlier entry).
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("replace %s: %w", hdr.Name, err)
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode|0o600)
		if err != nil {
			return fmt.Errorf("create %s: %w", hdr.Name, err)
		}
		if err := x.writeFile(f, r, hdr.Size); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", hdr.Name, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("write %s: %w", hdr.Name, err)
		}
		return nil
	case tar.TypeSymlink:
		link := hdr.Linkname
		if filepath.IsAbs(link) {
			return fmt.Errorf("%w: symlink %q points to the absolute path %q", ErrUnsafePath, hdr.Name, link)
		}
		if !within(root, filepath.Join(filepath.Dir(p), link)) {
			return fmt.Errorf("%w: symlink %q points outside the archive (%q)", ErrUnsafePath, hdr.Name, link)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("create dir for %s: %w", hdr.Name, err)
		}
		_ = os.Remove(p)
		if err := os.Symlink(link, p); err != nil {
			return fmt.Errorf("create symlink %s: %w", hdr.Name, err)
		}
		x.symlinks = append(x.symlinks, p)
		return nil
	case tar.TypeLink:
		old, why := target(root, hdr.Linkname)
		if why != "" {
			return fmt.Errorf("%w: hard link %q targets %q, which %s", ErrUnsafePath, hdr.Name, hdr.Linkname, why)
		}
		if link := symlinkParent(root, old); link != "" {
			return fmt.Errorf("%w: hard link %q targets %q, which goes through the symlink %q", ErrUnsafePath, hdr.Name, hdr.Linkname, link)
		}
		st, err := os.Lstat(old)
		if err != nil {
			return fmt.Errorf("hard link %s: target %q: %w", hdr.Name, hdr.Linkname, err)
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%w: hard link %q targets a symlink", ErrUnsafePath, hdr.Name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("create dir for %s: %w", hdr.Name, err)
		}
		_ = os.Remove(p)
		if err := os.Link(old, p); err != nil {
			return fmt.Errorf("create hard link %s: %w", hdr.Name, err)
		}
		return nil
	default:
		// Devices, FIFOs and other specials have no place in a model or code
		// archive; skip them rather than fail a job over a stray entry.
		return nil
	}
}

// holeChunk is the unit in which runs of zeros become holes.
const holeChunk = 64 << 10

// writeFile copies an entry's size bytes to f, leaving every whole chunk
// of zeros as a hole (so a sparse member stays sparse, and a file of zeros
// costs no disk).
func (x *extractor) writeFile(f *os.File, r io.Reader, size int64) error {
	if x.zero == nil {
		x.zero = make([]byte, holeChunk)
	}
	buf := make([]byte, holeChunk)
	var off int64
	hole := false
	for off < size {
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), size-off)])
		if n > 0 {
			if n == holeChunk && bytes.Equal(buf, x.zero) {
				hole = true
			} else {
				if _, werr := f.WriteAt(buf[:n], off); werr != nil {
					return werr
				}
				hole = false
			}
			off += int64(n)
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return fmt.Errorf("archive ends inside the file: %w", io.ErrUnexpectedEOF)
			}
			return err
		}
	}
	if hole {
		return f.Truncate(size)
	}
	return nil
}
