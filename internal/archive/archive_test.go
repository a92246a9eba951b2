package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// tarEntry describes one entry of a test archive.
type tarEntry struct {
	typ  byte // tar.TypeReg, TypeDir, TypeSymlink, TypeLink
	name string
	link string
	body string
}

func buildTar(t testing.TB, entries []tarEntry, gz bool) []byte {
	t.Helper()
	b, err := buildTarErr(entries, gz)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func buildTarErr(entries []tarEntry, gz bool) ([]byte, error) {
	var buf bytes.Buffer
	var zw *gzip.Writer
	w := &buf
	tw := tar.NewWriter(w)
	if gz {
		zw = gzip.NewWriter(w)
		tw = tar.NewWriter(zw)
	}
	for _, e := range entries {
		hdr := &tar.Header{Typeflag: e.typ, Name: e.name, Linkname: e.link, Mode: 0o644}
		if e.typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if e.typ == tar.TypeDir {
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("header %q: %w", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// listTree returns every path under root (relative, slash-separated), with
// "@" appended to symlinks and "/" to directories.
func listTree(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			rel += "@"
		case d.IsDir():
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestExtract(t *testing.T) {
	tests := []struct {
		name    string
		entries []tarEntry
		wantErr string // the refusal's message, after ErrUnsafePath's
		want    []string
	}{
		{
			name: "files dirs and inner links",
			entries: []tarEntry{
				{typ: tar.TypeDir, name: "src/"},
				{typ: tar.TypeReg, name: "src/train.py", body: "print(1)"},
				{typ: tar.TypeReg, name: "./requirements.txt", body: "numpy"},
				{typ: tar.TypeSymlink, name: "link.py", link: "src/train.py"},
				{typ: tar.TypeLink, name: "hard.py", link: "src/train.py"},
			},
			want: []string{"hard.py", "link.py@", "requirements.txt", "src/", "src/train.py"},
		},
		{name: "dotdot", entries: []tarEntry{{typ: tar.TypeReg, name: "../evil", body: "x"}}, wantErr: `"../evil" climbs out with ..`},
		{name: "nested dotdot", entries: []tarEntry{{typ: tar.TypeReg, name: "a/../../evil", body: "x"}}, wantErr: `"a/../../evil" climbs out with ..`},
		{name: "absolute", entries: []tarEntry{{typ: tar.TypeReg, name: "/tmp/evil", body: "x"}}, wantErr: `"/tmp/evil" is absolute`},
		{name: "absolute symlink", entries: []tarEntry{{typ: tar.TypeSymlink, name: "l", link: "/etc"}}, wantErr: `symlink "l" points to the absolute path "/etc"`},
		{name: "escaping symlink", entries: []tarEntry{{typ: tar.TypeSymlink, name: "a/l", link: "../../x"}}, wantErr: `symlink "a/l" points outside the archive ("../../x")`},
		{
			name: "write through symlink",
			entries: []tarEntry{
				{typ: tar.TypeSymlink, name: "d", link: "."},
				{typ: tar.TypeReg, name: "d/f", body: "x"},
			},
			wantErr: `"d/f" goes through the symlink "d"`,
		},
		{
			name: "symlink chain escaping physically",
			entries: []tarEntry{
				{typ: tar.TypeSymlink, name: "a", link: "."},
				{typ: tar.TypeSymlink, name: "b", link: "a/.."},
			},
			wantErr: `symlink "b" resolves outside the archive`,
		},
		{name: "hard link outside", entries: []tarEntry{{typ: tar.TypeLink, name: "h", link: "../outside/canary"}}, wantErr: `hard link "h" targets "../outside/canary", which climbs out with ..`},
		{name: "hard link absolute", entries: []tarEntry{{typ: tar.TypeLink, name: "h", link: "/etc/passwd"}}, wantErr: `hard link "h" targets "/etc/passwd", which is absolute`},
		{
			name: "hard link through symlink",
			entries: []tarEntry{
				{typ: tar.TypeSymlink, name: "d", link: "."},
				{typ: tar.TypeReg, name: "f", body: "x"},
				{typ: tar.TypeLink, name: "h", link: "d/f"},
			},
			wantErr: `hard link "h" targets "d/f", which goes through the symlink "d"`,
		},
		{
			name: "hard link to symlink",
			entries: []tarEntry{
				{typ: tar.TypeSymlink, name: "s", link: "x"},
				{typ: tar.TypeLink, name: "h", link: "s"},
			},
			wantErr: `hard link "h" targets a symlink`,
		},
		{name: "file replacing root", entries: []tarEntry{{typ: tar.TypeReg, name: ".", body: "x"}}, wantErr: `"." would replace the destination itself`},
	}
	for _, tt := range tests {
		for _, gz := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "/tar", true: "/tgz"}[gz], func(t *testing.T) {
				sandbox := t.TempDir()
				dest := filepath.Join(sandbox, "dest")
				outside := filepath.Join(sandbox, "outside")
				if err := os.MkdirAll(outside, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(outside, "canary"), []byte("canary"), 0o644); err != nil {
					t.Fatal(err)
				}
				err := Extract(context.Background(), bytes.NewReader(buildTar(t, tt.entries, gz)), dest)
				if tt.wantErr != "" {
					if want := ErrUnsafePath.Error() + ": " + tt.wantErr; !errors.Is(err, ErrUnsafePath) || err.Error() != want {
						t.Fatalf("Extract error = %v, want %s", err, want)
					}
				} else if err != nil {
					t.Fatalf("Extract: %v", err)
				}
				assertContained(t, sandbox)
				if tt.want != nil {
					if got := listTree(t, dest); strings.Join(got, ",") != strings.Join(tt.want, ",") {
						t.Errorf("tree = %v, want %v", got, tt.want)
					}
				}
			})
		}
	}
}

// assertContained checks that an extraction into sandbox/dest left nothing
// in sandbox besides dest and the untouched canary, and that no symlink
// under dest resolves outside it.
func assertContained(t testing.TB, sandbox string) {
	t.Helper()
	entries, err := os.ReadDir(sandbox)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "dest" && e.Name() != "outside" {
			t.Errorf("extraction wrote %s outside dest", e.Name())
		}
	}
	out := listTree(t, filepath.Join(sandbox, "outside"))
	if len(out) != 1 || out[0] != "canary" {
		t.Errorf("outside dir changed: %v", out)
	}
	if b, _ := os.ReadFile(filepath.Join(sandbox, "outside", "canary")); string(b) != "canary" {
		t.Errorf("canary modified: %q", b)
	}
	dest := filepath.Join(sandbox, "dest")
	realDest, err := filepath.EvalSymlinks(dest)
	if err != nil {
		return // dest never created
	}
	_ = filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if r, err := filepath.EvalSymlinks(p); err == nil && !within(realDest, r) {
			t.Errorf("symlink %s resolves outside dest to %s", p, r)
		}
		return nil
	})
}

