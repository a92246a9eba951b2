// Command hosting measures what an endpoint adds to the model server it
// runs, side by side in one run (issue 12's goals):
//
//   - InvokeEndpoint through the sagebox server against the same request
//     sent to the instance's own model server (its Unix socket): added p50
//     at concurrency 1 (goal ≤ 0.2 ms) and the throughput ratio at
//     concurrency 32 (goal ≥ 0.9×);
//   - CreateEndpoint → InService against the model's own load time (a
//     fresh interpreter importing the inference script and running
//     model_fn): goal ≤ 1.5 s added;
//   - p99 during an UpdateEndpoint under load against p99 at steady state:
//     goal ≤ 2×;
//   - a 1 MB JPEG through the endpoint against the direct call: goal ≤ 1 ms
//     added at p50.
//
// The same Go load generator drives both sides, over plain HTTP (the
// server runs without credentials, so requests need no signature; a
// client's SigV4 cost is the client's either way). It shares the machine's
// CPUs with the server and the workers, which the table notes.
//
// Run it with bench/hosting/run.sh.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/valyala/fasthttp"
)

// inference is the benchmark's model: torch imported as a real script
// would, handlers that cost little so the transport dominates.
const inference = `
import json, os
import torch

def model_fn(model_dir):
    return {"version": open(os.path.join(model_dir, "version.txt")).read().strip()}

def input_fn(body, content_type):
    return body

def predict_fn(data, model):
    return {"bytes": len(data), "version": model["version"]}

def output_fn(pred, accept):
    return json.dumps(pred)
`

const python = "/usr/bin/python3"

func main() {
	bin := flag.String("bin", "bin/sagebox", "sagebox binary")
	dur := flag.Duration("d", 8*time.Second, "duration of each throughput cell")
	n1 := flag.Int("n", 2000, "requests for the concurrency-1 latency cells")
	flag.Parse()
	if err := run(context.Background(), *bin, *dur, *n1); err != nil {
		fmt.Fprintln(os.Stderr, "bench/hosting:", err)
		os.Exit(1)
	}
}

type bench struct {
	bin, dir, url string
	sm            *sagemaker.Client
	s3            *s3.Client
	srv           *exec.Cmd
}

