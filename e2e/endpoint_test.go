package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// endpointScript drives one step of the endpoint lifecycle with boto3.
const endpointScript = `
import boto3, json, sys, threading, time, os
kw = dict(endpoint_url=os.environ["SAGEBOX_URL"])
s3 = boto3.client("s3", **kw); sm = boto3.client("sagemaker", **kw); rt = boto3.client("sagemaker-runtime", **kw)
role = "arn:aws:iam::123456789012:role/r"
def model(name, key):
    sm.create_model(ModelName=name, ExecutionRoleArn=role, PrimaryContainer={
        "Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:1.13-cpu-py39",
        "ModelDataUrl": "s3://models-bucket/" + key,
        "Environment": {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_MODEL_SERVER_WORKERS": "1"}})
def invoke():
    r = rt.invoke_endpoint(EndpointName="ep", Body=b"[1, 2]", ContentType="application/json")
    return json.loads(r["Body"].read())["version"]
step = sys.argv[1]
if step == "create":
    s3.create_bucket(Bucket="models-bucket")
    for v in ("v1", "v2"):
        s3.upload_file(sys.argv[2] + "/" + v + ".tar.gz", "models-bucket", v + "/model.tar.gz")
    model("m1", "v1/model.tar.gz")
    sm.create_endpoint_config(EndpointConfigName="c1", ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": "m1", "InitialInstanceCount": 2, "InstanceType": "ml.m5.large"}])
    sm.create_endpoint(EndpointName="ep", EndpointConfigName="c1")
    sm.get_waiter("endpoint_in_service").wait(EndpointName="ep", WaiterConfig={"Delay": 1})
    print(invoke())
elif step == "check":
    sm.get_waiter("endpoint_in_service").wait(EndpointName="ep", WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    print(invoke())
elif step == "update":
    stop, counts, errors = False, {}, []
    def load():
        while not stop:
            try:
                v = invoke(); counts[v] = counts.get(v, 0) + 1
            except Exception as e:
                errors.append(str(e))
    threads = [threading.Thread(target=load) for _ in range(4)]
    [t.start() for t in threads]
    time.sleep(1)
    model("m2", "v2/model.tar.gz")
    sm.create_endpoint_config(EndpointConfigName="c2", ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": "m2", "InitialInstanceCount": 2, "InstanceType": "ml.m5.large"}])
    sm.update_endpoint(EndpointName="ep", EndpointConfigName="c2")
    time.sleep(0.5)
    sm.get_waiter("endpoint_in_service").wait(EndpointName="ep", WaiterConfig={"Delay": 1})
    time.sleep(2)
    stop = True
    [t.join() for t in threads]
    print(json.dumps({"counts": counts, "errors": errors[:3], "failed": len(errors)}))
elif step == "delete":
    sm.delete_endpoint(EndpointName="ep")
    print("deleted")
`

const versionInference = `
import json, os
def model_fn(model_dir):
    return open(os.path.join(model_dir, "version.txt")).read().strip()
def transform_fn(version, body, content_type, accept):
    return json.dumps({"version": version, "y": [x * 2 for x in json.loads(body)]}), "application/json"
`

// An endpoint from boto3: InService, survives a SIGKILL of the server
// (instances re-adopted, not restarted), updated under load without one
// failed InvokeEndpoint, deleted with its processes.
func TestEndpointRestartUpdateDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTool(t, "/usr/bin/python3", "-c", "import boto3")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		m := filepath.Join(dir, v)
		writeFile(t, filepath.Join(m, "code", "inference.py"), versionInference)
		writeFile(t, filepath.Join(m, "version.txt"), v)
		if out, err := exec.Command("tar", "czf", filepath.Join(dir, v+".tar.gz"), "-C", m, ".").CombinedOutput(); err != nil {
			t.Fatalf("tar: %v %s", err, out)
		}
	}
	s := startServer(t)
	run := func(step string) string {
		t.Helper()
		out, err := s.python(ctx, endpointScript, step, dir)
		if err != nil {
			t.Fatalf("%s: %v\n%s\nserver log:\n%s", step, err, out, s.log)
		}
		return strings.TrimSpace(out)
	}
	if out := run("create"); !strings.HasSuffix(out, "v1") {
		t.Fatalf("create: %s", out)
	}
	pids := modelServerPids(t, s.dataDir)
	if len(pids) != 2 {
		t.Fatalf("model servers: %v", pids)
	}

	s.kill()
	s.start()
	if out := run("check"); !strings.HasSuffix(out, "v1") {
		t.Fatalf("after restart: %s", out)
	}
	if after := modelServerPids(t, s.dataDir); !sameSet(after, pids) {
		t.Errorf("instances restarted: %v → %v", pids, after)
	}

	var res struct {
		Counts map[string]int
		Errors []string
		Failed int
	}
	out := run("update")
	if err := json.Unmarshal([]byte(out[strings.LastIndex(out, "\n")+1:]), &res); err != nil {
		t.Fatalf("update: %v %s", err, out)
	}
	t.Logf("during the update: %+v", res)
	if res.Failed > 0 || res.Counts["v1"] == 0 || res.Counts["v2"] == 0 {
		t.Errorf("update under load: %+v", res)
	}
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("old instance %d still runs", pid)
		}
	}

	last := modelServerPids(t, s.dataDir)
	run("delete")
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range last {
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if processAlive(pid) {
			t.Errorf("instance %d runs after DeleteEndpoint", pid)
		}
	}
}

// modelServerPids is the pids of the model servers of the data dir's
// endpoint instances (their supervisors' child.json).
func modelServerPids(t *testing.T, dataDir string) []int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dataDir, "endpoints", "*", "*", "*", "i-*", "child.json"))
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var c struct {
			PID int `json:"pid"`
		}
		if json.Unmarshal(b, &c) == nil && processAlive(c.PID) {
			out = append(out, c.PID)
		}
	}
	return out
}

func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && syscall.Kill(pid, 0) == nil
}

func sameSet(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[int]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return true
}
