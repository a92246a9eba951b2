package sts

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssts "github.com/aws/aws-sdk-go-v2/service/sts"
)

func TestGetCallerIdentityWithGoSDK(t *testing.T) {
	srv := httptest.NewServer(New(Config{AccountID: "111122223333"}))
	defer srv.Close()
	c := awssts.NewFromConfig(aws.Config{
		Region: "us-west-2", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
	})
	out, err := c.GetCallerIdentity(context.Background(), &awssts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.Account) != "111122223333" || !strings.HasPrefix(aws.ToString(out.Arn), "arn:aws:iam::111122223333:") {
		t.Errorf("identity = %+v", out)
	}
}

// The SageMaker SDK's two identity calls, made with Debian's boto3.
func TestBoto3(t *testing.T) {
	if exec.Command("/usr/bin/python3", "-c", "import boto3").Run() != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatal("python3-boto3 is required")
		}
		t.Skip("boto3 missing")
	}
	srv := httptest.NewServer(New(Config{AccountID: "111122223333"}))
	defer srv.Close()
	script := filepath.Join(t.TempDir(), "c.py")
	os.WriteFile(script, []byte(`import boto3, sys
s = boto3.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="us-west-2")
print(s.client("sts", endpoint_url=sys.argv[1]).get_caller_identity()["Account"])
print(s.client("iam", endpoint_url=sys.argv[1]).get_role(RoleName="SageMakerRole")["Role"]["Arn"])
try:
    s.client("iam", endpoint_url=sys.argv[1]).list_users()
except Exception as e:
    print("error", e)
`), 0o644)
	out, err := exec.Command("/usr/bin/python3", script, srv.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"111122223333\n", "arn:aws:iam::111122223333:role/SageMakerRole\n", "InvalidAction", "ListUsers"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
