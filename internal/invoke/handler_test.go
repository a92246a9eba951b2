package invoke

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestHeadersForwardedAndAnswered(t *testing.T) {
	s := newStack(t, Config{})
	fi := newInstance(t, "i-1", nil)
	s.table.Set("ep", oneVariant("AllTraffic", fi))

	a := s.invoke(t, "ep", []byte("\x93NUMPY payload"),
		"Content-Type", "application/x-npy",
		"Accept", "application/x-npy",
		HeaderCustomAttributes, "trace=1,c=2",
		HeaderTargetVariant, "AllTraffic",
		HeaderInferenceID, "inf-42 x",
		"X-Unrelated", "dropped")
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	if string(a.body) != "\x93NUMPY payload" {
		t.Errorf("body %q", a.body)
	}
	if got := a.header.Values("Content-Type"); len(got) != 1 || got[0] != "application/x-npy" {
		t.Errorf("Content-Type %q, want exactly application/x-npy", got)
	}
	if got := a.header.Get("X-Amzn-Invoked-Production-Variant"); got != "AllTraffic" {
		t.Errorf("invoked variant %q", got)
	}
	if got := a.header.Get("X-Amzn-SageMaker-Custom-Attributes"); got != "seen=trace=1,c=2" {
		t.Errorf("custom attributes back %q", got)
	}
	if a.header.Get("X-Amzn-RequestId") == "" {
		t.Error("no X-Amzn-RequestId")
	}
	seen := fi.last(t)
	if seen.path != "/invocations" {
		t.Errorf("instance path %q", seen.path)
	}
	for k, want := range map[string]string{
		"Content-Type":                       "application/x-npy",
		"Accept":                             "application/x-npy",
		"X-Amzn-SageMaker-Custom-Attributes": "trace=1,c=2",
		"X-Amzn-SageMaker-Target-Variant":    "AllTraffic",
		"X-Amzn-SageMaker-Inference-Id":      "inf-42 x",
		"X-Unrelated":                        "",
		"Accept-Encoding":                    "",
	} {
		if got := seen.header.Get(k); got != want {
			t.Errorf("instance got %s = %q, want %q", k, got, want)
		}
	}
}

func TestContentTypePassthrough(t *testing.T) {
	s := newStack(t, Config{})
	var ct = map[string]string{}
	var mu sync.Mutex
	fi := newInstance(t, "i-1", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		v, ok := ct[r.Header.Get("Accept")]
		mu.Unlock()
		if ok {
			w.Header()["Content-Type"] = []string{v}
		} else {
			w.Header()["Content-Type"] = nil // none at all, not sniffed
		}
		w.Write([]byte("<html>not sniffed</html>"))
	})
	s.table.Set("ep", oneVariant("v", fi))
	ct["a"] = "text/csv"
	ct["b"] = "application/json; charset=UTF-8"
	ct["c"] = "Application/X-NPY"
	for accept, want := range ct {
		a := s.invoke(t, "ep", []byte("x"), "Accept", accept)
		if got := a.header.Values("Content-Type"); a.status != 200 || len(got) != 1 || got[0] != want {
			t.Errorf("Accept %s: status %d Content-Type %q, want %q", accept, a.status, got, want)
		}
	}
	a := s.invoke(t, "ep", []byte("x"), "Accept", "none")
	if got, ok := a.header["Content-Type"]; a.status != 200 || ok {
		t.Errorf("instance sent no Content-Type: got status %d, %q", a.status, got)
	}
	// No Content-Type from the client: none to the instance either.
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/endpoints/ep/invocations", strings.NewReader("x"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, ok := fi.last(t).header["Content-Type"]; ok {
		t.Errorf("instance got a Content-Type the client did not send: %q", fi.last(t).header.Get("Content-Type"))
	}
}

