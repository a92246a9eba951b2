package proc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Spec.Credential applies to the command only: detached, attached under
// a supervisor and attached without one, the command runs as the given
// uid and gid with no supplementary groups, and a detached supervisor's
// state files stay this process's.
func TestCredentialAppliesToTheCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a command as another user needs root")
	}
	cred := &syscall.Credential{Uid: 61200, Gid: 61201, Groups: []uint32{}}
	path, args := sh(`echo "$(id -u) $(id -g) $(id -G)"`)
	want := "61200 61201 61201"
	ctx := context.Background()

	state := filepath.Join(t.TempDir(), "state")
	h, err := Start(ctx, Spec{Path: path, Args: args, Detach: true, StateDir: state, Supervisor: supervisorArgv(), Credential: cred})
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, h)
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the detached command did not finish")
	}
	b, _ := os.ReadFile(OutputPath(state))
	if got := strings.TrimSpace(string(b)); got != want || h.Result().ExitCode != 0 {
		t.Errorf("detached: id says %q (%s), want %q", got, h.Result(), want)
	}
	for _, f := range []string{fileExit, fileChild, fileSupervisor, fileOutput} {
		if st, err := os.Stat(filepath.Join(state, f)); err != nil || st.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("%s is not root's: %v", f, err)
		}
	}

	for _, sup := range [][]string{supervisorArgv(), nil} {
		var s lineSink
		h, err := Start(ctx, Spec{Path: path, Args: args, Supervisor: sup, Sink: s.sink, Credential: cred})
		if err != nil {
			t.Fatal(err)
		}
		stopAtEnd(t, h)
		<-h.Done()
		if got := strings.Join(s.get("stdout"), "|"); got != want {
			t.Errorf("attached (supervisor %v): id says %q (%s), want %q", sup, got, h.Result(), want)
		}
	}
}
