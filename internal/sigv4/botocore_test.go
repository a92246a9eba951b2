package sigv4

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// botocoreScript signs requests with botocore's own signers (SigV4Auth for
// JSON services, S3SigV4Auth for S3) and sends them with urllib, so the
// verifier is checked against an implementation it shares no code with.
const botocoreScript = `
import sys, urllib.request
from botocore.auth import SigV4Auth, S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

base = sys.argv[1]
creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
cases = [
    ("sagemaker", SigV4Auth, "POST", "/", b'{"TrainingJobName": "j"}'),
    ("sagemaker", SigV4Auth, "POST", "/endpoints/my-end%3Apoint/invocations?b=2&a=1&c=x%20y", b"[[1, 2]]"),
    ("logs", SigV4Auth, "POST", "/", b"{}"),
    ("s3", S3SigV4Auth, "PUT", "/bucket/dir/a%20b%2Bc%25d%C3%BC?partNumber=1&uploadId=u%2Bv", b"payload"),
    ("s3", S3SigV4Auth, "GET", "/bucket?list-type=2&prefix=a%2Fb&encoding-type=url", b""),
]
for service, auth, method, path, body in cases:
    req = AWSRequest(method=method, url=base + path, data=body,
                     headers={"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "SageMaker.Describe"})
    auth(creds, service, "us-west-2").add_auth(req)
    p = req.prepare()
    r = urllib.request.Request(p.url, data=p.body or None, headers=dict(p.headers), method=p.method)
    with urllib.request.urlopen(r) as resp:
        assert resp.status == 200, (service, path, resp.status)
        assert resp.headers["X-Service"] == service, resp.headers["X-Service"]
print("BOTOCORE OK")
`

func TestBotocoreSigner(t *testing.T) {
	py, err := exec.LookPath("/usr/bin/python3")
	if err == nil {
		err = exec.Command(py, "-c", "import botocore").Run()
	}
	if err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatalf("/usr/bin/python3 with botocore is required (SAGEBOX_STRICT_TOOLS=1): %v", err)
		}
		t.Skipf("/usr/bin/python3 with botocore not available: %v", err)
	}
	srv := verifyServer(t, NewVerifier(map[string]string{testCreds.AccessKeyID: testCreds.SecretAccessKey}, time.Now))
	script := filepath.Join(t.TempDir(), "sign.py")
	if err := os.WriteFile(script, []byte(botocoreScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script, srv.URL)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "BOTOCORE OK") {
		t.Fatalf("%v\n%s", err, out)
	}
}
