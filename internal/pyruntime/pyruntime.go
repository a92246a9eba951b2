// Package pyruntime finds the Python interpreter that runs user code, writes
// sagebox's embedded Python package to a versioned cache directory, and
// prepares per-requirements environments that still see the system's
// packages.
package pyruntime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/python"
)

// Interpreter is the Python that runs user code.
type Interpreter struct {
	// Path is the interpreter's path (absolute where it could be resolved).
	Path string
	// Source says how it was chosen: "SAGEBOX_PYTHON", "PATH" or "/usr/bin/python3".
	Source string
}

func (i Interpreter) String() string { return fmt.Sprintf("%s (from %s)", i.Path, i.Source) }

// ErrNoInterpreter is returned by Find when no candidate can import torch.
var ErrNoInterpreter = errors.New("no Python interpreter that can import torch")

// Find returns SAGEBOX_PYTHON when it is set (it must exist and run; it is
// not required to import torch, since the user chose it). Otherwise it returns
// the first of python3 on PATH and /usr/bin/python3 that can import torch.
func Find(ctx context.Context, getenv func(string) string) (Interpreter, error) {
	if p := getenv("SAGEBOX_PYTHON"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return Interpreter{}, fmt.Errorf("SAGEBOX_PYTHON=%q: %w", p, err)
		}
		if err := probe(ctx, path, "import sys"); err != nil {
			return Interpreter{}, fmt.Errorf("SAGEBOX_PYTHON=%q does not run: %w", p, err)
		}
		return Interpreter{Path: path, Source: "SAGEBOX_PYTHON"}, nil
	}
	var tried []string
	candidates := []Interpreter{{Path: "python3", Source: "PATH"}, {Path: "/usr/bin/python3", Source: "/usr/bin/python3"}}
	for _, c := range candidates {
		path, err := lookPath(c.Path, getenv("PATH"))
		if err != nil {
			tried = append(tried, c.Path+": not found")
			continue
		}
		if err := probe(ctx, path, "import torch"); err != nil {
			tried = append(tried, path+": "+err.Error())
			continue
		}
		return Interpreter{Path: path, Source: c.Source}, nil
	}
	return Interpreter{}, fmt.Errorf("%w (set SAGEBOX_PYTHON, or install python3-torch): %s", ErrNoInterpreter, strings.Join(tried, "; "))
}

// lookPath resolves name against the given PATH value, not the process's.
func lookPath(name, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		if st, err := os.Stat(name); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return name, nil
		}
		return "", fmt.Errorf("%s: not an executable file", name)
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found on PATH", name)
}

func probe(ctx context.Context, python, code string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", code)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		if msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	return nil
}

// Unpack writes the embedded sagebox_runtime package under root/<hash>/ and
// returns that directory, which belongs on PYTHONPATH. The hash covers the
// package's contents, so a new binary gets a new directory and concurrent
// callers never see a half-written package (it is written to a temporary
// directory and renamed into place).
func Unpack(root string) (string, error) {
	return unpack(python.FS, root)
}

