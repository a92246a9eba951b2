package controlplane_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/controlplane"
)

const arnPrefix = "arn:aws:sagemaker:us-east-1:123456789012:"

// fails calls target and checks that it answers 400 with code and a
// message that contains want (the whole message when exact).
func (e *env) fails(t *testing.T, target string, body any, code, want string, exact bool) {
	t.Helper()
	r := e.call(t, target, body)
	gotCode, msg := r.errorOf(t)
	if r.status != 400 || gotCode != code || (exact && msg != want) || (!exact && !strings.Contains(msg, want)) {
		t.Errorf("%s %v:\n got %d %s %q\nwant 400 %s %q", target, body, r.status, gotCode, msg, code, want)
	}
}

// sdkModel is CreateModel as the SageMaker SDK sends it for a PyTorchModel.
func sdkModel(name string) map[string]any {
	return map[string]any{
		"ModelName":        name,
		"ExecutionRoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
		"PrimaryContainer": container("s3://bucket/" + name + "/model.tar.gz"),
	}
}

func container(modelData string) map[string]any {
	return map[string]any{
		"Image":        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:1.13.1-cpu-py39",
		"ModelDataUrl": modelData,
		"Environment": map[string]any{
			"SAGEMAKER_PROGRAM": "inference.py", "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
			"SAGEMAKER_CONTAINER_LOG_LEVEL": "20", "SAGEMAKER_REGION": "us-east-1",
		},
	}
}

// sdkConfig is CreateEndpointConfig as the SDK sends it: the weight is a
// JSON integer.
func sdkEndpointConfig(name, model string) map[string]any {
	return map[string]any{
		"EndpointConfigName": name,
		"ProductionVariants": []any{map[string]any{
			"VariantName": "AllTraffic", "ModelName": model, "InitialVariantWeight": 1,
			"InitialInstanceCount": 1, "InstanceType": "ml.m5.xlarge",
		}},
	}
}

// deployed creates a model, a config and an endpoint all named name, as
// estimator.deploy does, and promotes the endpoint when promote is set.
func (e *env) deployed(t *testing.T, name string, promote bool) {
	t.Helper()
	e.ok(t, "SageMaker.CreateModel", sdkModel(name))
	e.ok(t, "SageMaker.CreateEndpointConfig", sdkEndpointConfig(name, name))
	e.hosting.set(func(f *fakeHosting) { f.autoPromote = promote })
	e.ok(t, "SageMaker.CreateEndpoint", map[string]any{"EndpointName": name, "EndpointConfigName": name, "Tags": []any{}})
	e.hosting.set(func(f *fakeHosting) { f.autoPromote = false })
}

func (e *env) describeEndpoint(t *testing.T, name string) map[string]any {
	t.Helper()
	return e.ok(t, "SageMaker.DescribeEndpoint", map[string]any{"EndpointName": name})
}

// TestModelLifecycle: CreateModel stores the model under a lower-cased ARN,
// DescribeModel returns it as sent (without Tags), a second CreateModel of
// the name in any case is SageMaker's "Cannot create already existing
// model", and after DeleteModel it is "Could not find model".
func TestModelLifecycle(t *testing.T) {
	e := newEnv(t)
	req := sdkModel("My-Model")
	req["Tags"] = []any{map[string]any{"Key": "team", "Value": "ml"}}
	out := e.ok(t, "SageMaker.CreateModel", req)
	if out["ModelArn"] != arnPrefix+"model/my-model" {
		t.Errorf("ModelArn = %v", out["ModelArn"])
	}
	d := e.ok(t, "SageMaker.DescribeModel", map[string]any{"ModelName": "my-model"})
	if d["ModelName"] != "My-Model" || d["ModelArn"] != arnPrefix+"model/my-model" || d["Tags"] != nil || d["CreationTime"] != float64(startTime().Unix()) {
		t.Errorf("DescribeModel = %v", d)
	}
	if got, want := d["PrimaryContainer"], any(jsonRound(t, container("s3://bucket/My-Model/model.tar.gz"))); !reflect.DeepEqual(got, want) {
		t.Errorf("PrimaryContainer = %v\nwant %v", got, want)
	}
	if d["ExecutionRoleArn"] != "arn:aws:iam::123456789012:role/SageMakerRole" || d["EnableNetworkIsolation"] != false {
		t.Errorf("DescribeModel = %v", d)
	}
	e.fails(t, "SageMaker.CreateModel", sdkModel("MY-MODEL"), "ValidationException",
		`Cannot create already existing model "`+arnPrefix+`model/my-model".`, true)

	e.clock.Advance(time.Second)
	e.ok(t, "SageMaker.CreateModel", sdkModel("other"))
	l := e.ok(t, "SageMaker.ListModels", map[string]any{})
	if got := names(l["Models"], "ModelName"); !reflect.DeepEqual(got, []string{"other", "My-Model"}) {
		t.Errorf("ListModels = %v", l)
	}
	l = e.ok(t, "SageMaker.ListModels", map[string]any{"SortBy": "Name", "SortOrder": "Ascending", "MaxResults": 1})
	if got := names(l["Models"], "ModelName"); !reflect.DeepEqual(got, []string{"My-Model"}) || l["NextToken"] == nil {
		t.Errorf("ListModels page 1 = %v", l)
	}
	l = e.ok(t, "SageMaker.ListModels", map[string]any{"SortBy": "Name", "SortOrder": "Ascending", "MaxResults": 1, "NextToken": l["NextToken"]})
	if got := names(l["Models"], "ModelName"); !reflect.DeepEqual(got, []string{"other"}) || l["NextToken"] != nil {
		t.Errorf("ListModels page 2 = %v", l)
	}
	l = e.ok(t, "SageMaker.ListModels", map[string]any{"NameContains": "MY"})
	if got := names(l["Models"], "ModelName"); !reflect.DeepEqual(got, []string{"My-Model"}) {
		t.Errorf("ListModels NameContains = %v", l)
	}
	e.fails(t, "SageMaker.ListModels", map[string]any{"NextToken": "bogus"}, "ValidationException", "Invalid pagination token", false)
	e.fails(t, "SageMaker.ListModels", map[string]any{"SortBy": "Status"}, "ValidationException", "Member must satisfy enum value set: [Name, CreationTime]", false)

	e.ok(t, "SageMaker.DeleteModel", map[string]any{"ModelName": "My-Model"})
	missing := `Could not find model "` + arnPrefix + `model/my-model".`
	e.fails(t, "SageMaker.DescribeModel", map[string]any{"ModelName": "My-Model"}, "ValidationException", missing, true)
	e.fails(t, "SageMaker.DeleteModel", map[string]any{"ModelName": "My-Model"}, "ValidationException", missing, true)
	e.fails(t, "SageMaker.DescribeModel", map[string]any{"ModelName": "bad_name"}, "ValidationException",
		"Value 'bad_name' at 'modelName' failed to satisfy constraint: Member must satisfy regular expression pattern", false)
}

