package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// zerosTarGz is a gzip tar with one small file and one file of n zeros: a
// tar bomb in the shape the reliability probe used (1 MB -> 1 GB).
func zerosTarGz(t *testing.T, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range []struct {
		name string
		size int64
	}{{"train.py", 9}, {"zeros.bin", n}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Size: e.size, Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 1<<20)
		if e.name == "train.py" {
			body = []byte("print(1)\n")
		}
		for left := e.size; left > 0; left -= int64(len(body)) {
			if _, err := tw.Write(body[:min(int64(len(body)), left)]); err != nil {
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
	return buf.Bytes()
}

func TestExtractStopsAtTheSizeLimit(t *testing.T) {
	bomb := zerosTarGz(t, 64<<20)
	dest := t.TempDir()
	err := ExtractLimited(context.Background(), bytes.NewReader(bomb), dest, Limits{MaxBytes: 16 << 20})
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrLimit) || le.What != "size" || le.Entry != "zeros.bin" {
		t.Fatalf("got %v, want a size LimitError at zeros.bin", err)
	}
	if want := `archive unpacks to more than 16.0 MiB (16777216 bytes) (stopped at "zeros.bin")`; err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
	if _, err := os.Stat(filepath.Join(dest, "zeros.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("zeros.bin was written: %v", err)
	}
	// The same archive fits a larger limit, and its zeros cost no disk.
	dest = t.TempDir()
	if err := ExtractLimited(context.Background(), bytes.NewReader(bomb), dest, Limits{MaxBytes: 64<<20 + 9}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dest, "zeros.bin"))
	if err != nil || st.Size() != 64<<20 {
		t.Fatalf("zeros.bin: %v %v", st, err)
	}
	if blocks := st.Sys().(*syscall.Stat_t).Blocks * 512; blocks > 1<<20 {
		t.Errorf("64 MiB of zeros take %d bytes of disk; want holes", blocks)
	}
}

func TestExtractStopsAtTheEntryLimit(t *testing.T) {
	var entries []tarEntry
	for i := 0; i < 20; i++ {
		entries = append(entries, tarEntry{typ: tar.TypeReg, name: "f" + strings.Repeat("x", i), body: "x"})
	}
	archive := buildTar(t, entries, true)
	err := ExtractLimited(context.Background(), bytes.NewReader(archive), t.TempDir(), Limits{MaxEntries: 10})
	var le *LimitError
	if !errors.As(err, &le) || le.What != "entries" || le.Max != 10 {
		t.Fatalf("got %v, want an entries LimitError", err)
	}
	if !strings.HasPrefix(err.Error(), "archive has more than 10 entries") {
		t.Errorf("message %q", err)
	}
	if err := ExtractLimited(context.Background(), bytes.NewReader(archive), t.TempDir(), Limits{MaxEntries: 20}); err != nil {
		t.Errorf("20 entries under a limit of 20: %v", err)
	}
}

// TestExtractGNUSparse: a member GNU tar wrote with --sparse is extracted
// with its content and its holes, not dropped (it was silently skipped).
func TestExtractGNUSparse(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("GNU tar not installed")
	}
	src := t.TempDir()
	f, err := os.Create(filepath.Join(src, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("tail"), 1<<28); err != nil { // 256 MiB hole, then data
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(src, "train.py"), []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archivePath := filepath.Join(t.TempDir(), "sparse.tar.gz")
	if out, err := exec.Command("tar", "--sparse", "--format=gnu", "-czf", archivePath, "-C", src, "train.py", "big.bin").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	// The archive really has a sparse member.
	af, _ := os.Open(archivePath)
	zr, _ := gzip.NewReader(af)
	tr := tar.NewReader(zr)
	sparse := false
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		sparse = sparse || h.Typeflag == tar.TypeGNUSparse
	}
	af.Close()
	if !sparse {
		t.Fatal("tar --sparse wrote no GNU sparse member; the test proves nothing")
	}

	dest := t.TempDir()
	if err := ExtractFile(context.Background(), archivePath, dest); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dest, "big.bin"))
	if err != nil {
		t.Fatalf("sparse member missing: %v", err)
	}
	if len(b) != 1<<28+4 || string(b[len(b)-4:]) != "tail" || bytes.Count(b[:1<<20], []byte{0}) != 1<<20 {
		t.Errorf("big.bin: %d bytes, ends %q", len(b), b[len(b)-4:])
	}
	st, _ := os.Stat(filepath.Join(dest, "big.bin"))
	if blocks := st.Sys().(*syscall.Stat_t).Blocks * 512; blocks > 1<<20 {
		t.Errorf("the 256 MiB hole takes %d bytes of disk", blocks)
	}
	// Its apparent size counts against the limit.
	err = ExtractFileLimited(context.Background(), archivePath, t.TempDir(), Limits{MaxBytes: 1 << 27})
	if !errors.Is(err, ErrLimit) {
		t.Errorf("a 256 MiB sparse file under a 128 MiB limit: %v", err)
	}
}

// TestExtractSDKRepackRoot: the SageMaker SDK's repack writes model.tar.gz
// with tarfile.add(dir, arcname="/"), so its first entry is the directory
// "/". That names the destination, not the host's root.
func TestExtractSDKRepackRoot(t *testing.T) {
	archive := buildTar(t, []tarEntry{
		{typ: tar.TypeDir, name: "/"},
		{typ: tar.TypeReg, name: "model.pth", body: "weights"},
		{typ: tar.TypeDir, name: "code/"},
		{typ: tar.TypeReg, name: "code/inference.py", body: "def model_fn(d): pass\n"},
	}, true)
	dest := t.TempDir()
	if err := Extract(context.Background(), bytes.NewReader(archive), dest); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "code", "inference.py")); err != nil || !strings.Contains(string(b), "model_fn") {
		t.Errorf("code/inference.py: %q %v", b, err)
	}
	// Absolute entries other than the root itself are still refused.
	for _, name := range []string{"/etc/x", "//etc"} {
		typ := byte(tar.TypeReg)
		if name == "//etc" {
			typ = tar.TypeDir
		}
		bad := buildTar(t, []tarEntry{{typ: typ, name: name, body: "x"}}, false)
		if err := Extract(context.Background(), bytes.NewReader(bad), t.TempDir()); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("%q: %v, want ErrUnsafePath", name, err)
		}
	}
}
