package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A model.tar.gz past SAGEBOX_MODEL_DATA_MAX_MB / _ENTRIES: the server
// refuses to start, exits non-zero and names the limit that was hit.
func TestModelServerModelDataLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	many := []tarEntry{tarReg("code/inference.py", "def model_fn(d): return None\n")}
	for i := 0; i < 20; i++ {
		many = append(many, tarReg(fmt.Sprintf("f%02d.txt", i), "x"))
	}
	cases := []struct {
		name, env, want string
		entries         []tarEntry
	}{
		{"size", "SAGEBOX_MODEL_DATA_MAX_MB=1", "SAGEBOX_MODEL_DATA_MAX_MB=1",
			[]tarEntry{tarReg("big.bin", strings.Repeat("x", 2<<20))}},
		{"entries", "SAGEBOX_MODEL_DATA_MAX_ENTRIES=10", "SAGEBOX_MODEL_DATA_MAX_ENTRIES=10", many},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			tarball := filepath.Join(base, "model.tar.gz")
			writeTarGz(t, tarball, c.entries)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, "model-server", "--model-data", tarball, "--port", "0")
			cmd.Env = append(os.Environ(), "SAGEBOX_PYTHON=/usr/bin/python3", "XDG_CACHE_HOME="+filepath.Join(base, "cache"),
				"SAGEMAKER_MODEL_SERVER_WORKERS=1", c.env)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			switch {
			case ctx.Err() != nil:
				t.Fatalf("model-server still ran after 20s: the archive was accepted\n%s", stderr.String())
			case !errors.As(err, &exit) || exit.ExitCode() == 0:
				t.Fatalf("model-server exited with %v, want a non-zero status\n%s", err, stderr.String())
			}
			mustContain(t, "stderr", stderr.String(), c.want, "limit")
		})
	}
}