func TestModelError(t *testing.T) {
	s := newStack(t, Config{})
	fi := newInstance(t, "i-1", func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Accept") {
		case "client":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			io.WriteString(w, `{"code":400,"type":"ValueError","message":"bad input"}`+"\n")
		case "server":
			w.WriteHeader(503)
			io.WriteString(w, "Prediction failed")
		case "stage":
			w.Header().Set(HeaderContainer, "stage-2")
			w.WriteHeader(507)
			io.WriteString(w, `{"code":507,"type":"MemoryError","message":"Out of resources"}`)
		}
	})
	s.table.Set("Ep-1", oneVariant("v1", fi))
	arn := "arn:aws:logs:us-west-2:123456789012:log-group:/aws/sagemaker/Endpoints/Ep-1"
	for _, c := range []struct {
		accept, kind, container, code, orig string
		status                              int
	}{
		{"client", "client", "primary", "CLIENT_ERROR_FROM_MODEL", `{"code":400,"type":"ValueError","message":"bad input"}`, 400},
		{"server", "server", "primary", "SERVER_ERROR_FROM_MODEL", "Prediction failed", 503},
		{"stage", "server", "stage-2", "SERVER_ERROR_FROM_MODEL", `{"code":507,"type":"MemoryError","message":"Out of resources"}`, 507},
	} {
		before := fi.hits.Load()
		a := s.invoke(t, "ep-1", []byte("x"), "Accept", c.accept)
		if a.status != 424 {
			t.Fatalf("%s: status %d, want 424: %s", c.accept, a.status, a.body)
		}
		e := a.err(t)
		want := fmt.Sprintf(`Received %s error (%d) from %s with message "%s". See %s in account 123456789012 for more information.`,
			c.kind, c.status, c.container, c.orig, arn)
		if e.Type != "ModelError" || e.Message != want || e.OriginalMessage != c.orig || e.LogStreamArn != arn || e.ErrorCode != c.code ||
			e.OriginalStatusCode == nil || *e.OriginalStatusCode != c.status {
			t.Errorf("%s: got %+v\nwant message %s", c.accept, e, want)
		}
		if n := fi.hits.Load() - before; n != 1 {
			t.Errorf("%s: instance hit %d times, want 1 (no retry)", c.accept, n)
		}
	}
	if got := s.counter(t, "sagebox_endpoint_invocation_model_errors_total", "Ep-1", "v1"); got != 3 {
		t.Errorf("model errors metric %v", got)
	}
	if got := s.counter(t, "sagebox_endpoint_invocation_4xx_errors_total", "Ep-1", "v1"); got != 1 {
		t.Errorf("4xx metric %v", got)
	}
	if got := s.counter(t, "sagebox_endpoint_invocation_5xx_errors_total", "Ep-1", "v1"); got != 2 {
		t.Errorf("5xx metric %v", got)
	}
}

func TestMissingAndNotServing(t *testing.T) {
	s := newStack(t, Config{})
	a := s.invoke(t, "nope", []byte("x"))
	if e := a.err(t); a.status != 400 || e.Type != "ValidationError" || e.Message != "Endpoint nope of account 123456789012 not found." {
		t.Errorf("missing: %d %+v", a.status, e)
	}
	for _, st := range []string{"Creating", "Failed", "Deleting"} {
		s.table.Set("ep", &Route{Status: st})
		a := s.invoke(t, "ep", []byte("x"))
		e := a.err(t)
		if a.status != 400 || e.Type != "ValidationError" || !strings.Contains(e.Message, "Endpoint ep of account 123456789012 is "+st+", not InService") {
			t.Errorf("%s: %d %+v", st, a.status, e)
		}
	}
	// Updating serves from its current fleet.
	fi := newInstance(t, "i-1", nil)
	r := oneVariant("v", fi)
	r.Status = "Updating"
	s.table.Set("ep", r)
	if a := s.invoke(t, "ep", []byte("x")); a.status != 200 {
		t.Errorf("updating endpoint: %d %s", a.status, a.body)
	}
	s.table.Delete("ep")
	if a := s.invoke(t, "ep", []byte("x")); a.status != 400 || !strings.Contains(a.err(t).Message, "not found") {
		t.Errorf("deleted: %d %s", a.status, a.body)
	}
	// Bad name: AWS's validation message.
	a = s.invoke(t, "bad_name", []byte("x"))
	if e := a.err(t); a.status != 400 || !strings.Contains(e.Message, "Value 'bad_name' at 'endpointName' failed to satisfy constraint") {
		t.Errorf("bad name: %d %+v", a.status, e)
	}
}

