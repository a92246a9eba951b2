// Command listfair measures ListTrainingJobs at saturation (the reliability
// probe's R14): wrk with 500 connections lists 100 of 200 jobs for 15 s
// while a prober times DescribeTrainingJob, once against a baseline binary
// and once against this one, side by side in one run. The goal is a p99
// within a few times the p50, no request past wrk's 10 s timeout, and
// describes that listings cannot starve.
//
// Run it with bench/listfair/run.sh, which builds both binaries.
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
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

const listLua = `wrk.method = "POST"; wrk.body = '{"MaxResults": 100}'
wrk.headers["X-Amz-Target"] = "SageMaker.ListTrainingJobs"; wrk.headers["Content-Type"] = "application/x-amz-json-1.1"
wrk.headers["Authorization"] = "AWS4-HMAC-SHA256 Credential=test/20261203/us-east-1/sagemaker/aws4_request, SignedHeaders=host, Signature=0"
done = function(s, l, r) io.write(string.format("RESULT p50=%.1f p99=%.1f max=%.1f rps=%.1f timeouts=%d\n", l:percentile(50)/1000, l:percentile(99)/1000, l.max/1000, s.requests/(s.duration/1e6), s.errors.timeout)) end
`

func main() {
	bin := flag.String("bin", "bin/sagebox", "sagebox binary to measure")
	base := flag.String("baseline", "", "baseline sagebox binary (the code before the change)")
	jobs := flag.Int("jobs", 200, "training jobs in the store")
	conns := flag.Int("c", 500, "wrk connections")
	dur := flag.Duration("d", 15*time.Second, "wrk duration")
	flag.Parse()
	type result struct {
		name string
		r    measurement
	}
	var results []result
	for _, b := range []struct{ name, path string }{{"baseline", *base}, {"sagebox", *bin}} {
		if b.path == "" {
			continue
		}
		m, err := measure(context.Background(), b.path, *jobs, *conns, *dur)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/listfair:", b.name, err)
			os.Exit(1)
		}
		results = append(results, result{b.name, m})
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "binary\tlist req/s\tlist p50 ms\tlist p99 ms\tp99/p50\tlist max ms\ttimeouts\tdescribe p50 ms\tdescribe p99 ms\t\n")
	for _, r := range results {
		m := r.r
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.1fx\t%.0f\t%d\t%.0f\t%.0f\t\n", r.name, m.rps, m.p50, m.p99, m.p99/m.p50, m.max, m.timeouts, m.dp50, m.dp99)
	}
	tw.Flush()
	fmt.Printf("(%d jobs, MaxResults=100, wrk -t2 -c%d -d%s on the same 2 CPUs as the server; goal: p99/p50 a few times at most, no timeouts)\n", *jobs, *conns, *dur)
}

type measurement struct {
	rps, p50, p99, max float64
	timeouts           int
	dp50, dp99         float64
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func call(url, target, body string) (int, error) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func measure(ctx context.Context, bin string, jobs, conns int, dur time.Duration) (measurement, error) {
	var m measurement
	dir, err := os.MkdirTemp("", "listfair-")
	if err != nil {
		return m, err
	}
	defer os.RemoveAll(dir)
	addr, err := freeAddr()
	if err != nil {
		return m, err
	}
	srv := exec.Command(bin, "server", "--addr", addr, "--data-dir", filepath.Join(dir, "data"), "--log-level", "error")
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	if err := srv.Start(); err != nil {
		return m, err
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	url := "http://" + addr + "/"
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(url + "_sagebox/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("server at %s did not become healthy", addr)
		}
	}
	// Jobs whose source directory does not exist: stored, then Failed at
	// once, with no interpreter started.
	for i := 0; i < jobs; i++ {
		body := fmt.Sprintf(`{"TrainingJobName":"list-%03d","RoleArn":"arn:aws:iam::123456789012:role/R",
 "AlgorithmSpecification":{"TrainingImage":"img","TrainingInputMode":"File"},
 "OutputDataConfig":{"S3OutputPath":"s3://bench/out"},
 "ResourceConfig":{"InstanceType":"ml.m5.large","InstanceCount":1,"VolumeSizeInGB":1},
 "StoppingCondition":{"MaxRuntimeInSeconds":60},
 "HyperParameters":{"sagemaker_program":"\"train.py\"","sagemaker_submit_directory":"\"s3://bench/missing.tar.gz\""}}`, i)
		if code, err := call(url, "SageMaker.CreateTrainingJob", body); err != nil || code != 200 {
			return m, fmt.Errorf("create job %d: %d %v", i, code, err)
		}
	}
	lua := filepath.Join(dir, "list.lua")
	if err := os.WriteFile(lua, []byte(listLua), 0o644); err != nil {
		return m, err
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var lat []time.Duration
	wg.Add(1)
	go func() { // the describe prober, 10 a second
		defer wg.Done()
		for wctx.Err() == nil {
			t := time.Now()
			if code, err := call(url, "SageMaker.DescribeTrainingJob", `{"TrainingJobName":"list-007"}`); err == nil && code == 200 {
				lat = append(lat, time.Since(t))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	var out bytes.Buffer
	wrk := exec.CommandContext(ctx, "wrk", "-t2", fmt.Sprintf("-c%d", conns), "-d"+dur.String(), "--timeout", "10s", "-s", lua, url)
	wrk.Stdout, wrk.Stderr = &out, os.Stderr
	err = wrk.Run()
	cancel()
	wg.Wait()
	if err != nil {
		return m, fmt.Errorf("wrk: %w\n%s", err, out.String())
	}
	re := regexp.MustCompile(`RESULT p50=([\d.]+) p99=([\d.]+) max=([\d.]+) rps=([\d.]+) timeouts=(\d+)`)
	g := re.FindStringSubmatch(out.String())
	if g == nil {
		return m, fmt.Errorf("no result from wrk:\n%s", out.String())
	}
	fmt.Sscan(g[1], &m.p50)
	fmt.Sscan(g[2], &m.p99)
	fmt.Sscan(g[3], &m.max)
	fmt.Sscan(g[4], &m.rps)
	fmt.Sscan(g[5], &m.timeouts)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if n := len(lat); n > 0 {
		m.dp50 = float64(lat[n/2]) / 1e6
		m.dp99 = float64(lat[min(n-1, n*99/100)]) / 1e6
	}
	return m, nil
}
