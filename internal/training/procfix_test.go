package training

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
)

// sigtermTwiceScript counts the SIGTERMs it gets; the first one runs a
// handler that takes a while (the checkpoint-on-stop pattern).
const sigtermTwiceScript = `import signal, sys, time
n = [0]
def h(*a):
    n[0] += 1
    print("SIGTERM", n[0], flush=True)
    if n[0] == 1:
        time.sleep(2)
        print("checkpoint saved", flush=True)
        sys.exit(0)
signal.signal(signal.SIGTERM, h)
print("training", flush=True)
time.sleep(120)
`

// TestRecoverDuringStopDoesNotResendSIGTERM is reproduction R10 of the
// 12-03 reliability probe: the server goes away while a job is Stopping
// and the script is inside its SIGTERM handler; the new server must not
// send it a second SIGTERM, only keep the SIGKILL deadline.
func TestRecoverDuringStopDoesNotResendSIGTERM(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	e := newEnv(t)
	hps := e.putSource("stop-twice", map[string]string{"train.py": sigtermTwiceScript})
	e.submit(newTestJob("stop-twice", hps))
	waitLog(t, e, "stop-twice/", "training", 30*time.Second)
	e.mem.update(t, "stop-twice", func(j *sagebox.TrainingJob) { // StopTrainingJob
		j.TrainingJobStatus, j.SecondaryStatus = sagebox.StatusStopping, sagebox.SecondaryStopping
		appendTransition(j, sagebox.SecondaryStopping, "Stopping the training job", time.Now())
	})
	if err := e.runner.Stop(context.Background(), "stop-twice"); err != nil {
		t.Fatal(err)
	}
	waitLog(t, e, "stop-twice/", "SIGTERM 1", 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.runner.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e.runner = e.newRunner()
	if err := e.runner.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	j := e.mem.waitEnd(t, "stop-twice", 60*time.Second)
	logs := e.logs.text("stop-twice/")
	if j.TrainingJobStatus != sagebox.StatusStopped {
		t.Errorf("status %s %q", j.TrainingJobStatus, j.FailureReason)
	}
	if strings.Contains(logs, "SIGTERM 2") || !strings.Contains(logs, "checkpoint saved") {
		t.Errorf("the script got SIGTERM again after the restart, or its handler did not finish; logs:\n%s", logs)
	}
}
