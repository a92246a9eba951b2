package training

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// hostTalkScript: algo-1 listens on MASTER_ADDR:MASTER_PORT, algo-2 connects
// to it by name, the way hand-rolled multi-host scripts do.
const hostTalkScript = `import json, os, socket, time
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

func TestHostNamesResolve(t *testing.T) {
	skipShort(t)
	requirePython(t)
	if toolkit.FindNSSWrapper() == "" {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatal("libnss-wrapper is required (make deps)")
		}
		t.Skip("libnss-wrapper not installed")
	}
	t.Parallel()
	e := newEnv(t)
	hps := e.putSource("names", map[string]string{"train.py": hostTalkScript})
	e.submit(newTestJob("names", hps, withHosts(2)))
	j := e.mem.waitEnd(t, "names", 60*time.Second)
	logs := e.logs.text("names/")
	if j.TrainingJobStatus != sagebox.StatusCompleted {
		t.Fatalf("status %s: %s\nlogs:\n%s", j.TrainingJobStatus, j.FailureReason, logs)
	}
	for _, want := range []string{"'algo-1': '127.0.0.1'", "'algo-2': '127.0.0.1'", "master algo-1", "master got hello from algo-2"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}
