package main

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestListenModelServer(t *testing.T) {
	ln, addr, err := listenModelServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if addr != ln.Addr().String() || strings.HasSuffix(addr, ":0") {
		t.Errorf("port 0 reported as %q (listening on %s)", addr, ln.Addr())
	}
	ln.Close()

	sock := filepath.Join(t.TempDir(), "http.sock")
	live, addr, err := listenModelServer("unix:" + sock)
	if err != nil || addr != "unix:"+sock {
		t.Fatalf("unix socket: %q %v", addr, err)
	}
	if _, _, err := listenModelServer("unix:" + sock); err == nil || !strings.Contains(err.Error(), "another server is listening") {
		t.Errorf("a socket a live server listens on was taken over: %v", err)
	}
	// A socket file left behind by a dead server is replaced.
	live.(*net.UnixListener).SetUnlinkOnClose(false)
	live.Close()
	again, _, err := listenModelServer("unix:" + sock)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	again.Close()
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file still there after close: %v", err)
	}
	if _, _, err := listenModelServer("unix:"); err == nil {
		t.Error("an empty socket path was accepted")
	}
}

func TestReadyReporter(t *testing.T) {
	if _, err := newReadyReporter(1); err == nil {
		t.Error("--ready-fd 1 accepted")
	}
	if _, err := newReadyReporter(987); err == nil || !strings.Contains(err.Error(), "not an open file descriptor") {
		t.Errorf("a closed descriptor: %v", err)
	}
	none, err := newReadyReporter(-1)
	if err != nil {
		t.Fatal(err)
	}
	none.report(true, nil) // no --ready-fd: nothing to do

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	// A descriptor of its own, as a child inherits it: the reporter closes it.
	fd, err := syscall.Dup(int(pw.Fd()))
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	r, err := newReadyReporter(fd)
	if err != nil {
		t.Fatal(err)
	}
	r.addr = "unix:/x/http.sock"
	r.report(false, errors.New(`model_fn raised "boom"`))
	r.report(true, nil) // only the first report counts
	b, _ := io.ReadAll(pr)
	if want := `{"ready":false,"addr":"unix:/x/http.sock","error":"model_fn raised \"boom\""}` + "\n"; string(b) != want {
		t.Fatalf("handshake %q, want %q", b, want)
	}
}
