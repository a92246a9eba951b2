package local

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sagebox/sagebox/internal/toolkit"
)

// installPackage is the toolkit's PYTHON_PACKAGE install, `python -m pip
// install . [-r requirements.txt]` in code/, done into a per-job virtual
// environment (with --system-site-packages, so torch stays visible; Debian's
// system Python refuses pip installs). When setuptools is importable the
// build runs without isolation, so a package without dependencies installs
// offline. pip and the package's setup run with env (pipEnv). It returns
// the environment's interpreter.
// With cred, pip and the setup run as that user (venv's parent is its).
func installPackage(ctx context.Context, python, code, venv string, env []string, cred *syscall.Credential, out io.Writer) (string, error) {
	if err := os.RemoveAll(venv); err != nil {
		return "", fmt.Errorf("clear %s: %w", venv, err)
	}
	run := func(dir, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		var tail bytes.Buffer
		w := io.MultiWriter(out, &tail)
		cmd.Stdout, cmd.Stderr = w, w
		cmd.Env = append(env[:len(env):len(env)], "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%w: %s", err, toolkit.LastLines(tail.String(), 20))
		}
		return nil
	}
	if err := run(code, python, "-m", "venv", "--system-site-packages", venv); err != nil {
		return "", fmt.Errorf("create environment (is python3-venv installed?): %w", err)
	}
	vpy := filepath.Join(venv, "bin", "python")
	args := []string{"-m", "pip", "install", "--no-input"}
	probe := exec.CommandContext(ctx, vpy, "-c", "import setuptools")
	probe.Env = env
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if probe.Run() == nil {
		args = append(args, "--no-build-isolation")
	}
	args = append(args, ".")
	if exists(filepath.Join(code, "requirements.txt")) {
		args = append(args, "-r", "requirements.txt")
	}
	if err := run(code, vpy, args...); err != nil {
		return "", fmt.Errorf("pip install %s: %w", strings.Join(args[3:], " "), err)
	}
	return vpy, nil
}
