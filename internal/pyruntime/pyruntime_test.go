package pyruntime

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

func TestUnpackIsStableAndAtomic(t *testing.T) {
	fsys := fstest.MapFS{
		"sagebox_runtime/__init__.py":       {Data: []byte("X = 1\n")},
		"sagebox_runtime/__main__.py":       {Data: []byte("print('hi')\n")},
		"sagebox_runtime/__pycache__/x.pyc": {Data: []byte("junk")},
	}
	root := t.TempDir()
	var wg sync.WaitGroup
	dirs := make([]string, 8)
	errs := make([]error, 8)
	for i := range dirs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			dirs[i], errs[i] = unpack(fsys, root)
		}(i)
	}
	wg.Wait()
	for i := range dirs {
		if errs[i] != nil {
			t.Fatalf("unpack %d: %v", i, errs[i])
		}
		if dirs[i] != dirs[0] {
			t.Fatalf("unpack gave %s and %s for the same contents", dirs[0], dirs[i])
		}
	}
	if b, err := os.ReadFile(filepath.Join(dirs[0], "sagebox_runtime", "__init__.py")); err != nil || string(b) != "X = 1\n" {
		t.Fatalf("__init__.py = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "sagebox_runtime", "__pycache__")); err == nil {
		t.Errorf("__pycache__ was unpacked")
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 {
		t.Errorf("root has %d entries, want only the runtime dir (no leftover temp dirs)", len(entries))
	}
	fsys["sagebox_runtime/__init__.py"] = &fstest.MapFile{Data: []byte("X = 2\n")}
	other, err := unpack(fsys, root)
	if err != nil || other == dirs[0] {
		t.Fatalf("changed contents must unpack to a new dir: %s vs %s (%v)", other, dirs[0], err)
	}
}

func TestUnpackEmbedded(t *testing.T) {
	dir, err := Unpack(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sagebox_runtime", "__init__.py")); err != nil {
		t.Fatalf("embedded package lacks __init__.py (is the embed missing all:?): %v", err)
	}
}

func TestFind(t *testing.T) {
	ctx := context.Background()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	t.Run("SAGEBOX_PYTHON wins", func(t *testing.T) {
		sh, err := exec.LookPath("python3")
		if err != nil {
			t.Skip("no python3")
		}
		got, err := Find(ctx, env(map[string]string{"SAGEBOX_PYTHON": sh}))
		if err != nil || got.Source != "SAGEBOX_PYTHON" || got.Path != sh {
			t.Fatalf("Find = %+v, %v", got, err)
		}
	})
	t.Run("SAGEBOX_PYTHON missing is an error", func(t *testing.T) {
		_, err := Find(ctx, env(map[string]string{"SAGEBOX_PYTHON": "/nonexistent/python"}))
		if err == nil || !strings.Contains(err.Error(), "SAGEBOX_PYTHON") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("skips interpreters without torch", func(t *testing.T) {
		// A fake python3 on PATH that cannot import torch must be passed over.
		dir := t.TempDir()
		fake := filepath.Join(dir, "python3")
		if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := Find(ctx, env(map[string]string{"PATH": dir}))
		if exec.Command("/usr/bin/python3", "-c", "import torch").Run() == nil {
			if err != nil || got.Path != "/usr/bin/python3" {
				t.Fatalf("Find = %+v, %v; want /usr/bin/python3", got, err)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), "No module named torch") {
			t.Fatalf("err = %v, want the reason each candidate failed", err)
		}
	})
}

func TestInstallRequirementsOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("creates a virtual environment")
	}
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import venv, ensurepip, numpy").Run() != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatal("python3-venv and python3-numpy are required")
		}
		t.Skip("python3-venv or numpy missing")
	}
	ctx := context.Background()
	dir := t.TempDir()
	req := filepath.Join(dir, "requirements.txt")
	os.WriteFile(req, []byte("# already installed system-wide, so no network is needed\nnumpy\n"), 0o644)
	cache := filepath.Join(dir, "venvs")
	var log strings.Builder
	venvPy, err := InstallRequirements(ctx, py, req, cache, nil, &log)
	if err != nil {
		t.Fatalf("install: %v\n%s", err, log.String())
	}
	if out, err := exec.Command(venvPy, "-c", "import numpy; print('ok')").CombinedOutput(); err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("venv cannot see system numpy: %v %s", err, out)
	}
	again, err := InstallRequirements(ctx, py, req, cache, nil, &log)
	if err != nil || again != venvPy {
		t.Fatalf("second install = %s, %v; want the cached %s", again, err, venvPy)
	}

	t.Setenv("PIP_RETRIES", "0") // no network here: fail fast
	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("sagebox-no-such-package-xyz==9.9\n"), 0o644)
	_, err = InstallRequirements(ctx, py, bad, cache, nil, &log)
	if err == nil || !strings.Contains(err.Error(), "sagebox-no-such-package-xyz") {
		t.Fatalf("uninstallable requirement: err = %v", err)
	}
	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, []byte("# nothing\n\n"), 0o644)
	if got, err := InstallRequirements(ctx, py, empty, cache, nil, &log); err != nil || got != py {
		t.Fatalf("empty requirements = %s, %v; want the interpreter itself", got, err)
	}
}

