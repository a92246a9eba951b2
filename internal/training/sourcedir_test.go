package training

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"github.com/sagebox/sagebox/internal/toolkit"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
		tw.Write([]byte(h.Name[:0] + it.body[:h.Size]))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestSourceDir(t *testing.T) {
	e := newEnv(t)
	local := t.TempDir()
	os.MkdirAll(filepath.Join(local, "dir", "src"), 0o755)
	os.WriteFile(filepath.Join(local, "dir", "src", "train.py"), []byte("print(1)"), 0o644)
	os.WriteFile(filepath.Join(local, "single.py"), []byte("print(2)"), 0o644)
	os.WriteFile(filepath.Join(local, "code.tar.gz"), tarGz(t, tarItem{name: "train.py", body: "print(3)"}), 0o644)
	e.putObject("ok.tar.gz", tarGz(t, tarItem{name: "train.py", body: "x"}, tarItem{name: "lib/util.py", body: "y"}))
	e.putObject("dotdot.tar.gz", tarGz(t, tarItem{name: "train.py", body: "x"}, tarItem{name: "../../evil.py", body: "pwned"}))
	e.putObject("abs.tar.gz", tarGz(t, tarItem{name: "train.py", body: "x"}, tarItem{name: filepath.Join(e.dataDir, "evil.py"), body: "pwned"}))
	e.putObject("symlink.tar.gz", tarGz(t,
		tarItem{name: "train.py", body: "x"},
		tarItem{name: "escape", link: "../../..", typ: tar.TypeSymlink},
		tarItem{name: "escape/evil.py", body: "pwned"}))
	e.putObject("chain.tar.gz", tarGz(t,
		tarItem{name: "train.py", body: "x"},
		tarItem{name: "a", link: ".", typ: tar.TypeSymlink},
		tarItem{name: "b", link: "a/..", typ: tar.TypeSymlink}))
	e.putObject("notgz", []byte("this is not an archive"))

	tests := []struct {
		name, dir, entry string
		wantFiles        string
		wantReason       string
	}{
		{"s3", "s3://bkt/ok.tar.gz", "train.py", "lib/util.py,train.py", ""},
		{"local dir nested entry", "file://" + filepath.Join(local, "dir"), "src/train.py", "src/train.py", ""},
		{"local single file", "file://" + filepath.Join(local, "single.py"), "single.py", "single.py", ""},
		{"local tarball", filepath.Join(local, "code.tar.gz"), "train.py", "train.py", ""},
		{"dotdot", "s3://bkt/dotdot.tar.gz", "train.py", "", `ClientError: sourcedir s3://bkt/dotdot.tar.gz was refused: unsafe path in archive: "../../evil.py" climbs out with ..`},
		{"absolute", "s3://bkt/abs.tar.gz", "train.py", "", "ClientError: sourcedir s3://bkt/abs.tar.gz was refused: unsafe path in archive"},
		{"symlink escape", "s3://bkt/symlink.tar.gz", "train.py", "", "ClientError: sourcedir s3://bkt/symlink.tar.gz was refused: unsafe path in archive: symlink \"escape\" points outside"},
		{"symlink chain", "s3://bkt/chain.tar.gz", "train.py", "", "ClientError: sourcedir s3://bkt/chain.tar.gz was refused: unsafe path in archive: symlink \"b\" resolves outside"},
		{"missing entry", "s3://bkt/ok.tar.gz", "train2.py", "", "ClientError: entry point train2.py not found in sourcedir (files: lib/util.py, train.py)"},
		{"no sourcedir", "", "train.py", "", "ClientError: entry point train.py not found in the code directory (no sagemaker_submit_directory hyperparameter was given) (files: none)"},
		{"missing object", "s3://bkt/nope.tar.gz", "train.py", "", "ClientError: sagemaker_submit_directory s3://bkt/nope.tar.gz does not exist"},
		{"not an archive", "s3://bkt/notgz", "train.py", "", "ClientError: sourcedir s3://bkt/notgz could not be extracted"},
		{"entry outside", "s3://bkt/ok.tar.gz", "../train.py", "", "ClientError: entry point ../train.py must be a path inside the source directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sandbox := t.TempDir()
			ws := toolkit.Workspace{Root: filepath.Join(sandbox, "jobs", "j", "algo-1")}
			if err := ws.Create(nil); err != nil {
				t.Fatal(err)
			}
			s := &toolkit.Spec{SubmitDir: tt.dir, EntryPoint: tt.entry}
			err := e.runner.stageSourceDir(context.Background(), s, ws)
			if tt.wantReason != "" {
				if err == nil || !strings.HasPrefix(failureReason(err), tt.wantReason) {
					t.Fatalf("reason = %v\nwant prefix %s", err, tt.wantReason)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tt.wantFiles != "" {
				if got := strings.Join(listDir(t, ws.CodeDir()), ","); got != tt.wantFiles {
					t.Errorf("code/ = %s, want %s", got, tt.wantFiles)
				}
			}
			// Nothing lands outside code/.
			for _, p := range []string{filepath.Join(sandbox, "evil.py"), filepath.Join(sandbox, "jobs", "evil.py"), filepath.Join(ws.Root, "evil.py"), filepath.Join(e.dataDir, "evil.py")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was written outside code/", p)
				}
			}
		})
	}
}
