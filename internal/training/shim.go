package training

import "time"

// A host's process runs detached under internal/proc's supervisor
// (`sagebox exec-shim`), with its state in the host's state directory;
// the runner adds its own files there.
const (
	fileOutput = "output.log" // the process's stdout+stderr (proc.OutputPath)
	fileExit   = "exit.json"  // the exit status (internal/proc)
	fileShim   = "shim.json"  // launchRecord (runner)
	fileShimLg = "shim.log"   // the supervisor's own stderr (proc.SupervisorLogPath)
	fileTail   = "tail.json"  // tailState (runner)
)

// exitStatus is how a host's process ended, as the runner uses it.
type exitStatus struct {
	ExitCode  int       `json:"exit_code"`
	Signal    string    `json:"signal"` // "SIGKILL", or "" for a normal exit
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	Error     string    `json:"error,omitempty"` // the process could not be started
}
