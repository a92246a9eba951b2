package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestListenModelServer(t *testing.T) {
	ln, addr, err := listenModelServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if addr != ln.Addr().String() || strings.HasSuffix(addr, ":0") {
		t.Errorf("port 0 reported as %q (listening on %s)", addr, ln.Addr())
	}
	ln.Close()

	sock := filepath.Join(t.TempDir(), "http.sock")
	live, addr, err := listenModelServer("unix:" + sock)
	if err != nil || addr != "unix:"+sock {
		t.Fatalf("unix socket: %q %v", addr, err)
	}
	if _, _, err := listenModelServer("unix:" + sock); err == nil || !strings.Contains(err.Error(), "another server is listening") {
		t.Errorf("a socket a live server listens on was taken over: %v", err)
	}
	// A socket file left behind by a dead server is replaced.
	live.(*net.UnixListener).SetUnlinkOnClose(false)
	live.Close()
	again, _, err := listenModelServer("unix:" + sock)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	again.Close()
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file still there after close: %v", err)
	}
	if _, _, err := listenModelServer("unix:"); err == nil {
		t.Error("an empty socket path was accepted")
	}
}

func TestReadyReporter(t *testing.T) {
	if _, err := newReadyReporter(1); err == nil {
		t.Error("--ready-fd 1 accepted")
	}
	if _, err := newReadyReporter(987); err == nil || !strings.Contains(err.Error(), "not an open file descriptor") {
		t.Errorf("a closed descriptor: %v", err)
	}
	none, err := newReadyReporter(-1)
	if err != nil {
		t.Fatal(err)
	}
	none.report(true, nil) // no --ready-fd: nothing to do

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	// A descriptor of its own, as a child inherits it: the reporter closes it.
	fd, err := syscall.Dup(int(pw.Fd()))
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	r, err := newReadyReporter(fd)
	if err != nil {
		t.Fatal(err)
	}
	r.addr = "unix:/x/http.sock"
	r.report(false, errors.New(`model_fn raised "boom"`))
	r.report(true, nil) // only the first report counts
	b, _ := io.ReadAll(pr)
	if want := `{"ready":false,"addr":"unix:/x/http.sock","error":"model_fn raised \"boom\""}` + "\n"; string(b) != want {
		t.Fatalf("handshake %q, want %q", b, want)
	}
}

// TestMain lets this test binary be the workers' supervisor, as the
// sagebox binary is (`sagebox exec-shim`), when a test runs the
// model-server command in-process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "exec-shim" {
		os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// readyPipe returns a descriptor for --ready-fd and a function that reads
// the line the command wrote to it.
func readyPipe(t *testing.T) (int, func() string) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(int(pw.Fd()))
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	return fd, func() string {
		defer pr.Close()
		b, _ := io.ReadAll(pr)
		return string(b)
	}
}

