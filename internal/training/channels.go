package training

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/sagebox/sagebox/internal/objectstore"
)

// A channel is staged in two steps: plan (list the objects once per job)
// and stage (place one host's share into its input/data/<channel>/).
//
// Placement of S3 keys. S3Prefix is a plain string prefix, as in SageMaker:
// s3://b/data matches data/x and data2/y. A key that continues the prefix at
// a "/" boundary keeps the rest of its path (prefix data/train, key
// data/train/a/b.csv → <channel>/a/b.csv); a key that continues it inside a
// path segment is placed relative to the prefix's parent "directory"
// (prefix data, key data2/y → <channel>/data2/y); a key equal to the prefix
// is placed under its base name. Keys ending in "/" are folder markers and
// are skipped. A key that would land outside the channel directory ("..")
// fails the job.
//
// Objects are hard-linked out of the object store (its files are immutable,
// so a link is a free, consistent snapshot), falling back to a reflink or a
// copy across file systems. A hard-linked input file shares its inode with
// the stored object: treat channel files as read-only, like SageMaker's
// FastFile mode (Config.CopyChannels copies instead). file:// sources are
// always copied (reflinked where possible) so a script can never modify the
// user's own files.

// channelPlan is a channel's object list, shared by its hosts.
type channelPlan struct {
	spec    channelSpec
	objects []channelObject // s3: in key order (manifest order for a manifest)
	local   bool            // objects are files on this machine (file://)
	bytes   int64
}

type channelObject struct {
	bucket, key string // s3
	src         string // file://: absolute path
	rel         string // where it goes under the channel directory
	size        int64
}