func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		"model.pth":         strings.Repeat("weights", 1000),
		"code/inference.py": "def model_fn(d): pass\n",
		"empty":             "",
		"deep/a/b/c.txt":    "c",
	}
	for name, body := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("model.pth", filepath.Join(src, "latest.pth")); err != nil {
		t.Fatal(err)
	}
	for _, gz := range []bool{true, false} {
		t.Run(map[bool]string{true: "tgz", false: "tar"}[gz], func(t *testing.T) {
			var buf bytes.Buffer
			var err error
			if gz {
				err = WriteTarGz(context.Background(), &buf, src)
			} else {
				err = WriteTar(context.Background(), &buf, src)
			}
			if err != nil {
				t.Fatal(err)
			}
			if gz {
				// Standard gzip, readable by the standard library.
				if _, err := gzip.NewReader(bytes.NewReader(buf.Bytes())); err != nil {
					t.Fatalf("not gzip: %v", err)
				}
			}
			dest := t.TempDir()
			if err := Extract(context.Background(), &buf, dest); err != nil {
				t.Fatal(err)
			}
			for name, body := range files {
				b, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(name)))
				if err != nil || string(b) != body {
					t.Errorf("%s = %q, %v", name, b, err)
				}
			}
			st, err := os.Stat(filepath.Join(dest, "model.pth"))
			if err != nil || st.Mode().Perm() != 0o640 {
				t.Errorf("mode of model.pth = %v, %v", st.Mode(), err)
			}
			if l, err := os.Readlink(filepath.Join(dest, "latest.pth")); err != nil || l != "model.pth" {
				t.Errorf("symlink = %q, %v", l, err)
			}
		})
	}
}

func TestWriteTarGzDirsMerges(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	write := func(dir, name, body string) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "model.pth", "host1")
	write(a, "host1.txt", "1")
	write(a, "x/inner", "dir in host1")
	write(b, "model.pth", "host2")
	write(b, "x", "file in host2")
	var buf bytes.Buffer
	if err := WriteTarGzDirs(context.Background(), &buf, a, b, filepath.Join(b, "missing")); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	if err := Extract(context.Background(), &buf, dest); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listTree(t, dest), ","); got != "host1.txt,model.pth,x" {
		t.Errorf("tree = %s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "model.pth")); string(b) != "host2" {
		t.Errorf("model.pth = %q, want the later host's", b)
	}
}

func TestWriteTarMissingDir(t *testing.T) {
	err := WriteTar(context.Background(), &bytes.Buffer{}, filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want not-exist", err)
	}
}

func TestExtractCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	data := buildTar(t, []tarEntry{{typ: tar.TypeReg, name: "a", body: "a"}}, true)
	if err := Extract(ctx, bytes.NewReader(data), t.TempDir()); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}
