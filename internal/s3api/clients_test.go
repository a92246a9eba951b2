package s3api

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox/internal/objectstore"
	"github.com/sagebox/sagebox/internal/sigv4"
)

// boto3Script exercises the calls SageMaker-era Python code makes. It
// exits non-zero with a traceback on the first surprise.
const boto3Script = `
import hashlib, os, sys, urllib.request
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

ep, workdir = sys.argv[1], sys.argv[2]
kw = dict(endpoint_url=ep, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
s3 = boto3.client("s3", **kw)
B = "boto-bucket"

def err(e):
    return e.response["Error"]["Code"], e.response["Error"]["Message"]

# The SageMaker SDK compares exactly these strings before CreateBucket.
try:
    s3.head_bucket(Bucket=B)
    raise SystemExit("head_bucket on a missing bucket succeeded")
except ClientError as e:
    assert err(e) == ("404", "Not Found"), err(e)

s3.create_bucket(Bucket=B)
try:
    s3.create_bucket(Bucket=B)
    raise SystemExit("second create_bucket succeeded")
except ClientError as e:
    assert err(e)[0] == "BucketAlreadyOwnedByYou", err(e)
s3.create_bucket(Bucket="boto-west", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
s3.head_bucket(Bucket=B)

res = boto3.resource("s3", **kw)
assert res.Bucket(B).creation_date is not None
assert res.Bucket("no-such-bucket-here").creation_date is None

key = "dir/a b+c%d \u00fc.txt"
body = b"hello from boto3"
r = s3.put_object(Bucket=B, Key=key, Body=body, ContentType="text/plain",
                  Metadata={"owner": "me"}, ServerSideEncryption="aws:kms")
assert r["ETag"] == '"%s"' % hashlib.md5(body).hexdigest(), r["ETag"]
g = s3.get_object(Bucket=B, Key=key)
assert g["Body"].read() == body
assert g["Metadata"] == {"owner": "me"}, g["Metadata"]
assert g["ContentType"] == "text/plain", g["ContentType"]
g = s3.get_object(Bucket=B, Key=key, Range="bytes=6-9")
assert g["Body"].read() == body[6:10]
assert g["ContentRange"] == "bytes 6-9/%d" % len(body), g["ContentRange"]
assert s3.head_object(Bucket=B, Key=key)["ContentLength"] == len(body)
try:
    s3.head_object(Bucket=B, Key="missing")
    raise SystemExit("head_object on a missing key succeeded")
except ClientError as e:
    assert err(e)[0] == "404", err(e)
try:
    s3.get_object(Bucket=B, Key="missing")
    raise SystemExit("get_object on a missing key succeeded")
except s3.exceptions.NoSuchKey:
    pass

for i in range(5):
    s3.put_object(Bucket=B, Key="list/%d" % i, Body=b"x")
l = s3.list_objects_v2(Bucket=B, Delimiter="/")
assert [c["Prefix"] for c in l["CommonPrefixes"]] == ["dir/", "list/"], l
l = s3.list_objects_v2(Bucket=B, Prefix="dir/")
assert [c["Key"] for c in l["Contents"]] == [key], l
want = ["list/%d" % i for i in range(5)]
for op in ("list_objects_v2", "list_objects"):
    keys = []
    for page in s3.get_paginator(op).paginate(Bucket=B, Prefix="list/", PaginationConfig={"PageSize": 2}):
        keys += [c["Key"] for c in page.get("Contents", [])]
    assert keys == want, (op, keys)

# 20 MB through s3transfer: multipart with 8 MB parts, then back.
data = os.urandom(20 * 1024 * 1024)
src = os.path.join(workdir, "big.bin")
with open(src, "wb") as f:
    f.write(data)
s3.upload_file(src, B, "big/model.tar.gz")
h = s3.head_object(Bucket=B, Key="big/model.tar.gz")
assert h["ContentLength"] == len(data), h
assert h["ETag"].endswith('-3"'), h["ETag"]
dst = os.path.join(workdir, "big.out")
s3.download_file(B, "big/model.tar.gz", dst)
with open(dst, "rb") as f:
    assert hashlib.sha256(f.read()).digest() == hashlib.sha256(data).digest(), "download differs"

s3.copy_object(Bucket=B, Key="copy.txt", CopySource={"Bucket": B, "Key": key})
assert s3.get_object(Bucket=B, Key="copy.txt")["Body"].read() == body

url = s3.generate_presigned_url("get_object", Params={"Bucket": B, "Key": key}, ExpiresIn=60)
assert urllib.request.urlopen(url).read() == body
s3v4 = boto3.client("s3", config=Config(signature_version="s3v4"), **kw)
url = s3v4.generate_presigned_url("get_object", Params={"Bucket": B, "Key": key}, ExpiresIn=60)
assert "X-Amz-Signature=" in url, url
assert urllib.request.urlopen(url).read() == body

mp = s3.create_multipart_upload(Bucket=B, Key="aborted")
s3.upload_part(Bucket=B, Key="aborted", UploadId=mp["UploadId"], PartNumber=1, Body=b"x")
assert [p["PartNumber"] for p in s3.list_parts(Bucket=B, Key="aborted", UploadId=mp["UploadId"])["Parts"]] == [1]
s3.abort_multipart_upload(Bucket=B, Key="aborted", UploadId=mp["UploadId"])
try:
    s3.list_parts(Bucket=B, Key="aborted", UploadId=mp["UploadId"])
    raise SystemExit("list_parts after abort succeeded")
except ClientError as e:
    assert err(e)[0] == "NoSuchUpload", err(e)

d = s3.delete_objects(Bucket=B, Delete={"Objects": [{"Key": k} for k in want + ["copy.txt"]]})
assert len(d["Deleted"]) == 6, d
s3.delete_object(Bucket=B, Key="never-there")
print("BOTO3 OK", boto3.__version__)
`