func run(ctx context.Context, bin string, dur time.Duration, n1 int) error {
	dir, err := os.MkdirTemp("", "bench-hosting-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &bench{bin: bin, dir: dir}
	if err := b.startServer(ctx); err != nil {
		return err
	}
	defer b.stopServer()
	for _, v := range []string{"v1", "v2"} {
		if err := b.uploadModel(ctx, v); err != nil {
			return err
		}
	}

	// The model's own load time, three times, the median.
	var loads []time.Duration
	for i := 0; i < 3; i++ {
		d, err := b.modelLoadTime(ctx)
		if err != nil {
			return err
		}
		loads = append(loads, d)
	}
	loadTime := median(loads)

	// CreateEndpoint → InService, three endpoints one after another, the median.
	var creates []time.Duration
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("create-%d", i)
		d, err := b.deploy(ctx, name, "v1")
		if err != nil {
			return err
		}
		creates = append(creates, d)
		if err := b.deleteEndpoint(ctx, name); err != nil {
			return err
		}
	}
	create := median(creates)

	if _, err := b.deploy(ctx, "bench", "v1"); err != nil {
		return err
	}
	sock, err := instanceSocket(dir)
	if err != nil {
		return err
	}
	viaServer := target{name: "through sagebox", url: b.url + "/endpoints/bench/invocations", client: tcpClient()}
	direct := target{name: "model server directly", url: "http://instance/invocations", client: unixClient(sock)}
	floorURL, stopFloor, err := startFloorProxy(sock)
	if err != nil {
		return err
	}
	defer stopFloor()
	floor := target{name: "cheapest proxy", url: floorURL + "/invocations", client: tcpClient()}
	small := []byte(`{"x": [1, 2, 3]}`)
	jpeg := make([]byte, 1<<20)
	rand.Read(jpeg)

	type row struct {
		what           string
		server, direct stats
	}
	var rows []row
	for _, c := range []struct {
		what string
		body []byte
		ct   string
		conc int
		n    int
	}{
		{"small JSON, c=1", small, "application/json", 1, n1},
		{"small JSON, c=32", small, "application/json", 32, 0},
		{"1 MB JPEG, c=1", jpeg, "image/jpeg", 1, n1 / 4},
	} {
		var r row
		r.what = c.what
		// Alternate sides in two halves so drift hits both alike.
		for half := 0; half < 2; half++ {
			for _, side := range []struct {
				t   target
				dst *stats
			}{{viaServer, &r.server}, {direct, &r.direct}} {
				s, err := load(ctx, side.t, c.body, c.ct, c.conc, c.n/2, dur/2)
				if err != nil {
					return fmt.Errorf("%s %s: %w", side.t.name, c.what, err)
				}
				side.dst.merge(s)
			}
		}
		rows = append(rows, r)
	}

	// The cheapest possible hop at c=32: what any proxy in front of the
	// instance costs on this machine, measured beside the two sides.
	var floorC32 stats
	for half := 0; half < 2; half++ {
		fs, err := load(ctx, floor, small, "application/json", 32, 0, dur/2)
		if err != nil {
			return fmt.Errorf("cheapest proxy: %w", err)
		}
		floorC32.merge(fs)
	}

	// p99 at steady state and during an UpdateEndpoint, concurrency 8.
	steady, err := load(ctx, viaServer, small, "application/json", 8, 0, 5*time.Second)
	if err != nil {
		return err
	}
	during, updateTook, err := b.loadDuringUpdate(ctx, viaServer, small)
	if err != nil {
		return err
	}

	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "MISS"
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "cell\tthrough sagebox\tdirect to instance\tratio / added\tgoal\t\n")
	c1, c32, big := rows[0], rows[1], rows[2]
	added := c1.server.p(50) - c1.direct.p(50)
	fmt.Fprintf(tw, "InvokeEndpoint c=1 p50 ms\t%s\t%s\t+%s ms\t≤ +0.2 ms %s\t\n", ms(c1.server.p(50)), ms(c1.direct.p(50)), ms(added), verdict(added <= 200*time.Microsecond))
	fmt.Fprintf(tw, "InvokeEndpoint c=1 p99 ms\t%s\t%s\t+%s ms\t\t\n", ms(c1.server.p(99)), ms(c1.direct.p(99)), ms(c1.server.p(99)-c1.direct.p(99)))
	ratio := c32.server.rps() / c32.direct.rps()
	fmt.Fprintf(tw, "InvokeEndpoint c=32 req/s\t%.0f\t%.0f\t%.2f×\t≥ 0.9× %s\t\n", c32.server.rps(), c32.direct.rps(), ratio, verdict(ratio >= 0.9))
	fmt.Fprintf(tw, "  cheapest proxy c=32 req/s\t%.0f\t%.0f\t%.2f×\t(bound for any hop)\t\n", floorC32.rps(), c32.direct.rps(), floorC32.rps()/c32.direct.rps())
	addedBig := big.server.p(50) - big.direct.p(50)
	fmt.Fprintf(tw, "1 MB body c=1 p50 ms\t%s\t%s\t+%s ms\t≤ +1 ms %s\t\n", ms(big.server.p(50)), ms(big.direct.p(50)), ms(addedBig), verdict(addedBig <= time.Millisecond))
	fmt.Fprintf(tw, "CreateEndpoint → InService s\t%.2f\t%.2f (model load)\t+%.2f s\t≤ +1.5 s %s\t\n", create.Seconds(), loadTime.Seconds(), (create - loadTime).Seconds(), verdict(create-loadTime <= 1500*time.Millisecond))
	pr := float64(during.p(99)) / float64(steady.p(99))
	fmt.Fprintf(tw, "p99 during UpdateEndpoint ms\t%s (update %.1f s, %d failed)\t%s (steady)\t%.2f×\t≤ 2× %s\t\n", ms(during.p(99)), updateTook.Seconds(), during.failed, ms(steady.p(99)), pr, verdict(pr <= 2 && during.failed == 0))
	tw.Flush()
	fmt.Printf("\n%d CPUs; the load generator, the server and the instance's workers share them. Errors: %d through sagebox, %d direct.\n",
		runtime.NumCPU(), c1.server.failed+c32.server.failed+big.server.failed, c1.direct.failed+c32.direct.failed+big.direct.failed)
	return nil
}

