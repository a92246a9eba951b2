package invoke_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
)

// TestGoSDKRuntime: aws-sdk-go-v2's sagemakerruntime client (default
// retryer) against router (SigV4 on) + invoke: the members go out and
// come back, a model error is *types.ModelError with its members and is
// not retried, a missing endpoint is *types.ValidationError.
func TestGoSDKRuntime(t *testing.T) {
	st := newRuntimeStack(t)
	c := sagemakerruntime.NewFromConfig(aws.Config{
		Region:       "us-west-2",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint: aws.String(st.srv.URL),
	})
	ctx := context.Background()
	out, err := c.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
		EndpointName:     aws.String("boto-ep"),
		Body:             []byte("1,2,3"),
		ContentType:      aws.String("text/csv"),
		Accept:           aws.String("application/x-npy"),
		CustomAttributes: aws.String("go=1"),
		TargetVariant:    aws.String("AllTraffic"),
		InferenceId:      aws.String("go-inf"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(out.Body) != "1,2,3" || aws.ToString(out.ContentType) != "application/x-npy" ||
		aws.ToString(out.InvokedProductionVariant) != "AllTraffic" || aws.ToString(out.CustomAttributes) != "echo=go=1" {
		t.Errorf("output body %q content type %q variant %q custom %q", out.Body, aws.ToString(out.ContentType),
			aws.ToString(out.InvokedProductionVariant), aws.ToString(out.CustomAttributes))
	}
	if h := st.seen.Load(); h == nil || h.Get("X-Amzn-SageMaker-Inference-Id") != "go-inf" || h.Get("Content-Type") != "text/csv" {
		t.Errorf("instance saw %v", h)
	}

	_, err = c.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
		EndpointName: aws.String("boto-ep"), Body: []byte("x"), Accept: aws.String("fail-500"),
	})
	var me *types.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("model error: %T %v", err, err)
	}
	if aws.ToInt32(me.OriginalStatusCode) != 500 || aws.ToString(me.OriginalMessage) != "Traceback: boom" ||
		!strings.HasPrefix(aws.ToString(me.Message), `Received server error (500) from primary with message "Traceback: boom"`) ||
		!strings.HasSuffix(aws.ToString(me.LogStreamArn), ":log-group:/aws/sagemaker/Endpoints/boto-ep") {
		t.Errorf("ModelError %+v", me)
	}
	if n := st.failHits.Load(); n != 1 {
		t.Errorf("failing request reached the instance %d times, want 1", n)
	}

	_, err = c.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("gone"), Body: []byte("x")})
	var ve *types.ValidationError
	if !errors.As(err, &ve) || aws.ToString(ve.Message) != "Endpoint gone of account 123456789012 not found." {
		t.Errorf("missing endpoint: %T %v", err, err)
	}
}