func (r *Runner) planChannel(ctx context.Context, c channelSpec) (*channelPlan, error) {
	plan := &channelPlan{spec: c}
	var err error
	switch {
	case strings.HasPrefix(c.uri, "file://"):
		plan.local = true
		plan.objects, err = planLocal(c)
	case c.dataType == "ManifestFile":
		plan.objects, err = r.planManifest(ctx, c)
	default:
		plan.objects, err = r.planPrefix(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	if len(plan.objects) == 0 && !plan.local {
		return nil, clientErrorf("No S3 objects found under S3 URL %q given in input data source for channel %q. Please ensure that the bucket exists and that objects exist under that S3 prefix.", c.uri, c.name)
	}
	for _, o := range plan.objects {
		plan.bytes += o.size
	}
	return plan, nil
}

func (r *Runner) planPrefix(ctx context.Context, c channelSpec) ([]channelObject, error) {
	bucket, prefix, err := objectstore.ParseURI(c.uri)
	if err != nil {
		return nil, clientErrorf("channel %q: %w", c.name, err)
	}
	var out []channelObject
	opts := objectstore.ListOptions{Prefix: prefix, MaxKeys: 1000}
	for {
		res, err := r.objects.List(ctx, bucket, opts)
		if err != nil {
			if errors.Is(err, objectstore.ErrNoSuchBucket) {
				return nil, clientErrorf("channel %q: bucket %q does not exist (S3Uri %s)", c.name, bucket, c.uri)
			}
			return nil, fmt.Errorf("list %s: %w", c.uri, err)
		}
		for _, o := range res.Objects {
			rel, ok, err := placeKey(prefix, o.Key)
			if err != nil {
				return nil, clientErrorf("channel %q: %w", c.name, err)
			}
			if ok {
				out = append(out, channelObject{bucket: bucket, key: o.Key, rel: rel, size: o.Size})
			}
		}
		if !res.IsTruncated {
			return out, nil
		}
		opts.StartAfter = res.NextMarker
	}
}

// placeKey says where key, listed under prefix, goes inside the channel
// directory (see the comment at the top of this file). ok is false for a
// folder marker.
func placeKey(prefix, key string) (rel string, ok bool, err error) {
	switch {
	case strings.HasSuffix(key, "/"):
		return "", false, nil
	case prefix == "":
		rel = key
	case strings.HasSuffix(prefix, "/"):
		rel = key[len(prefix):]
	case key == prefix:
		rel = path.Base(key)
	case strings.HasPrefix(key, prefix+"/"):
		rel = key[len(prefix)+1:]
	default:
		rel = key[strings.LastIndex(prefix, "/")+1:]
	}
	clean := path.Clean("/" + rel)[1:]
	if clean == "" {
		return "", false, nil
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == ".." {
			return "", false, fmt.Errorf("object key %q cannot be placed inside the channel directory (it contains \"..\")", key)
		}
	}
	return clean, true, nil
}

// manifest is the S3 ManifestFile format: [{"prefix": "s3://b/p/"}, "rel", ...].
func (r *Runner) planManifest(ctx context.Context, c channelSpec) ([]channelObject, error) {
	bucket, key, err := objectstore.ParseURI(c.uri)
	if err != nil {
		return nil, clientErrorf("channel %q: %w", c.name, err)
	}
	obj, err := r.objects.Get(ctx, bucket, key)
	if err != nil {
		if errors.Is(err, objectstore.ErrNoSuchKey) || errors.Is(err, objectstore.ErrNoSuchBucket) {
			return nil, clientErrorf("channel %q: manifest %s does not exist", c.name, c.uri)
		}
		return nil, fmt.Errorf("read manifest %s: %w", c.uri, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(io.LimitReader(obj, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", c.uri, err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) == 0 {
		return nil, clientErrorf("channel %q: manifest %s is not a JSON array starting with {\"prefix\": ...}", c.name, c.uri)
	}
	var head struct {
		Prefix string `json:"prefix"`
	}
	if err := json.Unmarshal(raw[0], &head); err != nil || head.Prefix == "" {
		return nil, clientErrorf("channel %q: manifest %s must start with {\"prefix\": \"s3://...\"}", c.name, c.uri)
	}
	pb, pk, err := objectstore.ParseURI(head.Prefix)
	if err != nil {
		return nil, clientErrorf("channel %q: manifest prefix: %w", c.name, err)
	}
	var out []channelObject
	for _, m := range raw[1:] {
		var rel string
		if err := json.Unmarshal(m, &rel); err != nil {
			return nil, clientErrorf("channel %q: manifest %s: entries after the prefix must be strings", c.name, c.uri)
		}
		placed, ok, err := placeKey("", rel)
		if err != nil {
			return nil, clientErrorf("channel %q: manifest entry: %w", c.name, err)
		}
		if ok {
			out = append(out, channelObject{bucket: pb, key: pk + rel, rel: placed})
		}
	}
	return out, nil
}

func planLocal(c channelSpec) ([]channelObject, error) {
	root := strings.TrimPrefix(c.uri, "file://")
	if !filepath.IsAbs(root) {
		return nil, clientErrorf("channel %q: %s must be an absolute file:// path", c.name, c.uri)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, clientErrorf("channel %q: %w", c.name, err)
	}
	if !st.IsDir() {
		return []channelObject{{src: root, rel: filepath.Base(root), size: st.Size()}}, nil
	}
	var out []channelObject
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			return nil // directories, dangling links, specials
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, channelObject{src: p, rel: filepath.ToSlash(rel), size: st.Size()})
		return nil
	})
	if err != nil {
		return nil, clientErrorf("channel %q: read %s: %w", c.name, root, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out, nil
}

// share returns host's objects: all of them (FullyReplicated) or, for
// ShardedByS3Key, objects host, host+n, host+2n, ... in key order.
func (p *channelPlan) share(host, n int) []channelObject {
	if p.spec.distribution != "ShardedByS3Key" || n <= 1 {
		return p.objects
	}
	var out []channelObject
	for i := host; i < len(p.objects); i += n {
		out = append(out, p.objects[i])
	}
	return out
}

// stagingWorkers bounds concurrent links/copies per channel.
const stagingWorkers = 8

// stage places objs under dest. It returns how many files were hard-linked
// (the rest were cloned or copied).
func (r *Runner) stage(ctx context.Context, plan *channelPlan, objs []channelObject, dest string) (linked int, err error) {
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	work := make(chan channelObject)
	for range min(stagingWorkers, len(objs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				l, err := r.placeObject(ctx, plan, o, dest)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if l {
					linked++
				}
				mu.Unlock()
			}
		}()
	}
	for _, o := range objs {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		work <- o
	}
	close(work)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return linked, firstErr
}

func (r *Runner) placeObject(ctx context.Context, plan *channelPlan, o channelObject, dest string) (linked bool, err error) {
	dst := filepath.Join(dest, filepath.FromSlash(o.rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, placeError(plan, o, err)
	}
	if plan.local {
		return false, placeError(plan, o, cloneFile(o.src, dst))
	}
	if !r.cfg.CopyChannels {
		if _, err := r.objects.Link(ctx, o.bucket, o.key, dst); err == nil {
			return true, nil
		} else if errors.Is(err, objectstore.ErrNoSuchKey) {
			return false, clientErrorf("channel %q: object s3://%s/%s does not exist", plan.spec.name, o.bucket, o.key)
		}
		// Another file system, or a link limit: clone or copy instead.
	}
	src, err := r.objects.FilePath(ctx, o.bucket, o.key)
	if err != nil {
		if errors.Is(err, objectstore.ErrNoSuchKey) || errors.Is(err, objectstore.ErrNoSuchBucket) {
			return false, clientErrorf("channel %q: object s3://%s/%s does not exist", plan.spec.name, o.bucket, o.key)
		}
		return false, err
	}
	return false, placeError(plan, o, cloneFile(src, dst))
}

func placeError(plan *channelPlan, o channelObject, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return clientErrorf("channel %q: two objects map to the same file %s", plan.spec.name, o.rel)
	}
	return fmt.Errorf("stage %s of channel %s: %w", o.rel, plan.spec.name, err)
}
