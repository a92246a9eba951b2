package invoke_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sagebox/sagebox/internal/invoke"
	"github.com/sagebox/sagebox/internal/router"
	"github.com/sagebox/sagebox/internal/sigv4"
)

// python is Debian's interpreter, where python3-boto3 installs boto3.
const python = "/usr/bin/python3"

func requireBoto3(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import boto3").Run(); err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatalf("boto3 is required (SAGEBOX_STRICT_TOOLS=1): %v", err)
		}
		t.Skipf("boto3 not available to %s: %v", python, err)
	}
}

// authenticator is cmd/sagebox's SigV4 gate for the runtime route:
// service "sagemaker", the body read (and put back) within the limit.
type authenticator struct{ v *sigv4.Verifier }

func (a authenticator) Authenticate(r *http.Request, svc router.Service) error {
	_, err := a.v.VerifyRoute(r, sigv4.Route{Services: []string{"sagemaker"}, MaxBody: invoke.DefaultMaxPayload})
	return err
}

// TestBoto3Runtime runs botocore's sagemaker-runtime client, with the
// SageMaker SDK's retry settings, against router (SigV4 on) + invoke over
// a fake instance: every InvokeEndpoint member arrives, the answer's
// members come back, and a model error is a ModelError botocore does not
// retry.
func TestBoto3Runtime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python")
	}
	requireBoto3(t)

	st := newRuntimeStack(t)
	srv, hits, failHits, seen := st.srv, &st.hits, &st.failHits, &st.seen
	cmd := exec.Command(python, "testdata/boto3_runtime.py", srv.URL, "boto-ep")
	cmd.Env = append(os.Environ(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("boto3 script: %v\n%s", err, stderr.String())
	}
	type clientErr struct {
		Code            string
		Message         string
		Status          int
		Retries         int
		OriginalStatus  *int   `json:"original_status"`
		OriginalMessage string `json:"original_message"`
		LogStreamArn    string `json:"log_stream_arn"`
	}
	var got struct {
		OK struct {
			Body        string
			ContentType string `json:"content_type"`
			Variant     string
			Custom      string
		}
		ClientError clientErr `json:"client_error"`
		ServerError clientErr `json:"server_error"`
		Missing     clientErr
		BadVariant  clientErr `json:"bad_variant"`
		TooLarge    clientErr `json:"too_large"`
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("script output %q: %v", stdout, err)
	}
	if got.OK.Body != "\u0093NUMPY\u0001\u0000payload" /* latin-1 decoded */ || got.OK.ContentType != "application/x-npy" ||
		got.OK.Variant != "AllTraffic" || got.OK.Custom != "echo=trace=abc" {
		t.Errorf("invoke_endpoint answer %+v", got.OK)
	}
	if hp := seen.Load(); hp == nil {
		t.Error("instance saw no successful request")
	} else {
		for k, want := range map[string]string{
			"Content-Type": "application/x-npy", "Accept": "application/x-npy",
			"X-Amzn-SageMaker-Custom-Attributes": "trace=abc", "X-Amzn-SageMaker-Target-Variant": "AllTraffic",
			"X-Amzn-SageMaker-Inference-Id": "inf-1",
		} {
			if g := hp.Get(k); g != want {
				t.Errorf("instance got %s = %q, want %q", k, g, want)
			}
		}
		if hp.Get("Authorization") != "" {
			t.Error("the client's Authorization reached the instance")
		}
	}
	arn := "arn:aws:logs:us-west-2:123456789012:log-group:/aws/sagemaker/Endpoints/boto-ep"
	ce := got.ClientError
	if ce.Code != "ModelError" || ce.Status != 424 || ce.Retries != 0 || ce.OriginalStatus == nil || *ce.OriginalStatus != 400 ||
		ce.OriginalMessage != `{"code":400,"type":"ValueError","message":"bad row"}` || ce.LogStreamArn != arn ||
		!strings.HasPrefix(ce.Message, `Received client error (400) from primary with message "{"code":400`) {
		t.Errorf("client error %+v", ce)
	}
	se := got.ServerError
	if se.Code != "ModelError" || se.Status != 424 || se.Retries != 0 || se.OriginalStatus == nil || *se.OriginalStatus != 500 ||
		!strings.HasPrefix(se.Message, `Received server error (500) from primary with message "Traceback: boom"`) {
		t.Errorf("server error %+v", se)
	}
	if n := failHits.Load(); n != 2 {
		t.Errorf("the failing requests reached the instance %d times, want 2 (once each: no retry)", n)
	}
	if m := got.Missing; m.Code != "ValidationError" || m.Status != 400 || m.Message != "Endpoint no-such-endpoint of account 123456789012 not found." {
		t.Errorf("missing endpoint %+v", m)
	}
	if b := got.BadVariant; b.Code != "ValidationError" || !strings.Contains(b.Message, "variant Nope was not found") {
		t.Errorf("bad variant %+v", b)
	}
	if tl := got.TooLarge; tl.Code != invoke.CodeTooLarge || tl.Status != 413 || tl.Retries != 0 {
		t.Errorf("6 MB + 1 byte: %+v", tl)
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("instance hits %d, want 3", n)
	}
}

// runtimeStack is router (SigV4 on, as cmd/sagebox configures the runtime
// route) + invoke over one fake instance on a Unix socket, endpoint
// "boto-ep", variant AllTraffic. The instance echoes, answers 400 to
// Accept: fail-400 and 500 to Accept: fail-500.
type runtimeStack struct {
	srv            *httptest.Server
	hits, failHits atomic.Int64
	seen           atomic.Pointer[http.Header]
}

func newRuntimeStack(t *testing.T) *runtimeStack {
	t.Helper()
	st := &runtimeStack{}
	hits, failHits, seen := &st.hits, &st.failHits, &st.seen
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
	inst := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		switch r.Header.Get("Accept") {
		case "fail-400":
			failHits.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			io.WriteString(w, `{"code":400,"type":"ValueError","message":"bad row"}`)
			return
		case "fail-500":
			failHits.Add(1)
			w.WriteHeader(500)
			io.WriteString(w, "Traceback: boom")
			return
		}
		h := r.Header.Clone()
		seen.Store(&h)
		w.Header()["Content-Type"] = []string{"application/x-npy"}
		w.Header().Set("X-Amzn-SageMaker-Custom-Attributes", "echo="+r.Header.Get("X-Amzn-SageMaker-Custom-Attributes"))
		w.Write(b)
	})}
	go inst.Serve(ln)
	t.Cleanup(func() { inst.Close() })

	tab := invoke.NewTable()
	h, err := invoke.NewHandler(tab, invoke.Config{Region: "us-west-2", AccountID: "123456789012",
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	tab.Set("boto-ep", &invoke.Route{Status: "InService", Variants: []invoke.Variant{
		{Name: "AllTraffic", Weight: 1, Instances: []invoke.Instance{{ID: "i-1", Addr: "unix:" + sock}}},
	}})
	v := sigv4.NewVerifier(map[string]string{"AKIDTEST": "secret"}, time.Now, sigv4.WithRegion("us-west-2"))
	st.srv = httptest.NewServer(router.New(router.Routes{Runtime: h}, authenticator{v}, nil))
	t.Cleanup(st.srv.Close)
	return st
}
