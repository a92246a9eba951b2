package training

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// requireIsolation skips a test of per-host addresses where this machine
// does not allow them (not root).
func requireIsolation(t *testing.T) {
	t.Helper()
	if err := proc.CheckIsolation(); err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" && os.Geteuid() == 0 {
			t.Fatal(err)
		}
		t.Skip("hosts cannot have namespaces of their own here:", err)
	}
}

// hostTalkScript: every host listens on its own host name, and connects by
// name to the next host (algo-1 to hosts[1], the last to algo-1), the way
// hand-rolled multi-host scripts do; a shell's getent and the host name
// tell what every other program sees.
const hostTalkScript = `import json, os, socket, subprocess, time
hosts, me = json.loads(os.environ["SM_HOSTS"]), os.environ["SM_CURRENT_HOST"]
print("resolved", {h: socket.gethostbyname(h) for h in hosts}, "master", os.environ["MASTER_ADDR"],
      "hostname", socket.gethostname(), flush=True)
print("getent", subprocess.run(["sh", "-c", "getent hosts " + hosts[-1]], capture_output=True, text=True).stdout.split(), flush=True)
port = int(os.environ["MASTER_PORT"]) + 1
srv = socket.create_server((me, port))
print(me, "listens on", srv.getsockname()[0], flush=True)
peer = hosts[(hosts.index(me) + 1) % len(hosts)]
for _ in range(300):
    try:
        c = socket.create_connection((peer, port))
        break
    except OSError:
        time.sleep(0.05)
c.sendall(("hello from " + me).encode())
c.close()
conn, _ = srv.accept()
print(me, "got", conn.recv(64).decode(), flush=True)
`

// TestHostNamesResolve: each host has an address of its own in the job's
// loopback /24, every host name resolves to it through the ordinary
// resolver (Python, a shell's getent), a host listens on its own name and
// reaches the next one by name, and gethostname() is the host's name.
func TestHostNamesResolve(t *testing.T) {
	skipShort(t)
	requirePython(t)
	requireIsolation(t)
	t.Parallel()
	e := newEnv(t)
	hps := e.putSource("names", map[string]string{"train.py": hostTalkScript})
	e.submit(newTestJob("names", hps, withHosts(3)))
	j := e.mem.waitEnd(t, "names", 60*time.Second)
	logs := e.logs.text("names/")
	if j.TrainingJobStatus != sagebox.StatusCompleted {
		t.Fatalf("status %s: %s\nlogs:\n%s", j.TrainingJobStatus, j.FailureReason, logs)
	}
	m := regexp.MustCompile(`'algo-1': '(127\.\d+\.\d+)\.1'`).FindStringSubmatch(logs)
	if m == nil || m[1] == "127.0.0" {
		t.Fatalf("algo-1 has no address of its own:\n%s", logs)
	}
	net := m[1]
	want := []string{
		fmt.Sprintf("'algo-2': '%s.2', 'algo-3': '%s.3'} master algo-1", net, net),
		fmt.Sprintf("getent ['%s.3', 'algo-3']", net),
		"hostname algo-2",
		"algo-2 listens on " + net + ".2",
		"algo-1 got hello from algo-3", "algo-2 got hello from algo-1", "algo-3 got hello from algo-2",
	}
	for _, w := range want {
		if !strings.Contains(logs, w) {
			t.Errorf("logs lack %q:\n%s", w, logs)
		}
	}
	if hosts, _ := os.ReadFile("/etc/hosts"); strings.Contains(string(hosts), "algo-1") {
		t.Errorf("the machine's /etc/hosts names the job's hosts:\n%s", hosts)
	}
}

