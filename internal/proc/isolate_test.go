package proc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Spec.HostsFile and Spec.Hostname: the command (and what it starts) reads
// the given file as /etc/hosts and has the given host name, detached and
// attached, while this process and the machine keep theirs.
func TestIsolationGivesTheCommandItsOwnHosts(t *testing.T) {
	if err := CheckIsolation(); err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" && os.Geteuid() == 0 {
			t.Fatal(err)
		}
		t.Skip("no mount namespaces here:", err)
	}
	before, err := os.ReadFile(etcHosts)
	if err != nil {
		t.Fatal(err)
	}
	myName, _ := os.Hostname()
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.9.8.1 algo-1\n127.9.8.2 algo-2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A grandchild too: sh starts getent.
	path, args := sh(`getent hosts algo-2; hostname; [ -w /etc/hosts ] || echo read-only`)
	check := func(how, out string) {
		t.Helper()
		for _, want := range []string{"127.9.8.2       algo-2", "\nalgo-1\n", "read-only"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", how, want, out)
			}
		}
	}

	state := filepath.Join(t.TempDir(), "state")
	h, err := Start(context.Background(), Spec{Path: path, Args: args, Detach: true, StateDir: state,
		Supervisor: supervisorArgv(), HostsFile: hosts, Hostname: "algo-1"})
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
	check("detached", string(b))

	var s lineSink
	h, err = Start(context.Background(), Spec{Path: path, Args: args, Supervisor: supervisorArgv(), Sink: s.sink,
		HostsFile: hosts, Hostname: "algo-1"})
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, h)
	<-h.Done()
	check("attached", "\n"+strings.Join(s.get("stdout"), "\n")+"\n")

	after, _ := os.ReadFile(etcHosts)
	if string(after) != string(before) {
		t.Errorf("the machine's /etc/hosts changed:\n%s", after)
	}
	if n, _ := os.Hostname(); n != myName {
		t.Errorf("this process's host name became %q", n)
	}
	if _, err := Start(context.Background(), Spec{Path: path, Args: args, HostsFile: hosts}); err == nil {
		t.Error("HostsFile without a supervisor was accepted")
	}
}
