package staging

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sagebox/sagebox/internal/archive"
	"github.com/sagebox/sagebox/internal/objectstore"
)

// StageSourceDir puts the user's code (the sagemaker_submit_directory
// hyperparameter, src) into the tree's code/, as the toolkit's
// files.download_and_extract does:
//   - s3://bucket/key: the object (a tar.gz), extracted;
//   - file:///path or /path: a directory (copied), a tarball (extracted) or a
//     single file (copied); a path under /opt/ml maps into the tree;
//   - "": the entry point must already be in the code directory.
//
// Extraction refuses entries that are absolute, climb out with "..", or
// go through or create symlinks that resolve outside code/. Then the entry
// point must exist.
func (s *Stager) StageSourceDir(ctx context.Context, src, entry string, t Tree) error {
	code := t.CodeDir()
	switch {
	case src == "":
	case strings.HasPrefix(src, "s3://"):
		bucket, key, err := objectstore.ParseURI(src)
		if err != nil {
			return clientErrorf("sagemaker_submit_directory: %w", err)
		}
		obj, _, err := s.Objects.Get(ctx, bucket, key)
		if err != nil {
			if errors.Is(err, ErrNoSuchKey) || errors.Is(err, ErrNoSuchBucket) {
				return clientErrorf("sagemaker_submit_directory %s does not exist: %w", src, err)
			}
			return fmt.Errorf("read sourcedir %s: %w", src, err)
		}
		defer obj.Close()
		if err := archive.ExtractLimited(ctx, obj, code, s.ArchiveLimits); err != nil {
			return s.sourceDirError(src, err)
		}
	default:
		p := strings.TrimPrefix(src, "file://")
		if !filepath.IsAbs(p) {
			return clientErrorf("sagemaker_submit_directory %q must be an s3:// URI, a file:// URI or an absolute path", src)
		}
		p = t.MapOptML(p)
		if err := s.LocalPaths.check("sagemaker_submit_directory", p); err != nil && !t.Contains(p) {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return clientErrorf("sagemaker_submit_directory %s: %w", src, err)
		}
		switch {
		case st.IsDir():
			allow := func(real string) error {
				return s.LocalPaths.check("sagemaker_submit_directory "+src+": a symlink leads to", real)
			}
			if err := copyTree(p, code, allow); err != nil {
				var ce *ClientError
				if errors.As(err, &ce) {
					return err
				}
				return fmt.Errorf("copy sourcedir %s: %w", src, err)
			}
		case isTarball(p):
			if err := archive.ExtractFileLimited(ctx, p, code, s.ArchiveLimits); err != nil {
				return s.sourceDirError(src, err)
			}
		default:
			if err := cloneFile(p, filepath.Join(code, filepath.Base(p))); err != nil {
				return fmt.Errorf("copy sourcedir %s: %w", src, err)
			}
		}
	}
	return checkEntryPoint(src, entry, code)
}

func (s *Stager) sourceDirError(src string, err error) error {
	if errors.Is(err, archive.ErrLimit) {
		from := ""
		if s.LimitsFrom != "" {
			from = " (" + s.LimitsFrom + ")"
		}
		return clientErrorf("sourcedir %s was refused: %w; the limit%s is what the job's volume can hold", src, err, from)
	}
	if errors.Is(err, archive.ErrUnsafePath) {
		return clientErrorf("sourcedir %s was refused: %w", src, err)
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return clientErrorf("sourcedir %s could not be extracted (it must be a tar or tar.gz archive): %w", src, err)
}

func isTarball(p string) bool {
	for _, ext := range []string{".tar.gz", ".tgz", ".tar"} {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 2)
	n, _ := f.Read(head)
	return n == 2 && head[0] == 0x1f && head[1] == 0x8b
}

// checkEntryPoint fails clearly when the entry point is not in code/ (or
// would be outside it).
func checkEntryPoint(submitDir, entry, code string) error {
	clean := filepath.Clean(filepath.FromSlash(entry))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return clientErrorf("entry point %s must be a path inside the source directory", entry)
	}
	st, err := os.Stat(filepath.Join(code, clean))
	if err == nil && !st.IsDir() {
		return nil
	}
	where := "sourcedir"
	if submitDir == "" {
		where = "the code directory (no sagemaker_submit_directory hyperparameter was given)"
	}
	return clientErrorf("entry point %s not found in %s (files: %s)", entry, where, listFiles(code, 20))
}

// listFiles names up to max files under dir, relative and sorted.
func listFiles(dir string, max int) string {
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	sort.Strings(files)
	if len(files) == 0 {
		return "none"
	}
	more := ""
	if len(files) > max {
		more = fmt.Sprintf(" and %d more", len(files)-max)
		files = files[:max]
	}
	return strings.Join(files, ", ") + more
}
