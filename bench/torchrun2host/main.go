// Command torchrun2host measures what sagebox adds to a 2-host torchrun
// job (issue 13): CreateTrainingJob with InstanceCount 2 and
// torch_distributed → Completed through a real server, against the same
// two torchrun commands started by hand on this machine (one per node,
// master 127.0.0.1, otherwise the argv sagebox runs, --monitor_interval 1
// included), side by side in one run, alternating, median of
// -reps. Goal: ≤ 2 s added.
//
// Run it with bench/torchrun2host/run.sh (builds bin/sagebox if missing).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/sagebox/sagebox/internal/archive"
)

// script all-reduces a tensor over the two nodes (gloo) and saves it.
const script = `import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} via {os.environ['MASTER_ADDR']}: sum {t.item()}", flush=True)
if dist.get_rank() == 0 and "SM_MODEL_DIR" in os.environ:
    torch.save(t, os.path.join(os.environ["SM_MODEL_DIR"], "sum.pt"))
dist.destroy_process_group()
`

func main() {
	bin := flag.String("bin", "bin/sagebox", "sagebox binary")
	python := flag.String("python", "/usr/bin/python3", "interpreter with torch")
	reps := flag.Int("reps", 5, "repetitions of each side (median reported)")
	flag.Parse()
	if err := run(context.Background(), *bin, *python, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "bench/torchrun2host:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin, python string, reps int) error {
	work, err := os.MkdirTemp("", "sagebox-bench-torchrun-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	srv := exec.Command(bin, "server", "--addr", addr, "--data-dir", filepath.Join(work, "data"), "--log-level", "warn")
	srv.Env = append(os.Environ(), "SAGEBOX_PYTHON="+python)
	var srvLog bytes.Buffer
	srv.Stdout, srv.Stderr = &srvLog, &srvLog
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	defer func() { _ = srv.Process.Signal(os.Interrupt); _ = srv.Wait() }()
	url := "http://" + addr
	if err := waitHealthy(url); err != nil {
		return fmt.Errorf("%w\n%s", err, srvLog.String())
	}
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", "")}
	sm := sagemaker.NewFromConfig(cfg)
	logs := cloudwatchlogs.NewFromConfig(cfg)
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		return err
	}
	src := filepath.Join(work, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "train.py"), []byte(script), 0o644); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := archive.WriteTarGz(ctx, &buf, src); err != nil {
		return err
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String("src/sourcedir.tar.gz"), Body: bytes.NewReader(buf.Bytes())}); err != nil {
		return err
	}

	var byHand, jobs []time.Duration
	var master string
	for i := range reps {
		h, err := handRun(python, src, work)
		if err != nil {
			return fmt.Errorf("torchrun by hand: %w", err)
		}
		j, m, err := job(ctx, sm, logs, fmt.Sprintf("torchrun2-%d", i))
		if err != nil {
			return err
		}
		byHand, jobs, master = append(byHand, h), append(jobs, j), m
	}
	mh, mj := median(byHand), median(jobs)
	added := mj - mh
	verdict := "MISS"
	if added <= 2*time.Second {
		verdict = "PASS"
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "2-HOST TORCHRUN (median of "+strconv.Itoa(reps)+")\tSAGEBOX JOB\tBY HAND\tRATIO\tADDED\tGOAL\t")
	fmt.Fprintf(tw, "create → Completed vs 2 × torchrun\t%s\t%s\t%.2f×\t%+.0f ms\t≤ +2000 ms\t%s\n",
		ms(mj), ms(mh), float64(mj)/float64(mh), float64(added.Microseconds())/1000, verdict)
	tw.Flush()
	fmt.Printf("(job's master address as its ranks saw it: %s; runs: job %v, by hand %v)\n", master, msList(jobs), msList(byHand))
	return nil
}

