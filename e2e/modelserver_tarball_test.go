package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tarEntry is one entry of a test archive: a regular file (body), a
// directory, a symlink or a hard link (link).
type tarEntry struct {
	name string
	typ  byte
	body string
	link string
}

func tarReg(name, body string) tarEntry { return tarEntry{name: name, typ: tar.TypeReg, body: body} }
func tarDir(name string) tarEntry       { return tarEntry{name: name, typ: tar.TypeDir} }
func tarSymlink(name, to string) tarEntry {
	return tarEntry{name: name, typ: tar.TypeSymlink, link: to}
}
func tarHardlink(name, to string) tarEntry {
	return tarEntry{name: name, typ: tar.TypeLink, link: to}
}

// writeTarGz writes entries, exactly as named, to a gzipped tar at path.
func writeTarGz(t *testing.T, path string, entries []tarEntry) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, ModTime: time.Now()}
		switch e.typ {
		case tar.TypeReg:
			hdr.Size = int64(len(e.body))
		case tar.TypeDir:
			hdr.Mode = 0o755
		case tar.TypeSymlink:
			hdr.Mode = 0o777
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, buf.String())
}

// echoInference is a valid handler every malicious archive carries first,
// so that an archive the extractor wrongly accepted would be served rather
// than fail for another reason.
const echoInference = `def model_fn(model_dir):
    return None


def transform_fn(model, data, content_type, accept):
    return data, "text/plain"
`

// A model.tar.gz whose entries would land outside the extraction directory
// stops `sagebox model-server --model-data` before any worker starts: it
// exits non-zero within seconds, says which entry is unsafe, writes nothing
// outside the directory it extracts into (nor leaves that directory behind),
// and leaves no process behind.
func TestModelServerRefusesMaliciousTarball(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	// The layout every case uses (base is the subtest's own temporary dir):
	//   base/cache                       XDG_CACHE_HOME of the model server
	//   base/cache/sagebox/models/model-XXXX   the extraction root
	//   base/outside                     a directory outside it, holding secret.txt
	//   base/cwd                         the server's working directory
	// From the extraction root, "../../../../outside" is base/outside.
	const up = "../../../../"
	good := []tarEntry{tarDir("code/"), tarReg("code/inference.py", echoInference)}
	cases := []struct {
		name    string
		entries func(outside string) []tarEntry
		// want are substrings of the error the server prints.
		want func(outside string) []string
	}{
		{
			name:    "dotdot",
			entries: func(string) []tarEntry { return []tarEntry{tarReg("../evil.txt", "evil")} },
			want:    func(string) []string { return []string{`"../evil.txt"`, "climbs out"} },
		},
		{
			name:    "dotdot-to-an-existing-dir",
			entries: func(string) []tarEntry { return []tarEntry{tarReg(up+"outside/evil.txt", "evil")} },
			want:    func(string) []string { return []string{strconv.Quote(up + "outside/evil.txt"), "climbs out"} },
		},
		{
			name: "dotdot-inside-a-pax-long-name",
			entries: func(string) []tarEntry {
				return []tarEntry{tarReg(strings.Repeat("d/", 60)+strings.Repeat("../", 64)+"outside/evil.txt", "evil")}
			},
			want: func(string) []string { return []string{"outside/evil.txt", "climbs out"} },
		},
		{
			name:    "absolute",
			entries: func(outside string) []tarEntry { return []tarEntry{tarReg(outside+"/evil.txt", "evil")} },
			want:    func(outside string) []string { return []string{strconv.Quote(outside + "/evil.txt"), "absolute"} },
		},
		{
			name: "symlink-climbing-out-then-write-through-it",
			entries: func(string) []tarEntry {
				return []tarEntry{tarSymlink("code/link", "../"+up+"outside"), tarReg("code/link/evil.txt", "evil")}
			},
			want: func(string) []string { return []string{`symlink "code/link"`, "outside the archive"} },
		},
		{
			name: "symlink-to-an-absolute-dir-then-write-through-it",
			entries: func(outside string) []tarEntry {
				return []tarEntry{tarSymlink("code/link", outside), tarReg("code/link/evil.txt", "evil")}
			},
			want: func(outside string) []string {
				return []string{`symlink "code/link"`, strconv.Quote(outside), "absolute"}
			},
		},
		{
			// "b" -> "a/.." reads as the root itself, but a -> . makes it
			// the root's parent.
			name: "chained-symlinks-then-write-through-them",
			entries: func(string) []tarEntry {
				return []tarEntry{tarSymlink("a", "."), tarSymlink("b", "a/.."), tarReg("b/evil.txt", "evil")}
			},
			want: func(string) []string { return []string{`"b/evil.txt" goes through the symlink "b"`} },
		},
		{
			// The same link alone: nothing is written through it, but the
			// extracted model must not keep a link out of its directory.
			name: "chained-symlinks-left-pointing-out",
			entries: func(string) []tarEntry {
				return []tarEntry{tarSymlink("a", "."), tarSymlink("b", "a/..")}
			},
			want: func(string) []string { return []string{`symlink "b"`, "resolves outside"} },
		},
		{
			name: "hardlink-climbing-out",
			entries: func(string) []tarEntry {
				return []tarEntry{tarHardlink("code/secret", up+"outside/secret.txt"), tarReg("code/secret", "pwned")}
			},
			want: func(string) []string {
				return []string{`hard link "code/secret" targets ` + strconv.Quote(up+"outside/secret.txt") + ", which climbs out"}
			},
		},
		{
			name: "hardlink-to-an-absolute-path",
			entries: func(outside string) []tarEntry {
				return []tarEntry{tarHardlink("code/secret", outside+"/secret.txt"), tarReg("code/secret", "pwned")}
			},
			want: func(outside string) []string {
				return []string{`hard link "code/secret" targets ` + strconv.Quote(outside+"/secret.txt") + ", which is absolute"}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			cache, outside, cwd := filepath.Join(base, "cache"), filepath.Join(base, "outside"), filepath.Join(base, "cwd")
			writeFile(t, filepath.Join(outside, "secret.txt"), "secret")
			os.MkdirAll(cwd, 0o755)
			tarball := filepath.Join(base, "tarballs", "model.tar.gz")
			writeTarGz(t, tarball, append(append([]tarEntry{}, good...), c.entries(outside)...))

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "model-server", "--model-data", tarball, "--port", "0")
			cmd.Dir = cwd
			marker := "XDG_CACHE_HOME=" + cache
			cmd.Env = append(os.Environ(), "SAGEBOX_PYTHON=/usr/bin/python3", marker, "SAGEMAKER_MODEL_SERVER_WORKERS=1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			began := time.Now()
			err := cmd.Run()
			took := time.Since(began)
			t.Logf("exited after %v: %v", took.Round(time.Millisecond), err)
			var exit *exec.ExitError
			switch {
			case ctx.Err() != nil:
				t.Errorf("model-server still ran after %v: the archive was accepted", took.Round(time.Millisecond))
			case !errors.As(err, &exit):
				t.Errorf("model-server exited with %v, want a non-zero exit status", err)
			case exit.ExitCode() == 0:
				t.Errorf("model-server exited 0")
			}
			if took > 5*time.Second {
				t.Errorf("model-server took %v to refuse the archive", took)
			}
			msg := stderr.String()
			mustContain(t, "stderr", msg, append([]string{"unsafe path in archive"}, c.want(outside)...)...)
			if strings.Contains(msg, "ready for invocations") || strings.Contains(stdout.String()+msg, "model loaded") {
				t.Errorf("the model was loaded from a malicious archive:\n%s", msg)
			}

			// Nothing written outside: no file of the archive's anywhere
			// under base (the cache, the outside dir, the working dir, next
			// to the tarball), the outside file untouched and not linked.
			filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.Contains(d.Name(), "evil") {
					t.Errorf("%s was written", p)
				}
				return nil
			})
			if b, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(b) != "secret" {
				t.Errorf("outside/secret.txt: %q, %v", b, err)
			}
			if st, err := os.Stat(filepath.Join(outside, "secret.txt")); err == nil {
				if nlink := st.Sys().(*syscall.Stat_t).Nlink; nlink != 1 {
					t.Errorf("outside/secret.txt has %d links, want 1", nlink)
				}
			}
			// The extraction directory itself is removed on the failure.
			if left, _ := os.ReadDir(filepath.Join(cache, "sagebox", "models")); len(left) != 0 {
				var names []string
				for _, e := range left {
					names = append(names, e.Name())
				}
				t.Errorf("left in the model cache after the failure: %v", names)
			}
			if pids := processesWithEnv(marker); len(pids) != 0 {
				t.Errorf("processes of this model server outlived it: %v", pids)
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), msg)
			}
		})
	}
}