func (b *bench) startServer(ctx context.Context) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	b.url = "http://" + addr
	b.srv = exec.Command(b.bin, "server", "--addr", addr, "--data-dir", filepath.Join(b.dir, "data"))
	b.srv.Env = append(os.Environ(), "SAGEBOX_PYTHON="+python)
	logf, err := os.Create(filepath.Join(b.dir, "server.log"))
	if err != nil {
		return err
	}
	b.srv.Stdout, b.srv.Stderr = logf, logf
	if err := b.srv.Start(); err != nil {
		return err
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(b.url + "/_sagebox/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", ""), BaseEndpoint: aws.String(b.url)}
				b.sm = sagemaker.NewFromConfig(cfg)
				b.s3 = s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
				_, err := b.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")})
				return err
			}
		}
	}
	return errors.New("server did not become healthy")
}

func (b *bench) stopServer() {
	if b.srv != nil && b.srv.Process != nil {
		b.srv.Process.Signal(os.Interrupt)
		b.srv.Wait()
	}
}

func (b *bench) modelDir(version string) string { return filepath.Join(b.dir, "model-"+version) }

func (b *bench) uploadModel(ctx context.Context, version string) error {
	d := b.modelDir(version)
	if err := os.MkdirAll(filepath.Join(d, "code"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d, "code", "inference.py"), []byte(inference), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d, "version.txt"), []byte(version), 0o644); err != nil {
		return err
	}
	tgz := filepath.Join(b.dir, version+".tar.gz")
	if out, err := exec.CommandContext(ctx, "tar", "czf", tgz, "-C", d, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v: %s", err, out)
	}
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := b.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String(version + "/model.tar.gz"), Body: f}); err != nil {
		return err
	}
	_, err = b.sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(version), PrimaryContainer: &smtypes.ContainerDefinition{
		ModelDataUrl: aws.String("s3://bench/" + version + "/model.tar.gz"),
		Environment:  map[string]string{"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_MODEL_SERVER_WORKERS": "2"}}})
	if err != nil {
		return err
	}
	_, err = b.sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(version),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(version),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large, InitialVariantWeight: aws.Float32(1)}}})
	return err
}

// modelLoadTime is what loading the model costs without sagebox: a fresh
// interpreter imports the script (torch with it) and runs model_fn.
func (b *bench) modelLoadTime(ctx context.Context) (time.Duration, error) {
	d := b.modelDir("v1")
	start := time.Now()
	cmd := exec.CommandContext(ctx, python, "-c", "import sys; sys.path.insert(0, 'code'); import inference; inference.model_fn('.')")
	cmd.Dir = d
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("model load: %v: %s", err, out)
	}
	return time.Since(start), nil
}

func (b *bench) deploy(ctx context.Context, name, config string) (time.Duration, error) {
	start := time.Now()
	if _, err := b.sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(config)}); err != nil {
		return 0, err
	}
	if err := b.waitInService(ctx, name); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func (b *bench) waitInService(ctx context.Context, name string) error {
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		d, err := b.sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err != nil {
			return err
		}
		switch d.EndpointStatus {
		case smtypes.EndpointStatusInService:
			return nil
		case smtypes.EndpointStatusFailed:
			return fmt.Errorf("endpoint %s failed: %s", name, aws.ToString(d.FailureReason))
		}
	}
	return fmt.Errorf("endpoint %s is not InService after 3 minutes", name)
}

func (b *bench) deleteEndpoint(ctx context.Context, name string) error {
	if _, err := b.sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String(name)}); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := b.sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)}); err != nil {
			return nil
		}
	}
	return fmt.Errorf("endpoint %s was not deleted within a minute", name)
}