func unpack(fsys fs.FS, root string) (string, error) {
	h := sha256.New()
	var files []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.Contains(p, "__pycache__") || strings.HasSuffix(p, ".pyc") {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		files = append(files, p)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash embedded runtime: %w", err)
	}
	dir := filepath.Join(root, hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("create runtime dir: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".unpack-")
	if err != nil {
		return "", fmt.Errorf("create runtime dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, p := range files {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return "", fmt.Errorf("read embedded %s: %w", p, err)
		}
		dst := filepath.Join(tmp, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", fmt.Errorf("unpack runtime: %w", err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", fmt.Errorf("unpack runtime: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return "", fmt.Errorf("unpack runtime: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process may have won the race; its copy is identical.
		if _, statErr := os.Stat(filepath.Join(dir, ".complete")); statErr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("install runtime dir: %w", err)
	}
	return dir, nil
}

// PythonPath joins directories for PYTHONPATH, first first, keeping an
// existing value at the end.
func PythonPath(existing string, dirs ...string) string {
	var parts []string
	for _, d := range dirs {
		if d != "" {
			parts = append(parts, d)
		}
	}
	if existing != "" {
		parts = append(parts, existing)
	}
	return strings.Join(parts, string(os.PathListSeparator))
}

// InstallRequirements makes sure the packages in reqFile are importable and
// returns the interpreter to run user code with. It builds a virtual
// environment with --system-site-packages (so Debian's torch and numpy stay
// visible; Debian marks the system Python externally managed, so pip cannot
// install into it) under cacheDir, keyed by the interpreter and the file's
// contents, and reuses it on later calls. When python is itself a virtual
// environment's, that environment's packages stay visible too. A
// requirement that the system already satisfies installs without network.
// pip, and whatever a requirement's build runs, gets env (KEY=VALUE
// entries) as its whole environment, as exec.Cmd.Env: a training job passes
// its own filtered environment so that the server's credentials never
// reach a requirement; nil means this process's environment. pip's output
// goes to out.
func InstallRequirements(ctx context.Context, python, reqFile, cacheDir string, env []string, out io.Writer) (string, error) {
	req, err := os.ReadFile(reqFile)
	if err != nil {
		return "", fmt.Errorf("read requirements: %w", err)
	}
	if len(bytes.TrimSpace(stripComments(req))) == 0 {
		return python, nil
	}
	sum := sha256.New()
	fmt.Fprintf(sum, "%s\x00", python)
	sum.Write(req)
	dir := filepath.Join(cacheDir, hex.EncodeToString(sum.Sum(nil))[:16])
	venvPython := filepath.Join(dir, "bin", "python")
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return venvPython, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("create requirements cache: %w", err)
	}
	// Jobs that share a requirements file build its environment once.
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("lock requirements cache: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock requirements cache: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return venvPython, nil
	}
	// A half-built environment from an earlier crash is rebuilt from scratch.
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clear stale environment: %w", err)
	}
	if env == nil {
		env = os.Environ()
	}
	env = append(env[:len(env):len(env)], "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		return cmd
	}
	run := func(name string, args ...string) error {
		cmd := command(name, args...)
		var tail tailBuffer
		w := io.MultiWriter(out, &tail)
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%w: %s", err, tail.String())
		}
		return nil
	}
	// Without its own pip the environment builds in a fraction of the time;
	// the system's pip (visible through --system-site-packages) installs into
	// it all the same. Only when there is none does the venv get its own.
	if err := run(python, "-m", "venv", "--system-site-packages", "--without-pip", dir); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("create environment for %s (is python3-venv installed?): %w", reqFile, err)
	}
	if err := inheritVenv(command, python, venvPython); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("environment for %s: %w", reqFile, err)
	}
	if command(venvPython, "-m", "pip", "--version").Run() != nil {
		if err := run(venvPython, "-m", "ensurepip"); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("install pip into the environment for %s (install python3-pip): %w", reqFile, err)
		}
	}
	if err := run(venvPython, "-m", "pip", "install", "--no-input", "-r", reqFile); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("install %s: %w", reqFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644); err != nil {
		return "", fmt.Errorf("mark environment complete: %w", err)
	}
	return venvPython, nil
}

// inheritVenv makes the packages of python visible to the environment of
// venvPython when python is itself a virtual environment's interpreter: a
// venv made from it is based on the base interpreter, so
// --system-site-packages shows the system's packages but not that venv's.
// A .pth file in the new environment adds them after its own and before the
// system's, so what the requirements install still wins.
func inheritVenv(command func(string, ...string) *exec.Cmd, python, venvPython string) error {
	const parentPaths = `import site, sys
if sys.prefix != sys.base_prefix:
    print("\n".join(site.getsitepackages()))`
	out, err := command(python, "-c", parentPaths).Output()
	if err != nil {
		return fmt.Errorf("ask %s for its site-packages: %w", python, err)
	}
	paths := strings.TrimSpace(string(out))
	if paths == "" {
		return nil
	}
	out, err = command(venvPython, "-c", `import sysconfig; print(sysconfig.get_paths()["purelib"])`).Output()
	if err != nil {
		return fmt.Errorf("ask %s for its site-packages: %w", venvPython, err)
	}
	pth := filepath.Join(strings.TrimSpace(string(out)), "_sagebox_parent_venv.pth")
	if err := os.WriteFile(pth, []byte(paths+"\n"), 0o644); err != nil {
		return fmt.Errorf("link %s's packages: %w", python, err)
	}
	return nil
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		out = append(out, bytes.TrimSpace(line)...)
	}
	return out
}

// tailBuffer keeps the last few KiB written to it, for error messages.
type tailBuffer struct{ b []byte }

const tailMax = 2048

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = t.b[len(t.b)-tailMax:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.TrimSpace(string(t.b)) }
