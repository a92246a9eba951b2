package controlplane_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const jobArn = "arn:aws:sagemaker:us-east-1:123456789012:training-job/tagged-job"

func tagList(n int) []any {
	var tags []any
	for i := 0; i < n; i++ {
		tags = append(tags, map[string]any{"Key": fmt.Sprint("k", i), "Value": "v"})
	}
	return tags
}

// TestTagsRoundTrip: Tags given at CreateTrainingJob are kept and listed in
// order; AddTags overwrites and appends; DeleteTags removes; Describe does
// not echo them (ListTags has them, as on AWS).
func TestTagsRoundTrip(t *testing.T) {
	e := newEnv(t)
	req := validJob("Tagged-Job")
	req["Tags"] = []any{map[string]any{"Key": "team", "Value": "ml"}, map[string]any{"Key": "stage", "Value": "dev"}}
	e.ok(t, "SageMaker.CreateTrainingJob", req)

	list := func(arn string) []any {
		t.Helper()
		out := e.ok(t, "SageMaker.ListTags", map[string]any{"ResourceArn": arn})
		tags, ok := out["Tags"].([]any)
		if !ok {
			t.Fatalf("ListTags without a Tags list: %v", out)
		}
		return tags
	}
	tag := func(k, v string) any { return map[string]any{"Key": k, "Value": v} }
	if got, want := list(jobArn), []any{tag("team", "ml"), tag("stage", "dev")}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListTags after create = %v, want %v", got, want)
	}
	if d := e.ok(t, "SageMaker.DescribeTrainingJob", map[string]any{"TrainingJobName": "Tagged-Job"}); d["Tags"] != nil {
		t.Errorf("Describe echoes Tags: %v", d["Tags"])
	}

	out := e.ok(t, "SageMaker.AddTags", map[string]any{"ResourceArn": jobArn, "Tags": []any{tag("stage", "prod"), tag("owner", "")}})
	if want := []any{tag("stage", "prod"), tag("owner", "")}; !reflect.DeepEqual(out["Tags"], want) {
		t.Errorf("AddTags answered %v, want the tags it was given", out)
	}
	if got, want := list(jobArn), []any{tag("team", "ml"), tag("stage", "prod"), tag("owner", "")}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListTags after AddTags = %v, want %v", got, want)
	}
	// The ARN's name part is matched ignoring case, as job names are.
	if got := list(strings.Replace(jobArn, "tagged-job", "Tagged-Job", 1)); len(got) != 3 {
		t.Errorf("ListTags with the name's own case = %v", got)
	}
	e.ok(t, "SageMaker.DeleteTags", map[string]any{"ResourceArn": jobArn, "TagKeys": []any{"team", "never-set"}})
	if got, want := list(jobArn), []any{tag("stage", "prod"), tag("owner", "")}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListTags after DeleteTags = %v, want %v", got, want)
	}

	// An untagged job lists an empty list, not an absent one.
	e.ok(t, "SageMaker.CreateTrainingJob", validJob("plain"))
	r := e.call(t, "SageMaker.ListTags", map[string]any{"ResourceArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/plain"})
	if r.status != 200 || string(r.body) != `{"Tags":[]}` {
		t.Errorf("ListTags of an untagged job = %d %s, want 200 {\"Tags\":[]}", r.status, r.body)
	}

	// 50 in all is the limit: 48 more fit (2 there), 49 do not, and a
	// refused AddTags changes nothing.
	r = e.call(t, "SageMaker.AddTags", map[string]any{"ResourceArn": jobArn, "Tags": tagList(49)})
	if code, msg := r.errorOf(t); code != "ValidationException" || !strings.Contains(msg, "at most 50 tags") {
		t.Errorf("AddTags past 50 in all = %s %q", code, msg)
	}
	if got := list(jobArn); len(got) != 2 {
		t.Errorf("a refused AddTags changed the tags: %v", got)
	}
	e.ok(t, "SageMaker.AddTags", map[string]any{"ResourceArn": jobArn, "Tags": tagList(48)})
	if got := list(jobArn); len(got) != 50 {
		t.Errorf("after filling up: %d tags, want 50", len(got))
	}
}

