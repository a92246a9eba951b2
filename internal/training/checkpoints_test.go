package training

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/toolkit"
)

func TestCheckpointSync(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// Every store operation reads a clock that moves one second, so an
	// upload made again would have a new LastModified without any sleep.
	var tick atomic.Int64
	clock := func() time.Time { return time.Unix(1_700_000_000+tick.Add(1), 0) }
	store, err := objectstore.OpenWithOptions(filepath.Join(t.TempDir(), "s3"), objectstore.Options{NoSync: true, Now: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.CreateBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	e.store = store
	e.runner = e.newRunner()
	e.putObject("ck/run1/old.pt", []byte("restored"))
	spec, err := toolkit.NewSpec(newTestJob("ck", map[string]string{"sagemaker_program": `"train.py"`}, withHosts(2), func(j *sagebox.TrainingJob) {
		j.CheckpointConfig = &sagebox.CheckpointConfig{S3Uri: "s3://bkt/ck/run1"}
	}), "")
	if err != nil {
		t.Fatal(err)
	}
	jr := newJobRun(e.runner, "ck")
	jr.spec = spec
	jr.setupHosts(ctx, newTestJob("ck", nil))
	for _, h := range jr.hosts {
		if err := h.info.Workspace.Create(nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := jr.downloadCheckpoints(ctx); err != nil {
		t.Fatal(err)
	}
	for _, h := range jr.hosts {
		b, err := os.ReadFile(filepath.Join(h.info.Workspace.CheckpointDir(), "old.pt"))
		if err != nil || string(b) != "restored" {
			t.Fatalf("%s: restored checkpoint = %q, %v", h.info.Name, b, err)
		}
		src, _ := e.store.FilePath(ctx, "bkt", "ck/run1/old.pt")
		a, _ := os.Stat(src)
		c, _ := os.Stat(filepath.Join(h.info.Workspace.CheckpointDir(), "old.pt"))
		if os.SameFile(a, c) {
			t.Error("a restored checkpoint must be a copy, not a hard link")
		}
	}
	h1 := jr.hosts[0].info.Workspace.CheckpointDir()
	os.WriteFile(filepath.Join(h1, "epoch-1.pt"), []byte("e1"), 0o644)
	os.MkdirAll(filepath.Join(h1, "sub"), 0o755)
	os.WriteFile(filepath.Join(h1, "sub", "x.pt"), []byte("x"), 0o644)
	if err := jr.syncCheckpoints(ctx); err != nil {
		t.Fatal(err)
	}
	if string(e.getObject("ck/run1/epoch-1.pt")) != "e1" || string(e.getObject("ck/run1/sub/x.pt")) != "x" {
		t.Fatal("new checkpoints not uploaded")
	}
	first, _ := e.store.Stat(ctx, "bkt", "ck/run1/epoch-1.pt")
	oldInfo, _ := e.store.Stat(ctx, "bkt", "ck/run1/old.pt")
	os.WriteFile(filepath.Join(h1, "sub", "x.pt"), []byte("x2"), 0o644)
	if err := jr.syncCheckpoints(ctx); err != nil {
		t.Fatal(err)
	}
	if string(e.getObject("ck/run1/sub/x.pt")) != "x2" {
		t.Error("a changed checkpoint was not uploaded again")
	}
	if again, _ := e.store.Stat(ctx, "bkt", "ck/run1/epoch-1.pt"); !again.LastModified.Equal(first.LastModified) || again.ETag != first.ETag {
		t.Error("an unchanged checkpoint was uploaded again")
	}
	if again, _ := e.store.Stat(ctx, "bkt", "ck/run1/old.pt"); !again.LastModified.Equal(oldInfo.LastModified) {
		t.Error("a restored, unchanged checkpoint was uploaded back")
	}
}