// loadDuringUpdate runs load at concurrency 8 from just before an
// UpdateEndpoint to v2 until the endpoint is InService on it.
func (b *bench) loadDuringUpdate(ctx context.Context, t target, body []byte) (stats, time.Duration, error) {
	lctx, cancel := context.WithCancel(ctx)
	var s stats
	var lerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		s, lerr = load(lctx, t, body, "application/json", 8, 0, time.Hour)
	}()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	_, err := b.sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("bench"), EndpointConfigName: aws.String("v2")})
	if err == nil {
		time.Sleep(20 * time.Millisecond)
		err = b.waitInService(ctx, "bench")
	}
	took := time.Since(start)
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-done
	if err != nil {
		return s, took, err
	}
	return s, took, lerr
}

// instanceSocket finds the Unix socket the endpoint's model server
// listens on, from its command line.
func instanceSocket(dataDir string) (string, error) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(raw, []byte("model-server")) {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		for i, a := range args {
			if a == "--listen" && i+1 < len(args) && strings.HasPrefix(args[i+1], "unix:") && strings.Contains(string(raw), dataDir) {
				return strings.TrimPrefix(args[i+1], "unix:"), nil
			}
			if strings.HasPrefix(a, "--listen=unix:") && strings.Contains(string(raw), dataDir) {
				return strings.TrimPrefix(a, "--listen=unix:"), nil
			}
		}
	}
	return "", errors.New("no model-server process of this run listens on a Unix socket")
}

type target struct {
	name, url string
	client    *http.Client
}

func tcpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, DisableCompression: true}}
}

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, DisableCompression: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
}

type stats struct {
	lat     []time.Duration
	elapsed time.Duration
	failed  int
}

func (s *stats) merge(o stats) {
	s.lat = append(s.lat, o.lat...)
	s.elapsed += o.elapsed
	s.failed += o.failed
}

func (s stats) p(q float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	l := append([]time.Duration(nil), s.lat...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[int(float64(len(l)-1)*q/100)]
}

func (s stats) rps() float64 { return float64(len(s.lat)) / s.elapsed.Seconds() }

// load sends body with conc workers, n requests in all (0: for dur).
func load(ctx context.Context, t target, body []byte, ct string, conc, n int, dur time.Duration) (stats, error) {
	var (
		mu    sync.Mutex
		s     stats
		sent  atomic.Int64
		first error
	)
	// Warm the connections.
	for i := 0; i < conc; i++ {
		if _, err := once(ctx, t, body, ct); err != nil {
			return s, err
		}
	}
	deadline := time.Now().Add(dur)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			failed := 0
			for ctx.Err() == nil {
				if n > 0 && sent.Add(1) > int64(n) {
					break
				}
				if n == 0 && time.Now().After(deadline) {
					break
				}
				d, err := once(ctx, t, body, ct)
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					failed++
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					continue
				}
				local = append(local, d)
			}
			mu.Lock()
			s.lat = append(s.lat, local...)
			s.failed += failed
			mu.Unlock()
		}()
	}
	wg.Wait()
	s.elapsed = time.Since(start)
	if first != nil {
		fmt.Fprintf(os.Stderr, "bench/hosting: %s: %d failed, first: %v\n", t.name, s.failed, first)
	}
	return s, nil
}

func once(ctx context.Context, t target, body []byte, ct string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return d, nil
}

// startFloorProxy starts the cheapest hop in front of the instance this
// process can build: a fasthttp server whose handler passes each request
// to the instance's socket with fasthttp's client, nothing else (no
// routing, no checks, no metrics). Its throughput bounds what any proxy,
// sagebox's included, can reach here.
func startFloorProxy(sock string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	client := &fasthttp.HostClient{Addr: sock, Dial: func(string) (net.Conn, error) { return net.Dial("unix", sock) }, MaxConns: 256}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if err := client.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
		}
	}}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Shutdown() }, nil
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