func TestHeaderValidation(t *testing.T) {
	s := newStack(t, Config{})
	fi := newInstance(t, "i-1", nil)
	s.table.Set("ep", oneVariant("v", fi))
	for _, c := range []struct {
		header, value, want string
	}{
		{HeaderTargetModel, "model-a.tar.gz", "TargetModel"},
		{HeaderInferenceID, strings.Repeat("a", 65), "'inferenceId' failed to satisfy constraint: Member must have length less than or equal to 64"},
		{HeaderInferenceID, "a\tb", "inferenceId"},
		{HeaderCustomAttributes, strings.Repeat("a", 1025), "customAttributes"},
		{HeaderTargetVariant, "bad_variant", "targetVariant"},
		{"Accept", strings.Repeat("a", 1025), "'accept'"},
	} {
		a := s.invoke(t, "ep", []byte("x"), c.header, c.value)
		if e := a.err(t); a.status != 400 || e.Type != "ValidationError" || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s=%.20q: %d %+v", c.header, c.value, a.status, e)
		}
	}
	if n := fi.hits.Load(); n != 0 {
		t.Errorf("instance saw %d refused requests", n)
	}
}

func TestWeights(t *testing.T) {
	s := newStack(t, Config{})
	a1, a2 := newInstance(t, "a-1", nil), newInstance(t, "a-2", nil)
	b1 := newInstance(t, "b-1", nil)
	z1 := newInstance(t, "z-1", nil)
	s.table.Set("ep", &Route{Status: "InService", Variants: []Variant{
		{Name: "A", Weight: 3, Instances: []Instance{a1.instance(), a2.instance()}},
		{Name: "B", Weight: 1, Instances: []Instance{b1.instance()}},
		{Name: "Z", Weight: 0, Instances: []Instance{z1.instance()}},
	}})
	const n = 2000
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		a := s.invoke(t, "ep", []byte("x"))
		if a.status != 200 {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
		counts[a.header.Get(HeaderInvokedVariant)]++
	}
	// 3:1 → 1500 ± 4.5σ (σ ≈ 19.4).
	if c := counts["A"]; c < 1410 || c > 1590 || counts["A"]+counts["B"] != n {
		t.Errorf("split %v, want about 1500/500", counts)
	}
	if z1.hits.Load() != 0 {
		t.Errorf("zero-weight variant got %d requests", z1.hits.Load())
	}
	if got := a1.hits.Load() + a2.hits.Load(); got != int64(counts["A"]) || a1.hits.Load() == 0 || a2.hits.Load() == 0 {
		t.Errorf("variant A's instances got %d and %d", a1.hits.Load(), a2.hits.Load())
	}
	// Targeted, a zero-weight variant serves.
	if a := s.invoke(t, "ep", []byte("x"), HeaderTargetVariant, "Z"); a.status != 200 || a.header.Get(HeaderInvokedVariant) != "Z" || z1.hits.Load() != 1 {
		t.Errorf("TargetVariant Z: %d %q hits %d", a.status, a.header.Get(HeaderInvokedVariant), z1.hits.Load())
	}
	a := s.invoke(t, "ep", []byte("x"), HeaderTargetVariant, "C")
	if e := a.err(t); a.status != 400 || e.Type != "ValidationError" || !strings.Contains(e.Message, "variant C was not found") {
		t.Errorf("unknown variant: %d %+v", a.status, e)
	}
	if got := s.counter(t, "sagebox_endpoint_invocations_total", "ep", "B"); got != float64(counts["B"]) {
		t.Errorf("invocations{B} = %v, want %d", got, counts["B"])
	}

	// All zero: refused, unless targeted.
	s.table.Set("ep", &Route{Status: "InService", Variants: []Variant{
		{Name: "A", Weight: 0, Instances: []Instance{a1.instance()}},
		{Name: "B", Weight: 0, Instances: []Instance{b1.instance()}},
	}})
	a = s.invoke(t, "ep", []byte("x"))
	if e := a.err(t); a.status != 400 || e.Type != "ValidationError" || !strings.Contains(e.Message, "weight") {
		t.Errorf("all zero: %d %+v", a.status, e)
	}
	if a := s.invoke(t, "ep", []byte("x"), HeaderTargetVariant, "B"); a.status != 200 {
		t.Errorf("all zero, targeted: %d %s", a.status, a.body)
	}
}