// jsonRound gives v as it looks after a JSON round trip.
func jsonRound(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// names returns the key member of every element of a listed array.
func names(list any, key string) []string {
	var out []string
	items, _ := list.([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		s, _ := m[key].(string)
		out = append(out, s)
	}
	return out
}

// TestCreateModelPipelines: Containers of 1 to 15 with or without
// InferenceExecutionConfig, ModelDataSource with an uncompressed prefix.
func TestCreateModelPipelines(t *testing.T) {
	e := newEnv(t)
	var fifteen []any
	for i := 0; i < 15; i++ {
		fifteen = append(fifteen, container(fmt.Sprintf("s3://bucket/m%d/model.tar.gz", i)))
	}
	e.ok(t, "SageMaker.CreateModel", map[string]any{"ModelName": "fifteen", "Containers": fifteen})
	d := e.ok(t, "SageMaker.DescribeModel", map[string]any{"ModelName": "fifteen"})
	if cs, _ := d["Containers"].([]any); len(cs) != 15 || d["PrimaryContainer"] != nil || d["InferenceExecutionConfig"] != nil {
		t.Errorf("DescribeModel = %v", d)
	}
	direct := map[string]any{
		"ModelName":                "direct",
		"InferenceExecutionConfig": map[string]any{"Mode": "Direct"},
		"Containers": []any{
			map[string]any{"ContainerHostname": "first", "ModelDataUrl": "s3://b/a.tar.gz"},
			map[string]any{"ContainerHostname": "second", "ModelDataSource": map[string]any{"S3DataSource": map[string]any{
				"S3Uri": "s3://b/model/", "S3DataType": "S3Prefix", "CompressionType": "None"}}},
		},
	}
	e.ok(t, "SageMaker.CreateModel", direct)
	d = e.ok(t, "SageMaker.DescribeModel", map[string]any{"ModelName": "direct"})
	if !reflect.DeepEqual(d["Containers"], jsonRound(t, direct["Containers"])) || !reflect.DeepEqual(d["InferenceExecutionConfig"], map[string]any{"Mode": "Direct"}) {
		t.Errorf("DescribeModel = %v", d)
	}
	e.ok(t, "SageMaker.CreateModel", map[string]any{"ModelName": "object", "PrimaryContainer": map[string]any{
		"ModelDataSource": map[string]any{"S3DataSource": map[string]any{"S3Uri": "s3://b/model.bin", "S3DataType": "S3Object", "CompressionType": "None"}}}})
}

// TestCreateModelBadInput: each request is refused with a message that
// says what to fix, and nothing is stored.
func TestCreateModelBadInput(t *testing.T) {
	e := newEnv(t)
	var sixteen []any
	for i := 0; i < 16; i++ {
		sixteen = append(sixteen, container("s3://b/m.tar.gz"))
	}
	bigEnv := map[string]any{}
	for i := 0; i < 101; i++ {
		bigEnv[fmt.Sprint("K", i)] = "v"
	}
	with := func(fn func(m map[string]any)) map[string]any {
		m := sdkModel("bad")
		fn(m)
		return m
	}
	withContainer := func(fn func(c map[string]any)) map[string]any {
		return with(func(m map[string]any) { fn(m["PrimaryContainer"].(map[string]any)) })
	}
	s3src := func(uri, typ, comp string) map[string]any {
		return map[string]any{"S3DataSource": map[string]any{"S3Uri": uri, "S3DataType": typ, "CompressionType": comp}}
	}
	tests := []struct {
		name string
		req  any
		code string
		want string
	}{
		{"both", with(func(m map[string]any) { m["Containers"] = []any{container("s3://b/m.tar.gz")} }), "ValidationException", "either PrimaryContainer or Containers, not both"},
		{"neither", with(func(m map[string]any) { delete(m, "PrimaryContainer") }), "ValidationException", "A model needs a container"},
		{"empty containers", map[string]any{"ModelName": "bad", "Containers": []any{}}, "ValidationException", "A model needs a container"},
		{"16 containers", map[string]any{"ModelName": "bad", "Containers": sixteen}, "ValidationException", "at 'containers' failed to satisfy constraint: Member must have length less than or equal to 15"},
		{"mode with primary", with(func(m map[string]any) { m["InferenceExecutionConfig"] = map[string]any{"Mode": "Serial"} }), "ValidationException", "only to a model with Containers"},
		{"bad mode", map[string]any{"ModelName": "bad", "Containers": []any{container("s3://b/m.tar.gz")}, "InferenceExecutionConfig": map[string]any{"Mode": "Parallel"}}, "ValidationException", "Member must satisfy enum value set: [Serial, Direct]"},
		{"direct without hostname", map[string]any{"ModelName": "bad", "InferenceExecutionConfig": map[string]any{"Mode": "Direct"},
			"Containers": []any{map[string]any{"ContainerHostname": "a", "ModelDataUrl": "s3://b/a.tar.gz"}, map[string]any{"ModelDataUrl": "s3://b/b.tar.gz"}}}, "ValidationException", "Containers[1] has no ContainerHostname"},
		{"duplicate hostname", map[string]any{"ModelName": "bad",
			"Containers": []any{map[string]any{"ContainerHostname": "a", "ModelDataUrl": "s3://b/a.tar.gz"}, map[string]any{"ContainerHostname": "A", "ModelDataUrl": "s3://b/b.tar.gz"}}}, "ValidationException", `ContainerHostname "A" is used by more than one container`},
		{"https model data", withContainer(func(c map[string]any) { c["ModelDataUrl"] = "https://example.com/m.tar.gz" }), "ValidationException", "must name an object in sagebox's object store"},
		{"prefix model data url", withContainer(func(c map[string]any) { c["ModelDataUrl"] = "s3://bucket/models/" }), "ValidationException", "must name an object"},
		{"not a URI", withContainer(func(c map[string]any) { c["ModelDataUrl"] = "model.tar.gz" }), "ValidationException", "at 'primaryContainer.modelDataUrl' failed to satisfy constraint: Member must satisfy regular expression pattern"},
		{"url and source", withContainer(func(c map[string]any) { c["ModelDataSource"] = s3src("s3://b/p/", "S3Prefix", "None") }), "ValidationException", "both ModelDataUrl and ModelDataSource"},
		{"prefix gzip", withContainer(func(c map[string]any) {
			delete(c, "ModelDataUrl")
			c["ModelDataSource"] = s3src("s3://b/p/", "S3Prefix", "Gzip")
		}), "ValidationException", "S3Prefix takes CompressionType None"},
		{"bad data type", withContainer(func(c map[string]any) {
			delete(c, "ModelDataUrl")
			c["ModelDataSource"] = s3src("s3://b/p/", "Manifest", "None")
		}), "ValidationException", "Member must satisfy enum value set: [S3Prefix, S3Object]"},
		{"no compression", withContainer(func(c map[string]any) {
			delete(c, "ModelDataUrl")
			c["ModelDataSource"] = s3src("s3://b/p/", "S3Prefix", "")
		}), "ValidationException", "Value null at 'primaryContainer.modelDataSource.s3DataSource.compressionType' failed to satisfy constraint: Member must not be null"},
		{"101 env entries", withContainer(func(c map[string]any) { c["Environment"] = bigEnv }), "ValidationException", "at 'primaryContainer.environment' failed to satisfy constraint: Member must have length less than or equal to 100"},
		{"long env value", withContainer(func(c map[string]any) { c["Environment"] = map[string]any{"K": strings.Repeat("x", 1025)} }), "ValidationException", "Map value must satisfy constraint: [Member must have length less than or equal to 1024"},
		{"bad env key", withContainer(func(c map[string]any) { c["Environment"] = map[string]any{"1-K": "v"} }), "ValidationException", "Map keys must satisfy constraint"},
		{"multi model", withContainer(func(c map[string]any) { c["Mode"] = "MultiModel" }), "ValidationException", "Mode MultiModel"},
		{"bad name", with(func(m map[string]any) { m["ModelName"] = "bad_name" }), "ValidationException", "at 'modelName' failed to satisfy constraint"},
		{"no name", with(func(m map[string]any) { delete(m, "ModelName") }), "ValidationException", "Value null at 'modelName' failed to satisfy constraint: Member must not be null"},
		{"bad tag", with(func(m map[string]any) { m["Tags"] = []any{map[string]any{"Key": ""}} }), "ValidationException", "tags.1.member.key"},
		{"wrong type", `{"ModelName":"bad","Containers":{}}`, "SerializationException", "Containers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { e.fails(t, "SageMaker.CreateModel", tt.req, tt.code, tt.want, false) })
	}
	if l := e.ok(t, "SageMaker.ListModels", map[string]any{}); len(l["Models"].([]any)) != 0 {
		t.Errorf("a refused CreateModel stored a model: %v", l)
	}
}

// TestEndpointConfigEchoesVariants: DescribeEndpointConfig returns
// ProductionVariants with exactly the members sent, integers as integers
// (the SDK sends them back to CreateEndpointConfig, and botocore refuses
// members it does not know), and echoes the optional configs.
func TestEndpointConfigEchoesVariants(t *testing.T) {
	e := newEnv(t)
	e.ok(t, "SageMaker.CreateModel", sdkModel("m"))
	body := `{"EndpointConfigName": "Echo-Config",
	  "ProductionVariants": [ {"VariantName": "AllTraffic", "ModelName": "m", "InitialVariantWeight": 1,
	     "InitialInstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30,
	     "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}} ],
	  "KmsKeyId": "alias/key",
	  "DataCaptureConfig": {"EnableCapture": true, "InitialSamplingPercentage": 50, "DestinationS3Uri": "s3://b/capture",
	     "CaptureOptions": [{"CaptureMode": "Input"}]},
	  "AsyncInferenceConfig": {"OutputConfig": {"S3OutputPath": "s3://b/async"}},
	  "ExplainerConfig": {"ClarifyExplainerConfig": {"ShapConfig": {"ShapBaselineConfig": {}}}},
	  "Tags": [{"Key": "k", "Value": "v"}]}`
	out := e.ok(t, "SageMaker.CreateEndpointConfig", body)
	if out["EndpointConfigArn"] != arnPrefix+"endpoint-config/echo-config" {
		t.Errorf("EndpointConfigArn = %v", out)
	}
	r := e.call(t, "SageMaker.DescribeEndpointConfig", map[string]any{"EndpointConfigName": "echo-config"})
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	want := `[{"VariantName":"AllTraffic","ModelName":"m","InitialVariantWeight":1,"InitialInstanceCount":1,"InstanceType":"ml.m5.xlarge","VolumeSizeInGB":30,"RoutingConfig":{"RoutingStrategy":"LEAST_OUTSTANDING_REQUESTS"}}]`
	if got := string(raw["ProductionVariants"]); got != want {
		t.Errorf("ProductionVariants =\n %s\nwant\n %s", got, want)
	}
	for member, want := range map[string]string{
		"EndpointConfigName":   `"Echo-Config"`,
		"EndpointConfigArn":    `"` + arnPrefix + `endpoint-config/echo-config"`,
		"KmsKeyId":             `"alias/key"`,
		"DataCaptureConfig":    `{"EnableCapture":true,"InitialSamplingPercentage":50,"DestinationS3Uri":"s3://b/capture","CaptureOptions":[{"CaptureMode":"Input"}]}`,
		"AsyncInferenceConfig": `{"OutputConfig":{"S3OutputPath":"s3://b/async"}}`,
		"ExplainerConfig":      `{"ClarifyExplainerConfig":{"ShapConfig":{"ShapBaselineConfig":{}}}}`,
		"CreationTime":         fmt.Sprint(startTime().Unix()),
	} {
		if got := string(raw[member]); got != want {
			t.Errorf("%s = %s, want %s", member, got, want)
		}
	}
	if _, ok := raw["Tags"]; ok {
		t.Errorf("DescribeEndpointConfig echoes Tags: %s", r.body)
	}
	if tags := e.ok(t, "SageMaker.ListTags", map[string]any{"ResourceArn": arnPrefix + "endpoint-config/echo-config"}); !reflect.DeepEqual(tags["Tags"], []any{map[string]any{"Key": "k", "Value": "v"}}) {
		t.Errorf("ListTags = %v", tags)
	}
	// A float weight and no optional members echo as sent too.
	e.ok(t, "SageMaker.CreateEndpointConfig", `{"EndpointConfigName":"float","ProductionVariants":[{"VariantName":"a","ModelName":"m","InstanceType":"ml.c5.large","InitialVariantWeight":0.5}]}`)
	r = e.call(t, "SageMaker.DescribeEndpointConfig", map[string]any{"EndpointConfigName": "float"})
	if !strings.Contains(string(r.body), `"ProductionVariants":[{"VariantName":"a","ModelName":"m","InstanceType":"ml.c5.large","InitialVariantWeight":0.5}]`) {
		t.Errorf("DescribeEndpointConfig = %s", r.body)
	}
	for _, m := range []string{"KmsKeyId", "DataCaptureConfig", "EnableNetworkIsolation", "Tags"} {
		if strings.Contains(string(r.body), m) {
			t.Errorf("DescribeEndpointConfig has %s though it was not sent: %s", m, r.body)
		}
	}

	l := e.ok(t, "SageMaker.ListEndpointConfigs", map[string]any{"SortBy": "Name", "SortOrder": "Ascending"})
	if got := names(l["EndpointConfigs"], "EndpointConfigName"); !reflect.DeepEqual(got, []string{"Echo-Config", "float"}) {
		t.Errorf("ListEndpointConfigs = %v", l)
	}
	e.ok(t, "SageMaker.DeleteEndpointConfig", map[string]any{"EndpointConfigName": "Echo-Config"})
	missing := `Could not find endpoint configuration "` + arnPrefix + `endpoint-config/echo-config".`
	e.fails(t, "SageMaker.DescribeEndpointConfig", map[string]any{"EndpointConfigName": "Echo-Config"}, "ValidationException", missing, true)
	e.fails(t, "SageMaker.DeleteEndpointConfig", map[string]any{"EndpointConfigName": "Echo-Config"}, "ValidationException", missing, true)
	e.fails(t, "SageMaker.ListTags", map[string]any{"ResourceArn": arnPrefix + "endpoint-config/echo-config"}, "ValidationException", "Requested resource not found", false)
}

// TestCreateEndpointConfigBadInput: each request is refused with a message
// that says what to fix.
func TestCreateEndpointConfigBadInput(t *testing.T) {
	e := newEnv(t)
	e.ok(t, "SageMaker.CreateModel", sdkModel("m"))
	e.ok(t, "SageMaker.CreateEndpointConfig", sdkEndpointConfig("Taken", "m"))
	variant := func(name string, fn func(v map[string]any)) map[string]any {
		v := map[string]any{"VariantName": name, "ModelName": "m", "InitialInstanceCount": 1, "InstanceType": "ml.m5.xlarge"}
		if fn != nil {
			fn(v)
		}
		return v
	}
	config := func(vs ...any) map[string]any {
		if vs == nil {
			vs = []any{}
		}
		return map[string]any{"EndpointConfigName": "bad", "ProductionVariants": vs}
	}
	var eleven []any
	for i := 0; i < 11; i++ {
		eleven = append(eleven, variant(fmt.Sprint("v", i), nil))
	}
	zero := func(v map[string]any) { v["InitialVariantWeight"] = 0 }
	tests := []struct {
		name string
		req  any
		code string
		want string
		full bool
	}{
		{"missing model", config(variant("a", func(v map[string]any) { v["ModelName"] = "No-Such-Model" })), "ValidationException",
			`Could not find model "` + arnPrefix + `model/no-such-model".`, true},
		{"all weights zero", config(variant("a", zero), variant("b", zero)), "ValidationException", "The InitialVariantWeight of every production variant is 0", false},
		{"duplicate variant", config(variant("a", nil), variant("a", nil)), "ValidationException", `VariantName "a" is used by more than one production variant`, false},
		{"11 variants", config(eleven...), "ValidationException", "at 'productionVariants' failed to satisfy constraint: Member must have length less than or equal to 10", false},
		{"no variants", config(), "ValidationException", "at 'productionVariants' failed to satisfy constraint: Member must have length greater than or equal to 1", false},
		{"null variants", map[string]any{"EndpointConfigName": "bad"}, "ValidationException", "Value null at 'productionVariants' failed to satisfy constraint: Member must not be null", false},
		{"zero instances", config(variant("a", func(v map[string]any) { v["InitialInstanceCount"] = 0 })), "ValidationException",
			"Value '0' at 'productionVariants.1.member.initialInstanceCount' failed to satisfy constraint: Member must have value greater than or equal to 1", false},
		{"negative weight", config(variant("a", func(v map[string]any) { v["InitialVariantWeight"] = -0.5 })), "ValidationException",
			"Value '-0.5' at 'productionVariants.1.member.initialVariantWeight' failed to satisfy constraint: Member must have value greater than or equal to 0", false},
		{"bad variant name", config(variant("all_traffic", nil)), "ValidationException", "at 'productionVariants.1.member.variantName' failed to satisfy constraint: Member must satisfy regular expression pattern", false},
		{"no model name", config(variant("a", func(v map[string]any) { delete(v, "ModelName") })), "ValidationException", "Value null at 'productionVariants.1.member.modelName'", false},
		{"no instance type", config(variant("a", func(v map[string]any) { delete(v, "InstanceType") })), "ValidationException", "has no InstanceType", false},
		{"bad instance type", config(variant("a", func(v map[string]any) { v["InstanceType"] = "m5.large" })), "ValidationException", "productionVariants.1.member.instanceType", false},
		{"fractional count", `{"EndpointConfigName":"bad","ProductionVariants":[{"VariantName":"a","ModelName":"m","InitialInstanceCount":1.5}]}`, "SerializationException", "InitialInstanceCount", false},
		{"variants not a list", `{"EndpointConfigName":"bad","ProductionVariants":{}}`, "SerializationException", "", false},
		{"shadow variants", map[string]any{"EndpointConfigName": "bad", "ProductionVariants": []any{variant("a", nil)}, "ShadowProductionVariants": []any{variant("s", nil)}}, "ValidationException", "ShadowProductionVariants", false},
		{"duplicate name", func() any { c := sdkEndpointConfig("TAKEN", "m"); return c }(), "ValidationException",
			`Cannot create already existing endpoint configuration "` + arnPrefix + `endpoint-config/taken".`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { e.fails(t, "SageMaker.CreateEndpointConfig", tt.req, tt.code, tt.want, tt.full) })
	}
	if l := e.ok(t, "SageMaker.ListEndpointConfigs", map[string]any{}); len(l["EndpointConfigs"].([]any)) != 1 {
		t.Errorf("a refused CreateEndpointConfig stored a config: %v", l)
	}
	// One variant at weight 0 is fine when another has weight.
	e.ok(t, "SageMaker.CreateEndpointConfig", config(variant("a", zero), variant("b", nil)))
}

// TestEndpointLifecycle: CreateEndpoint reserves and stores a snapshot of
// the config and its models and hands it to hosting; DescribeEndpoint
// answers at once (Creating); hosting's Promote makes it InService with
// runtime variants; UpdateEndpoint and UpdateEndpointWeightsAndCapacities
// go through Updating; DeleteEndpoint marks it Deleting and hosting
// removes it.
func TestEndpointLifecycle(t *testing.T) {
	e := newEnv(t)
	e.ok(t, "SageMaker.CreateModel", sdkModel("m1"))
	e.ok(t, "SageMaker.CreateModel", map[string]any{"ModelName": "m2", "Containers": []any{
		container("s3://b/a.tar.gz"), map[string]any{"ContainerHostname": "container-1", "ModelDataUrl": "s3://b/b.tar.gz"}, container("s3://b/c.tar.gz"),
	}})
	// Weight and count not sent: 1 and 1.
	e.ok(t, "SageMaker.CreateEndpointConfig", map[string]any{"EndpointConfigName": "c1", "ProductionVariants": []any{
		map[string]any{"VariantName": "AllTraffic", "ModelName": "m1", "InstanceType": "ml.m5.xlarge"},
	}})
	out := e.ok(t, "SageMaker.CreateEndpoint", map[string]any{"EndpointName": "My-Endpoint", "EndpointConfigName": "c1", "Tags": []any{}})
	if out["EndpointArn"] != arnPrefix+"endpoint/my-endpoint" {
		t.Errorf("EndpointArn = %v", out)
	}
	reserved, released, deployed, _ := e.hosting.calls()
	if len(reserved) != 1 || released != 0 || !reflect.DeepEqual(deployed, []string{"My-Endpoint"}) {
		t.Fatalf("hosting calls: reserved %v, released %d, deployed %v", reserved, released, deployed)
	}
	dep := reserved[0]
	if dep.Generation != 1 || dep.EndpointConfigName != "c1" || len(dep.Variants) != 1 {
		t.Fatalf("deployment = %+v", dep)
	}
	if v := dep.Variants[0]; v.VariantName != "AllTraffic" || v.InstanceType != "ml.m5.xlarge" || v.InstanceCount != 1 || v.Weight != 1 ||
		v.Model.ModelName != "m1" || v.Model.PrimaryContainer == nil || v.Model.PrimaryContainer.ContainerHostname != "primary" ||
		v.Model.PrimaryContainer.ModelDataUrl != "s3://bucket/m1/model.tar.gz" || v.Model.PrimaryContainer.Environment["SAGEMAKER_PROGRAM"] != "inference.py" {
		t.Errorf("deployed variant = %+v", v)
	}

	d := e.describeEndpoint(t, "my-endpoint")
	if d["EndpointStatus"] != "Creating" || d["EndpointConfigName"] != "c1" || d["EndpointName"] != "My-Endpoint" ||
		d["EndpointArn"] != arnPrefix+"endpoint/my-endpoint" || d["CreationTime"] == nil || d["LastModifiedTime"] == nil || d["Tags"] != nil {
		t.Errorf("DescribeEndpoint right after CreateEndpoint = %v", d)
	}
	// Only InService endpoints can be updated.
	e.ok(t, "SageMaker.CreateEndpointConfig", map[string]any{"EndpointConfigName": "c2", "ProductionVariants": []any{
		map[string]any{"VariantName": "blue", "ModelName": "m1", "InstanceType": "ml.m5.xlarge", "InitialVariantWeight": 3, "InitialInstanceCount": 2},
		map[string]any{"VariantName": "green", "ModelName": "m2", "InstanceType": "ml.m5.large", "InitialVariantWeight": 1},
	}})
	e.fails(t, "SageMaker.UpdateEndpoint", map[string]any{"EndpointName": "My-Endpoint", "EndpointConfigName": "c2"}, "ValidationException",
		"Cannot update in-progress endpoint", false)
	e.fails(t, "SageMaker.UpdateEndpointWeightsAndCapacities", map[string]any{"EndpointName": "My-Endpoint",
		"DesiredWeightsAndCapacities": []any{map[string]any{"VariantName": "AllTraffic", "DesiredWeight": 2}}}, "ValidationException", "Cannot update in-progress endpoint", false)
	if reserved, _, _, _ := e.hosting.calls(); len(reserved) != 1 {
		t.Errorf("a refused update reserved capacity: %d reservations", len(reserved))
	}

	e.clock.Advance(time.Second)
	if err := e.hosting.promote(t.Context(), "My-Endpoint"); err != nil {
		t.Fatal(err)
	}
	d = e.describeEndpoint(t, "My-Endpoint")
	if d["EndpointStatus"] != "InService" || d["LastModifiedTime"] != float64(startTime().Unix()+1) || d["FailureReason"] != nil {
		t.Errorf("after Promote = %v", d)
	}
	wantPV := []any{map[string]any{"VariantName": "AllTraffic", "CurrentWeight": 1.0, "DesiredWeight": 1.0, "CurrentInstanceCount": 1.0, "DesiredInstanceCount": 1.0}}
	if !reflect.DeepEqual(d["ProductionVariants"], wantPV) {
		t.Errorf("ProductionVariants = %v", d["ProductionVariants"])
	}

	// UpdateEndpoint to a two-variant config.
	e.clock.Advance(time.Second)
	out = e.ok(t, "SageMaker.UpdateEndpoint", map[string]any{"EndpointName": "My-Endpoint", "EndpointConfigName": "c2", "RetainAllVariantProperties": false})
	if out["EndpointArn"] != arnPrefix+"endpoint/my-endpoint" {
		t.Errorf("UpdateEndpoint = %v", out)
	}
	d = e.describeEndpoint(t, "My-Endpoint")
	if d["EndpointStatus"] != "Updating" || d["EndpointConfigName"] != "c1" {
		t.Errorf("after UpdateEndpoint = %v", d)
	}
	reserved, _, deployed, _ = e.hosting.calls()
	if len(reserved) != 2 || len(deployed) != 2 {
		t.Fatalf("UpdateEndpoint: reserved %d, deployed %v", len(reserved), deployed)
	}
	dep = reserved[1]
	if dep.Generation != 2 || dep.EndpointConfigName != "c2" || len(dep.Variants) != 2 {
		t.Fatalf("update deployment = %+v", dep)
	}
	blue, green := dep.Variants[0], dep.Variants[1]
	if blue.Weight != 3 || blue.InstanceCount != 2 || green.Weight != 1 || green.InstanceCount != 1 || green.InstanceType != "ml.m5.large" {
		t.Errorf("update variants = %+v %+v", blue, green)
	}
	var hosts []string
	for _, c := range green.Model.Containers {
		hosts = append(hosts, c.ContainerHostname)
	}
	if !reflect.DeepEqual(hosts, []string{"container-2", "container-1", "container-3"}) {
		t.Errorf("pipeline snapshot hostnames = %v", hosts)
	}
	if d := e.ok(t, "SageMaker.DescribeModel", map[string]any{"ModelName": "m2"}); strings.Contains(fmt.Sprint(d), "container-2") {
		t.Errorf("DescribeModel shows the snapshot's default hostnames: %v", d)
	}
	if err := e.hosting.promote(t.Context(), "My-Endpoint"); err != nil {
		t.Fatal(err)
	}
	if d = e.describeEndpoint(t, "My-Endpoint"); d["EndpointStatus"] != "InService" || d["EndpointConfigName"] != "c2" {
		t.Errorf("after the update's Promote = %v", d)
	}

	// UpdateEndpointWeightsAndCapacities: Pending is Current with the changes.
	bad := map[string]any{"EndpointName": "My-Endpoint", "DesiredWeightsAndCapacities": []any{
		map[string]any{"VariantName": "blue", "DesiredWeight": 1}, map[string]any{"VariantName": "red", "DesiredWeight": 1},
	}}
	e.fails(t, "SageMaker.UpdateEndpointWeightsAndCapacities", bad, "ValidationException",
		`The variant "red" is not present in endpoint "`+arnPrefix+`endpoint/my-endpoint": its variants are blue, green.`, true)
	e.fails(t, "SageMaker.UpdateEndpointWeightsAndCapacities", map[string]any{"EndpointName": "My-Endpoint", "DesiredWeightsAndCapacities": []any{
		map[string]any{"VariantName": "blue", "DesiredWeight": 0}, map[string]any{"VariantName": "green", "DesiredWeight": 0},
	}}, "ValidationException", "would be 0", false)
	e.fails(t, "SageMaker.UpdateEndpointWeightsAndCapacities", map[string]any{"EndpointName": "My-Endpoint", "DesiredWeightsAndCapacities": []any{
		map[string]any{"VariantName": "blue", "DesiredInstanceCount": 0},
	}}, "ValidationException", "desiredWeightsAndCapacities.1.member.desiredInstanceCount", false)
	e.fails(t, "SageMaker.UpdateEndpointWeightsAndCapacities", map[string]any{"EndpointName": "My-Endpoint", "DesiredWeightsAndCapacities": []any{}},
		"ValidationException", "Member must have length greater than or equal to 1", false)
	e.fails(t, "SageMaker.UpdateEndpointWeightsAndCapacities", map[string]any{"EndpointName": "My-Endpoint", "DesiredWeightsAndCapacities": []any{
		map[string]any{"VariantName": "blue", "DesiredWeight": 1}, map[string]any{"VariantName": "blue", "DesiredWeight": 2},
	}}, "ValidationException", "more than once", false)
	out = e.ok(t, "SageMaker.UpdateEndpointWeightsAndCapacities", map[string]any{"EndpointName": "My-Endpoint", "DesiredWeightsAndCapacities": []any{
		map[string]any{"VariantName": "green", "DesiredWeight": 0.5, "DesiredInstanceCount": 3},
	}})
	if out["EndpointArn"] != arnPrefix+"endpoint/my-endpoint" {
		t.Errorf("UpdateEndpointWeightsAndCapacities = %v", out)
	}
	stored, err := e.jobs.Endpoint(t.Context(), "My-Endpoint")
	if err != nil {
		t.Fatal(err)
	}
	if stored.EndpointStatus != sagebox.EndpointUpdating || stored.Internal.Pending == nil || stored.Internal.Pending.Generation != 3 {
		t.Fatalf("after UpdateEndpointWeightsAndCapacities: %s %+v", stored.EndpointStatus, stored.Internal.Pending)
	}
	p, c := stored.Internal.Pending, stored.Internal.Current
	if p.EndpointConfigName != "c2" || p.Variants[0].Weight != 3 || p.Variants[0].InstanceCount != 2 ||
		p.Variants[1].Weight != 0.5 || p.Variants[1].InstanceCount != 3 || !reflect.DeepEqual(p.Variants[1].Model, c.Variants[1].Model) {
		t.Errorf("pending = %+v", p)
	}
	if c.Variants[1].Weight != 1 || c.Variants[1].InstanceCount != 1 {
		t.Errorf("the current deployment changed: %+v", c.Variants[1])
	}
	if err := e.hosting.promote(t.Context(), "My-Endpoint"); err != nil {
		t.Fatal(err)
	}

	// ListEndpoints sees it; DeleteEndpoint hands it to hosting.
	l := e.ok(t, "SageMaker.ListEndpoints", map[string]any{"StatusEquals": "InService"})
	if got := names(l["Endpoints"], "EndpointName"); !reflect.DeepEqual(got, []string{"My-Endpoint"}) {
		t.Errorf("ListEndpoints = %v", l)
	}
	e.ok(t, "SageMaker.DeleteEndpoint", map[string]any{"EndpointName": "my-endpoint"})
	if _, _, _, deleted := e.hosting.calls(); !reflect.DeepEqual(deleted, []string{"My-Endpoint"}) {
		t.Errorf("hosting deleted %v", deleted)
	}
	missing := `Could not find endpoint "` + arnPrefix + `endpoint/my-endpoint".`
	for _, call := range []struct {
		target string
		body   map[string]any
	}{
		{"SageMaker.DescribeEndpoint", map[string]any{"EndpointName": "My-Endpoint"}},
		{"SageMaker.DeleteEndpoint", map[string]any{"EndpointName": "My-Endpoint"}},
		{"SageMaker.UpdateEndpoint", map[string]any{"EndpointName": "My-Endpoint", "EndpointConfigName": "c2"}},
		{"SageMaker.UpdateEndpointWeightsAndCapacities", map[string]any{"EndpointName": "My-Endpoint",
			"DesiredWeightsAndCapacities": []any{map[string]any{"VariantName": "blue", "DesiredWeight": 1}}}},
	} {
		e.fails(t, call.target, call.body, "ValidationException", missing, true)
	}
}

// TestDeleteEndpointWhileDeleting: a second DeleteEndpoint while hosting
// is still stopping the instances is refused.
func TestDeleteEndpointWhileDeleting(t *testing.T) {
	e := newEnv(t)
	e.deployed(t, "ep", true)
	// Keep the record: this hosting never finishes deleting.
	if _, err := e.jobs.UpdateEndpoint(t.Context(), "ep", func(ep *sagebox.Endpoint) error { return ep.BeginDelete(e.clock.Now()) }); err != nil {
		t.Fatal(err)
	}
	if d := e.describeEndpoint(t, "ep"); d["EndpointStatus"] != "Deleting" {
		t.Errorf("status = %v", d["EndpointStatus"])
	}
	e.fails(t, "SageMaker.DeleteEndpoint", map[string]any{"EndpointName": "ep"}, "ValidationException", "already being deleted", false)
	e.fails(t, "SageMaker.UpdateEndpoint", map[string]any{"EndpointName": "ep", "EndpointConfigName": "ep"}, "ValidationException", "it is Deleting", false)
}

// TestSDKDeleteOrder: the SDK's delete_endpoint deletes the config before
// the endpoint, and delete_model may come while the endpoint is live: both
// are allowed, and the endpoint keeps its snapshot (it can still be
// rescaled).
func TestSDKDeleteOrder(t *testing.T) {
	e := newEnv(t)
	e.deployed(t, "live", true)
	e.ok(t, "SageMaker.DeleteModel", map[string]any{"ModelName": "live"})
	e.ok(t, "SageMaker.DeleteEndpointConfig", map[string]any{"EndpointConfigName": "live"})
	if d := e.describeEndpoint(t, "live"); d["EndpointStatus"] != "InService" || d["EndpointConfigName"] != "live" {
		t.Errorf("after deleting its model and config: %v", d)
	}
	e.ok(t, "SageMaker.UpdateEndpointWeightsAndCapacities", map[string]any{"EndpointName": "live",
		"DesiredWeightsAndCapacities": []any{map[string]any{"VariantName": "AllTraffic", "DesiredInstanceCount": 2}}})
	stored, err := e.jobs.Endpoint(t.Context(), "live")
	if err != nil {
		t.Fatal(err)
	}
	if v := stored.Internal.Pending.Variants[0]; v.InstanceCount != 2 || v.Model.PrimaryContainer.ModelDataUrl != "s3://bucket/live/model.tar.gz" {
		t.Errorf("pending after the model was deleted = %+v", v)
	}
	if err := e.hosting.promote(t.Context(), "live"); err != nil {
		t.Fatal(err)
	}
	// An update to a config whose model is gone is refused.
	e.ok(t, "SageMaker.CreateModel", sdkModel("gone"))
	e.ok(t, "SageMaker.CreateEndpointConfig", sdkEndpointConfig("needs-gone", "gone"))
	e.ok(t, "SageMaker.DeleteModel", map[string]any{"ModelName": "gone"})
	e.fails(t, "SageMaker.UpdateEndpoint", map[string]any{"EndpointName": "live", "EndpointConfigName": "needs-gone"}, "ValidationException",
		`Could not find model "`+arnPrefix+`model/gone".`, true)
	e.fails(t, "SageMaker.UpdateEndpoint", map[string]any{"EndpointName": "live", "EndpointConfigName": "live"}, "ValidationException",
		`Could not find endpoint configuration "`+arnPrefix+`endpoint-config/live".`, true)
	e.ok(t, "SageMaker.DeleteEndpoint", map[string]any{"EndpointName": "live"})
}

// TestCreateEndpointErrors: unknown config, a config whose model is gone, a
// duplicate name, a refused reservation; none leaves an endpoint or a
// reservation behind.
func TestCreateEndpointErrors(t *testing.T) {
	e := newEnv(t)
	e.deployed(t, "Taken", false)
	create := func(name, config string) map[string]any {
		return map[string]any{"EndpointName": name, "EndpointConfigName": config, "Tags": []any{}}
	}
	e.fails(t, "SageMaker.CreateEndpoint", create("new", "No-Config"), "ValidationException",
		`Could not find endpoint configuration "`+arnPrefix+`endpoint-config/no-config".`, true)
	e.ok(t, "SageMaker.CreateModel", sdkModel("gone"))
	e.ok(t, "SageMaker.CreateEndpointConfig", sdkEndpointConfig("needs-gone", "gone"))
	e.ok(t, "SageMaker.DeleteModel", map[string]any{"ModelName": "gone"})
	e.fails(t, "SageMaker.CreateEndpoint", create("new", "needs-gone"), "ValidationException",
		`Could not find model "`+arnPrefix+`model/gone".`, true)
	e.fails(t, "SageMaker.CreateEndpoint", create("TAKEN", "Taken"), "ValidationException",
		`Cannot create already existing endpoint "`+arnPrefix+`endpoint/taken".`, true)
	e.fails(t, "SageMaker.CreateEndpoint", map[string]any{"EndpointName": "new"}, "ValidationException",
		"Value null at 'endpointConfigName' failed to satisfy constraint: Member must not be null", false)
	e.fails(t, "SageMaker.CreateEndpoint", create("new_one", "Taken"), "ValidationException", "at 'endpointName' failed to satisfy constraint", false)

	e.hosting.set(func(f *fakeHosting) {
		f.ReserveErr = sagebox.Errorf(sagebox.ErrResourceLimit, "The machine's capacity of 4 CPUs is in use by training job j (4 CPUs).")
	})
	e.fails(t, "SageMaker.CreateEndpoint", create("new", "Taken"), "ResourceLimitExceeded", "The machine's capacity of 4 CPUs is in use by training job j (4 CPUs).", true)
	e.hosting.set(func(f *fakeHosting) { f.ReserveErr = nil })
	e.fails(t, "SageMaker.DescribeEndpoint", map[string]any{"EndpointName": "new"}, "ValidationException", "Could not find endpoint", false)

	// A concurrent CreateEndpoint of the same name wins the race while
	// this one reserves: the reservation is given back.
	e.hosting.set(func(f *fakeHosting) {
		f.OnReserve = func() {
			f.OnReserve = nil
			ep := &sagebox.Endpoint{EndpointName: "racy", EndpointArn: arnPrefix + "endpoint/racy"}
			ep.BeginCreate(e.clock.Now(), &sagebox.Deployment{EndpointConfigName: "Taken"})
			if err := e.jobs.CreateEndpoint(t.Context(), ep); err != nil {
				t.Error(err)
			}
		}
	})
	_, releasedBefore, _, _ := e.hosting.calls()
	e.fails(t, "SageMaker.CreateEndpoint", create("racy", "Taken"), "ValidationException",
		`Cannot create already existing endpoint "`+arnPrefix+`endpoint/racy".`, true)
	if _, released, _, _ := e.hosting.calls(); released != releasedBefore+1 {
		t.Errorf("the reservation was not given back: %d releases, want %d", released, releasedBefore+1)
	}

	// Hosting that cannot start the deployment: the endpoint is Failed,
	// saying why.
	e.hosting.set(func(f *fakeHosting) { f.DeployErr = errors.New("hosting is shutting down") })
	e.ok(t, "SageMaker.CreateEndpoint", create("doomed", "Taken"))
	if d := e.describeEndpoint(t, "doomed"); d["EndpointStatus"] != "Failed" ||
		d["FailureReason"] != "sagebox could not start the deployment: hosting is shutting down" {
		t.Errorf("after a failed Deploy: %v", d)
	}
}

// TestHostingTags: the three kinds take Tags at Create (CreateEndpoint's
// Tags: [] included), ListTags/AddTags/DeleteTags work on every ARN kind
// (one name shared by model, config and endpoint, as estimator.deploy
// names them), Delete drops them, and ARNs that name nothing are refused.
func TestHostingTags(t *testing.T) {
	e := newEnv(t)
	tag := func(k, v string) any { return map[string]any{"Key": k, "Value": v} }
	m := sdkModel("Shared")
	m["Tags"] = []any{tag("kind", "model")}
	e.ok(t, "SageMaker.CreateModel", m)
	c := sdkEndpointConfig("Shared", "Shared")
	c["Tags"] = []any{tag("kind", "config")}
	e.ok(t, "SageMaker.CreateEndpointConfig", c)
	e.ok(t, "SageMaker.CreateEndpoint", map[string]any{"EndpointName": "Shared", "EndpointConfigName": "Shared", "Tags": []any{tag("kind", "endpoint")}})
	e.ok(t, "SageMaker.CreateEndpoint", map[string]any{"EndpointName": "untagged", "EndpointConfigName": "Shared", "Tags": []any{}})
	e.ok(t, "SageMaker.CreateTrainingJob", validJob("Shared"))

	list := func(arn string) any {
		t.Helper()
		return e.ok(t, "SageMaker.ListTags", map[string]any{"ResourceArn": arn, "MaxResults": 50})["Tags"]
	}
	for kind, want := range map[string][]any{
		"model":           {tag("kind", "model")},
		"endpoint-config": {tag("kind", "config")},
		"endpoint":        {tag("kind", "endpoint")},
		"training-job":    {},
	} {
		if got := list(arnPrefix + kind + "/shared"); !reflect.DeepEqual(got, want) {
			t.Errorf("ListTags %s = %v, want %v", kind, got, want)
		}
	}
	if got := list(arnPrefix + "endpoint/untagged"); !reflect.DeepEqual(got, []any{}) {
		t.Errorf("ListTags of an endpoint created with Tags: [] = %v", got)
	}
	e.ok(t, "SageMaker.AddTags", map[string]any{"ResourceArn": arnPrefix + "endpoint/Shared", "Tags": []any{tag("stage", "prod")}})
	e.ok(t, "SageMaker.DeleteTags", map[string]any{"ResourceArn": arnPrefix + "model/shared", "TagKeys": []any{"kind"}})
	if got := list(arnPrefix + "endpoint/shared"); !reflect.DeepEqual(got, []any{tag("kind", "endpoint"), tag("stage", "prod")}) {
		t.Errorf("after AddTags: %v", got)
	}
	if got := list(arnPrefix + "model/shared"); !reflect.DeepEqual(got, []any{}) {
		t.Errorf("after DeleteTags: %v", got)
	}

	for _, arn := range []string{
		arnPrefix + "endpoint/missing",
		arnPrefix + "model/missing",
		arnPrefix + "endpoint-config/missing",
		arnPrefix + "endpoints/shared",
		arnPrefix + "endpoint/",
		"arn:aws:sagemaker:eu-west-1:123456789012:endpoint/shared",
		"arn:aws:sagemaker:us-east-1:210987654321:endpoint/shared",
	} {
		e.fails(t, "SageMaker.ListTags", map[string]any{"ResourceArn": arn}, "ValidationException", "Requested resource not found: "+arn+".", true)
	}
	e.fails(t, "SageMaker.ListTags", map[string]any{"ResourceArn": "endpoint/shared"}, "ValidationException", "at 'resourceArn' failed to satisfy constraint", false)

	e.ok(t, "SageMaker.DeleteModel", map[string]any{"ModelName": "Shared"})
	e.ok(t, "SageMaker.DeleteEndpointConfig", map[string]any{"EndpointConfigName": "Shared"})
	e.ok(t, "SageMaker.DeleteEndpoint", map[string]any{"EndpointName": "Shared"})
	for _, kind := range []string{"model", "endpoint-config", "endpoint"} {
		e.fails(t, "SageMaker.ListTags", map[string]any{"ResourceArn": arnPrefix + kind + "/shared"}, "ValidationException", "Requested resource not found", false)
		// A new resource of the name starts without the old one's tags.
	}
	e.ok(t, "SageMaker.CreateModel", sdkModel("Shared"))
	if got := list(arnPrefix + "model/shared"); !reflect.DeepEqual(got, []any{}) {
		t.Errorf("a re-created model inherited tags: %v", got)
	}
}

// TestListEndpoints: filters, sorting and paging.
func TestListEndpoints(t *testing.T) {
	e := newEnv(t)
	e.ok(t, "SageMaker.CreateModel", sdkModel("m"))
	e.ok(t, "SageMaker.CreateEndpointConfig", sdkEndpointConfig("c", "m"))
	for i, name := range []string{"beta", "alpha", "gamma", "delta"} {
		e.clock.Advance(time.Second)
		e.hosting.set(func(f *fakeHosting) { f.autoPromote = i%2 == 0 })
		e.ok(t, "SageMaker.CreateEndpoint", map[string]any{"EndpointName": name, "EndpointConfigName": "c", "Tags": []any{}})
	}
	list := func(req map[string]any) ([]string, any) {
		t.Helper()
		out := e.ok(t, "SageMaker.ListEndpoints", req)
		for _, ep := range out["Endpoints"].([]any) {
			m := ep.(map[string]any)
			for _, k := range []string{"EndpointArn", "CreationTime", "LastModifiedTime", "EndpointStatus"} {
				if m[k] == nil {
					t.Errorf("summary without %s: %v", k, m)
				}
			}
		}
		return names(out["Endpoints"], "EndpointName"), out["NextToken"]
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	got, _ := list(map[string]any{})
	check("default (newest first)", got, []string{"delta", "gamma", "alpha", "beta"})
	got, _ = list(map[string]any{"StatusEquals": "InService"})
	check("InService", got, []string{"gamma", "beta"})
	got, _ = list(map[string]any{"StatusEquals": "Creating", "SortBy": "Name", "SortOrder": "Ascending"})
	check("Creating by name", got, []string{"alpha", "delta"})
	got, _ = list(map[string]any{"NameContains": "ta"})
	check("NameContains", got, []string{"delta", "beta"})
	after := startTime().Add(2 * time.Second).Unix()
	got, _ = list(map[string]any{"CreationTimeAfter": after})
	check("CreationTimeAfter", got, []string{"delta", "gamma"})
	got, _ = list(map[string]any{"CreationTimeBefore": float64(after) + 0.5, "LastModifiedTimeAfter": startTime().Unix()})
	check("CreationTimeBefore", got, []string{"alpha", "beta"})

	var all []string
	req := map[string]any{"SortBy": "Name", "MaxResults": 3}
	for n := 0; ; n++ {
		page, next := list(req)
		all = append(all, page...)
		if next == nil || n > 3 {
			break
		}
		req["NextToken"] = next
	}
	check("paged by name, descending", all, []string{"gamma", "delta", "beta", "alpha"})

	e.fails(t, "SageMaker.ListEndpoints", map[string]any{"SortBy": "Status"}, "ValidationException", "sorts by Name or CreationTime", false)
	e.fails(t, "SageMaker.ListEndpoints", map[string]any{"StatusEquals": "Running"}, "ValidationException", "at 'statusEquals' failed to satisfy constraint", false)
	e.fails(t, "SageMaker.ListEndpoints", map[string]any{"MaxResults": 101}, "ValidationException", "at 'maxResults' failed to satisfy constraint", false)
	e.fails(t, "SageMaker.ListEndpoints", map[string]any{"NextToken": "x"}, "ValidationException", "Invalid pagination token", false)
}

// TestNoHosting: a handler without hosting keeps models and configs
// working and answers the endpoint changes with ServiceUnavailable.
func TestNoHosting(t *testing.T) {
	e := newEnv(t)
	h := controlplane.New(controlplane.Config{Now: e.clock.Now}, e.jobs, e.logs, e.runner, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	bare := &env{jobs: e.jobs, logs: e.logs, srv: srv}
	bare.ok(t, "SageMaker.CreateModel", sdkModel("m"))
	bare.ok(t, "SageMaker.CreateEndpointConfig", sdkEndpointConfig("c", "m"))
	r := bare.call(t, "SageMaker.CreateEndpoint", map[string]any{"EndpointName": "e", "EndpointConfigName": "c", "Tags": []any{}})
	if code, msg := r.errorOf(t); r.status != 503 || code != "ServiceUnavailable" || !strings.Contains(msg, "without endpoint hosting") {
		t.Errorf("CreateEndpoint without hosting = %d %s %q", r.status, code, msg)
	}
	bare.ok(t, "SageMaker.ListEndpoints", map[string]any{})
}

// TestUpdateRefusedForCapacity: an UpdateEndpoint that hosting cannot
// reserve capacity for is refused with hosting's ResourceLimitExceeded and
// leaves the endpoint InService on what it serves.
func TestUpdateRefusedForCapacity(t *testing.T) {
	e := newEnv(t)
	e.deployed(t, "busy", true)
	e.ok(t, "SageMaker.CreateEndpointConfig", map[string]any{"EndpointConfigName": "bigger", "ProductionVariants": []any{
		map[string]any{"VariantName": "AllTraffic", "ModelName": "busy", "InstanceType": "ml.m5.xlarge", "InitialInstanceCount": 8},
	}})
	e.hosting.set(func(f *fakeHosting) {
		f.ReserveErr = sagebox.Errorf(sagebox.ErrResourceLimit, "8 instances of 1 slot do not fit the machine's 4 slots.")
	})
	e.fails(t, "SageMaker.UpdateEndpoint", map[string]any{"EndpointName": "busy", "EndpointConfigName": "bigger"}, "ResourceLimitExceeded",
		"8 instances of 1 slot do not fit the machine's 4 slots.", true)
	e.fails(t, "SageMaker.UpdateEndpointWeightsAndCapacities", map[string]any{"EndpointName": "busy",
		"DesiredWeightsAndCapacities": []any{map[string]any{"VariantName": "AllTraffic", "DesiredInstanceCount": 8}}}, "ResourceLimitExceeded", "do not fit", false)
	stored, err := e.jobs.Endpoint(t.Context(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	if stored.EndpointStatus != sagebox.EndpointInService || stored.Internal.Pending != nil || stored.Internal.Current.Generation != 1 || stored.EndpointConfigName != "busy" {
		t.Errorf("after refused updates: %s, pending %+v, current %+v", stored.EndpointStatus, stored.Internal.Pending, stored.Internal.Current)
	}
}
