package staging_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sagebox/sagebox/internal/archive"
	"github.com/sagebox/sagebox/internal/staging"
)

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

// notes records what a Stager writes to the hosts' logs.
type notes struct {
	mu    sync.Mutex
	lines map[int][]string
}

func (n *notes) add(ctx context.Context, hosts []int, msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lines == nil {
		n.lines = map[int][]string{}
	}
	for _, h := range hosts {
		n.lines[h] = append(n.lines[h], msg)
	}
}

func (n *notes) text(host int) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.lines[host], "\n")
}

func hosts(t *testing.T, n int) []staging.Host {
	t.Helper()
	root := t.TempDir()
	var out []staging.Host
	for i := range n {
		name := fmt.Sprintf("algo-%d", i+1)
		out = append(out, staging.Host{Index: i, Name: name, Tree: staging.Tree{Root: filepath.Join(root, name)}})
	}
	return out
}

func TestStageChannel(t *testing.T) {
	forEach(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		for _, k := range []string{"data/train/a/b.csv", "data/train/c.csv", "data/train/sub/", "data/train2/d.csv", "other/e.csv"} {
			be.put(t, "bkt", k, []byte("body of "+k))
		}
		var n notes
		st := &staging.Stager{Objects: be.objects, Notes: n.add}
		hs := hosts(t, 2)
		c := staging.Channel{Name: "train", URI: "s3://bkt/data/train", DataType: "S3Prefix", Distribution: "FullyReplicated", Compression: "Gzip"}
		if err := st.StageChannel(ctx, c, 2, hs); err != nil {
			t.Fatal(err)
		}
		how := "copied"
		if be.store != nil {
			how = "hard-linked"
		}
		for _, h := range hs {
			dest := h.Tree.ChannelDir("train")
			if got := strings.Join(listDir(t, dest), ","); got != "a/b.csv,c.csv,train2/d.csv" {
				t.Fatalf("%s staged %s", h.Name, got)
			}
			if b, _ := os.ReadFile(filepath.Join(dest, "a", "b.csv")); string(b) != "body of data/train/a/b.csv" {
				t.Errorf("content %q", b)
			}
			log := n.text(h.Index)
			for _, want := range []string{
				"channel train: CompressionType Gzip applies to Pipe mode; objects are staged as stored",
				"channel train: 3 files " + how + " from s3://bkt/data/train (",
			} {
				if !strings.Contains(log, want) {
					t.Errorf("%s's notes lack %q:\n%s", h.Name, want, log)
				}
			}
		}
		if be.store == nil {
			return
		}
		// The on-disk store's files are hard-linked; CopyChannels copies.
		src, err := be.store.FilePath(ctx, "bkt", "data/train/a/b.csv")
		if err != nil {
			t.Fatal(err)
		}
		a, _ := os.Stat(src)
		b, _ := os.Stat(filepath.Join(hs[0].Tree.ChannelDir("train"), "a", "b.csv"))
		if !os.SameFile(a, b) {
			t.Error("staged file is not a hard link to the object")
		}
		st.CopyChannels = true
		hs2 := hosts(t, 1)
		if err := st.StageChannel(ctx, c, 1, hs2); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(hs2[0].Tree.ChannelDir("train"), "a", "b.csv")
		if cp, _ := os.Stat(p); os.SameFile(a, cp) {
			t.Error("CopyChannels produced a hard link")
		}
		if got, _ := os.ReadFile(p); string(got) != "body of data/train/a/b.csv" {
			t.Errorf("copied content %q", got)
		}
	})
}

