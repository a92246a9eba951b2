package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func echoModel(t *testing.T, inference string) string {
	t.Helper()
	model := t.TempDir()
	os.MkdirAll(filepath.Join(model, "code"), 0o755)
	if err := os.WriteFile(filepath.Join(model, "code", "inference.py"), []byte(inference), 0o644); err != nil {
		t.Fatal(err)
	}
	return model
}

// --port 0: the server picks a free port and the handshake names it (the
// log says the same), so no test races another for a port.
func TestModelServerPortZeroReported(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	ms := startModelServer(t, nil, "--model-dir", echoModel(t, echoInference))
	host, port, err := net.SplitHostPort(ms.addr)
	if err != nil || host != "127.0.0.1" || port == "0" || port == "" {
		t.Fatalf("handshake address %q (%v), want 127.0.0.1 and the port chosen", ms.addr, err)
	}
	if !strings.Contains(ms.log.String(), "addr="+ms.addr) {
		t.Errorf("the log does not name the address %s:\n%s", ms.addr, ms.log.String())
	}
	// Ready means ready: /ping answers 200 without waiting.
	resp, err := http.Get(ms.url + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/ping right after the handshake: %d", resp.StatusCode)
	}
	ms.cmd.Process.Signal(syscall.SIGTERM)
	ms.waitExit(t)
}

// --listen unix:PATH serves the same routes on a Unix socket, to a Go
// client and to curl, and removes the socket file at exit.
func TestModelServerUnixSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	requireTool(t, "curl", "--version")
	sock := filepath.Join(t.TempDir(), "http.sock")
	// A socket file a dead server left behind is replaced.
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	ms := startModelServer(t, nil, "--model-dir", echoModel(t, echoInference), "--listen", "unix:"+sock)
	if ms.addr != "unix:"+sock {
		t.Fatalf("handshake address %q, want unix:%s", ms.addr, sock)
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := client.Post("http://model/invocations", "text/plain", strings.NewReader("over a socket"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "over a socket" {
		t.Fatalf("Go client over the socket: %d %q", resp.StatusCode, b)
	}
	out, err := exec.Command("curl", "-sS", "--unix-socket", sock, "-H", "Content-Type: text/plain",
		"--data-binary", "from curl", "http://model/invocations").CombinedOutput()
	if err != nil || string(out) != "from curl" {
		t.Fatalf("curl over the socket: %v %q", err, out)
	}
	out, err = exec.Command("curl", "-sS", "--unix-socket", sock, "http://model/ping").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Healthy") {
		t.Fatalf("curl /ping over the socket: %v %q", err, out)
	}
	ms.cmd.Process.Signal(syscall.SIGTERM)
	ms.waitExit(t)
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket file is still there after exit: %v", err)
	}
}

// The handshake says why the server is not ready: model_fn raised (the
// server keeps running and retrying, /ping answers 500), or the model
// could not even be prepared (the server exits non-zero).
func TestModelServerHandshakeReportsFailedLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTorch(t)
	t.Run("model_fn raises", func(t *testing.T) {
		model := echoModel(t, "def model_fn(model_dir):\n    raise RuntimeError(\"no weights here\")\n")
		ms, line := launchModelServer(t, []string{"SAGEMAKER_MODEL_SERVER_WORKERS=1"}, "--model-dir", model)
		if line.Ready || !strings.Contains(line.Error, "RuntimeError: no weights here") || ms.url == "" {
			t.Fatalf("handshake %+v, want not ready with the exception and the address", line)
		}
		resp, err := http.Get(ms.url + "/ping")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 500 {
			t.Errorf("/ping after a failed load: %d, want 500", resp.StatusCode)
		}
		ms.cmd.Process.Signal(syscall.SIGTERM)
		ms.waitExit(t)
	})
	t.Run("no such archive", func(t *testing.T) {
		ms, line := launchModelServer(t, nil, "--model-data", filepath.Join(t.TempDir(), "missing.tar.gz"))
		if line.Ready || !strings.Contains(line.Error, "missing.tar.gz") || ms.addr == "" {
			t.Fatalf("handshake %+v, want not ready, naming the archive, with the address", line)
		}
		select {
		case err := <-ms.exited:
			if err == nil {
				t.Error("model-server exited 0 after failing to prepare the model")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("model-server still runs after failing to prepare the model")
		}
	})
}
