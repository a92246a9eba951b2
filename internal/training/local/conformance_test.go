package local_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/archive"
	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/pyruntime"
	"github.com/sagebox/sagebox/internal/staging/localobj"
	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training/driver"
	"github.com/sagebox/sagebox/internal/training/driver/drivertest"
	"github.com/sagebox/sagebox/internal/training/local"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "exec-shim" {
		os.Exit(proc.RunSupervisor(context.Background(), os.Args[2:]))
	}
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) {
	dataDir := t.TempDir()
	store, err := objectstore.OpenWithOptions(filepath.Join(dataDir, "s3"), objectstore.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	if err := store.CreateBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			return local.New(local.Config{DataDir: dataDir, Objects: localobj.New(store),
				Python:            pyruntime.Interpreter{Path: "/usr/bin/python3", Source: "test"},
				SagemakerEndpoint: "http://127.0.0.1:9",
				ShimCommand:       []string{os.Args[0], "exec-shim"},
				Logger:            slog.New(slog.DiscardHandler)})
		},
		Job: func(t *testing.T, name string, scripts []drivertest.Script) *driver.Job {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "train.py"), []byte(drivertest.PythonScript(scripts)), 0o644); err != nil {
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
				TrainingJobArn:  "arn:aws:sagemaker:us-east-1:000000000000:training-job/" + name,
				HyperParameters: map[string]string{
					"sagemaker_program":          `"train.py"`,
					"sagemaker_submit_directory": `"s3://bkt/` + key + `"`,
				},
				ResourceConfig:   &sagebox.ResourceConfig{InstanceType: "ml.m5.large", InstanceCount: len(scripts), VolumeSizeInGB: 1},
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
		},
		ReadModel: func(t *testing.T, uri string) map[string]string {
			obj, err := store.Get(ctx, "bkt", strings.TrimPrefix(uri, "s3://bkt/"))
			if err != nil {
				t.Fatalf("get %s: %v", uri, err)
			}
			defer obj.Close()
			b, _ := io.ReadAll(obj)
			dir := t.TempDir()
			if err := archive.Extract(ctx, bytes.NewReader(b), dir); err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
				if err == nil && info.Mode().IsRegular() {
					rel, _ := filepath.Rel(dir, p)
					b, _ := os.ReadFile(p)
					out[filepath.ToSlash(rel)] = string(b)
				}
				return nil
			})
			return out
		},
		ReadHostFile: func(t *testing.T, job *driver.Job, host int, rel string) (string, bool) {
			b, err := os.ReadFile(filepath.Join(job.Hosts[host].Workspace.Root, filepath.FromSlash(rel)))
			return string(b), err == nil
		},
	})
}