func TestShardedByS3Key(t *testing.T) {
	forEach(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		for i := range 5 {
			be.put(t, "bkt", fmt.Sprintf("shards/part-%d", i), []byte{byte(i)})
		}
		st := &staging.Stager{Objects: be.objects}
		hs := hosts(t, 2)
		if err := st.StageChannel(ctx, staging.Channel{Name: "train", URI: "s3://bkt/shards/", DataType: "S3Prefix", Distribution: "ShardedByS3Key"}, 2, hs); err != nil {
			t.Fatal(err)
		}
		want := []string{"part-0,part-2,part-4", "part-1,part-3"}
		for i, h := range hs {
			if got := strings.Join(listDir(t, h.Tree.ChannelDir("train")), ","); got != want[i] {
				t.Errorf("%s gets %s, want %s", h.Name, got, want[i])
			}
		}
		// A pod stages only its own host: its share is the same.
		one := hosts(t, 2)[1:]
		if err := st.StageChannel(ctx, staging.Channel{Name: "train", URI: "s3://bkt/shards/", DataType: "S3Prefix", Distribution: "ShardedByS3Key"}, 2, one); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(listDir(t, one[0].Tree.ChannelDir("train")), ","); got != want[1] {
			t.Errorf("algo-2 alone gets %s, want %s", got, want[1])
		}
		plan, err := st.PlanChannel(ctx, staging.Channel{Name: "train", URI: "s3://bkt/shards/", DataType: "S3Prefix", Distribution: "FullyReplicated"})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(plan.Share(1, 2)); n != 5 {
			t.Errorf("FullyReplicated host 1 gets %d objects, want 5", n)
		}
	})
}

func TestManifestChannel(t *testing.T) {
	forEach(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		for _, k := range []string{"ds/img/1.png", "ds/img/2.png", "ds/img/3.png"} {
			be.put(t, "bkt", k, []byte(k))
		}
		be.put(t, "bkt", "manifests/m.json", []byte(`[{"prefix": "s3://bkt/ds/"}, "img/2.png", "img/1.png"]`))
		st := &staging.Stager{Objects: be.objects}
		plan, err := st.PlanChannel(ctx, staging.Channel{Name: "train", URI: "s3://bkt/manifests/m.json", DataType: "ManifestFile", Distribution: "FullyReplicated"})
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Items) != 2 || plan.Items[0].Rel != "img/2.png" {
			t.Errorf("manifest order lost: %+v", plan.Items)
		}
		dest := t.TempDir()
		if _, err := st.Place(ctx, plan, plan.Items, dest); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(listDir(t, dest), ","); got != "img/1.png,img/2.png" {
			t.Errorf("staged %s", got)
		}
	})
}

func TestChannelErrors(t *testing.T) {
	forEach(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		be.put(t, "bkt", "bad/../../escape", []byte("x"))
		be.put(t, "bkt", "m/notjson", []byte("{"))
		be.put(t, "bkt", "m/nohead", []byte(`["a"]`))
		be.put(t, "bkt", "m/nums", []byte(`[{"prefix": "s3://bkt/x/"}, 1]`))
		be.put(t, "bkt", "m/dotdot", []byte(`[{"prefix": "s3://bkt/x/"}, "../y"]`))
		be.put(t, "bkt", "m/missing", []byte(`[{"prefix": "s3://bkt/x/"}, "gone"]`))
		tests := []struct {
			name string
			c    staging.Channel
			want string
		}{
			{"empty", staging.Channel{Name: "train", URI: "s3://bkt/nothing/here", DataType: "S3Prefix"},
				`ClientError: No S3 objects found under S3 URL "s3://bkt/nothing/here" given in input data source for channel "train". Please ensure that the bucket exists and that objects exist under that S3 prefix.`},
			{"no bucket", staging.Channel{Name: "train", URI: "s3://nobucket/x", DataType: "S3Prefix"}, `ClientError: channel "train": bucket "nobucket" does not exist (S3Uri s3://nobucket/x)`},
			{"bad uri", staging.Channel{Name: "train", URI: "s3://B_d/x", DataType: "S3Prefix"}, `ClientError: channel "train": invalid s3 URI`},
			{"escaping key", staging.Channel{Name: "train", URI: "s3://bkt/bad/", DataType: "S3Prefix"}, `ClientError: channel "train": object key "bad/../../escape" cannot be placed inside the channel directory (it contains "..")`},
			{"no manifest", staging.Channel{Name: "m", URI: "s3://bkt/none.json", DataType: "ManifestFile"}, `ClientError: channel "m": manifest s3://bkt/none.json does not exist`},
			{"manifest not json", staging.Channel{Name: "m", URI: "s3://bkt/m/notjson", DataType: "ManifestFile"}, `ClientError: channel "m": manifest s3://bkt/m/notjson is not a JSON array starting with {"prefix": ...}`},
			{"manifest no prefix", staging.Channel{Name: "m", URI: "s3://bkt/m/nohead", DataType: "ManifestFile"}, `ClientError: channel "m": manifest s3://bkt/m/nohead must start with {"prefix": "s3://..."}`},
			{"manifest numbers", staging.Channel{Name: "m", URI: "s3://bkt/m/nums", DataType: "ManifestFile"}, `ClientError: channel "m": manifest s3://bkt/m/nums: entries after the prefix must be strings`},
			{"manifest dotdot", staging.Channel{Name: "m", URI: "s3://bkt/m/dotdot", DataType: "ManifestFile"}, `ClientError: channel "m": manifest entry: object key "../y" cannot be placed`},
			{"manifest missing object", staging.Channel{Name: "m", URI: "s3://bkt/m/missing", DataType: "ManifestFile"}, `ClientError: channel "m": object s3://bkt/x/gone does not exist`},
			{"missing local", staging.Channel{Name: "l", URI: "file:///no/such/dir", DataType: "S3Prefix"}, `ClientError: channel "l":`},
			{"relative local", staging.Channel{Name: "l", URI: "file://rel/dir", DataType: "S3Prefix"}, `ClientError: channel "l": file://rel/dir must be an absolute file:// path`},
		}
		st := &staging.Stager{Objects: be.objects}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := st.StageChannel(ctx, tt.c, 1, hosts(t, 1))
				var ce *staging.ClientError
				if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), tt.want) {
					t.Errorf("err = %v\nwant a ClientError with prefix %s", err, tt.want)
				}
			})
		}
	})
}

