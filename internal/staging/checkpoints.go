package staging

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sagebox/sagebox/internal/objectstore"
)

// CheckpointConfig (contract 6.2): before the processes start, everything
// under S3Uri is copied into each host's LocalPath (Download); while they
// run, files that changed are uploaded (Sync, called periodically); after
// they end (also after a failure or a stop) a last Sync uploads the rest.
// Local deletions are not propagated.
//
// LocalPath defaults to /opt/ml/checkpoints, which (like any path under
// /opt/ml) maps into the host's tree. Any other absolute path is used as
// given when it can be created and written (then the hosts of a multi-host
// job share it, and must name their files apart, as SageMaker asks
// anyway); otherwise the tree's checkpoints/ is used instead, and the log
// says so. Downloaded checkpoints are copies, never hard links: a script
// overwrites its checkpoint files in place.
type CheckpointConfig struct {
	S3Uri     string
	LocalPath string
}

// Checkpoints are a job's resolved checkpoint directories with what has
// been uploaded from them. A nil *Checkpoints has none. Not safe for
// concurrent use.
type Checkpoints struct {
	s       *Stager
	hosts   []Host
	targets []*checkpointTarget
}

type checkpointTarget struct {
	dir            string
	bucket, prefix string // prefix is "" or ends in "/"
	uploaded       map[string]fileSig
}

type fileSig struct {
	size  int64
	mtime int64
}

// Checkpoints resolves hosts' checkpoint directories (creating them). It
// returns nil when cc has no S3Uri.
func (s *Stager) Checkpoints(ctx context.Context, cc CheckpointConfig, hosts []Host) (*Checkpoints, error) {
	if cc.S3Uri == "" {
		return nil, nil
	}
	bucket, prefix, err := objectstore.ParseURI(cc.S3Uri)
	if err != nil {
		return nil, clientErrorf("CheckpointConfig.S3Uri: %w", err)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	local := cc.LocalPath
	if local == "" {
		local = "/opt/ml/checkpoints"
	}
	c := &Checkpoints{s: s, hosts: hosts}
	seen := map[string]bool{}
	for _, h := range hosts {
		dir := h.Tree.MapOptML(local)
		if !filepath.IsAbs(dir) {
			return nil, clientErrorf("CheckpointConfig.LocalPath %q must be an absolute path", local)
		}
		if !h.Tree.Contains(dir) {
			// On SageMaker LocalPath is a path in the training container,
			// never one of the host's: here it stays inside the workspace.
			s.note(ctx, []Host{h}, "CheckpointConfig.LocalPath %s is a path inside the training container; on sagebox it is %s", local, h.Tree.CheckpointDir())
			dir = h.Tree.CheckpointDir()
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create checkpoint dir: %w", err)
		}
		if !seen[dir] {
			seen[dir] = true
			c.targets = append(c.targets, &checkpointTarget{dir: dir, bucket: bucket, prefix: prefix, uploaded: map[string]fileSig{}})
		}
	}
	return c, nil
}

// Dirs are the local checkpoint directories, one per distinct path.
func (c *Checkpoints) Dirs() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, t := range c.targets {
		out = append(out, t.dir)
	}
	return out
}

// Download copies S3Uri's objects into every checkpoint directory.
func (c *Checkpoints) Download(ctx context.Context) error {
	if c == nil {
		return nil
	}
	objs := c.s.Objects
	for _, t := range c.targets {
		n := 0
		token := ""
		for {
			page, err := objs.List(ctx, t.bucket, t.prefix, token)
			if errors.Is(err, ErrNoSuchBucket) {
				return clientErrorf("CheckpointConfig.S3Uri: bucket %q does not exist", t.bucket)
			}
			if err != nil {
				return fmt.Errorf("list checkpoints: %w", err)
			}
			for _, o := range page.Objects {
				rel, ok, err := placeKey(t.prefix, o.Key)
				if err != nil || !ok {
					continue
				}
				dst := filepath.Join(t.dir, filepath.FromSlash(rel))
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					return err
				}
				_ = os.Remove(dst)
				if err := c.s.copyOut(ctx, t.bucket, o.Key, dst); err != nil {
					return fmt.Errorf("read checkpoint %s: %w", o.Key, err)
				}
				if st, err := os.Stat(dst); err == nil {
					t.uploaded[rel] = fileSig{st.Size(), st.ModTime().UnixNano()}
				}
				n++
			}
			if page.Next == "" {
				break
			}
			token = page.Next
		}
		if n > 0 {
			c.s.note(ctx, c.hosts, "restored %d checkpoint files from s3://%s/%s into %s", n, t.bucket, t.prefix, t.dir)
		}
	}
	return nil
}

// Sync uploads the files that changed since the last pass (or since
// Download wrote them).
func (c *Checkpoints) Sync(ctx context.Context) error {
	if c == nil {
		return nil
	}
	for _, t := range c.targets {
		err := filepath.WalkDir(t.dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			st, err := d.Info()
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(t.dir, p)
			rel = filepath.ToSlash(rel)
			sig := fileSig{st.Size(), st.ModTime().UnixNano()}
			if t.uploaded[rel] == sig {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return nil // removed meanwhile
			}
			defer f.Close()
			if err := c.s.Objects.Put(ctx, t.bucket, t.prefix+rel, f, PutOptions{Size: st.Size()}); err != nil {
				return fmt.Errorf("upload checkpoint %s: %w", rel, err)
			}
			t.uploaded[rel] = sig
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
