package staging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sagebox/sagebox/internal/archive"
	"github.com/sagebox/sagebox/internal/objectstore"
)

// Artifacts, as SageMaker uploads them (contract 6.1), after success,
// failure and stop alike:
//
//	<S3OutputPath>/<job>/output/model.tar.gz   model/ of every host, merged
//	                                          (a later host's file wins)
//	<S3OutputPath>/<job>/output/output.tar.gz  output/data/ of every host
//
// With OutputDataConfig.CompressionType NONE the model files are uploaded
// one object each under <job>/output/model/ and ModelArtifacts names that
// prefix. Archives are packed with parallel gzip and streamed into the
// object store (which makes them visible atomically); nothing is staged in
// a temporary file here (an Objects that needs a length may). A file://
// S3OutputPath (local mode style) writes the same files into that
// directory instead.

// Output says where a job's artifacts go.
type Output struct {
	// Path is OutputDataConfig.S3OutputPath (s3:// or file://); empty
	// uploads nothing.
	Path string
	// Job is the training job's name.
	Job string
	// Compression is OutputDataConfig.CompressionType; NONE uploads the
	// model files one by one.
	Compression string
}

// outputLocation is a parsed S3OutputPath.
type outputLocation struct {
	local          string // file:// directory
	bucket, prefix string
}

func parseOutputPath(p string) (outputLocation, error) {
	if rest, ok := strings.CutPrefix(p, "file://"); ok {
		if !filepath.IsAbs(rest) {
			return outputLocation{}, clientErrorf("S3OutputPath %q must be an absolute file:// path", p)
		}
		return outputLocation{local: rest}, nil
	}
	bucket, prefix, err := objectstore.ParseURI(p)
	if err != nil {
		return outputLocation{}, clientErrorf("S3OutputPath: %w", err)
	}
	return outputLocation{bucket: bucket, prefix: strings.Trim(prefix, "/")}, nil
}

func (l outputLocation) uri(key string) string {
	if l.local != "" {
		return "file://" + filepath.Join(l.local, filepath.FromSlash(key))
	}
	return objectstore.FormatURI(l.bucket, key)
}

func (l outputLocation) key(elem ...string) string {
	return path.Join(append([]string{l.prefix}, elem...)...)
}

// UploadArtifacts packs and uploads the model and output data of trees
// (the hosts, in order) and returns ModelArtifacts.S3ModelArtifacts.
func (s *Stager) UploadArtifacts(ctx context.Context, out Output, trees []Tree) (string, error) {
	if out.Path == "" {
		return "", nil
	}
	loc, err := parseOutputPath(out.Path)
	if err == nil && loc.local != "" {
		err = s.LocalPaths.check("S3OutputPath", loc.local)
	}
	if err != nil {
		return "", err
	}
	var models, data []string
	for _, t := range trees {
		models = append(models, t.ModelDir())
		data = append(data, t.OutputDataDir())
	}
	var modelURI string
	if strings.EqualFold(out.Compression, "NONE") {
		prefix := loc.key(out.Job, "output", "model")
		if err := s.putFiles(ctx, loc, prefix, models); err != nil {
			return "", err
		}
		modelURI = loc.uri(prefix) + "/"
	} else {
		key := loc.key(out.Job, "output", "model.tar.gz")
		if err := s.putTarGz(ctx, loc, key, models); err != nil {
			return "", err
		}
		modelURI = loc.uri(key)
	}
	if err := s.putTarGz(ctx, loc, loc.key(out.Job, "output", "output.tar.gz"), data); err != nil {
		return "", err
	}
	return modelURI, nil
}

// putTarGz packs dirs into one tar.gz and streams it to key.
func (s *Stager) putTarGz(ctx context.Context, loc outputLocation, key string, dirs []string) error {
	pr, pw := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		err := archive.WriteTarGzDirs(ctx, pw, dirs...)
		pw.CloseWithError(err)
		packed <- err
	}()
	err := s.put(ctx, loc, key, pr, -1, "application/x-tar")
	pr.CloseWithError(errors.New("upload ended"))
	if perr := <-packed; perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("upload %s: %w", loc.uri(key), err)
	}
	return nil
}

// putFiles uploads every file of the merged dirs as its own object under
// prefix.
func (s *Stager) putFiles(ctx context.Context, loc outputLocation, prefix string, dirs []string) error {
	files := map[string]string{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			rel, _ := filepath.Rel(dir, p)
			files[filepath.ToSlash(rel)] = p
			return nil
		})
		if err != nil {
			return fmt.Errorf("read %s: %w", dir, err)
		}
	}
	rels := make([]string, 0, len(files))
	for rel := range files {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	for _, rel := range rels {
		f, err := os.Open(files[rel])
		if err != nil {
			return fmt.Errorf("upload %s: %w", rel, err)
		}
		size := int64(-1)
		if st, err := f.Stat(); err == nil {
			size = st.Size()
		}
		err = s.put(ctx, loc, prefix+"/"+rel, f, size, "")
		f.Close()
		if err != nil {
			return fmt.Errorf("upload %s: %w", loc.uri(prefix+"/"+rel), err)
		}
	}
	return nil
}

// put stores r at key, in the object store or the local output directory.
func (s *Stager) put(ctx context.Context, loc outputLocation, key string, r io.Reader, size int64, contentType string) error {
	if loc.local == "" {
		err := s.Objects.Put(ctx, loc.bucket, key, r, PutOptions{Size: size, ContentType: contentType})
		if errors.Is(err, ErrNoSuchBucket) {
			return clientErrorf("output bucket %q does not exist", loc.bucket)
		}
		return err
	}
	dst := filepath.Join(loc.local, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
