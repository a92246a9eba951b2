package metastore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

func TestHostingResourcesAreSeparateNameSpaces(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	arn := func(kind string) string { return "arn:aws:sagemaker:us-east-1:123456789012:" + kind + "/same" }

	m := &sagebox.Model{ModelName: "Same", ModelArn: arn("model"), CreationTime: sagebox.NewTime(now),
		PrimaryContainer: &sagebox.ContainerDefinition{ModelDataUrl: "s3://b/model.tar.gz", Environment: map[string]string{"SAGEMAKER_PROGRAM": "inference.py"}},
		Tags:             []sagebox.Tag{{Key: "team", Value: "ml"}}}
	if err := db.CreateModel(ctx, m); err != nil {
		t.Fatal(err)
	}
	variants := json.RawMessage(`[{"VariantName":"AllTraffic","ModelName":"Same","InitialVariantWeight":1,"InitialInstanceCount":1,"InstanceType":"ml.m5.xlarge"}]`)
	c := &sagebox.EndpointConfig{EndpointConfigName: "same", EndpointConfigArn: arn("endpoint-config"), ProductionVariants: variants, CreationTime: sagebox.NewTime(now)}
	if err := db.CreateEndpointConfig(ctx, c); err != nil {
		t.Fatal(err)
	}
	e := &sagebox.Endpoint{EndpointName: "same", EndpointArn: arn("endpoint")}
	e.BeginCreate(now, &sagebox.Deployment{EndpointConfigName: "same", Variants: []sagebox.DeployedVariant{{VariantName: "AllTraffic", InstanceCount: 1, Weight: 1, Model: *m}}})
	if err := db.CreateEndpoint(ctx, e); err != nil {
		t.Fatal(err)
	}

	if err := db.CreateModel(ctx, &sagebox.Model{ModelName: "SAME", CreationTime: sagebox.NewTime(now)}); !errors.Is(err, metastore.ErrExists) {
		t.Fatalf("second model with the name in another case: %v, want ErrExists", err)
	}
	if err := db.CreateEndpoint(ctx, &sagebox.Endpoint{EndpointName: "same", CreationTime: sagebox.NewTime(now)}); !errors.Is(err, metastore.ErrExists) {
		t.Fatalf("second endpoint: %v, want ErrExists", err)
	}

	gotM, err := db.Model(ctx, "same")
	if err != nil || gotM.PrimaryContainer.Environment["SAGEMAKER_PROGRAM"] != "inference.py" || gotM.Tags != nil {
		t.Fatalf("model = %+v, %v", gotM, err)
	}
	if tags, _ := db.Tags(ctx, m.ModelArn); len(tags) != 1 {
		t.Fatalf("model tags = %v", tags)
	}
	gotC, err := db.EndpointConfig(ctx, "same")
	if err != nil || string(gotC.ProductionVariants) != string(variants) {
		t.Fatalf("config variants = %s, %v; want them byte for byte", gotC.ProductionVariants, err)
	}
	gotE, err := db.Endpoint(ctx, "same")
	if err != nil || gotE.EndpointStatus != sagebox.EndpointCreating || gotE.Internal.Pending == nil || gotE.Internal.Pending.Generation != 1 ||
		gotE.Internal.Pending.Variants[0].Model.PrimaryContainer.ModelDataUrl != "s3://b/model.tar.gz" {
		t.Fatalf("endpoint = %+v, %v", gotE, err)
	}
	// The internal record never shows in the API's shape.
	if b, _ := json.Marshal(gotE); strings.Contains(string(b), "Pending") {
		t.Fatalf("endpoint JSON leaks its internal record: %s", b)
	}

	// Deleting the model and the config leaves the endpoint's snapshot.
	if err := db.DeleteModel(ctx, "same"); err != nil {
		t.Fatal(err)
	}
	if tags, _ := db.Tags(ctx, m.ModelArn); len(tags) != 0 {
		t.Fatalf("tags survived DeleteModel: %v", tags)
	}
	if err := db.DeleteEndpointConfig(ctx, "same"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Model(ctx, "same"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("deleted model: %v", err)
	}
	if err := db.DeleteModel(ctx, "same"); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
	up, err := db.UpdateEndpoint(ctx, "same", func(e *sagebox.Endpoint) error {
		if !e.Promote(now.Add(time.Second), 1) {
			return errors.New("not promoted")
		}
		return nil
	})
	if err != nil || up.EndpointStatus != sagebox.EndpointInService || up.Internal.Current == nil {
		t.Fatalf("promote: %+v, %v", up, err)
	}
	sentinel := errors.New("abort")
	if _, err := db.UpdateEndpoint(ctx, "same", func(*sagebox.Endpoint) error { return sentinel }); err != sentinel {
		t.Fatalf("fn's error: %v", err)
	}
	all, err := db.Endpoints(ctx)
	if err != nil || len(all) != 1 || all[0].Internal.Current.Variants[0].Model.ModelName != "Same" {
		t.Fatalf("Endpoints = %v, %v", all, err)
	}
	if err := db.DeleteEndpoint(ctx, "SAME"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateEndpoint(ctx, "same", func(*sagebox.Endpoint) error { return nil }); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("update of a deleted endpoint: %v", err)
	}
}

func TestListEndpointsFiltersSortsAndPages(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 7; i++ {
		e := &sagebox.Endpoint{EndpointName: fmt.Sprintf("ep-%d", i)}
		e.BeginCreate(base.Add(time.Duration(i)*time.Minute), &sagebox.Deployment{})
		if i%2 == 0 {
			e.Promote(base.Add(time.Duration(i)*time.Minute), 1)
		}
		if err := db.CreateEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
		if err := db.CreateModel(ctx, &sagebox.Model{ModelName: fmt.Sprintf("m-%d", i), CreationTime: sagebox.NewTime(base.Add(time.Duration(i) * time.Minute))}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	token := ""
	for {
		page, next, err := db.ListEndpoints(ctx, metastore.ResourceQuery{StatusEquals: sagebox.EndpointInService, MaxResults: 3, NextToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			names = append(names, e.EndpointName)
		}
		if next == "" {
			break
		}
		token = next
	}
	if fmt.Sprint(names) != "[ep-6 ep-4 ep-2 ep-0]" {
		t.Fatalf("InService endpoints newest first = %v", names)
	}
	page, _, err := db.ListModels(ctx, metastore.ResourceQuery{SortBy: metastore.SortByName, SortOrder: metastore.SortAscending, NameContains: "M-", CreationTimeAfter: base.Add(90 * time.Second)})
	if err != nil || len(page) != 5 || page[0].ModelName != "m-2" {
		t.Fatalf("models = %v, %v", page, err)
	}
	if _, _, err := db.ListModels(ctx, metastore.ResourceQuery{NextToken: "garbage"}); !errors.Is(err, metastore.ErrInvalidToken) {
		t.Fatalf("bad token: %v", err)
	}
	_, next, _ := db.ListModels(ctx, metastore.ResourceQuery{MaxResults: 2})
	if _, _, err := db.ListModels(ctx, metastore.ResourceQuery{MaxResults: 2, NextToken: next, SortBy: metastore.SortByName}); !errors.Is(err, metastore.ErrInvalidToken) {
		t.Fatalf("token of another sort: %v", err)
	}
}