func TestLeastOutstanding(t *testing.T) {
	s := newStack(t, Config{})
	slow := newInstance(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(40 * time.Millisecond)
		w.Write([]byte("slow"))
	})
	fast := newInstance(t, "fast", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond)
		w.Write([]byte("fast"))
	})
	s.table.Set("ep", oneVariant("v", slow, fast))
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if a := s.invoke(t, "ep", []byte("x")); a.status != 200 {
					t.Errorf("status %d", a.status)
				}
			}
		}()
	}
	wg.Wait()
	if sl, f := slow.hits.Load(), fast.hits.Load(); sl*3 > f || sl+f != 100 {
		t.Errorf("slow instance got %d, fast %d: want the slow one well under a quarter", sl, f)
	}
	if s.table.Outstanding("slow") != 0 || s.table.Outstanding("fast") != 0 {
		t.Errorf("outstanding after the load: %d, %d", s.table.Outstanding("slow"), s.table.Outstanding("fast"))
	}
}

func TestRetryOnDeadSocket(t *testing.T) {
	s := newStack(t, Config{})
	live := newInstance(t, "live", nil)
	dead := newInstance(t, "dead", nil)
	dead.srv.Close() // the socket file stays, nobody listens: ECONNREFUSED
	gone := Instance{ID: "gone", Addr: "unix:/nonexistent/sock"}
	s.table.Set("ep", &Route{Status: "InService", Variants: []Variant{{Name: "v", Weight: 1,
		Instances: []Instance{dead.instance(), gone, live.instance()}}}})
	for i := 0; i < 20; i++ {
		if a := s.invoke(t, "ep", []byte(fmt.Sprint(i))); a.status != 200 || string(a.body) != fmt.Sprint(i) {
			t.Fatalf("request %d: %d %s", i, a.status, a.body)
		}
	}
	if live.hits.Load() != 20 {
		t.Errorf("live hits %d", live.hits.Load())
	}

	// Only dead instances, then hosting publishes the replacement while
	// the request waits between rounds.
	s.table.Set("ep", &Route{Status: "InService", Variants: []Variant{{Name: "v", Weight: 1, Instances: []Instance{gone}}}})
	go func() {
		time.Sleep(5 * time.Millisecond)
		s.table.Set("ep", oneVariant("v", live))
	}()
	if a := s.invoke(t, "ep", []byte("late")); a.status != 200 || string(a.body) != "late" {
		t.Errorf("after replacement: %d %s", a.status, a.body)
	}

	// Nothing ever listens: 503, which is safe to retry.
	s.table.Set("ep", &Route{Status: "InService", Variants: []Variant{{Name: "v", Weight: 1, Instances: []Instance{gone}}}})
	a := s.invoke(t, "ep", []byte("x"))
	if e := a.err(t); a.status != 503 || e.Type != "ServiceUnavailable" {
		t.Errorf("no instance: %d %+v", a.status, e)
	}
	if s.table.Outstanding("gone") != 0 {
		t.Errorf("outstanding gone = %d", s.table.Outstanding("gone"))
	}
}

