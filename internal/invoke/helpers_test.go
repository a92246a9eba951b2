package invoke

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	testRegion  = "us-west-2"
	testAccount = "123456789012"
)

// fakeInstance is a real net/http server on a Unix socket standing in for
// a model server.
type fakeInstance struct {
	id   string
	addr string
	sock string
	srv  *http.Server
	hits atomic.Int64

	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	header http.Header
	body   []byte
	path   string
}

// newInstance serves h (nil: echo) on a fresh socket.
func newInstance(t testing.TB, id string, h http.HandlerFunc) *fakeInstance {
	t.Helper()
	dir, err := os.MkdirTemp("", "inv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fi := &fakeInstance{id: id, addr: "unix:" + sock, sock: sock}
	if h == nil {
		h = echo
	}
	fi.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fi.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		fi.mu.Lock()
		fi.seen = append(fi.seen, seenRequest{header: r.Header.Clone(), body: b, path: r.URL.Path})
		fi.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		h(w, r)
	}), ErrorLog: nil}
	go fi.srv.Serve(ln)
	t.Cleanup(func() { fi.srv.Close() })
	return fi
}

// last returns the last request the instance saw.
func (fi *fakeInstance) last(t testing.TB) seenRequest {
	t.Helper()
	fi.mu.Lock()
	defer fi.mu.Unlock()
	if len(fi.seen) == 0 {
		t.Fatalf("instance %s saw no request", fi.id)
	}
	return fi.seen[len(fi.seen)-1]
}

func (fi *fakeInstance) instance() Instance { return Instance{ID: fi.id, Addr: fi.addr} }

// echo answers the body back with the request's Content-Type and a
// custom-attributes header that shows what it received.
func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if ct, ok := r.Header["Content-Type"]; ok {
		w.Header()["Content-Type"] = ct
	} else {
		w.Header()["Content-Type"] = nil
	}
	if ca, ok := r.Header[HeaderCustomAttributes]; ok {
		w.Header().Set(HeaderCustomAttributes, "seen="+ca[0])
	}
	w.Write(b)
}

// stack is a Table and Handler behind an httptest server.
type stack struct {
	table *Table
	h     *Handler
	srv   *httptest.Server
	reg   *prometheus.Registry
}

func newStack(t testing.TB, cfg Config) *stack {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Region, cfg.AccountID, cfg.Registerer = testRegion, testAccount, reg
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tab := NewTable()
	h, err := NewHandler(tab, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close() })
	return &stack{table: tab, h: h, srv: srv, reg: reg}
}

// oneVariant is a route of one variant over the instances.
func oneVariant(name string, ins ...*fakeInstance) *Route {
	v := Variant{Name: name, Weight: 1}
	for _, fi := range ins {
		v.Instances = append(v.Instances, fi.instance())
	}
	return &Route{Status: "InService", Variants: []Variant{v}}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// invoke posts body to endpoint with the headers (pairs of name, value).
func (s *stack) invoke(t testing.TB, endpoint string, body []byte, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/endpoints/"+endpoint+"/invocations", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// apiErr decodes an error answer.
type apiErrBody struct {
	Type               string `json:"__type"`
	LowerMessage       string `json:"message"`
	Message            string `json:"Message"`
	ErrorCode          string
	OriginalStatusCode *int
	OriginalMessage    string
	LogStreamArn       string
}

func (a answer) err(t testing.TB) apiErrBody {
	t.Helper()
	var e apiErrBody
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("error body %q: %v", a.body, err)
	}
	if got := a.header.Get("X-Amzn-ErrorType"); got != e.Type {
		t.Errorf("X-Amzn-ErrorType %q, __type %q", got, e.Type)
	}
	if e.Message == "" {
		e.Message = e.LowerMessage
	}
	return e
}

// waitFor polls cond for up to 5 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// counter reads a counter of the stack's registry (0 when absent).
func (s *stack) counter(t testing.TB, name, endpoint, variant string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["endpoint"] == endpoint && labels["variant"] == variant {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
