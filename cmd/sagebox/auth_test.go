package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sagebox/sagebox/internal/router"
	"github.com/sagebox/sagebox/internal/sigv4"
)

func TestCredentialsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# team keys\n\nALICE:alice:secret\n  BOB:bobsecret  \n", 0o600)
	lines, err := readCredentialsFile(good)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := parseCredentials(nil, "", lines)
	if err != nil || len(creds) != 2 || creds["ALICE"] != "alice:secret" || creds["BOB"] != "bobsecret" {
		t.Fatalf("credentials = %v, %v", creds, err)
	}
	if _, err := readCredentialsFile(write("shared", "ALICE:s\n", 0o644)); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable credentials file was accepted (err %v)", err)
	}
	if _, err := readCredentialsFile(write("group", "ALICE:s\n", 0o640)); err == nil {
		t.Error("a group-readable credentials file was accepted")
	}
	_, err = readCredentialsFile(write("bad", "ALICE:s\nBOBsecret\n", 0o600))
	if err == nil || !strings.Contains(err.Error(), "line 2") || strings.Contains(err.Error(), "BOBsecret") {
		t.Errorf("malformed line: err = %v, want line 2 named and the line not echoed", err)
	}
}

// TestAuthenticatorRoutes runs the real router and verifier: each API
// demands its own service in the scope, the server's region, and its own
// body cap, which a signed request within it passes.
func TestAuthenticatorRoutes(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET"}
	v := sigv4.NewVerifier(map[string]string{"AKID": "SECRET"}, time.Now, sigv4.WithRegion("us-east-1"))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, "ok "+hexSum(b))
	})
	srv := httptest.NewServer(router.New(router.Routes{JSON: ok, Runtime: ok, S3: ok, Query: ok}, sigv4Authenticator{v}, nil))
	defer srv.Close()

	call := func(path, target, service, region, body string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		if target != "" {
			req.Header.Set("X-Amz-Target", target)
			req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		} else if path == "/" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hexSum([]byte(body)), service, region, time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("x-amzn-ErrorType") + string(b)
	}
	big := strings.Repeat("x", 2<<20)
	cases := []struct {
		name, path, target, service, region, body string
		status                                    int
		want                                      string
	}{
		{"sagemaker", "/", "SageMaker.ListTrainingJobs", "sagemaker", "us-east-1", "{}", 200, "ok " + hexSum([]byte("{}"))},
		{"logs", "/", "Logs_20140328.DescribeLogGroups", "logs", "us-east-1", "{}", 200, "ok"},
		{"logs scoped as sagemaker", "/", "Logs_20140328.DescribeLogGroups", "sagemaker", "us-east-1", "{}", 403, "correct service: 'logs'"},
		{"sagemaker scoped as s3", "/", "SageMaker.ListTrainingJobs", "s3", "us-east-1", "{}", 403, "correct service: 'sagemaker'"},
		{"other region", "/", "SageMaker.ListTrainingJobs", "sagemaker", "eu-west-1", "{}", 403, "valid region"},
		{"json over 1 MiB", "/", "SageMaker.ListTrainingJobs", "sagemaker", "us-east-1", big, 413, "RequestEntityTooLargeException"},
		{"invocation of 2 MiB", "/endpoints/e/invocations", "", "sagemaker", "us-east-1", big, 200, "ok " + hexSum([]byte(big))},
		{"sts", "/", "", "sts", "us-east-1", "Action=GetCallerIdentity&Version=2011-06-15", 200, "ok"},
		{"iam", "/", "", "iam", "us-east-1", "Action=GetRole&RoleName=r&Version=2010-05-08", 200, "ok"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := call(c.path, c.target, c.service, c.region, c.body)
			if status != c.status || !strings.Contains(body, c.want) {
				t.Fatalf("%d %.200s, want %d containing %q", status, body, c.status, c.want)
			}
		})
	}
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestJobKeys(t *testing.T) {
	dir := t.TempDir()
	k, err := loadJobKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "job-key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("job-key: %v, mode %v; want 0600", err, st.Mode())
	}
	id, secret := k.credentials("job-a")
	if got, ok := k.lookup(id); !ok || got != secret {
		t.Fatalf("lookup(%q) = %q, %v; want the job's secret", id, got, ok)
	}
	if _, other := k.credentials("job-b"); other == secret {
		t.Fatal("two jobs share a secret")
	}
	if _, ok := k.lookup("AKIDOTHER"); ok {
		t.Fatal("a key id that is no job's was given a secret")
	}
	// An endpoint's instances have a key of their own, also for an
	// endpoint named like a job.
	epID, epSecret := k.endpointCredentials("job-a")
	if got, ok := k.lookup(epID); !ok || got != epSecret || epSecret == secret || epID == id {
		t.Fatalf("endpoint key %q: lookup %q %v; job's %q", epID, got, ok, secret)
	}
	// The key survives a restart: a re-adopted job keeps working.
	again, err := loadJobKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := again.lookup(id); got != secret {
		t.Fatal("a new server start derives another secret for the same job")
	}
	// And the verifier accepts a job's signature.
	v := sigv4.NewVerifier(map[string]string{"AKID": "SECRET"}, time.Now, sigv4.WithKeySource(k.lookup))
	req := httptest.NewRequest("GET", "http://example.com/bucket", nil)
	req.Header.Set("X-Amz-Content-Sha256", sigv4.EmptySHA256)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}, req, sigv4.EmptySHA256, "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(req); err != nil {
		t.Fatalf("the job's own key is refused: %v", err)
	}
}
