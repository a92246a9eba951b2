package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// endpointModels writes the models the endpoint tests deploy: a linear
// torch model whose inference.py tags each answer with the model's version,
// counts predict_fn calls in $HITS_FILE, raises for an input of 666, and
// (version "broken") raises in model_fn. Each tarball is laid out as the
// SageMaker SDK's repack writes it: a root entry named "/", code/ and
// model.pth.
const endpointModels = `
import io, os, sys, tarfile, tempfile, torch
out = sys.argv[1]
INFERENCE = '''
import io, json, os
import numpy as np
import torch

def model_fn(model_dir):
    version = open(os.path.join(model_dir, "version.txt")).read().strip()
    if version == "broken":
        raise RuntimeError("this model cannot load: weights are corrupt (version broken)")
    m = torch.nn.Linear(2, 1)
    m.load_state_dict(torch.load(os.path.join(model_dir, "model.pth")))
    m.version = version
    return m

def input_fn(body, content_type):
    if content_type == "application/x-npy":
        return torch.from_numpy(np.load(io.BytesIO(body))).float()
    if content_type == "application/json":
        return torch.tensor(json.loads(body), dtype=torch.float32)
    raise ValueError("unsupported content type " + content_type)

def predict_fn(x, model):
    with open(os.environ["HITS_FILE"], "a") as f:
        f.write("hit\\n")
    if float(x.flatten()[0]) == 666:
        raise RuntimeError("the model refuses 666")
    with torch.no_grad():
        return {"y": model(x).numpy(), "version": model.version}

def output_fn(pred, accept):
    if accept == "application/x-npy":
        buf = io.BytesIO()
        np.save(buf, pred["y"])
        return buf.getvalue()
    return json.dumps({"y": pred["y"].tolist(), "version": pred["version"]})
'''
for version, w in (("v1", 1.0), ("v2", 2.0), ("broken", 0.0)):
    d = tempfile.mkdtemp()
    os.makedirs(os.path.join(d, "code"))
    open(os.path.join(d, "code", "inference.py"), "w").write(INFERENCE)
    open(os.path.join(d, "version.txt"), "w").write(version)
    m = torch.nn.Linear(2, 1)
    with torch.no_grad():
        m.weight.fill_(w); m.bias.fill_(0)
    torch.save(m.state_dict(), os.path.join(d, "model.pth"))
    with tarfile.open(os.path.join(out, version + ".tar.gz"), "w:gz") as tar:
        tar.add(d, arcname=os.path.sep)
`

