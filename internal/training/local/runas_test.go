package local_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/archive"
	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/pyruntime"
	"github.com/sagebox/sagebox/internal/staging/localobj"
	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training/driver"
	"github.com/sagebox/sagebox/internal/training/local"
)

// probeScript tries what a job run as another user must not do, and
// prints one line per probe: "NAME denied" or "NAME allowed". It writes
// its model either way.
const probeScript = `import os, socket, sys
data = os.environ["PROBE_DATA"]
other = os.environ["PROBE_OTHER"]
chan = os.path.join(os.environ["SM_CHANNEL_TRAIN"], "data.csv")
def probe(name, f):
    try:
        f()
        print(name, "allowed", flush=True)
    except PermissionError:
        print(name, "denied", flush=True)
probe("metadb", lambda: open(os.path.join(data, "meta.db")).read())
probe("objectstore", lambda: os.listdir(os.path.join(data, "s3")))
probe("logs", lambda: os.listdir(os.path.join(data, "logs")))
probe("otherjob", lambda: os.listdir(other))
probe("otherconfig", lambda: open(os.path.join(other, "input", "config", "hyperparameters.json")).read())
if os.environ.get("PROBE_CHANNEL_WRITE"):
    def plant():
        os.chmod(chan, 0o644)  # an owner could, then write
        open(chan, "a").write("planted")
    probe("channelwrite", plant)
print("channel", open(chan).read().strip(), flush=True)
print("uid", os.getuid(), "home", os.environ.get("HOME"), flush=True)
print("resolves", socket.gethostbyname(os.environ["SM_CURRENT_HOST"]), flush=True)
cfg = os.path.join(sys.prefix, "pyvenv.cfg")
if os.path.exists(cfg):
    import probemod
    print("venv owner", os.stat(cfg).st_uid, flush=True)
print("runtime", sorted(os.listdir(os.environ["PROBE_RUNTIME"]))[:1], flush=True)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as f:
    f.write("weights")
`

func TestRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running jobs as another user needs root")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatal("no /usr/bin/python3")
		}
		t.Skip("no /usr/bin/python3")
	}
	t.Run("uid range", func(t *testing.T) {
		out := runProbeJob(t, &local.RunAs{UID: 61000, Count: 5})
		for _, p := range []string{"metadb", "objectstore", "logs", "otherjob", "otherconfig", "channelwrite"} {
			if !strings.Contains(out, p+" denied\n") {
				t.Errorf("probe %s was not denied a PermissionError:\n%s", p, out)
			}
		}
		if !strings.Contains(out, "uid 6100") || strings.Contains(out, "uid 0 ") {
			t.Errorf("the job did not run as a uid of the range:\n%s", out)
		}
		if !strings.Contains(out, "home /") || !strings.Contains(out, "/algo-1\n") {
			t.Errorf("HOME is not the workspace:\n%s", out)
		}
		// The job's /etc/hosts, root's, in a directory only root enters,
		// is readable to the job's uid through the bind mount.
		if !strings.Contains(out, "resolves 127.") || strings.Contains(out, "resolves 127.0.0.1") {
			t.Errorf("algo-1 does not resolve to its own address for the job's uid:\n%s", out)
		}
	})
	t.Run("one user", func(t *testing.T) {
		out := runProbeJob(t, &local.RunAs{UID: 61100, GID: 61100})
		for _, p := range []string{"metadb", "objectstore", "logs", "channelwrite"} {
			if !strings.Contains(out, p+" denied\n") {
				t.Errorf("probe %s was not denied a PermissionError:\n%s", p, out)
			}
		}
		if !strings.Contains(out, "uid 61100 ") {
			t.Errorf("the job did not run as uid 61100:\n%s", out)
		}
	})
	t.Run("package", func(t *testing.T) {
		// A source directory that is a package is pip-installed as the
		// job's uid, into an environment the job can then run from.
		out := runProbeJobFiles(t, &local.RunAs{UID: 61300, Count: 2}, map[string]string{
			"setup.py":    "from setuptools import setup\nsetup(name='probe', version='1.0', py_modules=['probemod'])\n",
			"probemod.py": "X = 1\n",
		})
		if !strings.Contains(out, "metadb denied\n") || !strings.Contains(out, "uid 6130") || !strings.Contains(out, "venv owner 6130") {
			t.Errorf("the package job did not run as the job's uid:\n%s", out)
		}
	})
	t.Run("off", func(t *testing.T) {
		// The same probes succeed as root: the test above is not passing
		// because the probes are wrong.
		out := runProbeJob(t, nil)
		for _, p := range []string{"metadb", "objectstore", "logs", "otherjob", "otherconfig"} {
			if !strings.Contains(out, p+" allowed\n") {
				t.Errorf("probe %s failed without run-as:\n%s", p, out)
			}
		}
	})
}

// runProbeJob runs probeScript as job "probe" beside a prepared job
// "other", checks it succeeded and its model was uploaded, and returns
// its output.
func runProbeJob(t *testing.T, runAs *local.RunAs) string {
	return runProbeJobFiles(t, runAs, nil)
}

