package hosting

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sagebox/sagebox"
)

// With RunAs, instances run as that user and own their model directory.
func TestInstancesRunAsTheRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const nobody = 65534
	e := newEnv(t, func(c *Config) { c.RunAs = &RunAs{UID: nobody, GID: nobody} })
	// As RestrictDataDir leaves them: the data directory enterable, the
	// binary's directory readable.
	os.Chmod(e.dir, 0o711)
	os.Chmod(filepath.Dir(sageboxBin), 0o755)
	uri := e.put("v1/model.tar.gz", tarGz(t, modelFiles("v1")))
	if err := e.create("ep", deployment(variant("AllTraffic", model("m1", uri), 1, 1))); err != nil {
		t.Fatal(err)
	}
	e.waitStatus("ep", sagebox.EndpointInService)
	if a, err := e.routes.invoke("ep", 0); err != nil || a.Version != "v1" {
		t.Fatalf("invoke: %+v %v", a, err)
	}
	for id, pid := range e.pids("ep") {
		if uid := procUID(t, pid); uid != nobody {
			t.Errorf("instance %s runs as uid %d, want %d", id, uid, nobody)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(e.dir, "endpoints", "ep", "models", "*", "0", "model.pt"))
	if len(dirs) != 1 {
		t.Fatalf("model dir: %v", dirs)
	}
	if st, err := os.Stat(dirs[0]); err != nil || st.Sys().(*syscall.Stat_t).Uid != nobody {
		t.Errorf("model.pt not owned by the run-as user: %v", err)
	}
}

func procUID(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			var uid int
			fmt.Sscan(f[1], &uid)
			return uid
		}
	}
	return -1
}
