package training

import (
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
)

// rendezvousScript: algo-2 dies at import, before it joins; algo-1 waits in
// torch.distributed's rendezvous (a 10-minute timeout) for a peer that
// will never come.
const rendezvousScript = `
import json, os, sys, time, datetime
host, marker = os.environ["SM_CURRENT_HOST"], sys.argv[sys.argv.index("--marker") + 1]
if host == "algo-2":
    while not os.path.exists(marker):  # until algo-1 is about to wait
        time.sleep(0.05)
    import no_such_module_for_sagebox
import torch.distributed as dist
print("joining", flush=True)
open(marker, "w").close()
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + os.environ["MASTER_PORT"],
                        rank=json.loads(os.environ["SM_HOSTS"]).index(host), world_size=2,
                        timeout=datetime.timedelta(minutes=10))
print("joined", flush=True)
`

// TestRendezvousThatCannotForm: when one host exits before the others
// joined, the job fails at once with that host's reason and the hosts left
// waiting are stopped, instead of waiting for MaxRuntime.
func TestRendezvousThatCannotForm(t *testing.T) {
	skipShort(t)
	requireTorch(t)
	t.Parallel()
	e := newEnv(t)
	hps := e.putSource("rdzv", map[string]string{"train.py": rendezvousScript})
	hps["marker"] = `"` + t.TempDir() + `/algo-1-joining"`
	start := time.Now()
	e.submit(newTestJob("rdzv", hps, withHosts(2)))
	j := e.mem.waitEnd(t, "rdzv", 2*time.Minute)
	took := time.Since(start)
	if j.TrainingJobStatus != sagebox.StatusFailed || !strings.Contains(j.FailureReason, "ModuleNotFoundError: No module named 'no_such_module_for_sagebox'") {
		t.Fatalf("%s %q\n%s", j.TrainingJobStatus, j.FailureReason, e.logs.text("rdzv/"))
	}
	if !strings.Contains(e.logs.text("rdzv/algo-1-"), "joining") || strings.Contains(e.logs.text("rdzv/"), "joined") {
		t.Errorf("algo-1 should have been waiting in the rendezvous:\n%s", e.logs.text("rdzv/"))
	}
	if took > time.Minute {
		t.Errorf("the job took %s to fail; it must not wait for the rendezvous timeout", took)
	}
}
