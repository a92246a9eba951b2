package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
)

// The tests here reproduce the security defects of the 2026-12-03
// reliability review (R1, R3, R11, R13) and check TLS with every client.

const (
	testAKID   = "AKIDSECURE"
	testSecret = "s3cr3t/with+chars"
)

// credsFile writes a mode-600 credentials file with the test key.
func credsFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(p, []byte("# sagebox keys\n"+testAKID+":"+testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startServerOpts starts `sagebox server` with extra environment and
// flags, scheme "http" or "https", and waits for health through client.
func startServerOpts(t *testing.T, env []string, scheme string, client *http.Client, extra ...string) *server {
	t.Helper()
	s := &server{t: t, addr: freeAddr(t), dataDir: t.TempDir(), extra: extra, log: &bytes.Buffer{}}
	s.URL = scheme + "://" + s.addr
	args := append([]string{"server", "--addr", s.addr, "--data-dir", s.dataDir, "--stop-grace", "5s"}, extra...)
	s.cmd = exec.Command(binary, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.Env = append(append(os.Environ(), "SAGEBOX_PYTHON=/usr/bin/python3"), env...)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.Get(s.URL + "/_sagebox/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server did not become healthy; log:\n%s", s.log)
	return nil
}

// signedEnv is awsEnv with the test key instead of test/test.
func (s *server) signedEnv() []string {
	return append(s.awsEnv(), "AWS_ACCESS_KEY_ID="+testAKID, "AWS_SECRET_ACCESS_KEY="+testSecret)
}

func (s *server) signedConfig() aws.Config {
	cfg := s.sdkConfig()
	cfg.Credentials = credentials.NewStaticCredentialsProvider(testAKID, testSecret, "")
	return cfg
}

// procStatus reads kB fields (VmRSS, VmHWM) of /proc/<pid>/status.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// forge sends a SageMaker call signed with a known key id and a made-up
// signature, then up to 64 MB of body (Content-Length length, or chunked
// when length < 0), and returns the status line of the answer.
func forge(addr string, length int64) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	now := time.Now().UTC()
	hdr := fmt.Sprintf("POST / HTTP/1.1\r\nHost: %s\r\nX-Amz-Date: %s\r\nX-Amz-Target: SageMaker.ListTrainingJobs\r\n"+
		"Content-Type: application/x-amz-json-1.1\r\n"+
		"Authorization: AWS4-HMAC-SHA256 Credential=%s/%s/us-east-1/sagemaker/aws4_request, SignedHeaders=host;x-amz-date, Signature=%s\r\n",
		addr, now.Format("20060102T150405Z"), testAKID, now.Format("20060102"), strings.Repeat("0", 64))
	if length < 0 {
		hdr += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		hdr += "Content-Length: " + strconv.FormatInt(length, 10) + "\r\n\r\n"
	}
	if _, err := io.WriteString(c, hdr); err != nil {
		return "", err
	}
	go func() { // the body, until the server hangs up
		chunk := bytes.Repeat([]byte("a"), 1<<20)
		total := int64(64 << 20)
		if length >= 0 && length < total {
			total = length
		}
		for sent := int64(0); sent < total; sent += int64(len(chunk)) {
			part := chunk[:min(int64(len(chunk)), total-sent)]
			if length < 0 {
				if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(part), part); err != nil {
					return
				}
			} else if _, err := c.Write(part); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// R1: with credentials on, a forged request costs the server at most the
// API's body cap (1 MiB), not the 64 MB it declares or streams. At commit
// 4489049, 24 concurrent forged 64 MB requests took the server to 3.3 GB.
func TestForgedUploadsStayCheap(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	s := startServerOpts(t, nil, "http", http.DefaultClient, "--credentials-file", credsFile(t))
	pid := s.cmd.Process.Pid
	before := procStatus(t, pid, "VmHWM")
	kinds := []struct {
		name   string
		length int64
		want   string // status code in the answer's status line
	}{
		{"declared 64 MB", 64 << 20, "413"},
		{"chunked, 64 MB streamed", -1, "413"},
		{"1 MiB, the cap: hashed, then refused", 1 << 20, "403"},
	}
	const concurrent = 24
	for _, k := range kinds {
		var wg sync.WaitGroup
		lines := make([]string, concurrent)
		errs := make([]error, concurrent)
		for i := range concurrent {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lines[i], errs[i] = forge(s.addr, k.length)
			}()
		}
		wg.Wait()
		for i := range concurrent {
			if errs[i] != nil || !strings.Contains(lines[i], " "+k.want+" ") {
				t.Errorf("%s #%d: answer %q, %v; want %s", k.name, i, lines[i], errs[i], k.want)
			}
		}
		t.Logf("%s ×%d: server VmHWM %d kB (VmRSS %d kB), %d kB at start", k.name, concurrent,
			procStatus(t, pid, "VmHWM"), procStatus(t, pid, "VmRSS"), before)
	}
	// 24 bodies of at most 1 MiB each in flight, with slice growth and GC
	// slack: well under 200 MB. Reading the declared 64 MB would be GBs.
	if grew := procStatus(t, pid, "VmHWM") - before; grew > 200<<10 {
		t.Errorf("the server's peak RSS grew by %d MB under forged uploads; want < 200 MB", grew>>10)
	}
	// And the server still serves a signed call.
	if _, err := sagemaker.NewFromConfig(s.signedConfig()).ListTrainingJobs(context.Background(), &sagemaker.ListTrainingJobsInput{}); err != nil {
		t.Errorf("signed call after the forged uploads: %v", err)
	}
}

// r11Script signs SageMaker calls with botocore's own signer, in the ways
// R11 found accepted, and prints each answer.
const r11Script = `
import json, os, urllib.request, urllib.error
from botocore.auth import SigV4Auth, S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
url, ak, sk = os.environ["SAGEBOX_URL"], os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
H = {"X-Amz-Target": "SageMaker.ListTrainingJobs", "Content-Type": "application/x-amz-json-1.1"}
def go(svc, region, secret=sk, body=b"{}", send=None, extra={}):
    r = AWSRequest(method="POST", url=url + "/", data=body, headers=dict(H, **extra))
    (S3SigV4Auth if svc == "s3" else SigV4Auth)(Credentials(ak, secret), svc, region).add_auth(r)
    req = urllib.request.Request(r.url, data=send or body, headers=dict(r.headers), method="POST")
    try:
        with urllib.request.urlopen(req) as resp:
            return "%d" % resp.status
    except urllib.error.HTTPError as e:
        return "%d %s %s" % (e.code, e.headers.get("x-amzn-ErrorType"), json.loads(e.read())["message"])
print(json.dumps({
    "control": go("sagemaker", "us-east-1"),
    "wrong secret": go("sagemaker", "us-east-1", secret="WRONG"),
    "region eu-west-1": go("sagemaker", "eu-west-1"),
    "service s3": go("s3", "us-east-1"),
    "service logs": go("logs", "us-east-1"),
    "unsigned payload": go("sagemaker", "us-east-1", extra={"X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD"}),
    "unsigned payload, body swapped": go("sagemaker", "us-east-1", body=b'{"MaxResults": 1}', send=b'{"MaxResults": 2}', extra={"X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD"}),
    "signed body swapped": go("sagemaker", "us-east-1", body=b'{"MaxResults": 1}', send=b'{"MaxResults": 2}'),
}))
`

// R11: the credential scope must name the server's region and the API
// addressed, and JSON bodies are always hashed. Real clients still pass.
func TestSigV4ScopeWithBotocore(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTool(t, "/usr/bin/python3", "-c", "import boto3")
	s := startServerOpts(t, nil, "http", http.DefaultClient, "--credentials-file", credsFile(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := s.pythonEnv(ctx, s.signedEnv(), r11Script)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]string{
		"control":                        "200",
		"wrong secret":                   "403 InvalidSignatureException",
		"region eu-west-1":               "403 InvalidSignatureException Credential should be scoped to a valid region.",
		"service s3":                     "403 InvalidSignatureException Credential should be scoped to correct service: 'sagemaker'.",
		"service logs":                   "403 InvalidSignatureException Credential should be scoped to correct service: 'sagemaker'.",
		"unsigned payload":               "403 InvalidSignatureException",
		"unsigned payload, body swapped": "403 InvalidSignatureException",
		"signed body swapped":            "403 InvalidSignatureException",
	}
	for k, w := range want {
		if !strings.HasPrefix(got[k], w) {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}

	// Every client path still works with auth on: boto3's SageMaker, Logs,
	// STS, IAM and S3 (streaming and presigned, V2 and V4) ...
	out, err = s.pythonEnv(ctx, s.signedEnv(), `
import os, urllib.request, boto3, botocore.config
url = os.environ["SAGEBOX_URL"]
c = lambda svc, **kw: boto3.client(svc, endpoint_url=url, region_name="us-east-1", **kw)
print("jobs", c("sagemaker").list_training_jobs()["TrainingJobSummaries"])
print("groups", c("logs").describe_log_groups()["logGroups"])
print("account", c("sts").get_caller_identity()["Account"])
print("role", c("iam").get_role(RoleName="SageMakerRole")["Role"]["Arn"])
s3 = c("s3")
s3.create_bucket(Bucket="bkt")
s3.put_object(Bucket="bkt", Key="k", Body=b"x" * (3 << 20))
s3.upload_fileobj(__import__("io").BytesIO(b"y" * (9 << 20)), "bkt", "multi")
print("sizes", s3.head_object(Bucket="bkt", Key="k")["ContentLength"], s3.head_object(Bucket="bkt", Key="multi")["ContentLength"])
for sv in ("s3", "s3v4"):
    u = c("s3", config=botocore.config.Config(signature_version=sv)).generate_presigned_url("get_object", Params={"Bucket": "bkt", "Key": "k"}, ExpiresIn=60)
    print("presigned", sv, len(urllib.request.urlopen(u).read()))
`)
	if err != nil {
		t.Fatalf("boto3 with auth on: %v\n%s", err, out)
	}
	mustContain(t, "boto3 output", out, "jobs []", "account 123456789012", "role arn:aws:iam::123456789012:role/SageMakerRole",
		fmt.Sprintf("sizes %d %d", 3<<20, 9<<20), fmt.Sprintf("presigned s3 %d", 3<<20), fmt.Sprintf("presigned s3v4 %d", 3<<20))
	// ... and the AWS CLI.
	file := filepath.Join(t.TempDir(), "blob")
	writeFile(t, file, strings.Repeat("z", 10<<20))
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "/usr/bin/aws", append([]string{"--endpoint-url", s.URL}, args...)...)
		cmd.Env = s.signedEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("aws %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if _, err := exec.LookPath("/usr/bin/aws"); err == nil {
		cli("s3", "cp", file, "s3://bkt/cli-blob")
		mustContain(t, "aws s3 ls", cli("s3", "ls", "s3://bkt/"), "cli-blob", strconv.Itoa(10<<20))
		mustContain(t, "aws sagemaker", cli("sagemaker", "list-training-jobs"), "TrainingJobSummaries")
	}
}

// pythonEnv runs a Python script with Debian's python3 and env.
func (s *server) pythonEnv(ctx context.Context, env []string, script string) (string, error) {
	s.t.Helper()
	f := filepath.Join(s.t.TempDir(), "script.py")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", f)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// countFDs is how many descriptors the process holds open.
func countFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func countDir(dir string) int {
	ents, _ := os.ReadDir(dir)
	return len(ents)
}

// R13: an upload that stops sending is dropped after --body-idle-timeout:
// its socket and its S3 temporary file are freed while the client still
// holds the connection open. One that sends slowly but steadily is not.
func TestStalledUploadsAreDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const idle = time.Second
	s := startServerOpts(t, nil, "http", http.DefaultClient, "--body-idle-timeout", idle.String())
	ctx := context.Background()
	if _, err := s.s3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	pid := s.cmd.Process.Pid
	tmp := filepath.Join(s.dataDir, "s3", "tmp")
	// Warm up what a burst of uploads opens for good (the stores' pools of
	// SQLite connections), so the count below measures only what stalled
	// uploads hold.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := aws.String(fmt.Sprintf("warm%d", i))
			s.s3().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: key, Body: strings.NewReader("w")})
			s.s3().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: key})
		}()
	}
	wg.Wait()
	fdsBefore := countFDs(t, pid)

	// A steady trickle: one byte every idle/2, 3 idle periods in all.
	steady := make(chan string, 1)
	go func() {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			steady <- err.Error()
			return
		}
		defer c.Close()
		const n = 6
		fmt.Fprintf(c, "PUT /bkt/steady HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", s.addr, n)
		for range n {
			time.Sleep(idle / 2)
			c.Write([]byte("s"))
		}
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		steady <- strings.TrimSpace(line)
	}()

	const stalled = 40
	conns := make([]net.Conn, 0, stalled)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range stalled {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "PUT /bkt/slow%d HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000000\r\n\r\n%s", i, s.addr, strings.Repeat("x", 1000))
	}
	// Each stalled upload first holds a temporary file ...
	deadline := time.Now().Add(idle / 2)
	held := 0
	for time.Now().Before(deadline) && held < stalled {
		held = countDir(tmp)
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d stalled uploads: %d temporary files, %d fds (%d before)", stalled, held, countFDs(t, pid), fdsBefore)
	if held == 0 {
		t.Fatalf("no stalled upload reached the object store; the test exercises nothing")
	}
	// ... and gives everything back about idle later, though the client
	// never closes.
	deadline = time.Now().Add(10 * idle)
	for time.Now().Before(deadline) && (countDir(tmp) > 0 || countFDs(t, pid) > fdsBefore+2) {
		time.Sleep(50 * time.Millisecond)
	}
	if n, fds := countDir(tmp), countFDs(t, pid); n > 0 || fds > fdsBefore+2 {
		t.Fatalf("10 idle periods after the stall: %d temporary files, %d fds (%d before)", n, fds, fdsBefore)
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("stalled connection %d not closed by the server: %v", i, err)
		}
	}
	if line := <-steady; !strings.Contains(line, " 200 ") {
		t.Errorf("a slow but steady upload answered %q, want 200", line)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and localhost
// (its own CA) and its key, and returns their paths and a pool trusting it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sagebox test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// --tls-cert/--tls-key serve HTTPS that boto3 (verify=), the AWS CLI
// (--ca-bundle) and aws-sdk-go-v2 (RootCAs) accept, with auth on.
func TestTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	certFile, keyFile, pool := selfSigned(t)
	httpsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	s := startServerOpts(t, nil, "https", httpsClient,
		"--tls-cert", certFile, "--tls-key", keyFile, "--credentials-file", credsFile(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// aws-sdk-go-v2: SageMaker and an S3 upload over HTTPS.
	cfg := s.signedConfig()
	cfg.HTTPClient = httpsClient
	if _, err := sagemaker.NewFromConfig(cfg).ListTrainingJobs(ctx, &sagemaker.ListTrainingJobsInput{}); err != nil {
		t.Fatalf("Go SDK over HTTPS: %v", err)
	}
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("tls")}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("g"), 5<<20)
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("tls"), Key: aws.String("go"), Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("Go SDK PutObject over HTTPS: %v", err)
	}
	// Plain HTTP on the TLS port gets nothing done.
	if resp, err := http.Get("http://" + s.addr + "/_sagebox/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("plain HTTP to the TLS port answered 200")
		}
	}

	// The sagebox CLI reads AWS_CA_BUNDLE, as boto3 and the AWS CLI do.
	cmd := exec.CommandContext(ctx, binary, "jobs", "ls")
	cmd.Env = append(s.signedEnv(), "AWS_CA_BUNDLE="+certFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sagebox jobs ls over HTTPS: %v\n%s", err, out)
	}

	requireTool(t, "/usr/bin/python3", "-c", "import boto3")
	out, err := s.pythonEnv(ctx, append(s.signedEnv(), "CA="+certFile), `
import os, boto3
url, ca = os.environ["SAGEBOX_URL"], os.environ["CA"]
assert url.startswith("https://"), url
s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", verify=ca)
s3.put_object(Bucket="tls", Key="py", Body=b"p" * (2 << 20))
print("objects", sorted(o["Key"] for o in s3.list_objects_v2(Bucket="tls")["Contents"]))
print("jobs", boto3.client("sagemaker", endpoint_url=url, region_name="us-east-1", verify=ca).list_training_jobs()["TrainingJobSummaries"])
try:
    boto3.client("s3", endpoint_url=url, region_name="us-east-1").list_buckets()
    print("unverified: accepted")
except Exception as e:
    print("unverified:", type(e).__name__)
`)
	if err != nil {
		t.Fatalf("boto3 over HTTPS: %v\n%s", err, out)
	}
	mustContain(t, "boto3 over HTTPS", out, "objects ['go', 'py']", "jobs []", "unverified: SSLError")

	requireTool(t, "/usr/bin/aws")
	file := filepath.Join(t.TempDir(), "blob")
	writeFile(t, file, strings.Repeat("c", 9<<20))
	for _, args := range [][]string{
		{"s3", "cp", file, "s3://tls/cli"},
		{"s3api", "head-object", "--bucket", "tls", "--key", "cli"},
		{"sagemaker", "list-training-jobs"},
	} {
		cmd := exec.CommandContext(ctx, "/usr/bin/aws", append([]string{"--endpoint-url", s.URL, "--ca-bundle", certFile}, args...)...)
		cmd.Env = s.signedEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("aws %v over HTTPS: %v\n%s", args, err, out)
		}
		if args[1] == "head-object" {
			mustContain(t, "head-object", string(out), strconv.Itoa(9<<20))
		}
	}
}