func TestLocalChannelIsCopied(t *testing.T) {
	st := &staging.Stager{Objects: newMem()}
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "a.txt"), []byte("original"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "b.txt"), []byte("b"), 0o644)
	hs := hosts(t, 1)
	if err := st.StageChannel(context.Background(), staging.Channel{Name: "l", URI: "file://" + src, DataType: "S3Prefix", Distribution: "FullyReplicated"}, 1, hs); err != nil {
		t.Fatal(err)
	}
	dest := hs[0].Tree.ChannelDir("l")
	if got := strings.Join(listDir(t, dest), ","); got != "a.txt,sub/b.txt" {
		t.Fatalf("staged %s", got)
	}
	if err := os.WriteFile(filepath.Join(dest, "a.txt"), []byte("changed by the script"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "a.txt")); string(b) != "original" {
		t.Errorf("the user's file was modified through the channel: %q", b)
	}
	single, err := st.PlanChannel(context.Background(), staging.Channel{Name: "f", URI: "file://" + filepath.Join(src, "a.txt"), DataType: "S3Prefix"})
	if err != nil || len(single.Items) != 1 || single.Items[0].Rel != "a.txt" {
		t.Errorf("single file plan = %+v, %v", single, err)
	}
}

type tarItem struct {
	name, link, body string
	typ              byte
}

