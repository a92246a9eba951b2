package main

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sagebox/sagebox/internal/bodytimeout"
	"github.com/sagebox/sagebox/internal/invoke"
	"github.com/sagebox/sagebox/internal/router"
)

// BenchmarkRuntimeChain runs one InvokeEndpoint through the handlers the
// server stacks in front of the runtime (bodytimeout, the request counter,
// the router, invoke), against a fasthttp instance that answers at once,
// without the HTTP server: ns/op and allocs/op are what sagebox's own code
// costs per request, the part of the hop this repository controls.
func BenchmarkRuntimeChain(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	inst := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.SetContentType("application/json")
		ctx.SetBody(ctx.PostBody())
	}, NoDefaultServerHeader: true, NoDefaultContentType: true}
	go inst.Serve(ln)
	defer inst.Shutdown()

	tab := invoke.NewTable()
	tab.Set("ep", &invoke.Route{Status: "InService", Variants: []invoke.Variant{{Name: "AllTraffic", Weight: 1,
		Instances: []invoke.Instance{{ID: "i-1", Addr: "unix:" + sock}}}}})
	m := newServerMetrics()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := invoke.NewHandler(tab, invoke.Config{Region: "us-east-1", AccountID: "123456789012", Registerer: m.reg, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	chain := bodytimeout.Handler(m.Instrument(router.New(router.Routes{Runtime: h}, nil, logger)), time.Minute)
	body := bytes.Repeat([]byte(`{"x": [1, 2, 3]}`), 8)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest(http.MethodPost, "/endpoints/ep/invocations", bytes.NewReader(body))
			r.Header["Content-Type"] = []string{"application/json"}
			r.Header["Accept"] = []string{"application/json"}
			w := httptest.NewRecorder()
			chain.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	})
}
