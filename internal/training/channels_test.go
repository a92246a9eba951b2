package training

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func TestPlaceKey(t *testing.T) {
	tests := []struct {
		prefix, key, rel string
		skip, err        bool
	}{
		{prefix: "data/train", key: "data/train/a/b.csv", rel: "a/b.csv"},
		{prefix: "data/train/", key: "data/train/a/b.csv", rel: "a/b.csv"},
		{prefix: "data", key: "data/x", rel: "x"},
		{prefix: "data", key: "data2/y", rel: "data2/y"},
		{prefix: "a/da", key: "a/data2/y", rel: "data2/y"},
		{prefix: "data/f.csv", key: "data/f.csv", rel: "f.csv"},
		{prefix: "", key: "a/b", rel: "a/b"},
		{prefix: "data", key: "data//x", rel: "x"},
		{prefix: "data/", key: "data/sub/", skip: true},
		{prefix: "data", key: "data/../../etc/passwd", err: true},
		{prefix: "", key: "../x", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.prefix+"|"+tt.key, func(t *testing.T) {
			rel, ok, err := placeKey(tt.prefix, tt.key)
			switch {
			case tt.err:
				if err == nil {
					t.Fatalf("placeKey = %q, want an error", rel)
				}
			case tt.skip:
				if ok || err != nil {
					t.Fatalf("placeKey = %q %v %v, want skipped", rel, ok, err)
				}
			default:
				if err != nil || !ok || rel != tt.rel {
					t.Fatalf("placeKey = %q %v %v, want %q", rel, ok, err, tt.rel)
				}
			}
		})
	}
}

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

func TestStageS3PrefixHardLinks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, k := range []string{"data/train/a/b.csv", "data/train/c.csv", "data/train/sub/", "data/train2/d.csv", "other/e.csv"} {
		e.putObject(k, []byte("body of "+k))
	}
	plan, err := e.runner.planChannel(ctx, channelSpec{name: "train", uri: "s3://bkt/data/train", dataType: "S3Prefix", distribution: "FullyReplicated"})
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "train")
	linked, err := e.runner.stage(ctx, plan, plan.share(0, 1), dest)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listDir(t, dest), ","); got != "a/b.csv,c.csv,train2/d.csv" {
		t.Fatalf("staged %s", got)
	}
	if linked != 3 {
		t.Errorf("linked %d of 3", linked)
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

	t.Run("copy mode", func(t *testing.T) {
		e.runner.cfg.CopyChannels = true
		defer func() { e.runner.cfg.CopyChannels = false }()
		dest := filepath.Join(t.TempDir(), "train")
		linked, err := e.runner.stage(ctx, plan, plan.objects, dest)
		if err != nil || linked != 0 {
			t.Fatalf("linked %d, %v", linked, err)
		}
		c, _ := os.Stat(filepath.Join(dest, "a", "b.csv"))
		if os.SameFile(a, c) {
			t.Error("copy mode produced a hard link")
		}
		if got, _ := os.ReadFile(filepath.Join(dest, "a", "b.csv")); string(got) != "body of data/train/a/b.csv" {
			t.Errorf("copied content %q", got)
		}
	})
}

func TestShardedByS3Key(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := range 5 {
		e.putObject(fmt.Sprintf("shards/part-%d", i), []byte{byte(i)})
	}
	plan, err := e.runner.planChannel(ctx, channelSpec{name: "train", uri: "s3://bkt/shards/", dataType: "S3Prefix", distribution: "ShardedByS3Key"})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"part-0", "part-2", "part-4"}, {"part-1", "part-3"}}
	for host := range 2 {
		var got []string
		for _, o := range plan.share(host, 2) {
			got = append(got, o.rel)
		}
		if strings.Join(got, ",") != strings.Join(want[host], ",") {
			t.Errorf("host %d gets %v, want %v", host, got, want[host])
		}
	}
	plan.spec.distribution = "FullyReplicated"
	if n := len(plan.share(1, 2)); n != 5 {
		t.Errorf("FullyReplicated host 1 gets %d objects, want 5", n)
	}
}

func TestManifestChannel(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.putObject("ds/img/1.png", []byte("1"))
	e.putObject("ds/img/2.png", []byte("2"))
	e.putObject("ds/img/3.png", []byte("3"))
	e.putObject("manifests/m.json", []byte(`[{"prefix": "s3://bkt/ds/"}, "img/2.png", "img/1.png"]`))
	plan, err := e.runner.planChannel(ctx, channelSpec{name: "train", uri: "s3://bkt/manifests/m.json", dataType: "ManifestFile", distribution: "FullyReplicated"})
	if err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	if _, err := e.runner.stage(ctx, plan, plan.objects, dest); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listDir(t, dest), ","); got != "img/1.png,img/2.png" {
		t.Errorf("staged %s", got)
	}
}

func TestChannelErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.putObject("bad/../../escape", []byte("x"))
	tests := []struct {
		name string
		spec channelSpec
		want string
	}{
		{"empty", channelSpec{name: "train", uri: "s3://bkt/nothing/here", dataType: "S3Prefix"},
			`ClientError: No S3 objects found under S3 URL "s3://bkt/nothing/here" given in input data source for channel "train".`},
		{"no bucket", channelSpec{name: "train", uri: "s3://nobucket/x", dataType: "S3Prefix"}, `ClientError: channel "train": bucket "nobucket" does not exist`},
		{"escaping key", channelSpec{name: "train", uri: "s3://bkt/bad/", dataType: "S3Prefix"}, `ClientError: channel "train": object key "bad/../../escape" cannot be placed`},
		{"no manifest", channelSpec{name: "m", uri: "s3://bkt/none.json", dataType: "ManifestFile"}, `ClientError: channel "m": manifest s3://bkt/none.json does not exist`},
		{"missing local", channelSpec{name: "l", uri: "file:///no/such/dir", dataType: "S3Prefix"}, `ClientError: channel "l":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.runner.planChannel(ctx, tt.spec)
			if err == nil || !strings.HasPrefix(failureReason(err), tt.want) {
				t.Errorf("reason = %v\nwant prefix %s", err, tt.want)
			}
		})
	}
}

func TestLocalChannelIsCopied(t *testing.T) {
	e := newEnv(t)
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "a.txt"), []byte("original"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "b.txt"), []byte("b"), 0o644)
	plan, err := e.runner.planChannel(context.Background(), channelSpec{name: "l", uri: "file://" + src, dataType: "S3Prefix", distribution: "FullyReplicated"})
	if err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	if _, err := e.runner.stage(context.Background(), plan, plan.objects, dest); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listDir(t, dest), ","); got != "a.txt,sub/b.txt" {
		t.Fatalf("staged %s", got)
	}
	if err := os.WriteFile(filepath.Join(dest, "a.txt"), []byte("changed by the script"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "a.txt")); string(b) != "original" {
		t.Errorf("the user's file was modified through the channel: %q", b)
	}

	single, err := e.runner.planChannel(context.Background(), channelSpec{name: "f", uri: "file://" + filepath.Join(src, "a.txt"), dataType: "S3Prefix"})
	if err != nil || len(single.objects) != 1 || single.objects[0].rel != "a.txt" {
		t.Errorf("single file plan = %+v, %v", single, err)
	}
}