// runProbeJobFiles is runProbeJob with more files in the source directory.
func runProbeJobFiles(t *testing.T, runAs *local.RunAs, files map[string]string) string {
	ctx := context.Background()
	base := t.TempDir()
	// t.TempDir's parent is 0700; the job must be able to reach the data
	// directory, as it would under /var/lib.
	if err := os.Chmod(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(base, "data")
	store, err := objectstore.OpenWithOptions(filepath.Join(dataDir, "s3"), objectstore.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.CreateBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, "bkt", "in/data.csv", strings.NewReader("1,2,3\n"), objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "meta.db"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dataDir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	rt, err := pyruntime.Unpack(filepath.Join(dataDir, "runtime"))
	if err != nil {
		t.Fatal(err)
	}
	if runAs != nil {
		if err := local.RestrictDataDir(dataDir); err != nil {
			t.Fatal(err)
		}
	}
	drv := local.New(local.Config{DataDir: dataDir, Objects: localobj.New(store),
		Python:            pyruntime.Interpreter{Path: "/usr/bin/python3", Source: "test"},
		RuntimeDir:        rt,
		SagemakerEndpoint: "http://127.0.0.1:9",
		ShimCommand:       []string{os.Args[0], "exec-shim"},
		RunAs:             runAs,
		Logger:            slog.New(slog.DiscardHandler)})

	other := probeJob(t, store, dataDir, "other", nil, nil)
	if err := drv.Prepare(ctx, other); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PROBE_DATA": dataDir, "PROBE_OTHER": other.Hosts[0].Workspace.Root, "PROBE_RUNTIME": rt}
	if runAs != nil {
		// As root (run-as off) a write through the hard link succeeds:
		// the object store's 0444 does not stop root.
		env["PROBE_CHANNEL_WRITE"] = "1"
	}
	job := probeJob(t, store, dataDir, "probe", env, files)
	if err := drv.Prepare(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := drv.Install(ctx, job); err != nil {
		t.Fatal(err)
	}
	task, err := drv.Start(ctx, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-task.Done():
	case <-time.After(60 * time.Second):
		_ = task.Signal(9)
		t.Fatal("the job did not finish in 60 s")
	}
	var buf bytes.Buffer
	_, _ = io.Copy(&buf, io.NewSectionReader(task.Output(), 0, 1<<20))
	out := buf.String()
	if r := task.Result(); r.ExitCode != 0 || r.Err != nil {
		t.Fatalf("the job failed (exit %d, %v):\n%s", r.ExitCode, r.Err, out)
	}
	if _, err := drv.Settle(job, 0, ""); err != nil {
		t.Fatal(err)
	}
	uri, err := drv.Collect(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := store.Get(ctx, "bkt", strings.TrimPrefix(uri, "s3://bkt/"))
	if err != nil {
		t.Fatalf("model %s: %v", uri, err)
	}
	defer obj.Close()
	b, _ := io.ReadAll(obj)
	dir := t.TempDir()
	if err := archive.Extract(ctx, bytes.NewReader(b), dir); err != nil {
		t.Fatal(err)
	}
	if m, err := os.ReadFile(filepath.Join(dir, "model.txt")); err != nil || string(m) != "weights" {
		t.Errorf("model.tar.gz has model.txt %q (%v)", m, err)
	}
	// The channel file in the object store is untouched.
	in, err := store.Get(ctx, "bkt", "in/data.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if b, _ := io.ReadAll(in); string(b) != "1,2,3\n" {
		t.Errorf("the object store's file was modified through the channel: %q", b)
	}
	return out
}

func probeJob(t *testing.T, store *objectstore.Store, dataDir, name string, env, files map[string]string) *driver.Job {
	ctx := context.Background()
	dir := t.TempDir()
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "train.py"), []byte(probeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := archive.WriteTarGz(ctx, &buf, dir); err != nil {
		t.Fatal(err)
	}
	key := name + "/source/sourcedir.tar.gz"
	if _, err := store.Put(ctx, "bkt", key, bytes.NewReader(buf.Bytes()), objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tj := &sagebox.TrainingJob{
		TrainingJobName: name,
		TrainingJobArn:  fmt.Sprintf("arn:aws:sagemaker:us-east-1:000000000000:training-job/%s", name),
		HyperParameters: map[string]string{
			"sagemaker_program":          `"train.py"`,
			"sagemaker_submit_directory": `"s3://bkt/` + key + `"`,
		},
		Environment: env,
		InputDataConfig: []sagebox.Channel{{ChannelName: "train", DataSource: &sagebox.DataSource{
			S3DataSource: &sagebox.S3DataSource{S3DataType: "S3Prefix", S3Uri: "s3://bkt/in/"}}}},
		ResourceConfig:   &sagebox.ResourceConfig{InstanceType: "ml.m5.large", InstanceCount: 1, VolumeSizeInGB: 1},
		OutputDataConfig: &sagebox.OutputDataConfig{S3OutputPath: "s3://bkt/output"},
	}
	spec, err := toolkit.NewSpec(tj, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	job := &driver.Job{Name: name, Spec: spec, StateDir: filepath.Join(dataDir, "jobs", name, ".sagebox")}
	for i, h := range spec.Hosts {
		job.Hosts = append(job.Hosts, toolkit.Host{Index: i, Name: h})
	}
	return job
}