// handRun starts the two nodes' torchrun at once, as a user would on two
// terminals, and waits for both.
func handRun(python, src, work string) (time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	cmds := make([]*exec.Cmd, 2)
	outs := make([]bytes.Buffer, 2)
	for rank := range 2 {
		c := exec.Command(python, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
			"--master_addr", "127.0.0.1", "--master_port", strconv.Itoa(port), "--node_rank", strconv.Itoa(rank),
			"--log_dir", filepath.Join(work, "torchrun-logs"), "--redirects", "2", "--tee", "2",
			"--monitor_interval", "1", "train.py")
		c.Dir = src
		c.Stdout, c.Stderr = &outs[rank], &outs[rank]
		if err := c.Start(); err != nil {
			return 0, err
		}
		cmds[rank] = c
	}
	for rank, c := range cmds {
		if err := c.Wait(); err != nil {
			return 0, fmt.Errorf("node %d: %w\n%s", rank, err, outs[rank].String())
		}
	}
	return time.Since(start), nil
}

// job runs the same script as a 2-host torch_distributed training job and
// returns its time from CreateTrainingJob to Completed, and the master
// address its first rank printed.
func job(ctx context.Context, sm *sagemaker.Client, logs *cloudwatchlogs.Client, name string) (time.Duration, string, error) {
	hp := map[string]string{
		"sagemaker_program": `"train.py"`, "sagemaker_submit_directory": `"s3://bench/src/sourcedir.tar.gz"`,
		"sagemaker_torch_distributed_enabled": "true", "sagemaker_instance_type": `"ml.g5.2xlarge"`,
	}
	start := time.Now()
	_, err := sm.CreateTrainingJob(ctx, &sagemaker.CreateTrainingJobInput{
		TrainingJobName:        aws.String(name),
		RoleArn:                aws.String("arn:aws:iam::123456789012:role/bench"),
		AlgorithmSpecification: &smtypes.AlgorithmSpecification{TrainingImage: aws.String("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:1.13.1-cpu-py311"), TrainingInputMode: smtypes.TrainingInputModeFile},
		HyperParameters:        hp,
		OutputDataConfig:       &smtypes.OutputDataConfig{S3OutputPath: aws.String("s3://bench/out/")},
		ResourceConfig:         &smtypes.ResourceConfig{InstanceCount: aws.Int32(2), InstanceType: smtypes.TrainingInstanceTypeMlM5Xlarge, VolumeSizeInGB: aws.Int32(30)},
		StoppingCondition:      &smtypes.StoppingCondition{MaxRuntimeInSeconds: aws.Int32(600)},
	})
	if err != nil {
		return 0, "", err
	}
	for {
		d, err := sm.DescribeTrainingJob(ctx, &sagemaker.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
		if err != nil {
			return 0, "", err
		}
		switch d.TrainingJobStatus {
		case smtypes.TrainingJobStatusCompleted:
			took := time.Since(start)
			return took, masterOf(ctx, logs, name), nil
		case smtypes.TrainingJobStatusFailed, smtypes.TrainingJobStatusStopped:
			return 0, "", fmt.Errorf("job %s %s: %s", name, d.TrainingJobStatus, aws.ToString(d.FailureReason))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// masterOf is the master address in the job's algo-1 log line
// ("rank 0 of 2 via algo-1: ...").
func masterOf(ctx context.Context, logs *cloudwatchlogs.Client, name string) string {
	group := aws.String("/aws/sagemaker/TrainingJobs")
	st, err := logs.DescribeLogStreams(ctx, &cloudwatchlogs.DescribeLogStreamsInput{LogGroupName: group, LogStreamNamePrefix: aws.String(name + "/algo-1-")})
	if err != nil || len(st.LogStreams) == 0 {
		return fmt.Sprintf("? (%v)", err)
	}
	ev, err := logs.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: group, LogStreamName: st.LogStreams[0].LogStreamName, StartFromHead: aws.Bool(true)})
	if err != nil {
		return fmt.Sprintf("? (%v)", err)
	}
	for _, e := range ev.Events {
		if m := viaRE.FindStringSubmatch(aws.ToString(e.Message)); m != nil {
			return m[1]
		}
	}
	return "? (no rank line in the log)"
}

var viaRE = regexp.MustCompile(`rank 0 of 2 via (\S+):`)

func waitHealthy(url string) error {
	for range 200 {
		if resp, err := http.Get(url + "/_sagebox/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("server did not become healthy")
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func freePort() (int, error) {
	a, err := freeAddr()
	if err != nil {
		return 0, err
	}
	_, p, _ := net.SplitHostPort(a)
	return strconv.Atoi(p)
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }

func msList(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = ms(d)
	}
	return out
}