func TestCrashMidRequestNotRetried(t *testing.T) {
	s := newStack(t, Config{})
	crash := newInstance(t, "crash", func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	other := newInstance(t, "other", nil)
	s.table.Set("ep", oneVariant("v", crash))
	a := s.invoke(t, "ep", []byte("x"))
	e := a.err(t)
	if a.status != 424 || e.Type != "ModelError" || e.OriginalStatusCode == nil || *e.OriginalStatusCode != 0 ||
		!strings.Contains(e.Message, "Received server error (0) from primary") {
		t.Errorf("crash: %d %+v", a.status, e)
	}
	if crash.hits.Load() != 1 {
		t.Errorf("crashing instance hit %d times, want 1", crash.hits.Load())
	}
	_ = other
}

func TestTimeout(t *testing.T) {
	s := newStack(t, Config{Timeout: 50 * time.Millisecond})
	release := make(chan struct{})
	defer close(release)
	fi := newInstance(t, "i", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(2 * time.Second):
		}
	})
	s.table.Set("ep", oneVariant("v", fi))
	a := s.invoke(t, "ep", []byte("x"))
	e := a.err(t)
	if a.status != 424 || e.Type != "ModelError" || !strings.Contains(e.Message, "timed out") || *e.OriginalStatusCode != 0 {
		t.Errorf("timeout: %d %+v", a.status, e)
	}
	if fi.hits.Load() != 1 {
		t.Errorf("hits %d", fi.hits.Load())
	}
}

func TestPayloadLimit(t *testing.T) {
	s := newStack(t, Config{})
	fi := newInstance(t, "i", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprint(w, len(b))
	})
	s.table.Set("ep", oneVariant("v", fi))
	exact := bytes.Repeat([]byte("a"), DefaultMaxPayload)
	if a := s.invoke(t, "ep", exact); a.status != 200 || string(a.body) != fmt.Sprint(DefaultMaxPayload) {
		t.Fatalf("exactly 6 MB: %d %.200s", a.status, a.body)
	}
	a := s.invoke(t, "ep", append(exact, 'b'))
	if e := a.err(t); a.status != 413 || e.Type != CodeTooLarge || !strings.Contains(e.Message, "6291456") {
		t.Errorf("6 MB + 1: %d %+v", a.status, e)
	}
	// Without a Content-Length (chunked), read only up to the limit.
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/endpoints/ep/invocations", io.MultiReader(bytes.NewReader(exact), strings.NewReader("bb")))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("chunked over the limit: %d", resp.StatusCode)
	}
	if fi.hits.Load() != 1 {
		t.Errorf("instance saw %d requests, want only the one within the limit", fi.hits.Load())
	}
	if a := s.invoke(t, "ep", []byte("small")); a.status != 200 || string(a.body) != "5" {
		t.Errorf("after the refusals: %d %s", a.status, a.body)
	}
}

func TestDirectAndSerialHostname(t *testing.T) {
	s := newStack(t, Config{})
	fi := newInstance(t, "i", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HeaderTargetContainer) == "c2" {
			w.WriteHeader(400)
			io.WriteString(w, "c2 says no")
			return
		}
		io.WriteString(w, "to "+r.Header.Get(HeaderTargetContainer))
	})
	r := oneVariant("v", fi)
	r.Mode, r.Containers = "Direct", []string{"c1", "c2"}
	s.table.Set("direct", r)
	if a := s.invoke(t, "direct", []byte("x"), HeaderTargetContainer, "c1"); a.status != 200 || string(a.body) != "to c1" {
		t.Errorf("c1: %d %s", a.status, a.body)
	}
	// A Direct container's error names it without X-Sagebox-Container.
	a := s.invoke(t, "direct", []byte("x"), HeaderTargetContainer, "c2")
	if e := a.err(t); a.status != 424 || !strings.Contains(e.Message, "(400) from c2 with message \"c2 says no\"") {
		t.Errorf("c2: %d %+v", a.status, e)
	}
	for _, hn := range []string{"", "c3"} {
		a := s.invoke(t, "direct", []byte("x"), HeaderTargetContainer, hn)
		if e := a.err(t); a.status != 400 || e.Type != "ValidationError" || !strings.Contains(e.Message, "c1, c2") {
			t.Errorf("hostname %q: %d %+v", hn, a.status, e)
		}
	}
	r = oneVariant("v", fi)
	r.Mode, r.Containers = "Serial", []string{"c1", "c2"}
	s.table.Set("serial", r)
	a = s.invoke(t, "serial", []byte("x"), HeaderTargetContainer, "c1")
	if e := a.err(t); a.status != 400 || e.Type != "ValidationError" || !strings.Contains(e.Message, "Direct mode") {
		t.Errorf("serial with hostname: %d %+v", a.status, e)
	}
	s.table.Set("single", oneVariant("v", fi))
	a = s.invoke(t, "single", []byte("x"), HeaderTargetContainer, "c1")
	if a.status != 400 {
		t.Errorf("single with hostname: %d %s", a.status, a.body)
	}
	if n := fi.hits.Load(); n != 2 {
		t.Errorf("instance hits %d, want 2", n)
	}
}

