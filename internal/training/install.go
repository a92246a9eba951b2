package training

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sagebox/sagebox/internal/pyruntime"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// install runs pip the way the toolkit does (TK entry_point.install): a
// package (setup.py) is installed with its requirements; a script's
// requirements.txt is installed; a command gets nothing. Environments are
// built by pyruntime, cached by content, and see the system's packages.
// It returns the interpreter to run the job with.
func (jr *jobRun) install(ctx context.Context) (string, toolkit.EntryKind, error) {
	python := jr.r.cfg.Python.Path
	code := jr.hosts[0].info.Workspace.CodeDir()
	kind := toolkit.EntryKindOf(jr.spec.EntryPoint, code)
	req := filepath.Join(code, "requirements.txt")
	out := &lineWriter{jr: jr, ctx: ctx, hosts: jr.hosts}
	defer out.Flush()
	cache := filepath.Join(jr.r.cfg.DataDir, "cache", "requirements")
	switch {
	case kind == toolkit.EntryPackage:
		cmd := []string{"python", "-m", "pip", "install", "."}
		if exists(req) {
			cmd = append(cmd, "-r", "requirements.txt")
		}
		jr.note(ctx, jr.hosts, "installing the source directory as a package: %s", toolkit.ShellJoin(cmd))
		venv, err := installPackage(ctx, python, code, filepath.Join(jr.r.stateDir(jr.name), "venv"), jr.pipEnv(), out)
		if err != nil {
			if ctx.Err() != nil {
				return "", kind, ctx.Err()
			}
			return "", kind, &toolkit.Error{Reason: toolkit.InstallError("InstallModuleError", err, cmd), Err: err}
		}
		return venv, kind, nil
	case kind == toolkit.EntryProgram && exists(req):
		cmd := []string{"python", "-m", "pip", "install", "-r", "requirements.txt"}
		jr.note(ctx, jr.hosts, "installing requirements.txt")
		venv, err := pyruntime.InstallRequirements(ctx, python, req, cache, jr.pipEnv(), out)
		if err != nil {
			if ctx.Err() != nil {
				return "", kind, ctx.Err()
			}
			return "", kind, &toolkit.Error{Reason: toolkit.InstallError("InstallRequirementsError", err, cmd), Err: err}
		}
		return venv, kind, nil
	case kind == toolkit.EntryCommand:
		if exists(req) {
			jr.note(ctx, jr.hosts, "requirements.txt is not installed for a command entry point (as in the SageMaker toolkit)")
		}
		if err := os.Chmod(filepath.Join(code, jr.spec.EntryPoint), 0o755); err != nil {
			return "", kind, fmt.Errorf("make entry point executable: %w", err)
		}
		for _, h := range jr.hosts[1:] {
			_ = os.Chmod(filepath.Join(h.info.Workspace.CodeDir(), jr.spec.EntryPoint), 0o755)
		}
	}
	return python, kind, nil
}

// pipEnv is the environment pip and whatever a requirement's setup runs
// get: the job's own inherited base (baseEnv: not the server's AWS
// credentials or SAGEBOX_CREDENTIALS) and the job's Environment (so
// PIP_INDEX_URL and the like set for the job work), as in the SageMaker
// container, where pip runs in the job's environment.
func (jr *jobRun) pipEnv() []string {
	env := toolkit.BaseEnv(jr.r.environ())
	keys := make([]string, 0, len(jr.spec.Environment))
	for k := range jr.spec.Environment {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+jr.spec.Environment[k])
	}
	return env
}

// installPackage is the toolkit's PYTHON_PACKAGE install, `python -m pip
// install . [-r requirements.txt]` in code/, done into a per-job virtual
// environment (with --system-site-packages, so torch stays visible; Debian's
// system Python refuses pip installs). When setuptools is importable the
// build runs without isolation, so a package without dependencies installs
// offline. pip and the package's setup run with env (pipEnv). It returns
// the environment's interpreter.
func installPackage(ctx context.Context, python, code, venv string, env []string, out io.Writer) (string, error) {
	if err := os.RemoveAll(venv); err != nil {
		return "", fmt.Errorf("clear %s: %w", venv, err)
	}
	run := func(dir, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
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