// sdkHosting replays, with boto3, the SageMaker SDK's hosting requests
// (sdk-v2-audit §1.3-1.7, §3): PyTorchModel.deploy (upload of the repacked
// model, CreateModel, CreateEndpointConfig, CreateEndpoint with Tags: [],
// DescribeEndpoint polling), PyTorchPredictor.predict (x-npy both ways),
// the error and limit paths, Predictor.update_endpoint under load (the
// DescribeEndpointConfig variants are sent back verbatim to
// CreateEndpointConfig, which botocore validates client side), an update to
// a model that cannot load, ListTags on all four ARN kinds, and
// delete_endpoint + delete_model. Prints one JSON object.
const sdkHosting = `
import io, json, os, sys, threading, time
import boto3, botocore
import numpy as np
url, models, hits = os.environ["SAGEBOX_URL"], sys.argv[1], sys.argv[2]
cfg = botocore.config.Config(read_timeout=80)
sm = boto3.client("sagemaker", endpoint_url=url)
rt = boto3.client("sagemaker-runtime", endpoint_url=url, config=cfg)
s3 = boto3.client("s3", endpoint_url=url)
bucket = "sagemaker-us-east-1-123456789012"
s3.create_bucket(Bucket=bucket)
out = {}
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:1.13.1-cpu-py39"

def model(name, version):
    key = name + "/model.tar.gz"
    s3.put_object(Bucket=bucket, Key=key, Body=open(os.path.join(models, version + ".tar.gz"), "rb").read(), ServerSideEncryption="aws:kms")
    sm.create_model(ModelName=name, ExecutionRoleArn="arn:aws:iam::123456789012:role/SageMakerRole",
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": "s3://%s/%s" % (bucket, key),
            "Environment": {"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
                            "SAGEMAKER_CONTAINER_LOG_LEVEL": "20", "SAGEMAKER_REGION": "us-east-1", "HITS_FILE": hits}})

def config(name, model_name):
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": model_name,
        "InitialVariantWeight": 1, "InitialInstanceCount": 1, "InstanceType": "ml.m5.xlarge"}])

def wait(name, want=("InService", "Failed")):
    t0 = time.time()
    while True:
        d = sm.describe_endpoint(EndpointName=name)
        if d["EndpointStatus"] not in ("Creating", "Updating"):
            return d, time.time() - t0
        time.sleep(0.05)

def npy(a):
    buf = io.BytesIO(); np.save(buf, np.asarray(a, dtype=np.float32)); return buf.getvalue()

def predict(name, x, **kw):
    r = rt.invoke_endpoint(EndpointName=name, Body=npy(x), ContentType="application/x-npy", Accept="application/x-npy", **kw)
    return r, np.load(io.BytesIO(r["Body"].read()))

def err(fn):
    try:
        fn()
    except botocore.exceptions.ClientError as e:
        return {"code": e.response["Error"]["Code"], "message": e.response["Error"].get("Message", ""),
                "status": e.response["ResponseMetadata"]["HTTPStatusCode"], "original": e.response.get("OriginalStatusCode"),
                "attempts": e.response["ResponseMetadata"].get("RetryAttempts")}
    return None

name = "pytorch-inference-2026-12-03-10-00-00-000"
model(name, "v1")
config(name, name)
t0 = time.time()
arn = sm.create_endpoint(EndpointName=name, EndpointConfigName=name, Tags=[])["EndpointArn"]
first = sm.describe_endpoint(EndpointName=name)
out["first_status"] = first["EndpointStatus"]
d, took = wait(name)
out["status"], out["reason"], out["inservice_s"] = d["EndpointStatus"], d.get("FailureReason"), time.time() - t0
out["arn"] = arn
out["variants"] = d.get("ProductionVariants")

r, y = predict(name, [[1.0, 2.0]], CustomAttributes="trace=1")
out["content_type"] = r["ContentType"]
out["invoked_variant"] = r.get("InvokedProductionVariant")
out["y"] = y.tolist()
r = rt.invoke_endpoint(EndpointName=name, Body=json.dumps([[1.0, 1.0]]), ContentType="application/json", Accept="application/json")
out["json"] = json.loads(r["Body"].read())

open(hits, "w").close()
out["model_error"] = err(lambda: predict(name, [[666.0, 0.0]]))
out["model_error_hits"] = len(open(hits).read().split())
out["missing"] = err(lambda: predict("no-such-endpoint", [[1.0, 1.0]]))
out["too_large"] = err(lambda: rt.invoke_endpoint(EndpointName=name, Body=b"x" * (6 * 1024 * 1024 + 1), ContentType="application/json"))
out["bad_variant"] = err(lambda: predict(name, [[1.0, 1.0]], TargetVariant="NoSuchVariant"))
# AsyncPredictor.predict_async: sagebox serves no InvokeEndpointAsync, and says so in the runtime's JSON (not S3's XML 405).
out["async"] = err(lambda: rt.invoke_endpoint_async(EndpointName=name, InputLocation="s3://b/in.npy", ContentType="application/x-npy"))

# Predictor.update_endpoint(model_name=...): new config from the old one's variants, sent back verbatim.
model(name + "-v2", "v2")
desc_cfg = sm.describe_endpoint_config(EndpointConfigName=sm.describe_endpoint(EndpointName=name)["EndpointConfigName"])
variants = desc_cfg["ProductionVariants"]
out["config_variants"] = variants
for v in variants:
    v["ModelName"] = name + "-v2"
sm.list_tags(ResourceArn=desc_cfg["EndpointConfigArn"], MaxResults=50)
sm.create_endpoint_config(EndpointConfigName=name + "-2", ProductionVariants=variants)
stop, counts, errors_seen, versions = threading.Event(), {"ok": 0, "fail": 0}, [], set()
lock = threading.Lock()
def load():
    c = boto3.client("sagemaker-runtime", endpoint_url=url, config=cfg)
    while not stop.is_set():
        try:
            r = c.invoke_endpoint(EndpointName=name, Body=json.dumps([[1.0, 1.0]]), ContentType="application/json", Accept="application/json")
            v = json.loads(r["Body"].read())["version"]
            with lock:
                counts["ok"] += 1; versions.add(v)
        except Exception as e:
            with lock:
                counts["fail"] += 1; errors_seen.append(repr(e)[:300])
threads = [threading.Thread(target=load) for _ in range(4)]
for t in threads: t.start()
time.sleep(0.5)
sm.update_endpoint(EndpointName=name, EndpointConfigName=name + "-2")
out["update_first_status"] = sm.describe_endpoint(EndpointName=name)["EndpointStatus"]
d, _ = wait(name)
time.sleep(1.0)
stop.set()
for t in threads: t.join()
out["update"] = {"status": d["EndpointStatus"], "config": d["EndpointConfigName"], "ok": counts["ok"], "fail": counts["fail"],
                 "errors": errors_seen[:5], "versions": sorted(versions)}
out["after_update"] = predict(name, [[1.0, 1.0]])[1].tolist()

# An update to a model that cannot load leaves the endpoint on v2.
model(name + "-broken", "broken")
config(name + "-3", name + "-broken")
sm.update_endpoint(EndpointName=name, EndpointConfigName=name + "-3")
d, _ = wait(name)
out["broken_update"] = {"status": d["EndpointStatus"], "config": d["EndpointConfigName"], "reason": d.get("FailureReason", "")}
out["after_broken"] = predict(name, [[1.0, 1.0]])[1].tolist()

# ListTags on all four kinds of ARN.
job_arn = "arn:aws:sagemaker:us-east-1:123456789012:training-job/none"
out["tags"] = {k: sm.list_tags(ResourceArn=a)["Tags"] for k, a in (
    ("model", sm.describe_model(ModelName=name)["ModelArn"]), ("config", desc_cfg["EndpointConfigArn"]), ("endpoint", arn))}

# Predictor.delete_endpoint() then delete_model().
cfg_name = sm.describe_endpoint(EndpointName=name)["EndpointConfigName"]
sm.delete_endpoint_config(EndpointConfigName=cfg_name)
sm.delete_endpoint(EndpointName=name)
out["after_delete"] = err(lambda: sm.describe_endpoint(EndpointName=name))
for m in (name, name + "-v2", name + "-broken"):
    sm.delete_model(ModelName=m)
out["delete_model_again"] = err(lambda: sm.delete_model(ModelName=name))
print(json.dumps(out, default=str))
`