// TestOutstandingDrain is hosting's drain: once a Set without the
// instance has returned, Outstanding counts what is still in flight to it
// and reaches 0 when that ends.
func TestOutstandingDrain(t *testing.T) {
	s := newStack(t, Config{})
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	old := newInstance(t, "old", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		io.WriteString(w, "old")
	})
	nw := newInstance(t, "new", nil)
	s.table.Set("ep", oneVariant("v", old))
	done := make(chan answer, 1)
	go func() { done <- s.invoke(t, "ep", []byte("x")) }()
	<-entered
	s.table.Set("ep", oneVariant("v", nw))
	if n := s.table.Outstanding("old"); n != 1 {
		t.Errorf("outstanding old = %d, want 1", n)
	}
	if a := s.invoke(t, "ep", []byte("y")); string(a.body) != "y" {
		t.Errorf("new fleet answered %q", a.body)
	}
	close(release)
	if a := <-done; a.status != 200 || string(a.body) != "old" {
		t.Errorf("in-flight request: %d %s", a.status, a.body)
	}
	waitFor(t, "old drained", func() bool { return s.table.Outstanding("old") == 0 })
	if s.table.Outstanding("unknown") != 0 {
		t.Error("unknown instance outstanding")
	}
}

func TestMetricsRegistered(t *testing.T) {
	s := newStack(t, Config{})
	fi := newInstance(t, "i", nil)
	s.table.Set("ep", oneVariant("AllTraffic", fi))
	s.invoke(t, "ep", []byte("x"))
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["endpoint"] == "ep" && labels["variant"] == "AllTraffic" {
				got[mf.GetName()] = true
			}
		}
	}
	for _, name := range []string{
		"sagebox_endpoint_invocations_total", "sagebox_endpoint_invocation_4xx_errors_total",
		"sagebox_endpoint_invocation_5xx_errors_total", "sagebox_endpoint_invocation_model_errors_total",
		"sagebox_endpoint_model_latency_seconds", "sagebox_endpoint_overhead_latency_seconds",
	} {
		if !got[name] {
			t.Errorf("no %s{endpoint=ep,variant=AllTraffic}", name)
		}
	}
	if _, err := NewHandler(NewTable(), Config{Registerer: s.reg}); err == nil {
		t.Error("registering twice did not fail")
	}
}

// TestHostOfRoundTrip: the transport's host stands for the address.
func TestHostOfRoundTrip(t *testing.T) {
	for _, addr := range []string{"unix:/tmp/x y/s", "127.0.0.1:8080", "[::1]:9"} {
		got, err := addrOfHost(net.JoinHostPort(hostOf(addr), "80"))
		if err != nil || got != addr {
			t.Errorf("%q → %q, %v", addr, got, err)
		}
	}
}

// TestStalePooledConnection: an instance that closed its idle keep-alive
// connections (it restarted on the same socket) gets the next request on
// a fresh connection, not a ModelError: nothing was sent on the closed one.
func TestStalePooledConnection(t *testing.T) {
	s := newStack(t, Config{})
	a := newInstance(t, "i", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "A") })
	s.table.Set("ep", oneVariant("v", a))
	// Several pooled connections.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); s.invoke(t, "ep", []byte("x")) }()
	}
	wg.Wait()
	a.srv.Close()
	os.Remove(a.sock)
	ln, err := net.Listen("unix", a.sock)
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	b := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "B")
	})}
	go b.Serve(ln)
	defer b.Close()
	time.Sleep(10 * time.Millisecond) // the FINs arrive
	for i := 0; i < 6; i++ {
		if got := s.invoke(t, "ep", []byte("x")); got.status != 200 || string(got.body) != "B" {
			t.Fatalf("request %d after the restart: %d %s", i, got.status, got.body)
		}
	}
	if hits.Load() != 6 {
		t.Errorf("new server hits %d", hits.Load())
	}
}

