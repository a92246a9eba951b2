package staging

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
	"time"

	"github.com/sagebox/sagebox/internal/objectstore"
)

// A channel is staged in two steps: plan (list the objects once per job)
// and place (put one host's share into its input/data/<channel>/).
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
// Objects are hard-linked out of a local object store (its files are
// immutable, so a link is a free, consistent snapshot), falling back to a
// reflink or a copy across file systems, and to a download from an Objects
// that is not on this machine. A hard-linked input file shares its inode
// with the stored object: treat channel files as read-only, like
// SageMaker's FastFile mode (Stager.CopyChannels copies instead). file://
// sources are always copied (reflinked where possible) so a script can
// never modify the user's own files.

// Channel is one input channel, already validated by the caller.
type Channel struct {
	Name         string
	URI          string // s3://bucket/prefix or file:///path
	DataType     string // S3Prefix | ManifestFile
	Distribution string // FullyReplicated | ShardedByS3Key
	Compression  string // as given; only noted
}

// Plan is a channel's object list, shared by its hosts.
type Plan struct {
	Channel Channel
	Items   []Item // s3: in key order (manifest order for a manifest)
	Local   bool   // items are files on this machine (file://)
	Bytes   int64
}

// Item is one file of a channel.
type Item struct {
	Bucket, Key string // s3
	Src         string // file://: absolute path
	Rel         string // where it goes under the channel directory
	Size        int64
}

// StageChannel plans c once and places the share of each of hosts (of a
// cluster of count hosts) into its channel directory, noting in each
// host's log how the files got there.
func (s *Stager) StageChannel(ctx context.Context, c Channel, count int, hosts []Host) error {
	t0 := time.Now()
	plan, err := s.PlanChannel(ctx, c)
	if err != nil {
		return err
	}
	if strings.EqualFold(c.Compression, "Gzip") {
		s.note(ctx, hosts, "channel %s: CompressionType Gzip applies to Pipe mode; objects are staged as stored", c.Name)
	}
	for _, h := range hosts {
		items := plan.Share(h.Index, count)
		linked, err := s.Place(ctx, plan, items, h.Tree.ChannelDir(c.Name))
		if err != nil {
			return err
		}
		how := "copied"
		if linked == len(items) && linked > 0 {
			how = "hard-linked"
		} else if linked > 0 {
			how = fmt.Sprintf("%d hard-linked, %d copied", linked, len(items)-linked)
		}
		s.note(ctx, []Host{h}, "channel %s: %d files %s from %s (%s)", c.Name, len(items), how, c.URI, time.Since(t0).Round(time.Millisecond))
		s.log().Info("channel staged", "host", h.Name, "channel", c.Name, "files", len(items), "linked", linked, "elapsed", time.Since(t0))
	}
	return nil
}

