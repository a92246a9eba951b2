package hosting

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/gpu"
)

// A GPU instance type gets a GPU of its own (CUDA_VISIBLE_DEVICES), a CPU
// one sees none; they are given back when the instances stop.
func TestGPUInstancesGetTheirOwnGPU(t *testing.T) {
	alloc := gpu.NewAllocator([]gpu.Device{{Index: 0, Name: "fake"}, {Index: 1, Name: "fake"}}, nil)
	e := newEnv(t, func(c *Config) { c.GPUs = alloc })
	uri := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	gv := variant("GPU", model("m1", uri), 2, 1)
	gv.InstanceType = "ml.g4dn.xlarge"
	cv := variant("CPU", model("m1", uri), 1, 1)
	if err := e.create("ep", deployment(gv, cv)); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ep", sagebox.EndpointInService)
	seen := map[string]int{}
	for _, v := range e.routes.get("ep").Variants {
		for _, in := range v.Instances {
			pid := e.pids("ep")[in.ID]
			dev, ok := environ(t, pid)["CUDA_VISIBLE_DEVICES"]
			if !ok {
				t.Errorf("%s instance %s: no CUDA_VISIBLE_DEVICES", v.Name, in.ID)
			}
			if v.Name == "CPU" && dev != "" {
				t.Errorf("CPU instance sees GPU %q", dev)
			}
			if v.Name == "GPU" {
				seen[dev]++
			}
		}
	}
	if len(seen) != 2 || seen["0"] != 1 || seen["1"] != 1 {
		t.Errorf("GPU instances' devices: %v, want 0 and 1 once each", seen)
	}
	if err := e.remove("ep"); err != nil {
		t.Fatal(err)
	}
	// Every GPU is free again.
	if ids := alloc.ReserveFree("probe", 0, 1); len(ids) != 2 {
		t.Errorf("free GPUs after delete: %v, want both", ids)
	}
}

func environ(t *testing.T, pid int) map[string]string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			out[k] = v
		}
	}
	return out
}
