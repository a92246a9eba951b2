package controlplane_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/sagebox/sagebox"
)

const trainingGroup = "/aws/sagemaker/TrainingJobs"

// seedLogs writes n lines "line i" at timestamps 1000+i to each stream.
func (e *env) seedLogs(t *testing.T, group string, n int, streams ...string) {
	t.Helper()
	for _, s := range streams {
		var evs []sagebox.LogEvent
		for i := 0; i < n; i++ {
			evs = append(evs, sagebox.LogEvent{Timestamp: int64(1000 + i), Message: fmt.Sprintf("line %d", i)})
		}
		if err := e.logs.Append(context.Background(), group, s, evs); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLogsErrors(t *testing.T) {
	e := newEnv(t)
	e.seedLogs(t, trainingGroup, 1, "job/algo-1-1")
	tests := []struct {
		name, target string
		body         map[string]any
		code, msg    string
	}{
		{"streams of missing group", "DescribeLogStreams", map[string]any{"logGroupName": "/nope"},
			"ResourceNotFoundException", "The specified log group does not exist."},
		{"events of missing stream", "GetLogEvents", map[string]any{"logGroupName": trainingGroup, "logStreamName": "nope"},
			"ResourceNotFoundException", "The specified log stream does not exist."},
		{"filter missing group", "FilterLogEvents", map[string]any{"logGroupName": "/nope"},
			"ResourceNotFoundException", "The specified log group does not exist."},
		{"order by time with prefix", "DescribeLogStreams", map[string]any{"logGroupName": trainingGroup, "logStreamNamePrefix": "job/", "orderBy": "LastEventTime"},
			"InvalidParameterException", "Cannot order by LastEventTime with a logStreamNamePrefix."},
		{"limit 51", "DescribeLogStreams", map[string]any{"logGroupName": trainingGroup, "limit": 51},
			"InvalidParameterException", prefix1 + at("'51'", "limit", "Member must have value less than or equal to 50")},
		{"order enum", "DescribeLogStreams", map[string]any{"logGroupName": trainingGroup, "orderBy": "Name"},
			"InvalidParameterException", prefix1 + at("'Name'", "orderBy", "Member must satisfy enum value set: [LogStreamName, LastEventTime]")},
		{"group pattern", "DescribeLogStreams", map[string]any{"logGroupName": "bad group"},
			"InvalidParameterException", prefix1 + at("'bad group'", "logGroupName", `Member must satisfy regular expression pattern: [\.\-_/#A-Za-z0-9]+`)},
		{"no group", "DescribeLogStreams", map[string]any{},
			"InvalidParameterException", "Either logGroupName or logGroupIdentifier must be specified."},
		{"name and identifier", "DescribeLogStreams", map[string]any{"logGroupName": trainingGroup, "logGroupIdentifier": trainingGroup},
			"InvalidParameterException", "LogGroup name and LogGroup ARN are mutually exclusive parameters."},
		{"events limit 0", "GetLogEvents", map[string]any{"logGroupName": trainingGroup, "logStreamName": "job/algo-1-1", "limit": 0},
			"InvalidParameterException", prefix1 + at("'0'", "limit", "Member must have value greater than or equal to 1")},
		{"events stream missing", "GetLogEvents", map[string]any{"logGroupName": trainingGroup},
			"InvalidParameterException", prefix1 + at("null", "logStreamName", "Member must not be null")},
		{"events bad token", "GetLogEvents", map[string]any{"logGroupName": trainingGroup, "logStreamName": "job/algo-1-1", "nextToken": "x"},
			"InvalidParameterException", "The specified nextToken is invalid."},
		{"filter names and prefix", "FilterLogEvents", map[string]any{"logGroupName": trainingGroup, "logStreamNames": []string{"a"}, "logStreamNamePrefix": "a"},
			"InvalidParameterException", "logStreamNames and logStreamNamePrefix are mutually exclusive parameters."},
		{"filter JSON pattern", "FilterLogEvents", map[string]any{"logGroupName": trainingGroup, "filterPattern": `{ $.level = "x" }`},
			"InvalidParameterException", "Invalid filter pattern: JSON filter patterns ({ $.field ... }) are not supported by sagebox."},
		{"filter empty names", "FilterLogEvents", map[string]any{"logGroupName": trainingGroup, "logStreamNames": []string{}},
			"InvalidParameterException", prefix1 + at("'[]'", "logStreamNames", "Member must have length greater than or equal to 1")},
		{"filter bad token", "FilterLogEvents", map[string]any{"logGroupName": trainingGroup, "nextToken": "x"},
			"InvalidParameterException", "The specified nextToken is invalid."},
		{"group exists", "CreateLogGroup", map[string]any{"logGroupName": trainingGroup},
			"ResourceAlreadyExistsException", "The specified log group already exists"},
		{"stream exists", "CreateLogStream", map[string]any{"logGroupName": trainingGroup, "logStreamName": "job/algo-1-1"},
			"ResourceAlreadyExistsException", "The specified log stream already exists"},
		{"stream in missing group", "CreateLogStream", map[string]any{"logGroupName": "/nope", "logStreamName": "s"},
			"ResourceNotFoundException", "The specified log group does not exist."},
		{"put to missing stream", "PutLogEvents", map[string]any{"logGroupName": trainingGroup, "logStreamName": "nope", "logEvents": []any{map[string]any{"timestamp": 1, "message": "m"}}},
			"ResourceNotFoundException", "The specified log stream does not exist."},
		{"put out of order", "PutLogEvents", map[string]any{"logGroupName": trainingGroup, "logStreamName": "job/algo-1-1",
			"logEvents": []any{map[string]any{"timestamp": 2, "message": "b"}, map[string]any{"timestamp": 1, "message": "a"}}},
			"InvalidParameterException", "Log events in a single PutLogEvents request must be in chronological order."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, "Logs_20140328."+tt.target, tt.body)
			code, msg := r.errorOf(t)
			if r.status != 400 || code != tt.code || msg != tt.msg {
				t.Errorf("got %d %s %q\nwant 400 %s %q", r.status, code, msg, tt.code, tt.msg)
			}
			if r.header.Get("X-Amzn-ErrorType") != tt.code {
				t.Errorf("x-amzn-ErrorType = %q", r.header.Get("X-Amzn-ErrorType"))
			}
		})
	}
}