// PlanChannel lists c's objects.
func (s *Stager) PlanChannel(ctx context.Context, c Channel) (*Plan, error) {
	plan := &Plan{Channel: c}
	var err error
	switch {
	case strings.HasPrefix(c.URI, "file://"):
		plan.Local = true
		plan.Items, err = planLocal(c, s.LocalPaths)
	case c.DataType == "ManifestFile":
		plan.Items, err = s.planManifest(ctx, c)
	default:
		plan.Items, err = s.planPrefix(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	if len(plan.Items) == 0 && !plan.Local {
		return nil, clientErrorf("No S3 objects found under S3 URL %q given in input data source for channel %q. Please ensure that the bucket exists and that objects exist under that S3 prefix.", c.URI, c.Name)
	}
	for _, o := range plan.Items {
		plan.Bytes += o.Size
	}
	return plan, nil
}

func (s *Stager) planPrefix(ctx context.Context, c Channel) ([]Item, error) {
	bucket, prefix, err := objectstore.ParseURI(c.URI)
	if err != nil {
		return nil, clientErrorf("channel %q: %w", c.Name, err)
	}
	var out []Item
	token := ""
	for {
		page, err := s.Objects.List(ctx, bucket, prefix, token)
		if err != nil {
			if errors.Is(err, ErrNoSuchBucket) {
				return nil, clientErrorf("channel %q: bucket %q does not exist (S3Uri %s)", c.Name, bucket, c.URI)
			}
			return nil, fmt.Errorf("list %s: %w", c.URI, err)
		}
		for _, o := range page.Objects {
			rel, ok, err := placeKey(prefix, o.Key)
			if err != nil {
				return nil, clientErrorf("channel %q: %w", c.Name, err)
			}
			if ok {
				out = append(out, Item{Bucket: bucket, Key: o.Key, Rel: rel, Size: o.Size})
			}
		}
		if page.Next == "" {
			return out, nil
		}
		token = page.Next
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

// planManifest reads the S3 ManifestFile format:
// [{"prefix": "s3://b/p/"}, "rel", ...].
func (s *Stager) planManifest(ctx context.Context, c Channel) ([]Item, error) {
	bucket, key, err := objectstore.ParseURI(c.URI)
	if err != nil {
		return nil, clientErrorf("channel %q: %w", c.Name, err)
	}
	obj, _, err := s.Objects.Get(ctx, bucket, key)
	if err != nil {
		if errors.Is(err, ErrNoSuchKey) || errors.Is(err, ErrNoSuchBucket) {
			return nil, clientErrorf("channel %q: manifest %s does not exist", c.Name, c.URI)
		}
		return nil, fmt.Errorf("read manifest %s: %w", c.URI, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(io.LimitReader(obj, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", c.URI, err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) == 0 {
		return nil, clientErrorf("channel %q: manifest %s is not a JSON array starting with {\"prefix\": ...}", c.Name, c.URI)
	}
	var head struct {
		Prefix string `json:"prefix"`
	}
	if err := json.Unmarshal(raw[0], &head); err != nil || head.Prefix == "" {
		return nil, clientErrorf("channel %q: manifest %s must start with {\"prefix\": \"s3://...\"}", c.Name, c.URI)
	}
	pb, pk, err := objectstore.ParseURI(head.Prefix)
	if err != nil {
		return nil, clientErrorf("channel %q: manifest prefix: %w", c.Name, err)
	}
	var out []Item
	for _, m := range raw[1:] {
		var rel string
		if err := json.Unmarshal(m, &rel); err != nil {
			return nil, clientErrorf("channel %q: manifest %s: entries after the prefix must be strings", c.Name, c.URI)
		}
		placed, ok, err := placeKey("", rel)
		if err != nil {
			return nil, clientErrorf("channel %q: manifest entry: %w", c.Name, err)
		}
		if ok {
			out = append(out, Item{Bucket: pb, Key: pk + rel, Rel: placed})
		}
	}
	return out, nil
}

func planLocal(c Channel, policy LocalPaths) ([]Item, error) {
	root := strings.TrimPrefix(c.URI, "file://")
	if !filepath.IsAbs(root) {
		return nil, clientErrorf("channel %q: %s must be an absolute file:// path", c.Name, c.URI)
	}
	what := fmt.Sprintf("channel %q", c.Name)
	if err := policy.check(what, c.URI); err != nil {
		return nil, err
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, clientErrorf("channel %q: %w", c.Name, err)
	}
	if !st.IsDir() {
		return []Item{{Src: root, Rel: filepath.Base(root), Size: st.Size()}}, nil
	}
	var out []Item
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			return nil // directories, dangling links, specials
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if err := policy.check(what+": "+p+" is a symlink to", resolve(p)); err != nil {
				return err
			}
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, Item{Src: p, Rel: filepath.ToSlash(rel), Size: st.Size()})
		return nil
	})
	if err != nil {
		return nil, clientErrorf("channel %q: read %s: %w", c.Name, root, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rel < out[j].Rel })
	return out, nil
}

// Share returns host's items: all of them (FullyReplicated) or, for
// ShardedByS3Key, items host, host+n, host+2n, ... in key order.
func (p *Plan) Share(host, n int) []Item {
	if p.Channel.Distribution != "ShardedByS3Key" || n <= 1 {
		return p.Items
	}
	var out []Item
	for i := host; i < len(p.Items); i += n {
		out = append(out, p.Items[i])
	}
	return out
}

// placeWorkers bounds concurrent links/copies per channel.
const placeWorkers = 8

// Place puts items under dest. It returns how many files were hard-linked
// (the rest were cloned, copied or downloaded).
func (s *Stager) Place(ctx context.Context, plan *Plan, items []Item, dest string) (linked int, err error) {
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	work := make(chan Item)
	for range min(placeWorkers, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				l, err := s.placeItem(ctx, plan, o, dest)
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
	for _, o := range items {
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

func (s *Stager) placeItem(ctx context.Context, plan *Plan, o Item, dest string) (linked bool, err error) {
	dst := filepath.Join(dest, filepath.FromSlash(o.Rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, placeError(plan, o, err)
	}
	if plan.Local {
		return false, placeError(plan, o, cloneFile(o.Src, dst))
	}
	missing := func() error {
		return clientErrorf("channel %q: object s3://%s/%s does not exist", plan.Channel.Name, o.Bucket, o.Key)
	}
	if l, ok := s.Objects.(Linker); ok && !s.CopyChannels {
		if err := l.Link(ctx, o.Bucket, o.Key, dst); err == nil {
			return true, nil
		} else if errors.Is(err, ErrNoSuchKey) {
			return false, missing()
		}
		// Another file system, or a link limit: clone or copy instead.
	}
	if lf, ok := s.Objects.(LocalFiles); ok {
		src, err := lf.FilePath(ctx, o.Bucket, o.Key)
		if err != nil {
			if errors.Is(err, ErrNoSuchKey) || errors.Is(err, ErrNoSuchBucket) {
				return false, missing()
			}
			return false, err
		}
		return false, placeError(plan, o, cloneFile(src, dst))
	}
	err = s.download(ctx, o.Bucket, o.Key, dst)
	if errors.Is(err, ErrNoSuchKey) || errors.Is(err, ErrNoSuchBucket) {
		return false, missing()
	}
	return false, placeError(plan, o, err)
}

func placeError(plan *Plan, o Item, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return clientErrorf("channel %q: two objects map to the same file %s", plan.Channel.Name, o.Rel)
	}
	return fmt.Errorf("stage %s of channel %s: %w", o.Rel, plan.Channel.Name, err)
}
