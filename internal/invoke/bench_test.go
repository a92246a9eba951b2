package invoke

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// fastInstance is a fasthttp echo server on a Unix socket, the HTTP
// server the real model server runs, without a model behind it: what is
// measured is the path, not the model.
func fastInstance(b testing.TB) string {
	dir, err := os.MkdirTemp("", "invb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.SetContentType("application/json")
			ctx.SetBody(ctx.PostBody())
		},
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
	}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Shutdown() })
	return sock
}

// BenchmarkInvokeOverhead sends the same request to a fake instance
// directly and through Handler (behind a loopback HTTP server, as the
// router serves it), at concurrency 1 and 32. ns/op is wall time per
// request (1/throughput); p50-ns is the median latency of one request.
// The ratio of the pairs is what bench/hosting reports. The 1MB pair is a
// 1 MiB body each way at concurrency 1.
func BenchmarkInvokeOverhead(b *testing.B) {
	sock := fastInstance(b)
	tab := NewTable()
	h, err := NewHandler(tab, Config{Region: testRegion, AccountID: testAccount, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	tab.Set("ep", &Route{Status: "InService", Variants: []Variant{{Name: "AllTraffic", Weight: 1,
		Instances: []Instance{{ID: "i-1", Addr: "unix:" + sock}}}}})
	srv := httptest.NewServer(h)
	defer srv.Close()

	unixClient := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: 128, DisableCompression: true,
	}}
	tcpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, DisableCompression: true}}
	body := []byte(strings.Repeat(`{"x": [1, 2, 3]}`, 8))
	paths := []struct {
		name   string
		client *http.Client
		url    string
	}{
		{"direct", unixClient, "http://instance/invocations"},
		{"handler", tcpClient, srv.URL + "/endpoints/ep/invocations"},
	}
	for _, conc := range []int{1, 32} {
		for _, p := range paths {
			b.Run(p.name+"/c"+itoa(conc), func(b *testing.B) {
				benchConcurrent(b, conc, p.client, p.url, body)
			})
		}
	}
	// A 1 MB payload (the style endpoint's JPEG), echoed back.
	big := bytes.Repeat([]byte{0xff, 0xd8, 0x00, 0x7f}, 1<<18)
	for _, p := range paths {
		b.Run(p.name+"/1MB/c1", func(b *testing.B) {
			b.SetBytes(int64(len(big)))
			benchConcurrent(b, 1, p.client, p.url, big)
		})
	}
}

func benchConcurrent(b *testing.B, conc int, c *http.Client, url string, body []byte) {
	do := func() error {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header["Content-Type"] = []string{"application/json"}
		req.Header["Accept"] = []string{"application/json"}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return nil
	}
	for i := 0; i < 2*conc; i++ { // warm the connection pools
		if err := do(); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	lat := make([][]time.Duration, conc)
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := do(); err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}(g)
	}
	wg.Wait()
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "p50-ns")
	}
}