func tarGz(t *testing.T, items ...tarItem) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, it := range items {
		typ := it.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: it.name, Linkname: it.link, Typeflag: typ, Mode: 0o644, Size: int64(len(it.body))}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(it.body[:h.Size]))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestSourceDir(t *testing.T) {
	forEach(t, func(t *testing.T, be backend) {
		local := t.TempDir()
		os.MkdirAll(filepath.Join(local, "dir", "src"), 0o755)
		os.WriteFile(filepath.Join(local, "dir", "src", "train.py"), []byte("print(1)"), 0o644)
		os.WriteFile(filepath.Join(local, "single.py"), []byte("print(2)"), 0o644)
		os.WriteFile(filepath.Join(local, "code.tar.gz"), tarGz(t, tarItem{name: "train.py", body: "print(3)"}), 0o644)
		be.put(t, "bkt", "ok.tar.gz", tarGz(t, tarItem{name: "train.py", body: "x"}, tarItem{name: "lib/util.py", body: "y"}))
		be.put(t, "bkt", "dotdot.tar.gz", tarGz(t, tarItem{name: "train.py", body: "x"}, tarItem{name: "../../evil.py", body: "pwned"}))
		be.put(t, "bkt", "symlink.tar.gz", tarGz(t,
			tarItem{name: "train.py", body: "x"},
			tarItem{name: "escape", link: "../../..", typ: tar.TypeSymlink},
			tarItem{name: "escape/evil.py", body: "pwned"}))
		be.put(t, "bkt", "notgz", []byte("this is not an archive"))
		tests := []struct {
			name, dir, entry string
			wantFiles        string
			wantErr          string
		}{
			{"s3", "s3://bkt/ok.tar.gz", "train.py", "lib/util.py,train.py", ""},
			{"local dir nested entry", "file://" + filepath.Join(local, "dir"), "src/train.py", "src/train.py", ""},
			{"local single file", "file://" + filepath.Join(local, "single.py"), "single.py", "single.py", ""},
			{"local tarball", filepath.Join(local, "code.tar.gz"), "train.py", "train.py", ""},
			{"dotdot", "s3://bkt/dotdot.tar.gz", "train.py", "", `ClientError: sourcedir s3://bkt/dotdot.tar.gz was refused: unsafe path in archive: "../../evil.py" climbs out with ..`},
			{"symlink escape", "s3://bkt/symlink.tar.gz", "train.py", "", `ClientError: sourcedir s3://bkt/symlink.tar.gz was refused: unsafe path in archive: symlink "escape" points outside`},
			{"missing entry", "s3://bkt/ok.tar.gz", "train2.py", "", "ClientError: entry point train2.py not found in sourcedir (files: lib/util.py, train.py)"},
			{"no sourcedir", "", "train.py", "", "ClientError: entry point train.py not found in the code directory (no sagemaker_submit_directory hyperparameter was given) (files: none)"},
			{"missing object", "s3://bkt/nope.tar.gz", "train.py", "", "ClientError: sagemaker_submit_directory s3://bkt/nope.tar.gz does not exist"},
			{"missing bucket", "s3://nobkt/x.tar.gz", "train.py", "", "ClientError: sagemaker_submit_directory s3://nobkt/x.tar.gz does not exist"},
			{"not an archive", "s3://bkt/notgz", "train.py", "", "ClientError: sourcedir s3://bkt/notgz could not be extracted (it must be a tar or tar.gz archive)"},
			{"entry outside", "s3://bkt/ok.tar.gz", "../train.py", "", "ClientError: entry point ../train.py must be a path inside the source directory"},
			{"relative", "code/", "train.py", "", `ClientError: sagemaker_submit_directory "code/" must be an s3:// URI, a file:// URI or an absolute path`},
		}
		st := &staging.Stager{Objects: be.objects}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				sandbox := t.TempDir()
				tree := staging.Tree{Root: filepath.Join(sandbox, "jobs", "j", "algo-1")}
				os.MkdirAll(tree.CodeDir(), 0o755)
				err := st.StageSourceDir(context.Background(), tt.dir, tt.entry, tree)
				if tt.wantErr != "" {
					var ce *staging.ClientError
					if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), tt.wantErr) {
						t.Fatalf("err = %v\nwant prefix %s", err, tt.wantErr)
					}
				} else if err != nil {
					t.Fatal(err)
				}
				if tt.wantFiles != "" {
					if got := strings.Join(listDir(t, tree.CodeDir()), ","); got != tt.wantFiles {
						t.Errorf("code/ = %s, want %s", got, tt.wantFiles)
					}
				}
				for _, p := range []string{filepath.Join(sandbox, "evil.py"), filepath.Join(sandbox, "jobs", "evil.py"), filepath.Join(tree.Root, "evil.py")} {
					if _, err := os.Lstat(p); err == nil {
						t.Errorf("%s was written outside code/", p)
					}
				}
			})
		}
	})
}

