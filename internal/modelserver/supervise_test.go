package modelserver

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sagebox/sagebox/internal/proc"
)

// A worker's forks, a setsid() daemon included, do not outlive Shutdown
// (reliability probe R9). Without Config.Supervisor the daemon survives.
func TestWorkerDaemonDiesWithShutdown(t *testing.T) {
	ts := startTestServer(t, testOptions{workers: 2, env: []string{"FAKE_DAEMON=1"}})
	files, _ := filepath.Glob(filepath.Join(ts.state, "daemon-*"))
	if len(files) != 2 {
		t.Fatalf("daemons %v, want one per worker", files)
	}
	type daemon struct {
		pid   int
		start uint64
	}
	var daemons []daemon
	for _, f := range files {
		pid, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(f), "daemon-"))
		d := daemon{pid, proc.StartTime(pid)}
		if !proc.Running(d.pid, d.start) {
			t.Fatalf("daemon %d is not running", pid)
		}
		daemons = append(daemons, d)
	}
	t.Cleanup(func() {
		for _, d := range daemons {
			if proc.Running(d.pid, d.start) {
				_ = syscall.Kill(d.pid, syscall.SIGKILL)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range daemons {
		if proc.Running(d.pid, d.start) {
			t.Errorf("the setsid daemon %d of a worker outlived Shutdown", d.pid)
		}
	}
}

// The temporary directories of a model server that is gone are removed at
// the next start; those of a live one, and ones not named after an owner,
// are not.
func TestSweepTempDirs(t *testing.T) {
	parent := t.TempDir()
	mine, err := ownedTempDir(parent, "sagebox-ms-")
	if err != nil {
		t.Fatal(err)
	}
	me := os.Getpid()
	start := proc.StartTime(me)
	dead := []string{
		filepath.Join(parent, "sagebox-ms-"+strconv.Itoa(me)+"-"+strconv.FormatUint(start+1, 10)+"-123"), // a reused pid
		filepath.Join(parent, "sagebox-ms-999999999-12345-456"),                                          // no such pid
	}
	kept := []string{
		mine,
		filepath.Join(parent, "sagebox-ms-123456789"), // an older binary's: no owner
		filepath.Join(parent, "other-"+strconv.Itoa(me+1)+"-1-2"),
	}
	for _, d := range append(append([]string{}, dead...), kept[1:]...) {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if pid, st, ok := tempDirOwner(filepath.Base(mine), "sagebox-ms-"); !ok || pid != me || st != start {
		t.Fatalf("owner of %s: %d %d %v", mine, pid, st, ok)
	}
	sweepTempDirs(parent, "sagebox-ms-", slog.New(slog.DiscardHandler))
	for _, d := range dead {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s of a dead owner is still there (%v)", filepath.Base(d), err)
		}
	}
	for _, d := range kept {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(d), err)
		}
	}
}