// An interpreter that is itself a virtual environment's (a user's venv with
// their own packages) keeps those packages in the requirements environment,
// for imports and for pip, which then need not download them.
func TestInstallRequirementsFromAVenv(t *testing.T) {
	if testing.Short() {
		t.Skip("creates virtual environments")
	}
	if exec.Command("/usr/bin/python3", "-c", "import venv, numpy").Run() != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatal("python3-venv and python3-numpy are required")
		}
		t.Skip("python3-venv or numpy missing")
	}
	ctx := context.Background()
	dir := t.TempDir()
	parent := filepath.Join(dir, "user-venv")
	if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", parent).CombinedOutput(); err != nil {
		t.Fatalf("make the user's venv: %v %s", err, out)
	}
	parentPy := filepath.Join(parent, "bin", "python")
	out, err := exec.Command(parentPy, "-c", `import sysconfig; print(sysconfig.get_paths()["purelib"])`).Output()
	if err != nil {
		t.Fatal(err)
	}
	site := strings.TrimSpace(string(out))
	// A package installed in the user's venv only, with its metadata.
	os.WriteFile(filepath.Join(site, "sbx_user_only.py"), []byte("VALUE = 42\n"), 0o644)
	meta := filepath.Join(site, "sbx_user_only-1.0.dist-info")
	os.MkdirAll(meta, 0o755)
	os.WriteFile(filepath.Join(meta, "METADATA"), []byte("Metadata-Version: 2.1\nName: sbx-user-only\nVersion: 1.0\n"), 0o644)
	os.WriteFile(filepath.Join(meta, "RECORD"), nil, 0o644)

	t.Setenv("PIP_RETRIES", "0") // no network here: what is not found fails fast
	req := filepath.Join(dir, "requirements.txt")
	os.WriteFile(req, []byte("sbx-user-only==1.0\nnumpy\n"), 0o644)
	var log strings.Builder
	venvPy, err := InstallRequirements(ctx, parentPy, req, filepath.Join(dir, "venvs"), nil, &log)
	if err != nil {
		t.Fatalf("install: %v\n%s", err, log.String())
	}
	out, err = exec.Command(venvPy, "-c", "import sbx_user_only, numpy; print(sbx_user_only.VALUE)").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "42" {
		t.Fatalf("the environment does not see the user's venv and the system: %v %s", err, out)
	}
}

func TestPythonPath(t *testing.T) {
	if got := PythonPath("/old", "/a", "", "/b"); got != "/a:/b:/old" {
		t.Errorf("PythonPath = %q", got)
	}
	if got := PythonPath("", "/a"); got != "/a" {
		t.Errorf("PythonPath = %q", got)
	}
}

// pip, and the setup.py of a requirement it builds, get exactly the
// environment the caller passes (a training job passes its filtered one),
// not this process's: the server's credentials must not reach them.
func TestInstallRequirementsGetsOnlyTheGivenEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("creates a virtual environment")
	}
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import venv, setuptools").Run() != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatal("python3-venv and python3-setuptools are required")
		}
		t.Skip("python3-venv or setuptools missing")
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "server-secret")
	t.Setenv("SAGEBOX_CREDENTIALS", "AKIA:server-sigv4-secret")
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen-env.txt")
	pkg := filepath.Join(dir, "envspy")
	os.MkdirAll(pkg, 0o755)
	os.WriteFile(filepath.Join(pkg, "setup.py"), []byte(fmt.Sprintf(`import os
from setuptools import setup
with open(%q, "a") as f:
    for k, v in sorted(os.environ.items()):
        f.write(k + "=" + v + "\n")
setup(name="envspy", version="1.0", py_modules=[])
`, seen)), 0o644)
	req := filepath.Join(dir, "requirements.txt")
	os.WriteFile(req, []byte(pkg+"\n"), 0o644)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "PIP_NO_INDEX=1", "JOB_ONLY=from-the-job"}
	var log strings.Builder
	if _, err := InstallRequirements(context.Background(), py, req, filepath.Join(dir, "venvs"), env, &log); err != nil {
		t.Fatalf("install: %v\n%s", err, log.String())
	}
	got, err := os.ReadFile(seen)
	if err != nil {
		t.Fatalf("the requirement's setup.py never ran: %v\n%s", err, log.String())
	}
	if !strings.Contains(string(got), "JOB_ONLY=from-the-job") {
		t.Errorf("setup.py did not get the environment passed in:\n%s", got)
	}
	for _, secret := range []string{"server-secret", "server-sigv4-secret"} {
		if strings.Contains(string(got), secret) {
			t.Errorf("the server's %s reached a requirement's setup.py:\n%s", secret, got)
		}
	}
}
