package s3api

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sagebox/sagebox/internal/objectstore"
)

// testEnv is a Handler over a fresh store behind an httptest server.
type testEnv struct {
	srv   *httptest.Server
	store *objectstore.Store
	h     *Handler
}

func newEnv(t testing.TB, cfg Config) *testEnv {
	return newEnvWith(t, cfg, false, objectstore.Options{NoSync: true})
}

func newEnvWith(t testing.TB, cfg Config, tls bool, opts objectstore.Options) *testEnv {
	t.Helper()
	st, err := objectstore.OpenWithOptions(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h := New(st, cfg)
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(func() {
		srv.Close()
		st.Close()
	})
	return &testEnv{srv: srv, store: st, h: h}
}

func (e *testEnv) mkBucket(t testing.TB, name string) {
	t.Helper()
	if err := e.store.CreateBucket(context.Background(), name); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) put(t testing.TB, bucket, key, body string) {
	t.Helper()
	if _, err := e.store.Put(context.Background(), bucket, key, strings.NewReader(body), objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// response is what a raw request got back.
type response struct {
	status int
	header http.Header
	body   string
}

// call sends a raw request; path is escaped as the wire carries it.
func (e *testEnv) call(t testing.TB, method, path string, body io.Reader, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// errorCode parses an S3 error document.
func errorCode(t testing.TB, body string) string {
	t.Helper()
	var e errorXML
	if err := xml.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not an S3 error document: %v\n%s", err, body)
	}
	if e.RequestID == "" {
		t.Fatalf("error without RequestId: %s", body)
	}
	return e.Code
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func md5b64(s string) string {
	sum := md5.Sum([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// requireTool finds an external program for the client tests. Without it
// the test is skipped, unless SAGEBOX_STRICT_TOOLS=1 (CI), where a missing
// tool fails the test.
func requireTool(t *testing.T, path string, check ...string) string {
	t.Helper()
	p, err := exec.LookPath(path)
	if err == nil && len(check) > 0 {
		err = exec.Command(p, check...).Run()
	}
	if err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatalf("%s is required (SAGEBOX_STRICT_TOOLS=1): %v", path, err)
		}
		t.Skipf("%s not available: %v", path, err)
	}
	return p
}
