package training

import (
	"context"
	"github.com/sagebox/sagebox/internal/toolkit"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The placement rules, sharding, manifests and every error text are tested
// in internal/staging; these tests check the runner's calls: hard links
// through the local adapter, CopyChannels, the notes in the hosts' logs
// and the FailureReason a staging error becomes.

// listDir returns the files under dir, relative and sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// channelJob is a jobRun of n hosts with fresh workspaces, ready to stage.
func channelJob(t *testing.T, e *env, n int) *jobRun {
	t.Helper()
	ctx := context.Background()
	job := newTestJob("ch", map[string]string{"sagemaker_program": `"train.py"`}, withHosts(n))
	spec, err := toolkit.NewSpec(job, "")
	if err != nil {
		t.Fatal(err)
	}
	jr := newJobRun(e.runner, "ch")
	jr.spec = spec
	jr.setupHosts(ctx, job)
	for _, h := range jr.hosts {
		if err := h.info.Workspace.Create([]string{"train"}); err != nil {
			t.Fatal(err)
		}
	}
	return jr
}

func TestStageS3PrefixHardLinks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, k := range []string{"data/train/a/b.csv", "data/train/c.csv", "data/train/sub/", "data/train2/d.csv", "other/e.csv"} {
		e.putObject(k, []byte("body of "+k))
	}
	c := toolkit.Channel{Name: "train", URI: "s3://bkt/data/train", DataType: "S3Prefix", Distribution: "FullyReplicated"}
	jr := channelJob(t, e, 1)
	if err := jr.stageChannel(ctx, c); err != nil {
		t.Fatal(err)
	}
	dest := jr.hosts[0].info.Workspace.ChannelDir("train")
	if got := strings.Join(listDir(t, dest), ","); got != "a/b.csv,c.csv,train2/d.csv" {
		t.Fatalf("staged %s", got)
	}
	src, err := e.store.FilePath(ctx, "bkt", "data/train/a/b.csv")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(src)
	b, _ := os.Stat(filepath.Join(dest, "a", "b.csv"))
	if !os.SameFile(a, b) {
		t.Error("staged file is not a hard link to the object (different inode)")
	}
	if log := e.logs.text("ch/"); !strings.Contains(log, "sagebox: channel train: 3 files hard-linked from s3://bkt/data/train") {
		t.Errorf("job log does not say the files were hard-linked:\n%s", log)
	}

	t.Run("copy mode", func(t *testing.T) {
		e.runner.cfg.CopyChannels = true
		defer func() { e.runner.cfg.CopyChannels = false }()
		jr := channelJob(t, e, 1)
		if err := jr.stageChannel(ctx, c); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(jr.hosts[0].info.Workspace.ChannelDir("train"), "a", "b.csv")
		cp, _ := os.Stat(p)
		if os.SameFile(a, cp) {
			t.Error("copy mode produced a hard link")
		}
		if got, _ := os.ReadFile(p); string(got) != "body of data/train/a/b.csv" {
			t.Errorf("copied content %q", got)
		}
	})
}

func TestShardedChannelPerHost(t *testing.T) {
	e := newEnv(t)
	for _, k := range []string{"shards/p0", "shards/p1", "shards/p2"} {
		e.putObject(k, []byte(k))
	}
	jr := channelJob(t, e, 2)
	if err := jr.stageChannel(context.Background(), toolkit.Channel{Name: "train", URI: "s3://bkt/shards/", DataType: "S3Prefix", Distribution: "ShardedByS3Key"}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"p0,p2", "p1"} {
		if got := strings.Join(listDir(t, jr.hosts[i].info.Workspace.ChannelDir("train")), ","); got != want {
			t.Errorf("%s got %s, want %s", jr.hosts[i].info.Name, got, want)
		}
	}
	// Each host's note goes to its own stream only.
	if log := e.logs.text("ch/algo-2-"); !strings.Contains(log, "channel train: 1 files hard-linked") || strings.Contains(log, "2 files") {
		t.Errorf("algo-2's log:\n%s", log)
	}
}

func TestChannelFailureReasons(t *testing.T) {
	e := newEnv(t)
	e.putObject("bad/../../escape", []byte("x"))
	tests := []struct {
		name string
		spec toolkit.Channel
		want string
	}{
		{"empty", toolkit.Channel{Name: "train", URI: "s3://bkt/nothing/here", DataType: "S3Prefix"},
			`ClientError: No S3 objects found under S3 URL "s3://bkt/nothing/here" given in input data source for channel "train".`},
		{"no bucket", toolkit.Channel{Name: "train", URI: "s3://nobucket/x", DataType: "S3Prefix"}, `ClientError: channel "train": bucket "nobucket" does not exist`},
		{"escaping key", toolkit.Channel{Name: "train", URI: "s3://bkt/bad/", DataType: "S3Prefix"}, `ClientError: channel "train": object key "bad/../../escape" cannot be placed`},
		{"no manifest", toolkit.Channel{Name: "m", URI: "s3://bkt/none.json", DataType: "ManifestFile"}, `ClientError: channel "m": manifest s3://bkt/none.json does not exist`},
		{"missing local", toolkit.Channel{Name: "l", URI: "file:///no/such/dir", DataType: "S3Prefix"}, `ClientError: channel "l":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := channelJob(t, e, 1).stageChannel(context.Background(), tt.spec)
			if err == nil || !strings.HasPrefix(failureReason(err), tt.want) {
				t.Errorf("reason = %v\nwant prefix %s", err, tt.want)
			}
		})
	}
}

// A staging ClientError wrapped on its way up keeps its reason, also for
// an artifact upload's FailureReason.
func TestStagingClientErrorReason(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	jr := channelJob(t, e, 1)
	jr.spec.OutputPath = "s3://nobucket/out"
	_, err := jr.uploadArtifacts(ctx)
	if r, ok := jobReason(err); !ok || r != `ClientError: output bucket "nobucket" does not exist` {
		t.Errorf("reason %q %v (err %v)", r, ok, err)
	}
}
