package controlplane_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/sagebox/sagebox/internal/controlplane"
)

func TestIsJSONTarget(t *testing.T) {
	tests := []struct {
		method, target string
		want           bool
	}{
		{"POST", "SageMaker.CreateTrainingJob", true},
		{"POST", "Logs_20140328.GetLogEvents", true},
		{"POST", "SageMaker.Anything", true},
		{"GET", "SageMaker.CreateTrainingJob", false},
		{"POST", "", false},
		{"POST", "DynamoDB_20120810.GetItem", false},
		{"POST", "sagemaker.CreateTrainingJob", false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "/", nil)
			if tt.target != "" {
				r.Header.Set("X-Amz-Target", tt.target)
			}
			if got := controlplane.IsJSONTarget(r); got != tt.want {
				t.Errorf("IsJSONTarget = %v; want %v", got, tt.want)
			}
		})
	}
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestWireErrors covers the protocol-level failures: each is a JSON error
// with __type, message, the x-amzn-ErrorType header, the content type and a
// request id.
func TestWireErrors(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, target, body string
		status             int
		code, message      string
	}{
		{"unknown operation", "SageMaker.CreateHyperParameterTuningJob", "{}", 400, "UnknownOperationException", "not supported by sagebox"},
		{"unknown service op", "Logs_20140328.PutRetentionPolicy", "{}", 400, "UnknownOperationException", ""},
		{"malformed JSON", "SageMaker.DescribeTrainingJob", `{"TrainingJobName":`, 400, "SerializationException", "not valid JSON"},
		{"not an object", "SageMaker.DescribeTrainingJob", `["x"]`, 400, "SerializationException", "JSON object"},
		{"wrong member type", "SageMaker.ListTrainingJobs", `{"MaxResults":"ten"}`, 400, "SerializationException", "MaxResults"},
		{"wrong nested type", "SageMaker.CreateTrainingJob", `{"ResourceConfig":{"InstanceCount":1.5}}`, 400, "SerializationException", "InstanceCount"},
		{"bad timestamp", "SageMaker.ListTrainingJobs", `{"CreationTimeAfter":"yesterday"}`, 400, "SerializationException", ""},
		{"too large", "SageMaker.CreateTrainingJob", `{"x":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "RequestEntityTooLargeException", "1048576"},
		{"missing job", "SageMaker.DescribeTrainingJob", `{"TrainingJobName":"nope"}`, 400, "ValidationException", "Requested resource not found."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, tt.target, tt.body)
			if r.status != tt.status {
				t.Errorf("status = %d; want %d", r.status, tt.status)
			}
			code, msg := r.errorOf(t)
			if code != tt.code || !strings.Contains(msg, tt.message) {
				t.Errorf("error = %s %q; want %s containing %q", code, msg, tt.code, tt.message)
			}
			if got := r.header.Get("X-Amzn-ErrorType"); got != tt.code {
				t.Errorf("x-amzn-ErrorType = %q; want %q", got, tt.code)
			}
			checkWireHeaders(t, r)
		})
	}
}

func checkWireHeaders(t *testing.T, r response) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		t.Errorf("Content-Type = %q", ct)
	}
	if id := r.header.Get("X-Amzn-RequestId"); !uuidPattern.MatchString(id) {
		t.Errorf("x-amzn-RequestId = %q; want a uuid", id)
	}
}

func TestWireSuccess(t *testing.T) {
	e := newEnv(t)
	// An empty body is the empty object; unknown members are ignored.
	for _, body := range []string{"", "{}", `{"SomeFutureMember":{"x":[1,2]},"MaxResults":5}`} {
		r := e.call(t, "SageMaker.ListTrainingJobs", body)
		if r.status != http.StatusOK {
			t.Fatalf("body %q: status %d: %s", body, r.status, r.body)
		}
		checkWireHeaders(t, r)
		if got := string(r.body); got != `{"TrainingJobSummaries":[]}` {
			t.Errorf("body %q: got %s", body, got)
		}
	}
	r1 := e.call(t, "SageMaker.ListTrainingJobs", "{}")
	r2 := e.call(t, "SageMaker.ListTrainingJobs", "{}")
	if r1.header.Get("X-Amzn-RequestId") == r2.header.Get("X-Amzn-RequestId") {
		t.Error("two requests share a request id")
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t)
	req, _ := http.NewRequest(http.MethodPut, e.srv.URL+"/", bytes.NewReader([]byte("{}")))
	req.Header.Set("X-Amz-Target", "SageMaker.ListTrainingJobs")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("status = %d; want 405", resp.StatusCode)
	}
}

// TestInternalErrorNotLeaked: a runner failure during Stop is reported as
// InternalFailure without its text.
func TestInternalErrorNotLeaked(t *testing.T) {
	e := newEnv(t)
	e.runner.set(func(f *fakeRunner) {
		f.StopFunc = func(context.Context, string) error { return errors.New("secret path /var/lib/x") }
	})
	e.ok(t, "SageMaker.CreateTrainingJob", validJob("leak"))
	r := e.call(t, "SageMaker.StopTrainingJob", map[string]any{"TrainingJobName": "leak"})
	code, msg := r.errorOf(t)
	if r.status != 500 || code != "InternalFailure" {
		t.Fatalf("got %d %s; want 500 InternalFailure", r.status, code)
	}
	if strings.Contains(msg, "secret") {
		t.Errorf("internal error leaked: %q", msg)
	}
	checkWireHeaders(t, r)
}