// The control: a model.tar.gz with a code directory, a "./"-prefixed entry,
// and a symlink and a hard link that stay inside is extracted and served
// end to end, and its extraction directory is removed at shutdown.
func TestModelServerServesGoodTarball(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	tarball := filepath.Join(t.TempDir(), "model.tar.gz")
	writeTarGz(t, tarball, []tarEntry{
		tarDir("./"),
		tarDir("./code/"),
		tarReg("./code/inference.py", `import os


def model_fn(model_dir):
    def read(name):
        with open(os.path.join(model_dir, name)) as f:
            return f.read()
    return "+".join([read("data/weights.txt"), read("weights-link.txt"), read("data/weights-hard.txt")])


def transform_fn(model, data, content_type, accept):
    return "%s|%s" % (model, data.decode()), "text/plain"
`),
		tarDir("data/"),
		tarReg("data/weights.txt", "w1"),
		tarSymlink("weights-link.txt", "data/weights.txt"),
		tarHardlink("data/weights-hard.txt", "data/weights.txt"),
	})
	ms := startModelServer(t, []string{"SAGEMAKER_MODEL_SERVER_WORKERS=1"}, "--model-data", tarball)
	cache := strings.TrimPrefix(ms.cacheEnv, "XDG_CACHE_HOME=")
	models := filepath.Join(cache, "sagebox", "models")
	extracted, _ := filepath.Glob(filepath.Join(models, "model-*"))
	if len(extracted) != 1 {
		t.Fatalf("extraction dirs under %s: %v, want one", models, extracted)
	}
	if st, err := os.Lstat(filepath.Join(extracted[0], "weights-link.txt")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("weights-link.txt is not a symlink in %s: %v", extracted[0], err)
	}

	resp, err := http.Get(ms.url + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("ping: %d", resp.StatusCode)
	}
	resp, err = http.Post(ms.url+"/invocations", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "w1+w1+w1|hello"; resp.StatusCode != 200 || string(b) != want {
		t.Errorf("invocations: %d %q, want 200 %q", resp.StatusCode, b, want)
	}

	ms.cmd.Process.Signal(syscall.SIGTERM)
	ms.waitExit(t)
	if _, err := os.Stat(extracted[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the extraction dir %s is still there after shutdown (%v)", extracted[0], err)
	}
}
