package modelserver

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sagebox/sagebox/internal/wire"
)

func TestParseContainersFile(t *testing.T) {
	f, err := ParseContainersFile([]byte(`{"containers": [{"model_dir": "/m", "env": {"SAGEMAKER_PROGRAM": "serve.py"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Mode != ModeSerial || f.Containers[0].Hostname != "primary" {
		t.Fatalf("defaults: %+v", f)
	}
	// One container is a single model: no hostname in its Config, no
	// original request.
	cfgs, err := f.Configs([]string{"SAGEMAKER_PROGRAM=base.py", "SAGEMAKER_TS_BATCH_SIZE=4"})
	if err != nil {
		t.Fatal(err)
	}
	if c := cfgs[0]; c.Program != "serve.py" || c.BatchSize != 4 || c.Container != "" || c.OriginalRequest || c.ModelDir != "/m" {
		t.Fatalf("single container config %+v", c)
	}

	f, err = ParseContainersFile([]byte(`{"mode": "Serial", "containers": [
		{"hostname": "a", "model_dir": "/a"},
		{"hostname": "b", "model_dir": "/b", "env": {"SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": "text/csv",
			"SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code"}},
		{"hostname": "c", "model_dir": "/c", "env": {"SAGEMAKER_SUBMIT_DIRECTORY": "/src/c"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cfgs, err = f.Configs([]string{"SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT=application/x-npy"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		host, accept, codeDir string
		original              bool
	}{{"a", "application/x-npy", "", false}, {"b", "text/csv", "", true}, {"c", "application/x-npy", "/src/c", true}} {
		c := cfgs[i]
		if c.Container != want.host || c.DefaultAccept != want.accept || c.CodeDir != want.codeDir || c.OriginalRequest != want.original {
			t.Errorf("container %d: %+v", i, c)
		}
	}
	// Direct containers each get their own request: no originals.
	f.Mode = ModeDirect
	if cfgs, _ = f.Configs(nil); cfgs[1].OriginalRequest || cfgs[2].OriginalRequest {
		t.Error("a Direct container was given the original request")
	}
}

func TestCodeDirFromSubmit(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "",
		"/opt/ml/model/code":        "",
		"/opt/ml/model/code/":       "",
		"s3://b/p/sourcedir.tar.gz": "",
		"file:///srv/code":          "/srv/code",
		"./src":                     "./src",
		"/srv/code":                 "/srv/code",
	} {
		if got := codeDirFromSubmit(in); got != want {
			t.Errorf("codeDirFromSubmit(%q) = %q, want %q", in, got, want)
		}
	}
}

// stage is an Invoker that records the request it got and answers with
// answer(req).
type stage struct {
	got    *Request
	answer func(req *Request) (Response, error)
	health Health
}

func (s *stage) Invoke(ctx context.Context, req *Request, resp *Response) error {
	cp := *req
	cp.Headers = append([]wire.Header(nil), req.Headers...)
	s.got = &cp
	r, err := s.answer(req)
	*resp = r
	return err
}

func (s *stage) Health() Health { return s.health }

func header(hs []wire.Header, name string) []string {
	var out []string
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			out = append(out, h.Value)
		}
	}
	return out
}

// Serial's hand-offs: body and Content-Type from the previous answer,
// Accept only to the last, the client's other headers to every stage, the
// original request to all, and the first failure as the answer.
func TestSerialHandOffs(t *testing.T) {
	ok := func(body, ctype string) func(*Request) (Response, error) {
		return func(*Request) (Response, error) {
			return Response{Status: 200, ContentType: ctype, Body: []byte(body),
				Headers: []wire.Header{{Name: "X-From", Value: body}}}, nil
		}
	}
	a := &stage{answer: ok("one", "application/x-one")}
	b := &stage{answer: ok("two", "")}
	c := &stage{answer: ok("three", "text/csv")}
	p := NewSerial([]Container{{"a", a}, {"b", b}, {"c", c}})
	req := &Request{Body: []byte("in"), ContentType: "text/plain", Accept: "text/csv", Headers: []wire.Header{
		{Name: "Content-Type", Value: "text/plain"}, {Name: "Accept", Value: "text/csv"}, {Name: "Content-Length", Value: "2"},
		{Name: "X-Amzn-Sagemaker-Custom-Attributes", Value: "k=v"},
	}}
	var resp Response
	if err := p.Invoke(context.Background(), req, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || string(resp.Body) != "three" || resp.ContentType != "text/csv" ||
		len(header(resp.Headers, "X-From")) != 1 || header(resp.Headers, HeaderContainer) != nil {
		t.Fatalf("answer %+v", resp)
	}
	for i, w := range []struct {
		st                  *stage
		body, ctype, accept string
		ctypeHdr, acceptHdr []string
	}{
		{a, "in", "text/plain", "", []string{"text/plain"}, nil},
		{b, "one", "application/x-one", "", []string{"application/x-one"}, nil},
		{c, "two", "", "text/csv", nil, []string{"text/csv"}},
	} {
		g := w.st.got
		if string(g.Body) != w.body || g.ContentType != w.ctype || g.Accept != w.accept {
			t.Errorf("stage %d got %q %q accept %q", i, g.Body, g.ContentType, g.Accept)
		}
		if h := header(g.Headers, "Content-Type"); strings.Join(h, ",") != strings.Join(w.ctypeHdr, ",") {
			t.Errorf("stage %d Content-Type headers %v", i, h)
		}
		if h := header(g.Headers, "Accept"); strings.Join(h, ",") != strings.Join(w.acceptHdr, ",") {
			t.Errorf("stage %d Accept headers %v", i, h)
		}
		if header(g.Headers, "Content-Length") != nil || strings.Join(header(g.Headers, "X-Amzn-Sagemaker-Custom-Attributes"), ",") != "k=v" {
			t.Errorf("stage %d headers %v", i, g.Headers)
		}
		if o := g.Original; o == nil || string(o.Body) != "in" || o.ContentType != "text/plain" || o.Accept != "text/csv" {
			t.Errorf("stage %d original %+v", i, o)
		}
	}

	// A non-2xx answer stops the chain and is the answer, naming its stage.
	c.got = nil
	b.answer = func(*Request) (Response, error) {
		return Response{Status: 404, Body: []byte("no"), Err: errorf(404, TypeResponseStatus, "no"),
			Headers: []wire.Header{{Name: "X-Why", Value: "missing"}}}, nil
	}
	resp = Response{}
	if err := p.Invoke(context.Background(), req, &resp); err != nil || resp.Status != 404 || c.got != nil ||
		strings.Join(header(resp.Headers, HeaderContainer), ",") != "b" || header(resp.Headers, "X-Why") == nil {
		t.Fatalf("stage b answering 404: %v %+v (c called: %v)", err, resp, c.got != nil)
	}
	// So does an error.
	b.answer = func(*Request) (Response, error) {
		return Response{Headers: []wire.Header{{Name: "X-Why", Value: "boom"}}}, errorf(502, TypeWorkerDied, "died")
	}
	resp = Response{}
	err := p.Invoke(context.Background(), req, &resp)
	var e *Error
	if !errors.As(err, &e) || e.Code != 502 || strings.Join(header(resp.Headers, HeaderContainer), ",") != "b" || header(resp.Headers, "X-Why") == nil {
		t.Fatalf("stage b failing: %v %+v", err, resp)
	}
}

func TestContainersHealth(t *testing.T) {
	a := &stage{health: Health{Ready: true, Phase: PhaseRunning, Workers: []WorkerStatus{{ID: 0, State: WorkerLoaded}}}}
	b := &stage{health: Health{Phase: PhaseRunning, Message: "loading the model: 0 of 1 workers loaded", Workers: []WorkerStatus{{ID: 0}}}}
	p := NewSerial([]Container{{"a", a}, {"b", b}})
	h := p.Health()
	if h.Ready || h.Message != "container b: loading the model: 0 of 1 workers loaded" || h.Err != nil ||
		len(h.Workers) != 2 || h.Workers[1].Container != "b" || len(h.Containers) != 2 || !h.Containers[0].Ready {
		t.Fatalf("loading: %+v", h)
	}
	le := &LoadError{Worker: 0, Type: "ValueError", Message: "bad weights"}
	a.health = Health{Phase: PhaseRunning, Err: le, Message: le.Error()}
	h = p.Health()
	var got *LoadError
	if h.Ready || !errors.As(h.Err, &got) || h.Message != "container a: worker 0 could not load the model: ValueError: bad weights" {
		t.Fatalf("failed: %+v", h)
	}
	b.health = Health{Ready: true, Phase: PhaseRunning}
	a.health = Health{Phase: PhaseFailed, Message: "model server is failed: x"}
	if h = p.Health(); h.Phase != PhaseFailed {
		t.Fatalf("phase %q", h.Phase)
	}
	a.health, b.health = Health{Ready: true, Phase: PhaseRunning}, Health{Ready: true, Phase: PhaseRunning}
	if h = NewDirect([]Container{{"a", a}, {"b", b}}).Health(); !h.Ready || h.Message != "" {
		t.Fatalf("ready: %+v", h)
	}
}

func TestDirectRouting(t *testing.T) {
	a := &stage{answer: func(*Request) (Response, error) { return Response{Status: 200, Body: []byte("a")}, nil }}
	b := &stage{answer: func(*Request) (Response, error) { return Response{Status: 500, Err: errorf(500, "E", "x")}, nil }}
	d := NewDirect([]Container{{"a", a}, {"b", b}})
	call := func(target string) (Response, error) {
		req := &Request{Headers: []wire.Header{{Name: "X-Amzn-Sagemaker-Target-Container-Hostname", Value: target}}}
		if target == "" {
			req.Headers = nil
		}
		var r Response
		err := d.Invoke(context.Background(), req, &r)
		return r, err
	}
	if r, err := call("a"); err != nil || string(r.Body) != "a" || header(r.Headers, HeaderContainer) != nil {
		t.Fatalf("a: %v %+v", err, r)
	}
	if r, err := call("b"); err != nil || r.Status != 500 || strings.Join(header(r.Headers, HeaderContainer), ",") != "b" {
		t.Fatalf("b: %v %+v", err, r)
	}
	for _, target := range []string{"", "c"} {
		var e *Error
		if _, err := call(target); !errors.As(err, &e) || e.Code != http.StatusBadRequest || !strings.Contains(e.Message, "a, b") {
			t.Fatalf("target %q: %v", target, err)
		}
	}
}
