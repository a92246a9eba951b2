package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sagebox/sagebox/internal/router"
)

// The server's router serves /_sagebox/metrics and /_sagebox/health as
// cmd wires them: requests are counted by the service they addressed, and
// health turns 503 once the server is stopping.
func TestServerMetricsAndHealthWiring(t *testing.T) {
	health := &serverHealth{dataDir: t.TempDir()}
	m := newServerMetrics()
	s3 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) })
	h := m.Instrument(router.New(router.Routes{S3: s3, Health: health.Check, Metrics: m.Handler()}, nil, nil))
	srv := httptest.NewServer(h)
	defer srv.Close()

	get := func(method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	get("GET", "/bucket/key")
	get("GET", "/bucket/key")
	get("POST", "/endpoints/ep/invocations") // not wired: 501
	if code, body := get("GET", "/_sagebox/health"); code != 200 {
		t.Fatalf("health: %d %s", code, body)
	}
	code, body := get("GET", "/_sagebox/metrics")
	if code != 200 {
		t.Fatalf("metrics: %d %s", code, body)
	}
	for _, want := range []string{
		`sagebox_server_requests_total{code="404",method="get",service="s3"} 2`,
		`sagebox_server_requests_total{code="501",method="post",service="runtime"} 1`,
		`sagebox_server_requests_total{code="200",method="get",service="sagebox"} 1`,
		"go_goroutines ",
		"process_open_fds ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	health.stopping.Store(true)
	if code, body := get("GET", "/_sagebox/health"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Fatalf("health while stopping: %d %s", code, body)
	}
}