func TestDescribeLogStreams(t *testing.T) {
	e := newEnv(t)
	e.seedLogs(t, trainingGroup, 3, "job/algo-1-1", "job/algo-2-1", "other/algo-1-1")

	// The SDK's call: the job's prefix, by name, limit = instance count.
	out := e.ok(t, "Logs_20140328.DescribeLogStreams", map[string]any{
		"logGroupName": trainingGroup, "logStreamNamePrefix": "job/", "orderBy": "LogStreamName", "limit": 2,
	})
	if _, has := out["nextToken"]; has {
		t.Errorf("nextToken present although every stream fitted: %v", out)
	}
	streams := out["logStreams"].([]any)
	if len(streams) != 2 {
		t.Fatalf("streams = %v", streams)
	}
	want := map[string]any{
		"logStreamName":       "job/algo-1-1",
		"creationTime":        float64(startTime().UnixMilli()),
		"firstEventTimestamp": float64(1000),
		"lastEventTimestamp":  float64(1002),
		"lastIngestionTime":   float64(startTime().UnixMilli()),
		"arn":                 "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/TrainingJobs:log-stream:job/algo-1-1",
		"storedBytes":         float64(18),
	}
	if !reflect.DeepEqual(streams[0], want) {
		t.Errorf("stream = %v\nwant %v", streams[0], want)
	}

	// Paging with the token, by group ARN.
	arn := "arn:aws:logs:us-east-1:123456789012:log-group:" + trainingGroup + ":*"
	page := e.ok(t, "Logs_20140328.DescribeLogStreams", map[string]any{"logGroupIdentifier": arn, "limit": 2, "descending": true})
	if page["nextToken"] == nil || len(page["logStreams"].([]any)) != 2 {
		t.Fatalf("first page = %v", page)
	}
	rest := e.ok(t, "Logs_20140328.DescribeLogStreams", map[string]any{"logGroupIdentifier": arn, "limit": 2, "descending": true, "nextToken": page["nextToken"]})
	last := rest["logStreams"].([]any)
	if rest["nextToken"] != nil || len(last) != 1 || last[0].(map[string]any)["logStreamName"] != "job/algo-1-1" {
		t.Errorf("second page = %v", rest)
	}
}

// TestGetLogEventsSDKLoop does what logs_for_job does: startTime and
// startFromHead, following nextForwardToken until a page is empty; the
// token is stable at the end.
func TestGetLogEventsSDKLoop(t *testing.T) {
	e := newEnv(t)
	e.seedLogs(t, trainingGroup, 5, "job/algo-1-1")
	req := map[string]any{"logGroupName": trainingGroup, "logStreamName": "job/algo-1-1", "startTime": 0, "startFromHead": true, "limit": 2}
	var got []string
	var token any
	for i := 0; ; i++ {
		if i > 5 {
			t.Fatal("loop does not end")
		}
		if token != nil {
			req["nextToken"] = token
		}
		out := e.ok(t, "Logs_20140328.GetLogEvents", req)
		evs := out["events"].([]any)
		if len(evs) == 0 {
			if out["nextForwardToken"] != token {
				t.Errorf("empty page token %v; want the one sent, %v", out["nextForwardToken"], token)
			}
			break
		}
		for _, ev := range evs {
			m := ev.(map[string]any)
			got = append(got, m["message"].(string))
			if m["ingestionTime"] != float64(startTime().UnixMilli()) || m["timestamp"] == nil {
				t.Errorf("event = %v", m)
			}
		}
		token = out["nextForwardToken"]
	}
	if want := []string{"line 0", "line 1", "line 2", "line 3", "line 4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("read %v; want %v", got, want)
	}
	tail := e.ok(t, "Logs_20140328.GetLogEvents", map[string]any{"logGroupName": trainingGroup, "logStreamName": "job/algo-1-1", "limit": 1})
	if evs := tail["events"].([]any); len(evs) != 1 || evs[0].(map[string]any)["message"] != "line 4" {
		t.Errorf("tail = %v", tail)
	}
}

