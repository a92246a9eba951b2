package hosting

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/logstore"
)

// Create → InService in seconds, serve, delete: processes and files gone.
func TestCreateServeDelete(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.SagemakerEndpoint = "http://127.0.0.1:7070"
		c.Credentials = func(ep string) (string, string) { return "SAGEBOXEP-" + ep, "secret-of-" + ep }
		c.Environ = []string{"PATH=/usr/bin:/bin", "AWS_SECRET_ACCESS_KEY=the-servers-own", "SAGEMAKER_PROGRAM=stale"}
	})
	uri := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	start := time.Now()
	if err := e.create("ep", deployment(variant("AllTraffic", model("m1", uri), 2, 1))); err != nil {
		t.Fatal(err)
	}
	ep := e.waitStatus("ep", sagebox.EndpointInService)
	t.Logf("InService after %s", time.Since(start))
	if len(ep.ProductionVariants) != 1 || ep.ProductionVariants[0].CurrentInstanceCount != 2 || ep.ProductionVariants[0].DesiredInstanceCount != 2 ||
		ep.ProductionVariants[0].CurrentWeight != 1 || len(ep.ProductionVariants[0].DeployedImages) != 1 {
		t.Errorf("ProductionVariants = %+v", ep.ProductionVariants)
	}
	r := e.routes.get("ep")
	if r == nil || r.Status != sagebox.EndpointInService || len(r.Variants) != 1 || len(r.Variants[0].Instances) != 2 || r.Containers[0] != "primary" {
		t.Fatalf("route = %+v", r)
	}
	for i := 0; i < 4; i++ {
		a, err := e.routes.invoke("ep", i)
		if err != nil || a.Version != "v1" || a.Y[0][0] != 12 {
			t.Fatalf("invoke: %+v %v", a, err)
		}
	}
	// The instances' output is in the endpoint's log group.
	inst := r.Variants[0].Instances[0].ID
	waitFor(t, "instance logs", func() bool {
		p, err := e.logs.Events(context.Background(), LogGroup("ep"), LogStream("AllTraffic", inst), logstore.EventQuery{StartFromHead: true})
		if err != nil {
			return false
		}
		for _, ev := range p.Events {
			if strings.Contains(ev.Message, "model loaded") {
				return true
			}
		}
		return false
	})
	if got := e.pool.Holds("endpoint/ep"); got.Slots != 2 {
		t.Errorf("endpoint holds %v, want 2 slots", got)
	}
	pids := e.pids("ep")
	if len(pids) != 2 {
		t.Fatalf("pids = %v", pids)
	}
	// Handlers reach sagebox's S3 with the endpoint's own key, never the
	// server's.
	for _, pid := range pids {
		env := environ(t, pid)
		if env["AWS_ENDPOINT_URL"] != "http://127.0.0.1:7070" || env["AWS_ACCESS_KEY_ID"] != "SAGEBOXEP-ep" || env["AWS_SECRET_ACCESS_KEY"] != "secret-of-ep" ||
			env["AWS_REGION"] != "us-east-1" || env["SAGEMAKER_PROGRAM"] != "" {
			t.Errorf("instance environment: %v", env)
		}
	}
	if err := e.remove("ep"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Endpoint(context.Background(), "ep"); err == nil {
		t.Error("endpoint record still there")
	}
	for id, pid := range pids {
		if alive(pid) {
			t.Errorf("instance %s (pid %d) still runs", id, pid)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "endpoints", "ep")); !os.IsNotExist(err) {
		t.Errorf("endpoint files left: %v", err)
	}
	if e.routes.get("ep") != nil {
		t.Error("route left")
	}
	if got := e.pool.Used(); got.Slots != 0 {
		t.Errorf("capacity still used: %v", got)
	}
	ents, _ := os.ReadDir(e.m.runtime)
	if len(ents) != 0 {
		t.Errorf("socket dirs left: %v", ents)
	}
}

// model_fn raising fails the endpoint with the exception's text.
func TestModelFnErrorFailsTheEndpoint(t *testing.T) {
	e := newEnv(t, nil)
	files := modelFiles("v1")
	files["fail.txt"] = "the weights are corrupt: checksum 1234"
	uri := e.put("bad/model.tar.gz", tarGz(t, files))
	if err := e.create("ep", deployment(variant("AllTraffic", model("m1", uri), 1, 1))); err != nil {
		t.Fatal(err)
	}
	ep := e.waitStatus("ep", sagebox.EndpointFailed)
	if !strings.Contains(ep.FailureReason, "the weights are corrupt: checksum 1234") || !strings.Contains(ep.FailureReason, "AllTraffic") {
		t.Errorf("FailureReason = %q", ep.FailureReason)
	}
	waitFor(t, "instances stopped", func() bool { return len(e.pids("ep")) == 0 })
	waitFor(t, "capacity released", func() bool { return e.pool.Used().Slots == 0 })
}