// TestSourceDirLimits: a source directory that unpacks past the job's
// limits fails with a ClientError that names the limit (R6: a 1 MB
// archive unpacked to 1 GB and the job Completed).
func TestSourceDirLimits(t *testing.T) {
	forEach(t, func(t *testing.T, be backend) {
		big := strings.Repeat("0", 2<<20)
		be.put(t, "bkt", "bomb.tar.gz", tarGz(t, tarItem{name: "train.py", body: "x"}, tarItem{name: "zeros.bin", body: big}))
		be.put(t, "bkt", "many.tar.gz", tarGz(t, tarItem{name: "train.py", body: "x"}, tarItem{name: "a", body: "1"}, tarItem{name: "b", body: "2"}))
		st := &staging.Stager{Objects: be.objects, ArchiveLimits: archive.Limits{MaxBytes: 1 << 20, MaxEntries: 2}, LimitsFrom: "ResourceConfig.VolumeSizeInGB is 1"}
		for src, want := range map[string]string{
			"s3://bkt/bomb.tar.gz": `ClientError: sourcedir s3://bkt/bomb.tar.gz was refused: archive unpacks to more than 1.0 MiB (1048576 bytes) (stopped at "zeros.bin"); the limit (ResourceConfig.VolumeSizeInGB is 1) is what the job's volume can hold`,
			"s3://bkt/many.tar.gz": `ClientError: sourcedir s3://bkt/many.tar.gz was refused: archive has more than 2 entries (stopped at "b"); the limit (ResourceConfig.VolumeSizeInGB is 1) is what the job's volume can hold`,
		} {
			tree := staging.Tree{Root: filepath.Join(t.TempDir(), "algo-1")}
			os.MkdirAll(tree.CodeDir(), 0o755)
			err := st.StageSourceDir(context.Background(), src, "train.py", tree)
			var ce *staging.ClientError
			if !errors.As(err, &ce) || err.Error() != want {
				t.Errorf("%s:\n got %v\nwant %s", src, err, want)
			}
		}
	})
}

func TestCheckpoints(t *testing.T) {
	forEach(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		be.put(t, "bkt", "ck/run1/old.pt", []byte("restored"))
		be.put(t, "bkt", "ck/run1/deep/a.pt", []byte("a"))
		be.put(t, "bkt", "ck/run1/deep/b.pt", []byte("b"))
		var n notes
		st := &staging.Stager{Objects: be.objects, Notes: n.add}
		hs := hosts(t, 2)
		ck, err := st.Checkpoints(ctx, staging.CheckpointConfig{S3Uri: "s3://bkt/ck/run1"}, hs)
		if err != nil {
			t.Fatal(err)
		}
		if err := ck.Download(ctx); err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if got := strings.Join(listDir(t, h.Tree.CheckpointDir()), ","); got != "deep/a.pt,deep/b.pt,old.pt" {
				t.Errorf("%s restored %s", h.Name, got)
			}
			if !strings.Contains(n.text(h.Index), "restored 3 checkpoint files from s3://bkt/ck/run1/ into "+h.Tree.CheckpointDir()) {
				t.Errorf("%s notes: %s", h.Name, n.text(h.Index))
			}
		}
		if be.store != nil {
			src, _ := be.store.FilePath(ctx, "bkt", "ck/run1/old.pt")
			a, _ := os.Stat(src)
			c, _ := os.Stat(filepath.Join(hs[0].Tree.CheckpointDir(), "old.pt"))
			if os.SameFile(a, c) {
				t.Error("a restored checkpoint must be a copy, not a hard link")
			}
		}
		h1 := hs[0].Tree.CheckpointDir()
		os.WriteFile(filepath.Join(h1, "epoch-1.pt"), []byte("e1"), 0o644)
		os.MkdirAll(filepath.Join(h1, "sub"), 0o755)
		os.WriteFile(filepath.Join(h1, "sub", "x.pt"), []byte("x"), 0o644)
		if err := ck.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		for key, want := range map[string]string{"ck/run1/epoch-1.pt": "e1", "ck/run1/sub/x.pt": "x", "ck/run1/old.pt": "restored"} {
			if got, _ := be.get(t, "bkt", key); string(got) != want {
				t.Errorf("%s = %q, want %q", key, got, want)
			}
		}
		// Only what changed goes up again: overwrite old.pt's object behind
		// the sync's back and check it is left alone.
		be.put(t, "bkt", "ck/run1/old.pt", []byte("untouched"))
		be.put(t, "bkt", "ck/run1/epoch-1.pt", []byte("untouched"))
		os.WriteFile(filepath.Join(h1, "sub", "x.pt"), []byte("x2"), 0o644)
		if err := ck.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := be.get(t, "bkt", "ck/run1/sub/x.pt"); string(got) != "x2" {
			t.Errorf("a changed checkpoint was not uploaded again: %q", got)
		}
		for _, key := range []string{"ck/run1/old.pt", "ck/run1/epoch-1.pt"} {
			if got, _ := be.get(t, "bkt", key); string(got) != "untouched" {
				t.Errorf("unchanged %s was uploaded again", key)
			}
		}
	})
}