// TestBlueGreenUnderLoad is hosting's update: publish the new fleet, wait
// until the old instance's Outstanding reads 0, stop it — again and again
// under steady load. No request may fail.
func TestBlueGreenUnderLoad(t *testing.T) {
	s := newStack(t, Config{})
	slowish := func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond)
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}
	cur := newInstance(t, "gen-0", slowish)
	s.table.Set("ep", oneVariant("v", cur))
	stop := make(chan struct{})
	var failures, total atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				a := s.invoke(t, "ep", []byte("ping"))
				total.Add(1)
				if a.status != 200 || string(a.body) != "ping" {
					failures.Add(1)
					t.Errorf("status %d: %s", a.status, a.body)
				}
			}
		}()
	}
	for gen := 1; gen <= 15; gen++ {
		time.Sleep(5 * time.Millisecond)
		next := newInstance(t, fmt.Sprintf("gen-%d", gen), slowish)
		s.table.Set("ep", oneVariant("v", next))
		old := cur
		waitFor(t, "drain of "+old.id, func() bool { return s.table.Outstanding(old.id) == 0 })
		old.srv.Close()
		cur = next
	}
	close(stop)
	wg.Wait()
	if failures.Load() != 0 || total.Load() < 100 {
		t.Errorf("%d of %d requests failed", failures.Load(), total.Load())
	}
}

// TestSetBetweenLookupAndCount: a Set that lands after a request read the
// table but before it counted its instance, and finds the old instance
// idle (so hosting stops it), must not see the request go there.
func TestSetBetweenLookupAndCount(t *testing.T) {
	s := newStack(t, Config{})
	old := newInstance(t, "old", nil)
	nw := newInstance(t, "new", nil)
	s.table.Set("ep", oneVariant("v", old))
	var once sync.Once
	drained := -1
	s.h.beforeCount = func() {
		once.Do(func() {
			s.table.Set("ep", oneVariant("v", nw))
			drained = s.table.Outstanding("old")
		})
	}
	a := s.invoke(t, "ep", []byte("x"))
	if drained != 0 {
		t.Fatalf("Outstanding(old) right after the Set = %d", drained)
	}
	if a.status != 200 || old.hits.Load() != 0 || nw.hits.Load() != 1 {
		t.Errorf("status %d; old got %d, new %d: a request reached an instance hosting had already found drained",
			a.status, old.hits.Load(), nw.hits.Load())
	}
}

// TestTCPInstance: an instance address in the model server's other
// --listen form, HOST:PORT.
func TestTCPInstance(t *testing.T) {
	s := newStack(t, Config{})
	srv := httptest.NewServer(http.HandlerFunc(echo))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	s.table.Set("ep", &Route{Status: "InService", Variants: []Variant{{Name: "v", Weight: 1, Instances: []Instance{{ID: "tcp", Addr: addr}}}}})
	if a := s.invoke(t, "ep", []byte("over tcp"), "Content-Type", "text/plain"); a.status != 200 || string(a.body) != "over tcp" || a.header.Get("Content-Type") != "text/plain" {
		t.Errorf("%d %q %q", a.status, a.body, a.header.Get("Content-Type"))
	}
}

// TestLongSocketPath: hosting's sockets may be near the 108-byte limit;
// the hex host that stands for one is then over 200 characters.
func TestLongSocketPath(t *testing.T) {
	dir, err := os.MkdirTemp("", "inv")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	long := dir + "/" + strings.Repeat("d", 100-len(dir)-4)
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := long + "/s"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(echo)}
	go srv.Serve(ln)
	defer srv.Close()
	s := newStack(t, Config{})
	s.table.Set("ep", &Route{Status: "InService", Variants: []Variant{{Name: "v", Weight: 1, Instances: []Instance{{ID: "i", Addr: "unix:" + sock}}}}})
	if a := s.invoke(t, "ep", []byte("long")); a.status != 200 || string(a.body) != "long" {
		t.Errorf("socket path of %d bytes: %d %s", len(sock), a.status, a.body)
	}
}