// clientEnv is the environment for external clients: test credentials and
// no user configuration.
func clientEnv(t *testing.T) []string {
	home := t.TempDir()
	env := []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_CONFIG_FILE=" + filepath.Join(home, "no-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "no-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_PAGER=",
	}
	return env
}

// pythonsWithBoto3 returns Debian's interpreter (required) and, when it is a
// different program that also has boto3, the python3 on PATH (optional:
// newer botocore sends CRC32 checksums by default).
func pythonsWithBoto3(t *testing.T) map[string]string {
	out := map[string]string{"debian": requireTool(t, "/usr/bin/python3", "-c", "import boto3")}
	if p, err := exec.LookPath("python3"); err == nil {
		if real, _ := filepath.EvalSymlinks(p); real != "/usr/bin/python3" && !strings.HasPrefix(real, "/usr/bin/python3") {
			if exec.Command(p, "-c", "import boto3").Run() == nil {
				out["path"] = p
			}
		}
	}
	return out
}

func TestBoto3(t *testing.T) {
	pythons := pythonsWithBoto3(t)
	script := filepath.Join(t.TempDir(), "boto3_client.py")
	if err := os.WriteFile(script, []byte(boto3Script), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, py := range pythons {
		for _, auth := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/open", true: "/sigv4"}[auth], func(t *testing.T) {
				cfg := Config{}
				if auth {
					cfg.Verifier = sigv4.NewVerifier(map[string]string{"test": "test"}, time.Now)
				}
				e := newEnvWith(t, cfg, false, objectstore.Options{NoSync: true})
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, py, script, e.srv.URL, t.TempDir())
				cmd.Env = clientEnv(t)
				out, err := cmd.CombinedOutput()
				if err != nil || !bytes.Contains(out, []byte("BOTO3 OK")) {
					t.Fatalf("%s: %v\n%s", py, err, out)
				}
				t.Logf("%s", bytes.TrimSpace(out))
			})
		}
	}
}

// TestAWSCLI drives Debian's AWS CLI v2 (every invocation costs seconds
// of interpreter start-up, so only the one that CI installs is used).
func TestAWSCLI(t *testing.T) {
	aws := requireTool(t, "/usr/bin/aws", "--version")
	{
		{
			e := newEnvWith(t, Config{Verifier: sigv4.NewVerifier(map[string]string{"test": "test"}, time.Now)}, false, objectstore.Options{NoSync: true})
			dir := t.TempDir()
			env := clientEnv(t)
			run := func(args ...string) (string, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, aws, append([]string{"--endpoint-url", e.srv.URL}, args...)...)
				cmd.Env = env
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			must := func(args ...string) string {
				t.Helper()
				out, err := run(args...)
				if err != nil {
					t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return out
			}
			small := []byte("hello from the aws cli\n")
			big := make([]byte, 12<<20+5)
			rand.Read(big)
			for name, b := range map[string][]byte{"small.txt": small, "big.bin": big} {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}

			must("s3", "mb", "s3://cli-bucket")
			must("s3", "cp", "small.txt", "s3://cli-bucket/dir/small file.txt")
			must("s3", "cp", "big.bin", "s3://cli-bucket/big.bin")
			assertStored(t, e, "cli-bucket", "dir/small file.txt", small)
			assertStored(t, e, "cli-bucket", "big.bin", big)
			st, _ := e.store.Stat(context.Background(), "cli-bucket", "big.bin")
			if st.PartsCount() < 2 {
				t.Errorf("12 MiB cp was not a multipart upload (parts: %d)", st.PartsCount())
			}

			ls := must("s3", "ls", "s3://cli-bucket/")
			if !strings.Contains(ls, "PRE dir/") || !strings.Contains(ls, "big.bin") {
				t.Fatalf("aws s3 ls:\n%s", ls)
			}
			if ls = must("s3", "ls", "s3://cli-bucket/dir/"); !strings.Contains(ls, "small file.txt") {
				t.Fatalf("aws s3 ls dir/:\n%s", ls)
			}

			must("s3", "cp", "s3://cli-bucket/big.bin", "big.out")
			if got, _ := os.ReadFile(filepath.Join(dir, "big.out")); !bytes.Equal(got, big) {
				t.Fatal("aws s3 cp download differs")
			}

			out := must("s3api", "put-object", "--bucket", "cli-bucket", "--key", "api/key+1.txt", "--body", "small.txt", "--content-type", "text/plain")
			if !strings.Contains(out, md5hex(string(small))) {
				t.Fatalf("put-object output lacks the ETag:\n%s", out)
			}
			out = must("s3api", "get-object", "--bucket", "cli-bucket", "--key", "api/key+1.txt", "got.txt")
			if got, _ := os.ReadFile(filepath.Join(dir, "got.txt")); !bytes.Equal(got, small) || !strings.Contains(out, "text/plain") {
				t.Fatalf("get-object: %q\n%s", got, out)
			}
			if out, err := run("s3api", "head-object", "--bucket", "cli-bucket", "--key", "missing"); err == nil ||
				!(strings.Contains(out, "404") || strings.Contains(out, "Not Found")) {
				t.Fatalf("head-object on a missing key: %v\n%s", err, out)
			}
			must("s3", "rm", "--recursive", "s3://cli-bucket/")
			must("s3", "rb", "s3://cli-bucket")
			if _, err := e.store.HeadBucket(context.Background(), "cli-bucket"); err == nil {
				t.Fatal("bucket still there after aws s3 rb")
			}
		}
	}
}
