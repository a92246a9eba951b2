package training

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sagebox/sagebox/internal/objectstore"
)

// CheckpointConfig (contract 6.2): before the processes start, everything
// under S3Uri is copied into each host's LocalPath; while they run, files
// that changed are uploaded every Config.CheckpointInterval; after they end
// (also after a failure or a stop) a last pass uploads the rest. Local
// deletions are not propagated.
//
// LocalPath defaults to /opt/ml/checkpoints, which (like any path under
// /opt/ml) maps into the host's workspace. Any other absolute path is used
// as given when it can be created and written (then the hosts of a
// multi-host job share it, and must name their files apart, as SageMaker
// asks anyway); otherwise the workspace's checkpoints/ is used instead, and
// the log says so. Downloaded checkpoints are copies, never hard links: a
// script overwrites its checkpoint files in place.

type checkpointTarget struct {
	dir            string
	bucket, prefix string // prefix is "" or ends in "/"
	uploaded       map[string]fileSig
}

type fileSig struct {
	size  int64
	mtime int64
}

// checkpointTargets resolves the job's checkpoint directories, once.
func (jr *jobRun) checkpointTargets(ctx context.Context) ([]*checkpointTarget, error) {
	if jr.ckptsDone {
		return jr.ckpts, nil
	}
	cc := jr.spec.checkpoint
	if cc == nil || cc.S3Uri == "" {
		jr.ckptsDone = true
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
	seen := map[string]bool{}
	for _, h := range jr.hosts {
		dir := h.info.ws.mapOptML(local)
		if !filepath.IsAbs(dir) {
			return nil, clientErrorf("CheckpointConfig.LocalPath %q must be an absolute path", local)
		}
		if dir != h.info.ws.root && !strings.HasPrefix(dir, h.info.ws.root+string(filepath.Separator)) {
			if err := probeWritable(dir); err != nil {
				jr.note(ctx, []*hostRun{h}, "checkpoint LocalPath %s is not writable (%v); using %s instead", local, err, h.info.ws.checkpointDir())
				dir = h.info.ws.checkpointDir()
			}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create checkpoint dir: %w", err)
		}
		if !seen[dir] {
			seen[dir] = true
			jr.ckpts = append(jr.ckpts, &checkpointTarget{dir: dir, bucket: bucket, prefix: prefix, uploaded: map[string]fileSig{}})
		}
	}
	jr.ckptsDone = true
	return jr.ckpts, nil
}

func probeWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".sagebox-probe-")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// downloadCheckpoints copies S3Uri's objects into every checkpoint dir.
func (jr *jobRun) downloadCheckpoints(ctx context.Context) error {
	targets, err := jr.checkpointTargets(ctx)
	if err != nil {
		return err
	}
	for _, t := range targets {
		n := 0
		opts := objectstore.ListOptions{Prefix: t.prefix, MaxKeys: 1000}
		for {
			res, err := jr.r.objects.List(ctx, t.bucket, opts)
			if errors.Is(err, objectstore.ErrNoSuchBucket) {
				return clientErrorf("CheckpointConfig.S3Uri: bucket %q does not exist", t.bucket)
			}
			if err != nil {
				return fmt.Errorf("list checkpoints: %w", err)
			}
			for _, o := range res.Objects {
				rel, ok, err := placeKey(t.prefix, o.Key)
				if err != nil || !ok {
					continue
				}
				src, err := jr.r.objects.FilePath(ctx, t.bucket, o.Key)
				if err != nil {
					return fmt.Errorf("read checkpoint %s: %w", o.Key, err)
				}
				dst := filepath.Join(t.dir, filepath.FromSlash(rel))
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					return err
				}
				_ = os.Remove(dst)
				if err := cloneFile(src, dst); err != nil {
					return err
				}
				if st, err := os.Stat(dst); err == nil {
					t.uploaded[rel] = fileSig{st.Size(), st.ModTime().UnixNano()}
				}
				n++
			}
			if !res.IsTruncated {
				break
			}
			opts.StartAfter = res.NextMarker
		}
		if n > 0 {
			jr.note(ctx, jr.hosts, "restored %d checkpoint files from s3://%s/%s into %s", n, t.bucket, t.prefix, t.dir)
		}
	}
	return nil
}

// syncCheckpointsLoop uploads changed checkpoint files until ctx ends.
func (jr *jobRun) syncCheckpointsLoop(ctx context.Context) {
	if targets, _ := jr.checkpointTargets(ctx); len(targets) == 0 {
		return
	}
	t := time.NewTicker(jr.r.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := jr.syncCheckpoints(ctx); err != nil && ctx.Err() == nil {
				jr.log.Warn("checkpoint sync failed", "err", err)
			}
		}
	}
}

// syncCheckpoints uploads the files that changed since the last pass.
func (jr *jobRun) syncCheckpoints(ctx context.Context) error {
	targets, err := jr.checkpointTargets(ctx)
	if err != nil {
		return err
	}
	for _, t := range targets {
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
			if _, err := jr.r.objects.Put(ctx, t.bucket, t.prefix+rel, f, objectstore.PutOptions{}); err != nil {
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