// TestTagsValidation: every refusal of the three tag operations, worded as
// AWS words it.
func TestTagsValidation(t *testing.T) {
	e := newEnv(t)
	e.ok(t, "SageMaker.CreateTrainingJob", validJob("Tagged-Job"))
	arnPattern := "Member must satisfy regular expression pattern: arn:aws[a-z-]*:sagemaker:[a-z0-9-]*:[0-9]{12}:.+"
	tagPatternMsg := `Member must satisfy regular expression pattern: ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$`
	missing := "arn:aws:sagemaker:us-east-1:123456789012:training-job/nobody"
	tests := []struct {
		name, op string
		body     map[string]any
		code     string
		msg      string
	}{
		{"list: arn missing", "ListTags", map[string]any{}, "ValidationException", prefix1 + at("null", "resourceArn", "Member must not be null")},
		{"list: bad arn", "ListTags", map[string]any{"ResourceArn": "training-job/x"}, "ValidationException",
			prefix1 + at("'training-job/x'", "resourceArn", arnPattern)},
		{"list: arn too long", "ListTags", map[string]any{"ResourceArn": jobArn + strings.Repeat("x", 200)}, "ValidationException",
			prefix1 + at("'"+jobArn+strings.Repeat("x", 200)+"'", "resourceArn", "Member must have length less than or equal to 256")},
		{"list: unknown job", "ListTags", map[string]any{"ResourceArn": missing}, "ValidationException", "Requested resource not found: " + missing + "."},
		{"list: other region", "ListTags", map[string]any{"ResourceArn": strings.Replace(jobArn, "us-east-1", "eu-west-1", 1)}, "ValidationException", "Requested resource not found"},
		{"list: other account", "ListTags", map[string]any{"ResourceArn": strings.Replace(jobArn, "123456789012", "210987654321", 1)}, "ValidationException", "Requested resource not found"},
		{"list: unknown kind", "ListTags", map[string]any{"ResourceArn": "arn:aws:sagemaker:us-east-1:123456789012:notebook-instance/tagged-job"}, "ValidationException", "Requested resource not found"},
		{"list: max results 49", "ListTags", map[string]any{"ResourceArn": jobArn, "MaxResults": 49}, "ValidationException",
			prefix1 + at("'49'", "maxResults", "Member must have value greater than or equal to 50")},
		{"list: max results 50 ok", "ListTags", map[string]any{"ResourceArn": jobArn, "MaxResults": 50}, "", ""},
		{"list: foreign token", "ListTags", map[string]any{"ResourceArn": jobArn, "NextToken": "abc"}, "ValidationException", `The NextToken "abc" is not valid`},
		{"add: tags missing", "AddTags", map[string]any{"ResourceArn": jobArn}, "ValidationException", prefix1 + at("null", "tags", "Member must not be null")},
		{"add: 51 tags", "AddTags", map[string]any{"ResourceArn": jobArn, "Tags": tagList(51)}, "ValidationException",
			"at 'tags' failed to satisfy constraint: Member must have length less than or equal to 50"},
		{"add: empty key", "AddTags", map[string]any{"ResourceArn": jobArn, "Tags": []any{map[string]any{"Key": "", "Value": "v"}}}, "ValidationException",
			prefix1 + at("null", "tags.1.member.key", "Member must not be null")},
		{"add: key 129", "AddTags", map[string]any{"ResourceArn": jobArn, "Tags": []any{map[string]any{"Key": strings.Repeat("k", 129), "Value": "v"}}}, "ValidationException",
			prefix1 + at("'"+strings.Repeat("k", 129)+"'", "tags.1.member.key", "Member must have length less than or equal to 128")},
		{"add: value 257", "AddTags", map[string]any{"ResourceArn": jobArn, "Tags": []any{map[string]any{"Key": "k", "Value": strings.Repeat("v", 257)}}}, "ValidationException",
			prefix1 + at("'"+strings.Repeat("v", 257)+"'", "tags.1.member.value", "Member must have length less than or equal to 256")},
		{"add: key 128 value 256 ok", "AddTags", map[string]any{"ResourceArn": jobArn, "Tags": []any{map[string]any{"Key": strings.Repeat("k", 128), "Value": strings.Repeat("v", 256)}}}, "", ""},
		{"add: bad characters", "AddTags", map[string]any{"ResourceArn": jobArn, "Tags": []any{map[string]any{"Key": "a*b", "Value": "x"}}}, "ValidationException",
			prefix1 + at("'a*b'", "tags.1.member.key", tagPatternMsg)},
		{"add: unknown job", "AddTags", map[string]any{"ResourceArn": missing, "Tags": tagList(1)}, "ValidationException", "Requested resource not found: " + missing + "."},
		{"delete: keys missing", "DeleteTags", map[string]any{"ResourceArn": jobArn}, "ValidationException", prefix1 + at("null", "tagKeys", "Member must not be null")},
		{"delete: no keys", "DeleteTags", map[string]any{"ResourceArn": jobArn, "TagKeys": []any{}}, "ValidationException",
			prefix1 + at("'[]'", "tagKeys", "Member must have length greater than or equal to 1")},
		{"delete: empty key", "DeleteTags", map[string]any{"ResourceArn": jobArn, "TagKeys": []any{""}}, "ValidationException",
			prefix1 + at("null", "tagKeys.1.member", "Member must not be null")},
		{"delete: unknown job", "DeleteTags", map[string]any{"ResourceArn": missing, "TagKeys": []any{"k"}}, "ValidationException", "Requested resource not found: " + missing + "."},
		{"create: 51 tags", "CreateTrainingJob", func() map[string]any { r := validJob("j51"); r["Tags"] = tagList(51); return r }(), "ValidationException",
			"at 'tags' failed to satisfy constraint: Member must have length less than or equal to 50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, "SageMaker."+tt.op, tt.body)
			if tt.code == "" {
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				return
			}
			code, msg := r.errorOf(t)
			if r.status != 400 || code != tt.code || !strings.Contains(msg, tt.msg) {
				t.Errorf("got %d %s %q\nwant 400 %s containing %q", r.status, code, msg, tt.code, tt.msg)
			}
		})
	}
}
