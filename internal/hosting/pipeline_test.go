package hosting

import (
	"testing"

	"github.com/sagebox/sagebox"
)

const firstPy = `
import json, torch, os
def model_fn(model_dir):
    return torch.jit.load(os.path.join(model_dir, "model.pt"))
def input_fn(body, content_type):
    return torch.tensor(json.loads(body), dtype=torch.float32)
def predict_fn(x, model):
    return model(x)
def output_fn(y, accept):
    return json.dumps(y.tolist())
`

const secondPy = `
import json, os
def model_fn(model_dir):
    return open(os.path.join(model_dir, "version.txt")).read().strip()
def transform_fn(version, body, content_type, accept):
    y = json.loads(body)
    return json.dumps({"version": version, "y": [[r[0] + 1] for r in y], "pid": os.getpid()}), "application/json"
`

// A two-container Serial model runs as one instance reading its
// containers file, as a one-container model does.
func TestPipelineModelThroughContainersFile(t *testing.T) {
	e := newEnv(t, nil)
	c1 := e.put("p/first.tar.gz", tarGz(t, map[string]string{"model.pt": string(modelPT), "code/first.py": firstPy}))
	c2 := e.put("p/second.tar.gz", tarGz(t, map[string]string{"version.txt": "pipe", "code/second.py": secondPy}))
	env := func(prog string) map[string]string {
		return map[string]string{"SAGEMAKER_PROGRAM": prog, "SAGEMAKER_MODEL_SERVER_WORKERS": "1"}
	}
	m := sagebox.Model{ModelName: "pipe", Containers: []sagebox.ContainerDefinition{
		{ContainerHostname: "first", ModelDataUrl: c1, Environment: env("first.py")},
		{ContainerHostname: "second", ModelDataUrl: c2, Environment: env("second.py")},
	}, InferenceExecutionConfig: &sagebox.InferenceExecutionConfig{Mode: "Serial"}}
	if err := e.create("pipe", deployment(variant("AllTraffic", m, 1, 1))); err != nil {
		t.Fatal(err)
	}
	one := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	if err := e.create("one", deployment(variant("AllTraffic", model("m1", one), 1, 1))); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("pipe", sagebox.EndpointInService)
	e.waitStatus("one", sagebox.EndpointInService)
	r := e.routes.get("pipe")
	if r.Mode != "Serial" || len(r.Containers) != 2 || r.Containers[0] != "first" || r.Containers[1] != "second" {
		t.Errorf("route = %+v", r)
	}
	if a, err := e.routes.invoke("pipe", 0); err != nil || a.Version != "pipe" || a.Y[0][0] != 13 {
		t.Errorf("pipeline: %+v %v", a, err)
	}
	if a, err := e.routes.invoke("one", 0); err != nil || a.Version != "v1" {
		t.Errorf("one container: %+v %v", a, err)
	}
}
