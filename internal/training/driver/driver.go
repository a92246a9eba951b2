// Package driver is the seam between a training job's lifecycle and the
// backend that runs its hosts, in the shape of Nomad's task drivers.
//
// The lifecycle (internal/training: phases and status transitions, the
// outcome rules across hosts, stop and MaxRuntime, recovery after a
// restart, FailureReason, metrics, log streaming) is the same for every
// backend. A Driver does what depends on where the hosts run: it prepares
// a host's /opt/ml tree (config files, channels, code, checkpoints),
// installs requirements, starts one host's task, re-attaches to it after a
// restart, writes the toolkit's output/success or output/failure, syncs
// checkpoints and collects model.tar.gz and output.tar.gz. The local driver
// (internal/training/local) does it with workspaces on this disk, processes
// on this machine (internal/proc) and hard links out of the object store; a
// Kubernetes or Slurm driver implements the same interface (its pods would
// run `sagebox stage` and `sagebox collect`). drivertest is the conformance
// suite every driver passes; fake is an in-memory driver for fast lifecycle
// tests.
package driver

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/toolkit"
)

// Driver runs the hosts of training jobs on one backend. Calls for one job
// come in this order: Prepare, Install, Start for each host (or Recover for
// each host after a restart), Settle for each host as it ends, Collect,
// Release, all from one goroutine; SyncCheckpoints comes from another while
// tasks run (and once more before Collect). Once Prepare or Recover has
// filled Job.Hosts, no call may write the Job. Calls for different jobs
// may run concurrently.
type Driver interface {
	// Prepare makes every host of job ready to start, from scratch: its
	// tree with the config files, the channels (sharded across hosts as
	// the channel says), the source directory and the checkpoints. It
	// fills each Host's Workspace and devices. A stop cancels ctx.
	Prepare(ctx context.Context, job *Job) error
	// Install installs what the entry point needs (requirements.txt, or
	// the source directory as a package), with its output in the hosts'
	// logs. A stop cancels ctx.
	Install(ctx context.Context, job *Job) error
	// Start starts host's task and returns at once.
	Start(ctx context.Context, job *Job, host int) (Task, error)
	// Recover re-attaches to host's task after a restart of the server:
	// ErrNotStarted when it never started (the job is staged again). A
	// task that ended meanwhile, or whose process is gone, is returned
	// Done. Recover also fills the Host as Prepare did.
	Recover(ctx context.Context, job *Job, host int) (Task, error)
	// Settle records how host ended, as the toolkit does in the
	// container: output/success, or output/failure with failure unless
	// the script wrote its own. It returns the failure text that counts.
	Settle(job *Job, host int, failure string) (string, error)
	// SyncCheckpoints uploads the checkpoint files that changed since the
	// last sync.
	SyncCheckpoints(ctx context.Context, job *Job) error
	// Collect uploads model.tar.gz and output.tar.gz to the job's output
	// path and returns the model's URI ("" when there is no output path).
	Collect(ctx context.Context, job *Job) (string, error)
	// Release frees what the job held (devices) and applies the
	// retention policy to its workspaces. failed says how it ended.
	Release(job *Job, failed bool)
}

// ErrNotStarted is Recover's error for a host whose task never started.
var ErrNotStarted = errors.New("the host's task was never started")

// Job is one run of a training job, as the lifecycle hands it to a driver.
type Job struct {
	// Name is TrainingJobName.
	Name string
	// Spec is the job decoded by the toolkit.
	Spec *toolkit.Spec
	// Hosts are algo-1..N (Index, Name); Prepare or Recover fills the
	// rest (Workspace, NumGPUs, CUDADevices).
	Hosts []toolkit.Host
	// StateDir is a directory of the server's own, kept across restarts,
	// where a driver may keep what it needs to re-attach (one
	// subdirectory per host name is the convention).
	StateDir string
	// Notes receives sagebox's own lines for the logs of some hosts (by
	// index): staging and installation messages. Safe to call from any
	// goroutine; nil drops them.
	Notes func(hosts []int, msg string)
	// Output receives the installation's output (pip) as it comes, for the
	// logs of every host. Nil drops it.
	Output io.Writer
}

// Note sends msg to the given hosts' logs.
func (j *Job) Note(hosts []int, msg string) {
	if j.Notes != nil {
		j.Notes(hosts, msg)
	}
}

// AllHosts are the indexes of every host.
func (j *Job) AllHosts() []int {
	idx := make([]int, len(j.Hosts))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// Task is one host's running (or ended) task.
type Task interface {
	// Output is the task's stdout and stderr as one append-only log;
	// reading past its end gives io.EOF, and an output not written yet
	// reads as empty.
	Output() io.ReaderAt
	// Done is closed when the task has ended or is known to be lost.
	Done() <-chan struct{}
	// Result says how it ended; valid once Done is closed.
	Result() Result
	// Signal sends sig to everything the task runs (its process group).
	Signal(sig syscall.Signal) error
	// TermSentAt is when SIGTERM was first sent, by this server or, before
	// a restart, an earlier one (zero if never): the grace period counts
	// from it and a handler is never signalled twice.
	TermSentAt() time.Time
	// Passive reports a host that runs nothing of its own (an MPI worker:
	// mpirun on the first host starts its processes).
	Passive() bool
	// Argv is the command the task runs, for FailureReason.
	Argv() []string
	// ID names the task in logs (a pid, a pod name).
	ID() string
}

// Result is how a task ended.
type Result struct {
	ExitCode int
	// Signal is the name of the signal that ended it ("SIGKILL"), or "".
	Signal    string
	StartedAt time.Time
	EndedAt   time.Time
	// Err is set when the task could not run or its end could not be
	// observed. Lost marks the latter: the process is gone without an exit
	// status (after a restart, or its supervisor died), and Err says so.
	Err  error
	Lost bool
}
