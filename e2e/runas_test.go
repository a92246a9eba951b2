package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// With --run-as-uids a job's script cannot open the server's meta.db or
// list the object store, and still completes and uploads its model.
func TestRunAsJobCannotReadDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	if os.Geteuid() != 0 {
		t.Skip("--run-as-uids needs root")
	}
	requireTool(t, "/usr/bin/python3")
	s := &server{t: t, addr: freeAddr(t), dataDir: t.TempDir(), extra: []string{"--run-as-uids", "62000-62009"}}
	s.URL = "http://" + s.addr
	// t.TempDir's parent is 0700; a job's uid must reach the data
	// directory, as it would under /var/lib.
	if err := os.Chmod(filepath.Dir(s.dataDir), 0o755); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.stop)

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "train.py"), `import os, sys
model = os.environ["SM_MODEL_DIR"]
data = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(model))))
failed = []
for name, f in [("meta.db", lambda: open(os.path.join(data, "meta.db"), "rb").read(1)),
                ("s3", lambda: os.listdir(os.path.join(data, "s3"))),
                ("logs", lambda: os.listdir(os.path.join(data, "logs")))] + [
                (n, lambda n=n: open(os.path.join(data, n), "rb").read(1))
                for n in ("meta.db-wal", "meta.db-shm", "job-key") if os.path.exists(os.path.join(data, n))]:
    try:
        f()
        failed.append(name)
    except PermissionError as e:
        print("denied:", e)
if failed or os.getuid() < 62000:
    sys.exit("readable as uid %d: %s" % (os.getuid(), failed))
open(os.path.join(model, "weights.txt"), "w").write("ok")
`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, code := s.sagebox(ctx, "train", filepath.Join(dir, "train.py"), "--name", "runas")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	mustContain(t, "job output", out+errOut, "denied: [Errno 13] Permission denied", "meta.db", "meta.db-wal")
	d := s.waitJob(ctx, "runas")
	if d.ModelArtifacts == nil {
		t.Fatal("no ModelArtifacts")
	}
	if got := tarEntries(t, s, aws.ToString(d.ModelArtifacts.S3ModelArtifacts))["weights.txt"]; got != "ok" {
		t.Errorf("model.tar.gz weights.txt = %q", got)
	}
}
