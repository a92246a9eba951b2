package modelserver

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkInvocationsHTTP is one POST /invocations at a time through the
// HTTP routes, the queue and a fake worker process, with a fasthttp client
// in this process. allocs/op counts both sides; compare it between
// commits (it uses nothing but New, Start and HTTPServer).
func BenchmarkInvocationsHTTP(b *testing.B) {
	state := b.TempDir()
	modelDir := b.TempDir()
	os.MkdirAll(filepath.Join(modelDir, "code"), 0o755)
	cfg := DefaultConfig()
	cfg.ModelDir, cfg.Python, cfg.CacheDir = modelDir, os.Args[0], b.TempDir()
	cfg.RuntimeDir = filepath.Join(state, "runtime")
	cfg.GPUs, cfg.Workers = 0, 1
	cfg.Env = append(os.Environ(), "FAKE_SAGEBOX_WORKER=1")
	cfg.Supervisor = testSupervisor() // as sagebox runs workers
	srv, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := srv.HTTPServer(log.New(io.Discard, "", 0))
	go hs.Serve(ln)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		hs.Shutdown(ctx)
	})
	if err := srv.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}

	client := &fasthttp.Client{}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.SetRequestURI("http://" + ln.Addr().String() + "/invocations")
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.Header.Set("Accept", "application/json")
	req.SetBodyString(`{"x": [1, 2, 3]}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := client.Do(req, resp); err != nil || resp.StatusCode() != 200 {
			b.Fatalf("invoke: %v %d", err, resp.StatusCode())
		}
	}
}
