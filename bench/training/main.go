// Command training measures what a training job costs on top of the work it
// does, side by side with the baselines issue #2 names, in one run:
//
//   - job overhead: CreateTrainingJob → Completed through a real server,
//     minus the same script run directly with python (goal ≤ 1 s);
//   - channel staging (the Downloading phase) against `cp -r` of the same
//     bytes (goal ≥ 1×);
//   - model.tar.gz packing and upload (the Uploading phase) against
//     `tar czf` of the same directory (goal ≥ 1×).
//
// Run it with `go run ./bench/training` (scripts/bench.sh does); it builds
// nothing itself and expects bin/sagebox (`make build`).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/sagebox/sagebox/internal/archive"
)

func main() {
	bin := flag.String("bin", "bin/sagebox", "sagebox binary")
	python := flag.String("python", "/usr/bin/python3", "interpreter for the scripts")
	reps := flag.Int("reps", 5, "repetitions of each timed job (median reported)")
	flag.Parse()
	if err := run(context.Background(), *bin, *python, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "bench/training:", err)
		os.Exit(1)
	}
}

type bench struct {
	url    string
	python string
	work   string
	sm     *sagemaker.Client
	s3     *s3.Client
	seq    int
}

type row struct {
	what, sagebox, baseline, ratio, goal, verdict string
}

func run(ctx context.Context, bin, python string, reps int) error {
	work, err := os.MkdirTemp("", "sagebox-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(bin, "server", "--addr", addr, "--data-dir", filepath.Join(work, "data"), "--log-level", "warn")
	srv.Env = append(os.Environ(), "SAGEBOX_PYTHON="+python)
	var srvLog bytes.Buffer
	srv.Stdout, srv.Stderr = &srvLog, &srvLog
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	defer func() { srv.Process.Signal(os.Interrupt); srv.Wait() }()
	b := &bench{url: "http://" + addr, python: python, work: work}
	if err := b.waitHealthy(); err != nil {
		return fmt.Errorf("%w\n%s", err, srvLog.String())
	}
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(b.url),
		Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")}
	b.sm = sagemaker.NewFromConfig(cfg)
	b.s3 = s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := b.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		return err
	}

	var rows []row
	r, err := b.overhead(ctx, reps)
	if err != nil {
		return fmt.Errorf("job overhead: %w", err)
	}
	rows = append(rows, r)
	for _, shape := range []struct {
		name        string
		count, size int
	}{{"2000 × 32 KiB", 2000, 32 << 10}, {"32 × 8 MiB", 32, 8 << 20}} {
		r, err := b.staging(ctx, shape.name, shape.count, shape.size, reps)
		if err != nil {
			return fmt.Errorf("staging: %w", err)
		}
		rows = append(rows, r)
	}
	for _, r2 := range b.packing(ctx, reps) {
		rows = append(rows, r2)
	}
	printTable(rows)
	return nil
}

func (b *bench) waitHealthy() error {
	for i := 0; i < 200; i++ {
		if resp, err := http.Get(b.url + "/_sagebox/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("server did not become healthy")
}

// upload packs a script directory and returns its sagemaker_submit_directory.
func (b *bench) upload(ctx context.Context, name string, files map[string]string) (string, error) {
	dir := filepath.Join(b.work, "src-"+name)
	for f, c := range files {
		if err := os.WriteFile(filepath.Join(mkdir(dir), f), []byte(c), 0o644); err != nil {
			return "", err
		}
	}
	var buf bytes.Buffer
	if err := archive.WriteTarGz(ctx, &buf, dir); err != nil {
		return "", err
	}
	key := name + "/source/sourcedir.tar.gz"
	if _, err := b.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String(key), Body: bytes.NewReader(buf.Bytes())}); err != nil {
		return "", err
	}
	return "s3://bench/" + key, nil
}

func mkdir(d string) string { os.MkdirAll(d, 0o755); return d }