// nssTalkScript: algo-1 listens on MASTER_ADDR, algo-2 connects to it by
// name (under nss_wrapper every name is 127.0.0.1, so only one may listen).
const nssTalkScript = `import json, os, socket, time
hosts = json.loads(os.environ["SM_HOSTS"])
print("resolved", {h: socket.gethostbyname(h) for h in hosts}, "master", os.environ["MASTER_ADDR"], flush=True)
port = int(os.environ["MASTER_PORT"]) + 1
if os.environ["SM_CURRENT_HOST"] == hosts[0]:
    srv = socket.create_server((os.environ["MASTER_ADDR"], port))
    conn, _ = srv.accept()
    print("master got", conn.recv(64).decode(), flush=True)
else:
    for _ in range(100):
        try:
            c = socket.create_connection((hosts[0], port))
            break
        except OSError:
            time.sleep(0.1)
    c.sendall(("hello from " + os.environ["SM_CURRENT_HOST"]).encode())
    c.close()
`

// TestHostNamesNSSWrapperFallback: where hosts cannot have namespaces of
// their own, a job without a launcher still resolves the names (to
// 127.0.0.1) through libnss-wrapper.
func TestHostNamesNSSWrapperFallback(t *testing.T) {
	skipShort(t)
	requirePython(t)
	if toolkit.FindNSSWrapper() == "" {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatal("libnss-wrapper is required (make deps)")
		}
		t.Skip("libnss-wrapper not installed")
	}
	t.Parallel()
	e := newEnv(t, func(c *testConfig) { c.Local.NoHostIsolation = true })
	hps := e.putSource("nss", map[string]string{"train.py": nssTalkScript})
	e.submit(newTestJob("nss", hps, withHosts(2)))
	j := e.mem.waitEnd(t, "nss", 60*time.Second)
	logs := e.logs.text("nss/")
	if j.TrainingJobStatus != sagebox.StatusCompleted {
		t.Fatalf("status %s: %s\nlogs:\n%s", j.TrainingJobStatus, j.FailureReason, logs)
	}
	for _, want := range []string{"'algo-1': '127.0.0.1'", "'algo-2': '127.0.0.1'", "master algo-1", "master got hello from algo-2"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

// seedScript is the SageMaker PyTorch guide's multi-host pattern: no
// launcher, MASTER_ADDR/MASTER_PORT from the platform, rank and world size
// from SM_HOSTS; --set-world-size also exports WORLD_SIZE first, as the
// guide's example does.
const seedScript = `import json, os, sys, torch, torch.distributed as dist
hosts, current_host = json.loads(os.environ["SM_HOSTS"]), os.environ["SM_CURRENT_HOST"]
world_size = len(hosts)
if "--set-world-size" in sys.argv:
    os.environ["WORLD_SIZE"] = str(world_size)
dist.init_process_group("gloo", rank=hosts.index(current_host), world_size=world_size)
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} on {current_host} via {os.environ['MASTER_ADDR']}: sum {t.item()}", flush=True)
dist.destroy_process_group()
`

// TestSeedPatternAllReduce: the no-launcher pattern all-reduces over 2 and
// 3 hosts, with and without WORLD_SIZE set first.
func TestSeedPatternAllReduce(t *testing.T) {
	skipShort(t)
	requireTorch(t)
	requireIsolation(t)
	t.Parallel()
	e := newEnv(t)
	for _, tt := range []struct {
		hosts    int
		setWorld bool
	}{{2, false}, {3, false}, {2, true}, {3, true}} {
		name := fmt.Sprintf("seed-%d-%v", tt.hosts, tt.setWorld)
		t.Run(name, func(t *testing.T) {
			hps := e.putSource(name, map[string]string{"train.py": seedScript})
			if tt.setWorld {
				hps["set-world-size"] = `""`
			}
			e.submit(newTestJob(name, hps, withHosts(tt.hosts)))
			j := e.mem.waitEnd(t, name, 180*time.Second)
			logs := e.logs.text(name + "/")
			if j.TrainingJobStatus != sagebox.StatusCompleted {
				t.Fatalf("status %s: %s\nlogs:\n%s", j.TrainingJobStatus, j.FailureReason, logs)
			}
			sum := tt.hosts * (tt.hosts + 1) / 2
			for r := range tt.hosts {
				w := fmt.Sprintf("rank %d of %d on algo-%d via algo-1: sum %d.0", r, tt.hosts, r+1, sum)
				if !strings.Contains(logs, w) {
					t.Errorf("logs lack %q:\n%s", w, logs)
				}
			}
		})
	}
}

// TestUnknownHostNameFailsFast: a script that connects to a host no one
// defined fails at once with the resolver's error in its FailureReason,
// and torch's store, which retries a name that does not resolve until its
// 30-minute timeout, is failed by sagebox with a reason naming the host.
func TestUnknownHostNameFailsFast(t *testing.T) {
	skipShort(t)
	requireTorch(t)
	requireIsolation(t)
	t.Parallel()
	e := newEnv(t)
	for name, script := range map[string]string{
		"nohost-socket": "import socket\nsocket.create_connection(('algo-9', 7777))\n",
		"nohost-torch": "import os, torch.distributed as dist\nos.environ['MASTER_ADDR'] = 'algo-9'\n" +
			"dist.init_process_group('gloo', rank=int(os.environ['SM_CURRENT_HOST'][-1]) - 1, world_size=2)\n",
	} {
		t.Run(name, func(t *testing.T) {
			hps := e.putSource(name, map[string]string{"train.py": script})
			start := time.Now()
			e.submit(newTestJob(name, hps, withHosts(2)))
			j := e.mem.waitEnd(t, name, 120*time.Second)
			if j.TrainingJobStatus != sagebox.StatusFailed || !strings.Contains(j.FailureReason, "Name or service not known") {
				t.Fatalf("status %s reason %q\nlogs:\n%s", j.TrainingJobStatus, j.FailureReason, e.logs.text(name+"/"))
			}
			if name == "nohost-torch" && !strings.Contains(j.FailureReason, `HostNameError: torch.distributed cannot resolve host name "algo-9"`) ||
				!strings.Contains(e.logs.text(name+"/"), "algo-9") {
				t.Errorf("reason or logs do not name algo-9: %s", j.FailureReason)
			}
			if took := time.Since(start); took > 60*time.Second {
				t.Errorf("took %s to fail", took)
			}
			if name == "nohost-torch" && !strings.Contains(e.logs.text(name+"/"), `sagebox: torch.distributed cannot resolve host name "algo-9"`) {
				t.Errorf("the log does not say why the host was stopped:\n%s", e.logs.text(name+"/"))
			}
		})
	}
}

// TestSeedPatternUnderNSSWrapper: under the fallback, torch's c10d store
// does not see nss_wrapper's names, and the job fails at once saying why,
// not at MaxRuntime.
func TestSeedPatternUnderNSSWrapper(t *testing.T) {
	skipShort(t)
	requireTorch(t)
	if toolkit.FindNSSWrapper() == "" {
		t.Skip("libnss-wrapper not installed")
	}
	t.Parallel()
	e := newEnv(t, func(c *testConfig) { c.Local.NoHostIsolation = true })
	hps := e.putSource("seed-nss", map[string]string{"train.py": seedScript})
	start := time.Now()
	e.submit(newTestJob("seed-nss", hps, withHosts(2)))
	j := e.mem.waitEnd(t, "seed-nss", 120*time.Second)
	if j.TrainingJobStatus != sagebox.StatusFailed || !strings.Contains(j.FailureReason, `HostNameError: torch.distributed cannot resolve the job's host name "algo-1"`) ||
		!strings.Contains(j.FailureReason, "libnss-wrapper") {
		t.Fatalf("status %s reason %q\n%s", j.TrainingJobStatus, j.FailureReason, e.logs.text("seed-nss/"))
	}
	if took := time.Since(start); took > 60*time.Second {
		t.Errorf("took %s to fail", took)
	}
}