func TestCheckpointConfigErrors(t *testing.T) {
	ctx := context.Background()
	var n notes
	st := &staging.Stager{Objects: newMem("bkt"), Notes: n.add}
	if ck, err := st.Checkpoints(ctx, staging.CheckpointConfig{}, hosts(t, 1)); ck != nil || err != nil || ck.Download(ctx) != nil || ck.Sync(ctx) != nil {
		t.Errorf("no S3Uri: %v %v", ck, err)
	}
	if _, err := st.Checkpoints(ctx, staging.CheckpointConfig{S3Uri: "s3://bkt/x", LocalPath: "rel"}, hosts(t, 1)); err == nil || err.Error() != `ClientError: CheckpointConfig.LocalPath "rel" must be an absolute path` {
		t.Errorf("relative LocalPath: %v", err)
	}
	ck, err := st.Checkpoints(ctx, staging.CheckpointConfig{S3Uri: "s3://nobkt/x"}, hosts(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := ck.Download(ctx); err == nil || err.Error() != `ClientError: CheckpointConfig.S3Uri: bucket "nobkt" does not exist` {
		t.Errorf("missing bucket: %v", err)
	}
	// A LocalPath outside /opt/ml is a container path on SageMaker: it
	// stays inside the workspace, never a host directory the caller picks.
	hs := hosts(t, 1)
	outside := filepath.Join(t.TempDir(), "host-dir")
	ck, err = st.Checkpoints(ctx, staging.CheckpointConfig{S3Uri: "s3://bkt/x", LocalPath: outside}, hs)
	if err != nil {
		t.Fatal(err)
	}
	if d := ck.Dirs(); len(d) != 1 || d[0] != hs[0].Tree.CheckpointDir() {
		t.Errorf("dirs %v", d)
	}
	if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the host path was created: %v", err)
	}
	if !strings.Contains(n.text(0), "is a path inside the training container; on sagebox it is "+hs[0].Tree.CheckpointDir()) {
		t.Errorf("notes: %s", n.text(0))
	}
	// A path under /opt/ml maps into the tree.
	ck, err = st.Checkpoints(ctx, staging.CheckpointConfig{S3Uri: "s3://bkt/x", LocalPath: "/opt/ml/ckpt"}, hs)
	if err != nil || len(ck.Dirs()) != 1 || ck.Dirs()[0] != filepath.Join(hs[0].Tree.Root, "ckpt") {
		t.Errorf("/opt/ml/ckpt: %v %v", ck.Dirs(), err)
	}
}

// TestLocalPathsPolicy: file:// channels, source directories and output
// paths are refused where the server allows none, and outside the allowed
// roots (symlinks resolved) where it names some.
func TestLocalPathsPolicy(t *testing.T) {
	ctx := context.Background()
	allowed := t.TempDir()
	other := t.TempDir()
	os.MkdirAll(filepath.Join(allowed, "code"), 0o755)
	os.MkdirAll(filepath.Join(allowed, "data", "sub"), 0o755)
	os.MkdirAll(filepath.Join(allowed, "leaky"), 0o755)
	os.WriteFile(filepath.Join(allowed, "code", "train.py"), []byte("print(1)"), 0o644)
	os.WriteFile(filepath.Join(allowed, "data", "sub", "rows.csv"), []byte("1,2"), 0o644)
	os.Symlink(".", filepath.Join(allowed, "code", "loop")) // a cycle inside the root
	os.WriteFile(filepath.Join(other, "secret.txt"), []byte("x"), 0o644)
	os.Symlink(other, filepath.Join(allowed, "link-out"))
	os.Symlink(filepath.Join(other, "secret.txt"), filepath.Join(allowed, "leaky", "secret.txt"))
	os.WriteFile(filepath.Join(allowed, "leaky", "train.py"), []byte("print(1)"), 0o644)
	roots := staging.LocalPaths{Roots: []string{allowed}}
	deny := staging.LocalPaths{Deny: true, Why: "it listens on 0.0.0.0:7070"}
	tree := func() staging.Tree {
		tr := staging.Tree{Root: filepath.Join(t.TempDir(), "algo-1")}
		os.MkdirAll(tr.CodeDir(), 0o755)
		return tr
	}
	for _, tc := range []struct {
		name    string
		policy  staging.LocalPaths
		run     func(st *staging.Stager) error
		wantErr string
	}{
		{"channel under a root", roots, func(st *staging.Stager) error {
			_, err := st.PlanChannel(ctx, staging.Channel{Name: "train", URI: "file://" + filepath.Join(allowed, "data")})
			return err
		}, ""},
		{"channel with a file linked from outside", roots, func(st *staging.Stager) error {
			_, err := st.PlanChannel(ctx, staging.Channel{Name: "train", URI: "file://" + filepath.Join(allowed, "leaky")})
			return err
		}, "is a symlink to " + filepath.Join(other, "secret.txt") + " is outside the directories this server allows"},
		{"channel outside the roots", roots, func(st *staging.Stager) error {
			_, err := st.PlanChannel(ctx, staging.Channel{Name: "train", URI: "file://" + other})
			return err
		}, `ClientError: channel "train" file://` + other + ` is outside the directories this server allows (--allow-local-paths ` + allowed + `)`},
		{"channel through a symlink out of a root", roots, func(st *staging.Stager) error {
			_, err := st.PlanChannel(ctx, staging.Channel{Name: "train", URI: "file://" + filepath.Join(allowed, "link-out")})
			return err
		}, "is outside the directories this server allows"},
		{"channel on a server that allows none", deny, func(st *staging.Stager) error {
			_, err := st.PlanChannel(ctx, staging.Channel{Name: "train", URI: "file://" + allowed})
			return err
		}, `ClientError: channel "train" file://` + allowed + `: this server does not allow paths on its machine (it listens on 0.0.0.0:7070); use an s3:// URI, or ask its operator to allow the directory with --allow-local-paths`},
		{"source directory outside the roots", roots, func(st *staging.Stager) error {
			return st.StageSourceDir(ctx, "file://"+other, "secret.txt", tree())
		}, "ClientError: sagemaker_submit_directory " + other + " is outside the directories this server allows"},
		{"source directory under a root, with a link cycle", roots, func(st *staging.Stager) error {
			return st.StageSourceDir(ctx, "file://"+filepath.Join(allowed, "code"), "train.py", tree())
		}, ""},
		{"source directory with a link out of the root", roots, func(st *staging.Stager) error {
			return st.StageSourceDir(ctx, "file://"+allowed, "code/train.py", tree())
		}, "a symlink leads to " + other},
		{"output path where none is allowed", deny, func(st *staging.Stager) error {
			_, err := st.UploadArtifacts(ctx, staging.Output{Path: "file://" + filepath.Join(other, "out"), Job: "j"}, []staging.Tree{tree()})
			return err
		}, "ClientError: S3OutputPath " + filepath.Join(other, "out") + ": this server does not allow paths on its machine"},
		{"output path not yet created, under a root", roots, func(st *staging.Stager) error {
			_, err := st.UploadArtifacts(ctx, staging.Output{Path: "file://" + filepath.Join(allowed, "new", "out"), Job: "j"}, []staging.Tree{tree()})
			return err
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &staging.Stager{Objects: newMem("bkt"), LocalPaths: tc.policy}
			err := tc.run(st)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v\nwant %s", err, tc.wantErr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(other, "out")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused output path was written: %v", err)
	}
}

// extract unpacks a tar.gz and returns its files.
func extract(t *testing.T, b []byte) map[string]string {
	t.Helper()
	dir := t.TempDir()
	if err := archive.Extract(context.Background(), bytes.NewReader(b), dir); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, rel := range listDir(t, dir) {
		body, _ := os.ReadFile(filepath.Join(dir, rel))
		out[rel] = string(body)
	}
	return out
}

func TestUploadArtifacts(t *testing.T) {
	forEach(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		hs := hosts(t, 2)
		var trees []staging.Tree
		for i, h := range hs {
			os.MkdirAll(h.Tree.ModelDir(), 0o755)
			os.MkdirAll(h.Tree.OutputDataDir(), 0o755)
			os.WriteFile(filepath.Join(h.Tree.ModelDir(), "model.pt"), []byte(h.Name), 0o644)
			os.WriteFile(filepath.Join(h.Tree.ModelDir(), fmt.Sprintf("only-%d", i)), []byte("x"), 0o644)
			os.WriteFile(filepath.Join(h.Tree.OutputDataDir(), h.Name+".txt"), []byte("data"), 0o644)
			trees = append(trees, h.Tree)
		}
		st := &staging.Stager{Objects: be.objects}
		uri, err := st.UploadArtifacts(ctx, staging.Output{Path: "s3://out/prefix/", Job: "j1"}, trees)
		if err != nil {
			t.Fatal(err)
		}
		if uri != "s3://out/prefix/j1/output/model.tar.gz" {
			t.Errorf("model uri %s", uri)
		}
		model, ok := be.get(t, "out", "prefix/j1/output/model.tar.gz")
		if !ok {
			t.Fatal("no model.tar.gz")
		}
		if got := extract(t, model); fmt.Sprint(got) != "map[model.pt:algo-2 only-0:x only-1:x]" {
			t.Errorf("model.tar.gz holds %v", got)
		}
		data, _ := be.get(t, "out", "prefix/j1/output/output.tar.gz")
		if got := extract(t, data); fmt.Sprint(got) != "map[algo-1.txt:data algo-2.txt:data]" {
			t.Errorf("output.tar.gz holds %v", got)
		}

		uri, err = st.UploadArtifacts(ctx, staging.Output{Path: "s3://out", Job: "j2", Compression: "NONE"}, trees)
		if err != nil || uri != "s3://out/j2/output/model/" {
			t.Fatalf("NONE: %s %v", uri, err)
		}
		if b, _ := be.get(t, "out", "j2/output/model/model.pt"); string(b) != "algo-2" {
			t.Errorf("NONE model.pt = %q", b)
		}

		dir := t.TempDir()
		uri, err = st.UploadArtifacts(ctx, staging.Output{Path: "file://" + dir, Job: "j3"}, trees)
		if err != nil || uri != "file://"+filepath.Join(dir, "j3/output/model.tar.gz") {
			t.Fatalf("file://: %s %v", uri, err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "j3", "output", "model.tar.gz"))
		if !bytes.Equal(b, model) {
			t.Error("file:// model.tar.gz differs from the uploaded one")
		}

		for path, want := range map[string]string{
			"s3://nobucket/x": `ClientError: output bucket "nobucket" does not exist`,
			"file://rel":      `ClientError: S3OutputPath "file://rel" must be an absolute file:// path`,
			"s3://B/x":        `ClientError: S3OutputPath: invalid s3 URI`,
		} {
			_, err := st.UploadArtifacts(ctx, staging.Output{Path: path, Job: "j"}, trees)
			var ce *staging.ClientError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want %s", path, err, want)
			}
		}
	})
}

