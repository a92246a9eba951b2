package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCLIMultiHost: `sagebox train --instance-count 2 --distribution X`
// runs the job on algo-1 and algo-2 and streams every host's log, each line
// prefixed with its host's name.
func TestCLIMultiHost(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	s := startServer(t)
	dir := t.TempDir()
	// algo-2 speaks late, so the CLI prints algo-1's first lines while
	// algo-1 is the only stream: they must carry its name all the same.
	writeFile(t, filepath.Join(dir, "train.py"), `import os, time
host = os.environ["SM_CURRENT_HOST"]
if host == "algo-2":
    time.sleep(2)
rank = os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "-"))
print("hello from", host, "rank", rank, flush=True)
open(os.path.join(os.environ["SM_MODEL_DIR"], host + ".txt"), "w").write(rank)
`)
	cases := []struct {
		distribution string
		want         []string
	}{
		{"none", []string{"[algo-1] hello from algo-1 rank -", "[algo-2] hello from algo-2 rank -"}},
		{"torch_distributed", []string{"[algo-1] hello from algo-1 rank 0", "[algo-2] hello from algo-2 rank 1"}},
		// mpirun runs from algo-1, so both ranks' lines are in algo-1's log.
		{"mpi", []string{"[algo-1] ", "rank 0", "rank 1"}},
	}
	for _, c := range cases {
		t.Run(c.distribution, func(t *testing.T) {
			if c.distribution == "mpi" {
				if _, err := exec.LookPath("mpirun"); err != nil {
					requireTool(t, "mpirun")
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			name := "multi-" + strings.ReplaceAll(c.distribution, "_", "-")
			out, errOut, code := s.sagebox(ctx, "train", filepath.Join(dir, "train.py"), "--name", name,
				"--instance-count", "2", "--distribution", c.distribution)
			if code != 0 {
				t.Fatalf("sagebox train exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			mustContain(t, "train stdout", out, c.want...)
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(l, "[algo-1] ") && !strings.HasPrefix(l, "[algo-2] ") {
					t.Errorf("log line without its host's name: %q", l)
				}
			}
		})
	}
}

// TestCLIHostNamesInAShell: a shell entry point, the plainest program there
// is, resolves every host of the job to that host's own loopback address
// through the ordinary resolver (getent), and has its host's name.
func TestCLIHostNamesInAShell(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	if os.Geteuid() != 0 {
		t.Skip("hosts get addresses of their own only when sagebox runs as root")
	}
	s := startServer(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "train.sh"), "#!/bin/sh\necho \"$(hostname) sees $(getent hosts algo-1 algo-2 | tr -s ' \\n' ' ')\"\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, code := s.sagebox(ctx, "train", filepath.Join(dir, "train.sh"), "--name", "shell-names", "--instance-count", "2")
	if code != 0 {
		t.Fatalf("sagebox train exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	m := regexp.MustCompile(`\[algo-2\] algo-2 sees (127\.\d+\.\d+)\.1 algo-1 (127\.\d+\.\d+)\.2 algo-2`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] || m[1] == "127.0.0" {
		t.Fatalf("algo-2's shell does not see the job's own addresses:\n%s", out)
	}
	mustContain(t, "train stdout", out, "[algo-1] algo-1 sees "+m[1]+".1 algo-1 "+m[1]+".2 algo-2")
}