// R3: no SAGEBOX_* variable of the server, SAGEBOX_CREDENTIALS above all,
// reaches a training script; R4: with auth on, the script's own key (not
// the dummy one) opens sagebox's S3.
func TestJobSeesNoServerSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	requireTool(t, "/usr/bin/python3", "-c", "import boto3")
	s := startServerOpts(t, []string{"SAGEBOX_CREDENTIALS=" + testAKID + ":" + testSecret, "SAGEBOX_SOMETHING=server-only"}, "http", http.DefaultClient)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := s.pythonEnv(ctx, s.signedEnv(), `
import io, json, os, tarfile, time, boto3
url = os.environ["SAGEBOX_URL"]
c = lambda svc: boto3.client(svc, endpoint_url=url, region_name="us-east-1")
sm, s3, logs = c("sagemaker"), c("s3"), c("logs")
src = b'''import os
print("SAGEBOX_VARS=" + ",".join(sorted(k for k in os.environ if k.startswith("SAGEBOX_"))))
print("LEAK=" + str(any("`+testSecret+`" in v for v in os.environ.values())))
# R4: the job's own key opens sagebox's S3.
import boto3
print("KEY=" + os.environ["AWS_ACCESS_KEY_ID"])
try:
    print("S3=" + ",".join(b["Name"] for b in boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).list_buckets()["Buckets"]))
except Exception as e:
    print("S3 refused:", e)
'''
b = io.BytesIO()
with tarfile.open(fileobj=b, mode="w:gz") as t:
    i = tarfile.TarInfo("train.py"); i.size = len(src); t.addfile(i, io.BytesIO(src))
s3.create_bucket(Bucket="r3-bkt")
s3.put_object(Bucket="r3-bkt", Key="src.tar.gz", Body=b.getvalue())
sm.create_training_job(TrainingJobName="envleak", RoleArn="arn:aws:iam::123456789012:role/R",
    AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
    OutputDataConfig={"S3OutputPath": "s3://r3-bkt/out"},
    ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 30},
    StoppingCondition={"MaxRuntimeInSeconds": 600},
    HyperParameters={"sagemaker_program": '"train.py"', "sagemaker_submit_directory": '"s3://r3-bkt/src.tar.gz"'})
for _ in range(400):
    d = sm.describe_training_job(TrainingJobName="envleak")
    if d["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"): break
    time.sleep(0.25)
print("STATUS", d["TrainingJobStatus"], d.get("FailureReason", ""))
for st in logs.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix="envleak/")["logStreams"]:
    for e in logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=st["logStreamName"], startFromHead=True)["events"]:
        print("LOG", e["message"])
`)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	mustContain(t, "job output", out, "STATUS Completed", "LOG SAGEBOX_VARS=\n", "LOG LEAK=False",
		"LOG KEY=SAGEBOXJOB-envleak\n", "LOG S3=r3-bkt\n")
}
