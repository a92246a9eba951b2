package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/spf13/cobra"
)

// defaultEndpoint is where the CLI looks for a server when neither
// --endpoint nor SAGEBOX_ENDPOINT says otherwise.
const defaultEndpoint = "http://127.0.0.1:7070"

// clients are the AWS SDK clients the CLI talks to the server with: the CLI
// is just another client of the same API users call from boto3.
type clients struct {
	endpoint string
	sm       *sagemaker.Client
	rt       *sagemakerruntime.Client
	logs     *cloudwatchlogs.Client
	s3       *s3.Client
}

// addEndpointFlag registers --endpoint on cmd.
func addEndpointFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "endpoint", "", "sagebox server URL (default $SAGEBOX_ENDPOINT or "+defaultEndpoint+")")
}

func newClients(e *env, endpoint string) (*clients, error) {
	if endpoint == "" {
		endpoint = e.getenv("SAGEBOX_ENDPOINT")
	}
	if endpoint == "" {
		endpoint = defaultEndpoint
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	akid, secret := e.getenv("AWS_ACCESS_KEY_ID"), e.getenv("AWS_SECRET_ACCESS_KEY")
	if akid == "" || secret == "" {
		akid, secret = "sagebox", "sagebox"
	}
	region := e.getenv("AWS_REGION")
	if region == "" {
		region = e.getenv("AWS_DEFAULT_REGION")
	}
	if region == "" {
		region = "us-east-1"
	}
	httpClient, err := caBundleClient(e.getenv("AWS_CA_BUNDLE"))
	if err != nil {
		return nil, err
	}
	cfg := aws.Config{
		HTTPClient:   httpClient,
		Region:       region,
		Credentials:  credentials.NewStaticCredentialsProvider(akid, secret, e.getenv("AWS_SESSION_TOKEN")),
		BaseEndpoint: aws.String(endpoint),
		// The server is local: fail fast instead of retrying for minutes.
		RetryMaxAttempts: 2,
	}
	return &clients{
		endpoint: endpoint,
		sm:       sagemaker.NewFromConfig(cfg),
		// InvokeEndpoint is not retried: a retry would run the model again.
		rt:   sagemakerruntime.NewFromConfig(cfg, func(o *sagemakerruntime.Options) { o.RetryMaxAttempts = 1 }),
		logs: cloudwatchlogs.NewFromConfig(cfg),
		s3: s3.NewFromConfig(cfg, func(o *s3.Options) {
			o.UsePathStyle = true
			// Plain HTTP to loopback: checksums only where S3 requires them.
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}),
	}, nil
}

// caBundleClient is an HTTP client trusting the PEM certificates in path
// (AWS_CA_BUNDLE, as boto3 and the AWS CLI read it), for a server with
// --tls-cert; nil (the SDK's default client) when path is empty.
func caBundleClient(path string) (aws.HTTPClient, error) {
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("AWS_CA_BUNDLE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("AWS_CA_BUNDLE %s holds no PEM certificate", path)
	}
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}), nil
}

// unreachable turns a connection error into advice.
func (c *clients) explain(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if strings.Contains(err.Error(), "connection refused") {
		return fmt.Errorf("no sagebox server at %s (start one with `sagebox server`, or set SAGEBOX_ENDPOINT): %w", c.endpoint, err)
	}
	return err
}