func TestEndpointSDKSequences(t *testing.T) {
	requireTorch(t)
	s := startServer(t)
	t.Cleanup(func() { s.stop(); killInstances(s) }) // after the server, which would replace them
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	models := t.TempDir()
	if out, err := s.python(ctx, endpointModels, models); err != nil {
		t.Fatalf("build models: %v\n%s", err, out)
	}
	hits := filepath.Join(t.TempDir(), "hits")
	raw, err := s.python(ctx, sdkHosting, models, hits)
	if err != nil {
		t.Fatalf("sdk hosting script: %v\n%s", err, raw)
	}
	lines := strings.Split(strings.TrimSpace(raw), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("output: %v\n%s", err, raw)
	}
	t.Logf("InService after %.2fs", m["inservice_s"])
	str := func(k string) string { s, _ := m[k].(string); return s }
	obj := func(k string) map[string]any { o, _ := m[k].(map[string]any); return o }
	if str("first_status") != "Creating" && str("first_status") != "InService" {
		t.Errorf("DescribeEndpoint right after CreateEndpoint = %q", str("first_status"))
	}
	if str("status") != "InService" {
		t.Fatalf("endpoint status %q, reason %q", str("status"), str("reason"))
	}
	if str("arn") != "arn:aws:sagemaker:us-east-1:123456789012:endpoint/pytorch-inference-2026-12-03-10-00-00-000" {
		t.Errorf("EndpointArn = %q", str("arn"))
	}
	if str("content_type") != "application/x-npy" {
		t.Errorf("ContentType = %q, want exactly application/x-npy (NumpyDeserializer compares strings)", str("content_type"))
	}
	if str("invoked_variant") != "AllTraffic" {
		t.Errorf("InvokedProductionVariant = %q", str("invoked_variant"))
	}
	if got, _ := json.Marshal(m["y"]); string(got) != "[[3]]" {
		t.Errorf("prediction = %s, want [[3]]", got)
	}
	if v := obj("json")["version"]; v != "v1" {
		t.Errorf("json answer = %v", obj("json"))
	}
	me := obj("model_error")
	if me["code"] != "ModelError" || me["status"] != float64(424) || me["original"] != float64(500) && me["original"] != float64(400) {
		t.Errorf("model error = %v, want 424 ModelError with OriginalStatusCode", me)
	}
	mustContain(t, "model error message", me["message"].(string), "refuses 666")
	if m["model_error_hits"] != float64(1) {
		t.Errorf("predict_fn ran %v times for one failing request; a retried 5xx would run it again", m["model_error_hits"])
	}
	if e := obj("missing"); e["code"] != "ValidationError" || !strings.Contains(e["message"].(string), "no-such-endpoint") {
		t.Errorf("missing endpoint = %v", e)
	}
	if e := obj("too_large"); e == nil || e["status"].(float64) < 400 || e["status"].(float64) >= 500 {
		t.Errorf("6 MB + 1 body = %v, want a 4xx", e)
	}
	if e := obj("bad_variant"); e["code"] != "ValidationError" {
		t.Errorf("unknown TargetVariant = %v", e)
	}
	if e := obj("async"); e["code"] != "ValidationError" || e["status"] != float64(400) || !strings.Contains(e["message"].(string), "InvokeEndpointAsync") {
		t.Errorf("InvokeEndpointAsync = %v, want 400 ValidationError naming InvokeEndpointAsync", e)
	}
	cv, _ := json.Marshal(m["config_variants"])
	if string(cv) != `[{"VariantName":"AllTraffic","ModelName":"pytorch-inference-2026-12-03-10-00-00-000","InitialInstanceCount":1,"InstanceType":"ml.m5.xlarge","InitialVariantWeight":1.0}]` &&
		!strings.Contains(string(cv), `"InitialVariantWeight":1`) {
		t.Errorf("DescribeEndpointConfig variants = %s", cv)
	}
	up := obj("update")
	if up["status"] != "InService" || up["config"] != "pytorch-inference-2026-12-03-10-00-00-000-2" || up["fail"] != float64(0) {
		t.Errorf("update under load = %v", up)
	}
	if vs, _ := json.Marshal(up["versions"]); string(vs) != `["v1","v2"]` {
		t.Errorf("versions answered during the update = %s, want v1 then v2", vs)
	}
	t.Logf("update under load: %v ok, %v failed", up["ok"], up["fail"])
	if got, _ := json.Marshal(m["after_update"]); string(got) != "[[4]]" {
		t.Errorf("after update = %s, want v2's [[4]]", got)
	}
	bu := obj("broken_update")
	if bu["status"] != "InService" || bu["config"] != "pytorch-inference-2026-12-03-10-00-00-000-2" {
		t.Errorf("failed update = %v, want InService on the previous config", bu)
	}
	mustContain(t, "failed update's FailureReason", bu["reason"].(string), "weights are corrupt")
	if got, _ := json.Marshal(m["after_broken"]); string(got) != "[[4]]" {
		t.Errorf("after the failed update = %s, want v2's [[4]]", got)
	}
	if e := obj("after_delete"); e["code"] != "ValidationException" || !strings.Contains(e["message"].(string), "Could not find endpoint") {
		t.Errorf("describe after delete = %v", e)
	}
	if e := obj("delete_model_again"); e["code"] != "ValidationException" || !strings.Contains(e["message"].(string), "Could not find model") {
		t.Errorf("delete_model twice = %v", e)
	}
	// Every instance process is gone with the endpoint.
	pollUntil(t, "instances to exit", func() bool { return len(instancePids(s)) == 0 })
}