// job runs one training job to completion and returns its description.
func (b *bench) job(ctx context.Context, code string, channels []smtypes.Channel) (*sagemaker.DescribeTrainingJobOutput, time.Duration, error) {
	b.seq++
	name := fmt.Sprintf("bench-%d", b.seq)
	hp := map[string]string{"sagemaker_program": `"train.py"`, "sagemaker_submit_directory": fmt.Sprintf("%q", code)}
	start := time.Now()
	_, err := b.sm.CreateTrainingJob(ctx, &sagemaker.CreateTrainingJobInput{
		TrainingJobName:        aws.String(name),
		RoleArn:                aws.String("arn:aws:iam::123456789012:role/bench"),
		AlgorithmSpecification: &smtypes.AlgorithmSpecification{TrainingImage: aws.String("bench"), TrainingInputMode: smtypes.TrainingInputModeFile},
		HyperParameters:        hp,
		InputDataConfig:        channels,
		OutputDataConfig:       &smtypes.OutputDataConfig{S3OutputPath: aws.String("s3://bench/out/")},
		ResourceConfig:         &smtypes.ResourceConfig{InstanceCount: aws.Int32(1), InstanceType: smtypes.TrainingInstanceTypeMlM5Xlarge, VolumeSizeInGB: aws.Int32(30)},
		StoppingCondition:      &smtypes.StoppingCondition{MaxRuntimeInSeconds: aws.Int32(3600)},
	})
	if err != nil {
		return nil, 0, err
	}
	for {
		d, err := b.sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
		if err != nil {
			return nil, 0, err
		}
		switch d.TrainingJobStatus {
		case smtypes.TrainingJobStatusCompleted:
			return d, time.Since(start), nil
		case smtypes.TrainingJobStatusFailed, smtypes.TrainingJobStatusStopped:
			return nil, 0, fmt.Errorf("job %s %s: %s", name, d.TrainingJobStatus, aws.ToString(d.FailureReason))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// phase is how long the job spent in one secondary status.
func phase(d *sagemaker.DescribeTrainingJobOutput, status smtypes.SecondaryStatus) time.Duration {
	for i, t := range d.SecondaryStatusTransitions {
		if t.Status == status && i+1 < len(d.SecondaryStatusTransitions) {
			return aws.ToTime(d.SecondaryStatusTransitions[i+1].StartTime).Sub(aws.ToTime(t.StartTime))
		}
	}
	return 0
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

func timeCmd(name string, args ...string) (time.Duration, error) {
	start := time.Now()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %s", name, err, out)
	}
	return time.Since(start), nil
}

const overheadScript = `import os, torch
x = torch.randn(64, 64)
print("loss=%.4f" % (x @ x).mean().item())
open(os.path.join(os.environ.get("SM_MODEL_DIR", os.path.dirname(__file__)), "out.txt"), "w").write("ok")
`

func (b *bench) overhead(ctx context.Context, reps int) (row, error) {
	code, err := b.upload(ctx, "overhead", map[string]string{"train.py": overheadScript})
	if err != nil {
		return row{}, err
	}
	script := filepath.Join(b.work, "src-overhead", "train.py")
	var direct, job []time.Duration
	for i := 0; i < reps; i++ {
		d, err := timeCmd(b.python, script) // SM_MODEL_DIR unset: writes out.txt beside the script
		if err != nil {
			return row{}, err
		}
		direct = append(direct, d)
		_, j, err := b.job(ctx, code, nil)
		if err != nil {
			return row{}, err
		}
		job = append(job, j)
	}
	md, mj := median(direct), median(job)
	over := mj - md
	return row{
		what:     "job overhead (torch script)",
		sagebox:  fmt.Sprintf("job %s", ms(mj)),
		baseline: fmt.Sprintf("python %s", ms(md)),
		ratio:    fmt.Sprintf("%+.0f ms", float64(over.Microseconds())/1000),
		goal:     "≤ +1000 ms",
		verdict:  verdict(over <= time.Second),
	}, nil
}

func (b *bench) staging(ctx context.Context, shape string, count, size, reps int) (row, error) {
	prefix := fmt.Sprintf("data-%d-%d", count, size)
	local := filepath.Join(b.work, prefix)
	body := make([]byte, size)
	for i := 0; i < count; i++ {
		rand.Read(body[:min(size, 4096)])
		rel := fmt.Sprintf("shard-%02d/part-%05d.bin", i%20, i)
		p := filepath.Join(local, rel)
		mkdir(filepath.Dir(p))
		if err := os.WriteFile(p, body, 0o644); err != nil {
			return row{}, err
		}
		f, _ := os.Open(p)
		_, err := b.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String(prefix + "/" + rel), Body: f})
		f.Close()
		if err != nil {
			return row{}, err
		}
	}
	code, err := b.upload(ctx, "staging", map[string]string{"train.py": "print('staged')\n"})
	if err != nil {
		return row{}, err
	}
	ch := []smtypes.Channel{{ChannelName: aws.String("train"), DataSource: &smtypes.DataSource{S3DataSource: &smtypes.S3DataSource{
		S3DataType: smtypes.S3DataTypeS3Prefix, S3Uri: aws.String("s3://bench/" + prefix), S3DataDistributionType: smtypes.S3DataDistributionFullyReplicated}}}}
	var stage, cp []time.Duration
	for i := 0; i < reps; i++ {
		d, _, err := b.job(ctx, code, ch)
		if err != nil {
			return row{}, err
		}
		stage = append(stage, phase(d, smtypes.SecondaryStatusDownloading))
		dst := filepath.Join(b.work, fmt.Sprintf("cp-%d", i))
		c, err := timeCmd("cp", "-r", local, dst)
		if err != nil {
			return row{}, err
		}
		cp = append(cp, c)
		os.RemoveAll(dst)
	}
	ms1, mc := median(stage), median(cp)
	return row{
		what:     "staging " + shape + " (Downloading phase)",
		sagebox:  ms(ms1),
		baseline: "cp -r " + ms(mc),
		ratio:    ratio(mc, ms1),
		goal:     "≥ 1×",
		verdict:  verdict(ms1 <= mc),
	}, nil
}

// packing times the Uploading phase of a job whose model directory holds a
// realistic model (a torch state_dict of random weights and some JSON), and
// `tar czf` of the same files.
func (b *bench) packing(ctx context.Context, reps int) []row {
	local := mkdir(filepath.Join(b.work, "model-files"))
	gen := `import json, os, sys, torch
d = sys.argv[1]
torch.manual_seed(0)
sd = {f"layer{i}.weight": torch.randn(1024, 1024) for i in range(16)}
torch.save(sd, os.path.join(d, "model.pth"))
for i in range(50):
    json.dump({"step": i, "lr": 0.001 * i, "notes": ["x"] * 100}, open(os.path.join(d, f"meta-{i}.json"), "w"))
`
	if out, err := exec.Command(b.python, "-c", gen, local).CombinedOutput(); err != nil {
		return []row{{what: "packing", verdict: fmt.Sprintf("error: %v %s", err, out)}}
	}
	code, err := b.upload(ctx, "packing", map[string]string{"train.py": `import os, shutil
shutil.copytree(os.environ["SM_CHANNEL_MODEL"], os.environ["SM_MODEL_DIR"], dirs_exist_ok=True)
`})
	if err != nil {
		return []row{{what: "packing", verdict: err.Error()}}
	}
	ch := []smtypes.Channel{{ChannelName: aws.String("model"), DataSource: &smtypes.DataSource{S3DataSource: &smtypes.S3DataSource{
		S3DataType: smtypes.S3DataTypeS3Prefix, S3Uri: aws.String("file://" + local), S3DataDistributionType: smtypes.S3DataDistributionFullyReplicated}}}}
	var up, tz []time.Duration
	var tarSize int64
	for i := 0; i < reps; i++ {
		d, _, err := b.job(ctx, code, ch)
		if err != nil {
			return []row{{what: "packing", verdict: err.Error()}}
		}
		up = append(up, phase(d, smtypes.SecondaryStatusUploading))
		dst := filepath.Join(b.work, "model.tar.gz")
		t, err := timeCmd("tar", "czf", dst, "-C", local, ".")
		if err != nil {
			return []row{{what: "packing", verdict: err.Error()}}
		}
		tz = append(tz, t)
		if st, err := os.Stat(dst); err == nil {
			tarSize = st.Size()
		}
	}
	mu, mt := median(up), median(tz)
	var ourSize int64
	if obj, err := b.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bench"), Key: aws.String(fmt.Sprintf("out/bench-%d/output/model.tar.gz", b.seq))}); err == nil {
		ourSize = aws.ToInt64(obj.ContentLength)
	}
	return []row{{
		what:     fmt.Sprintf("model.tar.gz, 64 MiB state_dict (%s vs %s)", mib(ourSize), mib(tarSize)),
		sagebox:  "Uploading " + ms(mu),
		baseline: "tar czf " + ms(mt),
		ratio:    ratio(mt, mu),
		goal:     "≥ 1×",
		verdict:  verdict(mu <= mt),
	}}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }
func mib(n int64) string        { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func ratio(baseline, ours time.Duration) string {
	if ours <= 0 {
		return "∞"
	}
	return fmt.Sprintf("%.1f×", float64(baseline)/float64(ours))
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

func printTable(rows []row) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRAINING\tSAGEBOX\tBASELINE\tRATIO\tGOAL\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.what, r.sagebox, r.baseline, r.ratio, r.goal, r.verdict)
	}
	tw.Flush()
}