// An Objects without the local fast paths still places every file, by
// download, and a failed download leaves nothing behind.
func TestPlaceByDownload(t *testing.T) {
	mem := newMem("bkt")
	for i := range 20 {
		mem.put("bkt", fmt.Sprintf("d/f%02d", i), bytes.Repeat([]byte{byte(i)}, 1000))
	}
	st := &staging.Stager{Objects: failing{mem, "d/f07"}}
	hs := hosts(t, 1)
	err := st.StageChannel(context.Background(), staging.Channel{Name: "c", URI: "s3://bkt/d/", DataType: "S3Prefix"}, 1, hs)
	if err == nil || !strings.Contains(err.Error(), "stage f07 of channel c") {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(filepath.Join(hs[0].Tree.ChannelDir("c"), "f07")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed download left a file: %v", err)
	}
	st.Objects = mem
	hs = hosts(t, 1)
	if err := st.StageChannel(context.Background(), staging.Channel{Name: "c", URI: "s3://bkt/d/", DataType: "S3Prefix"}, 1, hs); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		b, _ := os.ReadFile(filepath.Join(hs[0].Tree.ChannelDir("c"), fmt.Sprintf("f%02d", i)))
		if !bytes.Equal(b, bytes.Repeat([]byte{byte(i)}, 1000)) {
			t.Errorf("f%02d wrong", i)
		}
	}
}

// failing breaks the body of one key half-way.
type failing struct {
	*memObjects
	key string
}

func (f failing) Get(ctx context.Context, bucket, key string) (io.ReadCloser, staging.ObjectMeta, error) {
	r, m, err := f.memObjects.Get(ctx, bucket, key)
	if err != nil || key != f.key {
		return r, m, err
	}
	return io.NopCloser(io.MultiReader(io.LimitReader(r, 10), errReader{})), m, nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