func TestFilterLogEvents(t *testing.T) {
	e := newEnv(t)
	e.seedLogs(t, trainingGroup, 3, "job/algo-1-1", "job/algo-2-1")
	out := e.ok(t, "Logs_20140328.FilterLogEvents", map[string]any{
		"logGroupName": trainingGroup, "logStreamNamePrefix": "job/", "filterPattern": "?\"line 0\" ?\"line 2\"", "interleaved": true,
		"startTime": 1000, "endTime": 1002,
	})
	var got []string
	for _, ev := range out["events"].([]any) {
		m := ev.(map[string]any)
		got = append(got, m["logStreamName"].(string)+" "+m["message"].(string))
		if m["eventId"] == "" || m["ingestionTime"] == nil {
			t.Errorf("event = %v", m)
		}
	}
	want := []string{"job/algo-1-1 line 0", "job/algo-2-1 line 0", "job/algo-1-1 line 2", "job/algo-2-1 line 2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %v; want %v", got, want)
	}
	if out["nextToken"] != nil {
		t.Errorf("nextToken = %v", out["nextToken"])
	}
	searched := []any{
		map[string]any{"logStreamName": "job/algo-1-1", "searchedCompletely": true},
		map[string]any{"logStreamName": "job/algo-2-1", "searchedCompletely": true},
	}
	if !reflect.DeepEqual(out["searchedLogStreams"], searched) {
		t.Errorf("searchedLogStreams = %v", out["searchedLogStreams"])
	}

	// Pagination with limit.
	req := map[string]any{"logGroupName": trainingGroup, "limit": 4}
	first := e.ok(t, "Logs_20140328.FilterLogEvents", req)
	req["nextToken"] = first["nextToken"]
	second := e.ok(t, "Logs_20140328.FilterLogEvents", req)
	if len(first["events"].([]any)) != 4 || len(second["events"].([]any)) != 2 || second["nextToken"] != nil {
		t.Errorf("pages of %d and %d events, token %v", len(first["events"].([]any)), len(second["events"].([]any)), second["nextToken"])
	}
}

// TestPutAndDescribeLogGroups covers the write operations a container can
// use to push logs itself.
func TestPutAndDescribeLogGroups(t *testing.T) {
	e := newEnv(t)
	e.ok(t, "Logs_20140328.CreateLogGroup", map[string]any{"logGroupName": "/custom"})
	e.ok(t, "Logs_20140328.CreateLogStream", map[string]any{"logGroupName": "/custom", "logStreamName": "s"})
	put := e.ok(t, "Logs_20140328.PutLogEvents", map[string]any{"logGroupName": "/custom", "logStreamName": "s",
		"logEvents": []any{map[string]any{"timestamp": 5, "message": "a"}, map[string]any{"timestamp": 6, "message": "b"}}})
	if put["nextSequenceToken"] == "" {
		t.Error("no nextSequenceToken")
	}
	evs := e.ok(t, "Logs_20140328.GetLogEvents", map[string]any{"logGroupName": "/custom", "logStreamName": "s", "startFromHead": true})
	if len(evs["events"].([]any)) != 2 {
		t.Errorf("events = %v", evs["events"])
	}
	groups := e.ok(t, "Logs_20140328.DescribeLogGroups", map[string]any{"logGroupNamePrefix": "/cus"})
	want := []any{map[string]any{
		"logGroupName": "/custom", "creationTime": float64(startTime().UnixMilli()), "metricFilterCount": float64(0),
		"arn": "arn:aws:logs:us-east-1:123456789012:log-group:/custom:*", "logGroupArn": "arn:aws:logs:us-east-1:123456789012:log-group:/custom",
		"storedBytes": float64(2),
	}}
	if !reflect.DeepEqual(groups["logGroups"], want) || groups["nextToken"] != nil {
		t.Errorf("groups = %v", groups)
	}
}