func TestBadModelDataFailsWithAClearReason(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.ModelDataLimits.MaxBytes = 1 << 20
		c.LimitsFrom = "--endpoint-model-data-max"
	})
	var emptyTar []byte
	{
		emptyTar = tarGz(t, nil)
	}
	big := modelFiles("v1")
	big["pad.bin"] = strings.Repeat("x", 2<<20)
	cases := []struct {
		name, body string
		want       string
	}{
		{"notgzip", "this is not an archive", "is not a gzip-compressed tar archive"},
		{"empty", string(emptyTar), "is an empty archive"},
		{"escape", string(tarGz(t, map[string]string{"../../evil.txt": "x"})), "outside the model directory"},
		{"big", string(tarGz(t, big)), "--endpoint-model-data-max"},
	}
	for _, c := range cases {
		uri := e.put(c.name+"/model.tar.gz", []byte(c.body))
		if err := e.create(c.name, deployment(variant("AllTraffic", model("m", uri), 1, 1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.create("missing", deployment(variant("AllTraffic", model("m", "s3://models/nothing/model.tar.gz"), 1, 1))); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct{ name, body, want string }{"missing", "", "Failed to download model data"})
	for _, c := range cases {
		ep := e.waitStatus(c.name, sagebox.EndpointFailed)
		if !strings.Contains(ep.FailureReason, c.want) {
			t.Errorf("%s: FailureReason = %q, want it to say %q", c.name, ep.FailureReason, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "evil.txt")); err == nil {
		t.Error("escaping entry written")
	}
	waitFor(t, "capacity released", func() bool { return e.pool.Used().Slots == 0 })
}

// A killed instance is replaced; the endpoint stays InService meanwhile.
func TestKilledInstanceIsReplaced(t *testing.T) {
	e := newEnv(t, nil)
	uri := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	if err := e.create("ep", deployment(variant("AllTraffic", model("m1", uri), 2, 1))); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ep", sagebox.EndpointInService)
	before := e.routes.instances("ep")
	pids := e.pids("ep")
	victim := before[0].ID
	syscall.Kill(pids[victim], syscall.SIGKILL)
	waitFor(t, "victim leaves the route", func() bool {
		for _, in := range e.routes.instances("ep") {
			if in.ID == victim {
				return false
			}
		}
		return true
	})
	if a, err := e.routes.invoke("ep", 0); err != nil || a.Version != "v1" {
		t.Fatalf("the other instance serves: %+v %v", a, err)
	}
	waitFor(t, "replacement in the route", func() bool { return len(e.routes.instances("ep")) == 2 })
	ep, _ := e.db.Endpoint(context.Background(), "ep")
	if ep.EndpointStatus != sagebox.EndpointInService {
		t.Errorf("status %s", ep.EndpointStatus)
	}
	for _, in := range e.routes.instances("ep") {
		if in.ID == victim {
			t.Error("victim's id reused")
		}
	}
	if got := e.pool.Holds("endpoint/ep"); got.Slots != 2 {
		t.Errorf("endpoint holds %v, want 2 slots", got)
	}
}

// A model server that exits before it is ready fails the endpoint with
// its last output; one that takes longer than StartupTimeout fails it
// saying so.
func TestStartupFailuresSayWhy(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StartupTimeout = 1500 * time.Millisecond })
	uri := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	bad := model("bad", uri)
	bad.PrimaryContainer.Environment["SAGEMAKER_MODEL_SERVER_WORKERS"] = "lots"
	if err := e.create("exits", deployment(variant("AllTraffic", bad, 1, 1))); err != nil {
		t.Fatal(err)
	}
	files := modelFiles("slow")
	files["code/inference.py"] = "import time\n" + strings.Replace(inferencePy, "def model_fn(model_dir):", "def model_fn(model_dir):\n    time.sleep(30)", 1)
	slow := e.put("slow/model.tar.gz", tarGz(t, files))
	if err := e.create("slow", deployment(variant("AllTraffic", model("slow", slow), 1, 1))); err != nil {
		t.Fatal(err)
	}
	ep := e.waitStatus("exits", sagebox.EndpointFailed)
	if !strings.Contains(ep.FailureReason, "before it was ready") || !strings.Contains(ep.FailureReason, "SAGEMAKER_MODEL_SERVER_WORKERS") {
		t.Errorf("exits: FailureReason = %q", ep.FailureReason)
	}
	ep = e.waitStatus("slow", sagebox.EndpointFailed)
	if !strings.Contains(ep.FailureReason, "within 1.5s") {
		t.Errorf("slow: FailureReason = %q", ep.FailureReason)
	}
	waitFor(t, "instances stopped", func() bool { return len(e.pids("exits"))+len(e.pids("slow")) == 0 })
}

// DeleteEndpoint while the model is still loading does not wait for it.
func TestDeleteWhileCreating(t *testing.T) {
	e := newEnv(t, nil)
	files := modelFiles("slow")
	files["code/inference.py"] = "import time\n" + strings.Replace(inferencePy, "def model_fn(model_dir):", "def model_fn(model_dir):\n    time.sleep(60)", 1)
	slow := e.put("slow/model.tar.gz", tarGz(t, files))
	if err := e.create("ep", deployment(variant("AllTraffic", model("slow", slow), 1, 1))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the instance started", func() bool { return len(e.pids("ep")) == 1 })
	time.Sleep(1500 * time.Millisecond) // its worker is in model_fn now
	pids := e.pids("ep")
	start := time.Now()
	if err := e.remove("ep"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("delete took %s", d)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d still runs", pid)
		}
	}
	if _, err := e.db.Endpoint(context.Background(), "ep"); err == nil {
		t.Error("record left")
	}
}

// The route serves the new fleet before DescribeEndpoint says InService:
// a client that polls until InService and then invokes never finds the
// endpoint without instances.
func TestInServiceMeansRouted(t *testing.T) {
	e := newEnv(t, nil)
	uri := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	if err := e.create("ep", deployment(variant("AllTraffic", model("m1", uri), 1, 1))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ep, err := e.db.Endpoint(context.Background(), "ep")
		if err != nil {
			t.Fatal(err)
		}
		if ep.EndpointStatus == sagebox.EndpointInService {
			if n := len(e.routes.instances("ep")); n != 1 {
				t.Fatalf("InService with %d routed instances", n)
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("not InService within a minute")
}
