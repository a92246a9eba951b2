package training

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
)

// envSpy is a setup.py that appends its environment to file.
func envSpy(name, file string) string {
	return fmt.Sprintf(`import os
from setuptools import setup
with open(%q, "a") as f:
    f.write("".join(k + "=" + v + "\n" for k, v in sorted(os.environ.items())))
setup(name=%q, version="1.0", py_modules=[])
`, file, name)
}

// pip installing a job's requirements (a requirements.txt, or the source
// directory as a package) runs with the job's filtered environment: the
// server's AWS credentials and SAGEBOX_CREDENTIALS never reach a
// requirement's setup.py, the job's Environment does.
func TestRequirementsGetTheJobsEnvironment(t *testing.T) {
	skipShort(t)
	requirePython(t)
	t.Parallel()
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen-env.txt")
	dep := filepath.Join(dir, "envspy-dep")
	os.MkdirAll(dep, 0o755)
	os.WriteFile(filepath.Join(dep, "setup.py"), []byte(envSpy("envspy-dep", seen)), 0o644)
	server := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "PIP_NO_INDEX=1",
		"AWS_SECRET_ACCESS_KEY=server-aws-secret", "AWS_ACCESS_KEY_ID=AKIASERVER",
		"SAGEBOX_CREDENTIALS=AKIASERVER:server-sigv4-secret",
	}
	e := newEnv(t, func(c *Config) { c.Environ = server })
	jobs := map[string]map[string]string{
		// A script with a requirements.txt: pyruntime.InstallRequirements.
		"pip-requirements": {"train.py": "print('trained')\n", "requirements.txt": dep + "\n"},
		// The source directory as a package, with requirements: installPackage.
		"pip-package": {"train.py": "print('trained')\n", "requirements.txt": dep + "\n", "setup.py": envSpy("envspy-src", seen)},
	}
	for name, files := range jobs {
		hps := e.putSource(name, files)
		e.submit(newTestJob(name, hps, func(j *sagebox.TrainingJob) { j.Environment = map[string]string{"FROM_THE_JOB": "job-" + name} }))
	}
	for name := range jobs {
		if j := e.mem.waitEnd(t, name, 180*time.Second); j.TrainingJobStatus != sagebox.StatusCompleted {
			t.Fatalf("%s: %s %q\n%s", name, j.TrainingJobStatus, j.FailureReason, e.logs.text(name+"/"))
		}
	}
	got, err := os.ReadFile(seen)
	if err != nil {
		t.Fatalf("no setup.py ran: %v", err)
	}
	runs := strings.Count(string(got), "FROM_THE_JOB=")
	for name := range jobs {
		if !strings.Contains(string(got), "FROM_THE_JOB=job-"+name+"\n") {
			t.Errorf("%s: setup.py did not see the job's Environment", name)
		}
	}
	if runs < 3 { // the dependency twice, the package's own setup at least once
		t.Errorf("setup.py ran %d times with the job's environment, want 3 or more:\n%s", runs, got)
	}
	for _, secret := range []string{"server-aws-secret", "AKIASERVER", "server-sigv4-secret"} {
		if strings.Contains(string(got), secret) {
			t.Errorf("the server's %s reached a requirement's setup.py:\n%s", secret, got)
		}
	}
}
