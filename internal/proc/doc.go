// Package proc starts and supervises the processes sagebox runs on this
// machine: training hosts' scripts and model-server workers (and, later,
// endpoint instances). It knows nothing of jobs or models; a cluster
// backend (Kubernetes, Slurm) would not use it.
//
// # The model
//
// A process is started with Start from a Spec. It always runs in a process
// group of its own, so that Signal reaches everything it forked into that
// group, and it normally runs under a supervisor: a small process (the
// hidden `sagebox exec-shim` subcommand, whose entry point is
// RunSupervisor) that is the command's parent. The supervisor is a child
// subreaper (PR_SET_CHILD_SUBREAPER): whatever the command forks, even a
// daemon that called setsid() and left the group, is re-parented to it
// when its own parent dies. When the command ends, the supervisor kills
// everything left below it before it reports the exit, so nothing the
// command started outlives it.
//
// There are two modes:
//
//   - Attached (Spec.Detach false): the process dies with its parent. The
//     supervisor's stdin is a pipe whose write end only the parent holds;
//     end of file on it means the parent process is gone, however it
//     ended (a SIGKILL included), and the supervisor then kills its whole
//     subtree and removes Spec.RemoveOnParentDeath (the parent's temporary
//     files). PR_SET_PDEATHSIG is not used for this: it fires when the
//     parent's forking thread exits, which may be long before (or without)
//     the parent's death. Stdout and stderr are pipes pumped line by line to
//     Spec.Sink; the last lines of stderr are kept for Tail. The
//     supervisor reports the command's pid and exit on a pipe (fd 3). With
//     no Spec.Supervisor the command runs directly, with Pdeathsig SIGKILL
//     (forks that leave the group are then not covered).
//
//   - Detached (Spec.Detach true): the process outlives its parent. The
//     supervisor runs in a session of its own and keeps everything in
//     Spec.StateDir (the files below): the command's output goes to
//     output.log, a file opened for append (not a pipe, so the parent can
//     die without the command getting SIGPIPE), and the exit is written
//     to exit.json. After a restart, Adopt re-attaches to the process from
//     the state directory.
//
// # State directory (detached)
//
//	proc.json        launch intent: run id, argv, time; written by Start BEFORE the supervisor starts
//	supervisor.json  the supervisor's pid and start time; written by the supervisor BEFORE the command starts
//	child.json       the command's pid, process group and start time (supervisor)
//	output.log       the command's stdout and stderr (supervisor)
//	exit.json        the exit status, with the run id (supervisor, atomically)
//	term.json        when SIGTERM was first sent (Handle.Signal), so a re-adopted process is never sent it twice
//	shim.log         the supervisor's own stderr
//
// Because the intent is on disk before any process exists and the
// supervisor records itself before the command runs, there is no moment
// at which a process runs that a restarted parent cannot find: Adopt
// either re-adopts it or reports ErrNotStarted, meaning nothing ran. An
// exit.json is only taken as the result of the run whose id it carries.
//
// # Identity
//
// A recorded pid is only trusted together with the process's start time
// (field 22 of /proc/<pid>/stat, in clock ticks since boot). A pid whose
// process started at another time now belongs to another program: it is
// never signalled, and the process counts as gone without an exit status.
// A state directory that cannot be decoded gives ErrCorrupt.
//
// # Compatibility
//
// The subcommand keeps the name exec-shim, which older binaries used.
// Adopt also understands the state an older binary's runner left (a
// supervisor pid in the caller's own record, exit.json without a run id):
// see AdoptLegacy.
package proc
