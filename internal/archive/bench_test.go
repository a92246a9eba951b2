package archive

import (
	"context"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// benchDir writes a model-like directory: a few large files of float-ish
// bytes (compressible about as well as real weights) and many small ones.
func benchDir(b *testing.B) (string, int64) {
	b.Helper()
	dir := b.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	var total int64
	write := func(name string, size int) {
		buf := make([]byte, size)
		for i := range buf {
			// Low-entropy high bytes, random low bytes: like fp32 weights.
			if i%4 >= 2 {
				buf[i] = byte(rng.IntN(4))
			} else {
				buf[i] = byte(rng.Uint32())
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(size)
	}
	for i := range 4 {
		write("shard"+string(rune('a'+i))+".pth", 16<<20)
	}
	for i := range 200 {
		write("small"+string(rune('a'+i%26))+string(rune('a'+i/26))+".json", 4<<10)
	}
	return dir, total
}

// BenchmarkWriteTarGz packs a 64 MiB model directory with the parallel
// gzip writer. Compare with BenchmarkTarCzf, the same directory through
// `tar czf`.
func BenchmarkWriteTarGz(b *testing.B) {
	dir, total := benchDir(b)
	b.SetBytes(total)
	b.ResetTimer()
	for b.Loop() {
		if err := WriteTarGz(context.Background(), io.Discard, dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTarCzf is the baseline: GNU tar piping through gzip.
func BenchmarkTarCzf(b *testing.B) {
	if _, err := exec.LookPath("tar"); err != nil {
		b.Skip("tar not installed")
	}
	dir, total := benchDir(b)
	b.SetBytes(total)
	b.ResetTimer()
	for b.Loop() {
		cmd := exec.Command("tar", "czf", "-", "-C", dir, ".")
		cmd.Stdout = io.Discard
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExtract unpacks the same archive.
func BenchmarkExtract(b *testing.B) {
	dir, total := benchDir(b)
	f, err := os.Create(filepath.Join(b.TempDir(), "a.tar.gz"))
	if err != nil {
		b.Fatal(err)
	}
	if err := WriteTarGz(context.Background(), f, dir); err != nil {
		b.Fatal(err)
	}
	f.Close()
	b.SetBytes(total)
	b.ResetTimer()
	for b.Loop() {
		if err := ExtractFile(context.Background(), f.Name(), b.TempDir()); err != nil {
			b.Fatal(err)
		}
	}
}
