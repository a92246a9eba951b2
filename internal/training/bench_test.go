package training

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/staging/localobj"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// Staging a channel (hard links out of the object store) against the
// baseline a container runner would pay: copying the same bytes with cp -r.
// Two shapes: many small objects and a few large ones.
var benchShapes = []struct {
	name  string
	count int
	size  int
}{
	{"2000x32KiB", 2000, 32 << 10},
	{"32x8MiB", 32, 8 << 20},
}

func benchChannel(b *testing.B, count, size int) (*env, string) {
	b.Helper()
	e := newEnv(b)
	src := filepath.Join(b.TempDir(), "src")
	os.MkdirAll(src, 0o755)
	body := make([]byte, size)
	for i := range count {
		body[0], body[1] = byte(i), byte(i>>8)
		key := fmt.Sprintf("bench/train/shard-%02d/part-%05d.bin", i%20, i)
		e.putObject(key, body)
		p := filepath.Join(src, filepath.FromSlash(key))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, body, 0o644)
	}
	return e, src
}

func BenchmarkStageChannel(b *testing.B) { benchStage(b, false) }

// BenchmarkStageChannelCopy is staging with Config.CopyChannels (reflink
// where the file system can, else copy_file_range).
func BenchmarkStageChannelCopy(b *testing.B) { benchStage(b, true) }

func benchStage(b *testing.B, copyChannels bool) {
	for _, shape := range benchShapes {
		b.Run(shape.name, func(b *testing.B) {
			e, _ := benchChannel(b, shape.count, shape.size)
			st := &staging.Stager{Objects: localobj.New(e.store), CopyChannels: copyChannels}
			ctx := context.Background()
			spec := stagingChannel(toolkit.Channel{Name: "train", URI: "s3://bkt/bench/train/", DataType: "S3Prefix", Distribution: "FullyReplicated"})
			b.SetBytes(int64(shape.count * shape.size))
			b.ResetTimer()
			for b.Loop() {
				plan, err := st.PlanChannel(ctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := st.Place(ctx, plan, plan.Items, filepath.Join(b.TempDir(), "train")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCpBaseline(b *testing.B) {
	for _, shape := range benchShapes {
		b.Run(shape.name, func(b *testing.B) {
			_, src := benchChannel(b, shape.count, shape.size)
			b.SetBytes(int64(shape.count * shape.size))
			b.ResetTimer()
			for b.Loop() {
				if out, err := exec.Command("cp", "-r", src, filepath.Join(b.TempDir(), "train")).CombinedOutput(); err != nil {
					b.Fatalf("cp: %v %s", err, out)
				}
			}
		})
	}
}

const trivialScript = "print('hello from the job')\n"

// BenchmarkJobOverhead is one trivial job from Submit to Completed:
// staging, config files, the shim, log capture, packing and uploading
// artifacts, and every status update. Compare with BenchmarkDirectPython.
func BenchmarkJobOverhead(b *testing.B) {
	requirePython(b)
	e := newEnv(b, func(c *Config) { c.PollInterval = 20 * time.Millisecond })
	hps := e.putSource("bench", map[string]string{"train.py": trivialScript})
	e.putObject("bench/data/x.csv", []byte("1,2,3\n"))
	i := 0
	b.ResetTimer()
	for b.Loop() {
		i++
		name := fmt.Sprintf("bench-%d", i)
		job := newTestJob(name, hps, withChannel("train", "s3://bkt/bench/data/", "FullyReplicated"))
		e.submit(job)
		if j := e.mem.waitEnd(b, name, time.Minute); j.TrainingJobStatus != sagebox.StatusCompleted {
			b.Fatalf("%s: %s %s", name, j.TrainingJobStatus, j.FailureReason)
		}
	}
}

func BenchmarkDirectPython(b *testing.B) {
	requirePython(b)
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "train.py"), []byte(trivialScript), 0o644)
	b.ResetTimer()
	for b.Loop() {
		cmd := exec.Command(testPython, "train.py")
		cmd.Dir = dir
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
