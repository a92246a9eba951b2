package modelserver

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sagebox/sagebox/internal/proc"
)

// A model server's temporary directories (the socket directory under
// $TMPDIR, an extracted model under the cache) carry their owner in their
// name: <prefix><pid>-<start>-<random>, where start is the owner's start
// time (proc.StartTime), so that a reused pid is never taken for the
// owner. Shutdown removes them. When the server is killed (SIGKILL, OOM),
// two things remove them instead:
//
//   - the workers' supervisors, which see the server die and remove them
//     once they have killed their worker (proc.Spec.RemoveOnParentDeath);
//   - the next model server's start, which removes every such directory
//     whose owner is no longer running (for when the supervisors were
//     killed too, or there were none).
//
// Directories in the older format (no owner in the name) are left alone.
// Owners are looked up in this machine's pid namespace: model servers in
// other pid namespaces must not share the same $TMPDIR or cache.

// ownedTempDir creates a new directory in parent named after this process.
func ownedTempDir(parent, prefix string) (string, error) {
	me := os.Getpid()
	return os.MkdirTemp(parent, fmt.Sprintf("%s%d-%d-", prefix, me, proc.StartTime(me)))
}

// sweepTempDirs removes the directories in parent that ownedTempDir made
// for a process that is gone.
func sweepTempDirs(parent, prefix string, logger *slog.Logger) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, start, ok := tempDirOwner(e.Name(), prefix)
		if !ok || !e.IsDir() || proc.Running(pid, start) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if err := os.RemoveAll(dir); err != nil {
			logger.Warn("could not remove a dead model server's temporary directory", "dir", dir, "error", err)
			continue
		}
		logger.Info("removed a dead model server's temporary directory", "dir", dir, "owner_pid", pid)
	}
}

// tempDirOwner parses <prefix><pid>-<start>-<random>.
func tempDirOwner(name, prefix string) (pid int, start uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, 0, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 3 || f[2] == "" {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 || start == 0 {
		return 0, 0, false
	}
	return pid, start, true
}