// killInstances SIGKILLs, by pid, every endpoint instance the server
// started that is still running: instances are detached, so a test that
// fails before deleting its endpoints would otherwise leave them behind.
// Their supervisors then remove the rest of their process trees.
func killInstances(s *server) {
	for _, pid := range instancePids(s) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// instancePids lists the model-server processes the server started.
func instancePids(s *server) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 1 && args[0] == binary && args[1] == "model-server" && strings.Contains(string(cmdline), s.dataDir) {
			var pid int
			if n, err := strconv.Atoi(e.Name()); err == nil {
				pid = n
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestEndpointCLIAndCrashRecovery deploys a model with the sagebox CLI,
// invokes it with the CLI and the AWS CLI, kills its instance and then the
// server, and checks that the endpoint serves throughout without the user
// doing anything.
func TestEndpointCLIAndCrashRecovery(t *testing.T) {
	requireTorch(t)
	s := startServer(t)
	t.Cleanup(func() { s.stop(); killInstances(s) }) // after the server, which would replace them
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	models := t.TempDir()
	if out, err := s.python(ctx, endpointModels, models); err != nil {
		t.Fatalf("build models: %v\n%s", err, out)
	}
	hits := filepath.Join(t.TempDir(), "hits")
	stdout, stderr, code := s.sagebox(ctx, "deploy", filepath.Join(models, "v1.tar.gz"), "--name", "cli-ep", "-e", "HITS_FILE="+hits)
	if code != 0 {
		t.Fatalf("sagebox deploy: exit %d\n%s%s", code, stdout, stderr)
	}
	mustContain(t, "deploy's advice", stderr, "InService", "sagebox invoke cli-ep")
	body := filepath.Join(t.TempDir(), "in.json")
	writeFile(t, body, "[[1.0, 2.0]]")
	invoke := func() string {
		t.Helper()
		stdout, stderr, code := s.sagebox(ctx, "invoke", "cli-ep", "--body", body, "--content-type", "application/json", "--accept", "application/json")
		if code != 0 {
			t.Fatalf("sagebox invoke: exit %d\n%s%s", code, stdout, stderr)
		}
		return stdout
	}
	mustContain(t, "invoke", invoke(), `"version": "v1"`, `[[3.0]]`)

	// The AWS CLI's sagemaker-runtime invoke-endpoint.
	outFile := filepath.Join(t.TempDir(), "out.json")
	if out, err := s.awscli(ctx, "sagemaker-runtime", "invoke-endpoint", "--endpoint-name", "cli-ep", "--content-type", "application/json",
		"--body", "fileb://"+body, outFile); err != nil {
		t.Fatalf("aws sagemaker-runtime invoke-endpoint: %v\n%s", err, out)
	} else {
		mustContain(t, "aws cli answer metadata", out, "AllTraffic")
	}
	got, _ := os.ReadFile(outFile)
	mustContain(t, "aws cli answer", string(got), `"version": "v1"`)

	// Prometheus metrics per endpoint and variant, after SageMaker's CloudWatch ones.
	resp, err := http.Get(s.URL + "/_sagebox/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	mustContain(t, "server metrics", string(metrics),
		`sagebox_endpoint_invocations_total{endpoint="cli-ep",variant="AllTraffic"}`,
		`sagebox_endpoint_model_latency_seconds_bucket{endpoint="cli-ep"`, `sagebox_endpoint_overhead_latency_seconds_bucket{endpoint="cli-ep"`)

	stdout, _, _ = s.sagebox(ctx, "endpoints", "ls")
	mustContain(t, "endpoints ls", stdout, "cli-ep", "InService")
	stdout, _, _ = s.sagebox(ctx, "endpoints", "describe", "cli-ep")
	mustContain(t, "endpoints describe", stdout, "AllTraffic", "InService")

	// A crashed instance is replaced and the endpoint stays InService.
	before := instancePids(s)
	if len(before) != 1 {
		t.Fatalf("model-server processes = %v, want 1", before)
	}
	syscall.Kill(before[0], syscall.SIGKILL)
	pollUntil(t, "a replacement instance", func() bool {
		now := instancePids(s)
		return len(now) == 1 && now[0] != before[0]
	})
	stdout, _, _ = s.sagebox(ctx, "endpoints", "describe", "cli-ep")
	mustContain(t, "status after an instance crash", stdout, "InService")
	pollUntil(t, "the replacement to serve", func() bool {
		_, _, code := s.sagebox(ctx, "invoke", "cli-ep", "--body", body)
		return code == 0
	})

	// SIGKILL of the server: the endpoint comes back by itself, on the
	// instance that kept running.
	running := instancePids(s)
	s.kill()
	s.start()
	stdout, _, _ = s.sagebox(ctx, "endpoints", "describe", "cli-ep")
	mustContain(t, "status after a server crash", stdout, "InService")
	mustContain(t, "invoke after a server crash", invoke(), `"version": "v1"`)
	if now := instancePids(s); len(now) != 1 || now[0] != running[0] {
		t.Errorf("instances after restart = %v, want the adopted %v", now, running)
	}

	// In place: a second instance, then the AWS CLI sees both.
	if stdout, stderr, code := s.sagebox(ctx, "endpoints", "update", "cli-ep", "--variant", "AllTraffic", "--instance-count", "2"); code != 0 {
		t.Fatalf("endpoints update: %d\n%s%s", code, stdout, stderr)
	}
	if out, err := s.awscli(ctx, "sagemaker", "describe-endpoint", "--endpoint-name", "cli-ep"); err != nil {
		t.Fatalf("aws sagemaker describe-endpoint: %v\n%s", err, out)
	} else {
		mustContain(t, "aws cli describe-endpoint after scaling", out, `"CurrentInstanceCount": 2`, `"EndpointStatus": "InService"`)
	}
	if n := len(instancePids(s)); n != 2 {
		t.Errorf("instances after scaling to 2 = %d", n)
	}
	if out, err := s.awscli(ctx, "sagemaker", "list-endpoints"); err != nil || !strings.Contains(out, "cli-ep") {
		t.Errorf("aws sagemaker list-endpoints: %v\n%s", err, out)
	}

	stdout, _, _ = s.sagebox(ctx, "endpoints", "logs", "cli-ep")
	mustContain(t, "endpoint logs", stdout, "[AllTraffic/")

	if stdout, stderr, code := s.sagebox(ctx, "endpoints", "delete", "cli-ep"); code != 0 {
		t.Fatalf("endpoints delete: %d\n%s%s", code, stdout, stderr)
	}
	pollUntil(t, "instances to exit", func() bool { return len(instancePids(s)) == 0 })
	if _, stderr, code := s.sagebox(ctx, "invoke", "cli-ep", "--body", body); code == 0 || !strings.Contains(stderr, "not found") {
		t.Errorf("invoke after delete: exit %d, %s", code, stderr)
	}
}