// A bad --containers file stops the command before anything starts: it
// exits non-zero with a message, and the readiness line says why.
func TestModelServerBadContainersFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := func(host string) string { return `{"hostname": "` + host + `", "model_dir": "` + dir + `"}` }
	many := make([]string, 16)
	for i := range many {
		many[i] = c("c" + strconv.Itoa(i))
	}
	for _, tt := range []struct {
		name, file string
		extra      []string
		want       string
	}{
		{"missing", filepath.Join(dir, "nope.json"), nil, "no such file"},
		{"bad json", write("bad.json", `{"mode": "Serial", "containers": [`), nil, "not a containers file"},
		{"unknown field", write("field.json", `{"containers": [{"hostname": "a", "model_dir": "/m", "modeldir": "x"}]}`), nil, `unknown field "modeldir"`},
		{"unknown mode", write("mode.json", `{"mode": "Parallel", "containers": [`+c("a")+`]}`), nil, `mode "Parallel": must be "Serial" or "Direct"`},
		{"no containers", write("none.json", `{"mode": "Serial", "containers": []}`), nil, "0 containers: a model has 1 to 15"},
		{"too many", write("many.json", `{"containers": [`+strings.Join(many, ",")+`]}`), nil, "16 containers: a model has 1 to 15"},
		{"duplicate hostnames", write("dup.json", `{"containers": [`+c("a")+`,`+c("b")+`,`+c("A")+`]}`), nil, `containers 1 and 3 share the hostname "A"`},
		{"missing model_dir", write("nodir.json", `{"containers": [`+c("a")+`, {"hostname": "b"}]}`), nil, "container 2 (b): model_dir is required"},
		{"missing hostname", write("nohost.json", `{"containers": [`+c("a")+`, {"model_dir": "/m"}]}`), nil, "container 2: hostname is required"},
		{"bad hostname", write("host.json", `{"containers": [`+c("a_b")+`]}`), nil, `hostname "a_b"`},
		{"bad env", write("env.json", `{"containers": [{"hostname": "a", "model_dir": "/m", "env": {"SAGEMAKER_TS_BATCH_SIZE": "lots"}}]}`), nil,
			`container a: invalid model server configuration: SAGEMAKER_TS_BATCH_SIZE="lots"`},
		{"model_dir not a directory", write("gone.json", `{"containers": [`+c("a")+`, {"hostname": "b", "model_dir": "/nonexistent/b"}]}`), nil,
			"container b: model directory /nonexistent/b: not a directory"},
		{"submit directory not a directory", write("submit.json", `{"containers": [{"hostname": "a", "model_dir": "`+dir+`", "env": {"SAGEMAKER_SUBMIT_DIRECTORY": "/nonexistent/src"}}]}`), nil,
			"SAGEMAKER_SUBMIT_DIRECTORY=/nonexistent/src: not a directory"},
		{"with --model-dir", write("ok.json", `{"containers": [`+c("a")+`]}`), []string{"--model-dir", dir}, "give --containers or --model-dir/--model-data, not both"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fd, line := readyPipe(t)
			args := append([]string{"model-server", "--containers", tt.file, "--port", "0", "--ready-fd", strconv.Itoa(fd)}, tt.extra...)
			var out, errOut bytes.Buffer
			code := run(context.Background(), args, func(string) string { return "" }, nil, &out, &errOut)
			if code == 0 || !strings.Contains(errOut.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want non-zero and %q", code, errOut.String(), tt.want)
			}
			var rl readyLine
			if l := line(); json.Unmarshal([]byte(l), &rl) != nil || rl.Ready || !strings.Contains(rl.Error, tt.want) {
				t.Fatalf("ready line %q", l)
			}
		})
	}
}

// The hosting manager's use: `sagebox model-server --containers FILE
// --listen unix:SOCK --ready-fd 3`, a two-container pipeline answering
// over the socket.
func TestModelServerContainersServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Python workers")
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import torch").CombinedOutput(); err != nil {
		t.Skipf("needs /usr/bin/python3 with torch: %v %s", err, out)
	}
	dir := t.TempDir()
	model := func(name, code string) string {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(d, "code"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "code", "inference.py"), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := model("first", "def model_fn(d):\n    return None\n"+
		"def transform_fn(m, data, content_type, accept):\n    return data.upper(), 'text/x-upper'\n")
	second := model("second", "def model_fn(d):\n    return None\n"+
		"def transform_fn(m, data, content_type, accept, context):\n"+
		"    o = context.original_request\n"+
		"    if data == b'FAIL':\n        raise ValueError('second refuses')\n"+
		"    return b'%s|%s|%s' % (content_type.encode(), data, o.body), 'text/plain'\n")
	spec, _ := json.Marshal(map[string]any{"mode": "Serial", "containers": []map[string]any{
		{"hostname": "first", "model_dir": first, "env": map[string]string{"SAGEMAKER_MODEL_SERVER_WORKERS": "1"}},
		{"hostname": "second", "model_dir": second, "env": map[string]string{"SAGEMAKER_MODEL_SERVER_WORKERS": "1"}},
	}})
	file := filepath.Join(dir, "containers.json")
	if err := os.WriteFile(file, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "m.sock")
	fd, line := readyPipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "SAGEBOX_PYTHON" {
			return "/usr/bin/python3"
		}
		return os.Getenv(k)
	}
	t.Setenv("SAGEBOX_PYTHON", "/usr/bin/python3")
	go func() {
		done <- run(ctx, []string{"model-server", "--containers", file, "--listen", "unix:" + sock, "--ready-fd", strconv.Itoa(fd)},
			getenv, nil, io.Discard, &errOut)
	}()
	var rl readyLine
	if l := line(); json.Unmarshal([]byte(l), &rl) != nil || !rl.Ready || rl.Addr != "unix:"+sock {
		cancel()
		<-done
		t.Fatalf("ready line %q\n%s", l, errOut.String())
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	post := func(body string) (*http.Response, string) {
		t.Helper()
		resp, err := client.Post("http://model/invocations", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	if resp, body := post("abc"); resp.StatusCode != 200 || body != "text/x-upper|ABC|abc" {
		t.Errorf("pipeline: %d %q", resp.StatusCode, body)
	}
	if resp, body := post("fail"); resp.StatusCode != 500 || resp.Header.Get("X-Sagebox-Container") != "second" || !strings.Contains(body, "second refuses") {
		t.Errorf("failing second container: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d\n%s", code, errOut.String())
	}
}
