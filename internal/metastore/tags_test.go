package metastore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

func tagsOf(t *testing.T, db *metastore.DB, arn string) []sagebox.Tag {
	t.Helper()
	tags, err := db.Tags(context.Background(), arn)
	if err != nil {
		t.Fatalf("Tags(%s): %v", arn, err)
	}
	return tags
}

// TestTagsKeptFromCreate: the job's Tags go to the tag table, in order,
// and the stored job keeps none.
func TestTagsKeptFromCreate(t *testing.T) {
	db, _ := openDB(t)
	job := newJob("tagged", 0)
	job.Tags = []sagebox.Tag{{Key: "team", Value: "ml"}, {Key: "cost", Value: ""}, {Key: "a", Value: "1"}}
	mustCreate(t, db, job)
	want := []sagebox.Tag{{Key: "team", Value: "ml"}, {Key: "cost", Value: ""}, {Key: "a", Value: "1"}}
	if got := tagsOf(t, db, job.TrainingJobArn); !reflect.DeepEqual(got, want) {
		t.Errorf("Tags = %v, want %v", got, want)
	}
	stored, err := db.TrainingJob(context.Background(), "tagged")
	if err != nil {
		t.Fatal(err)
	}
	if stored.Tags != nil {
		t.Errorf("stored job keeps Tags %v; the tag table is their only home", stored.Tags)
	}
	// A failed create (duplicate name) adds no tags.
	dup := newJob("tagged", 0)
	dup.Tags = []sagebox.Tag{{Key: "intruder", Value: "x"}}
	if err := db.CreateTrainingJob(context.Background(), dup); err == nil {
		t.Fatal("duplicate create succeeded")
	}
	if got := tagsOf(t, db, job.TrainingJobArn); !reflect.DeepEqual(got, want) {
		t.Errorf("after a refused duplicate: Tags = %v, want %v", got, want)
	}
}

func TestTagsAddOverwriteDelete(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	const arn = "arn:aws:sagemaker:us-east-1:123456789012:model/m"
	if got := tagsOf(t, db, arn); got == nil || len(got) != 0 {
		t.Fatalf("untagged resource: Tags = %#v, want an empty non-nil list", got)
	}
	if err := db.AddTags(ctx, arn, []sagebox.Tag{{Key: "b", Value: "1"}, {Key: "a", Value: "2"}}, 50); err != nil {
		t.Fatal(err)
	}
	// Overwriting a key keeps its place; a new key goes last.
	if err := db.AddTags(ctx, arn, []sagebox.Tag{{Key: "c", Value: "3"}, {Key: "b", Value: "new"}}, 50); err != nil {
		t.Fatal(err)
	}
	want := []sagebox.Tag{{Key: "b", Value: "new"}, {Key: "a", Value: "2"}, {Key: "c", Value: "3"}}
	if got := tagsOf(t, db, arn); !reflect.DeepEqual(got, want) {
		t.Errorf("Tags = %v, want %v", got, want)
	}
	// Keys are case-sensitive; the ARN is not.
	if err := db.AddTags(ctx, "ARN:aws:sagemaker:us-east-1:123456789012:model/M", []sagebox.Tag{{Key: "A", Value: "upper"}}, 50); err != nil {
		t.Fatal(err)
	}
	want = append(want, sagebox.Tag{Key: "A", Value: "upper"})
	if got := tagsOf(t, db, arn); !reflect.DeepEqual(got, want) {
		t.Errorf("Tags = %v, want %v", got, want)
	}
	if err := db.DeleteTags(ctx, arn, []string{"a", "missing", "A"}); err != nil {
		t.Fatal(err)
	}
	want = []sagebox.Tag{{Key: "b", Value: "new"}, {Key: "c", Value: "3"}}
	if got := tagsOf(t, db, arn); !reflect.DeepEqual(got, want) {
		t.Errorf("after DeleteTags: Tags = %v, want %v", got, want)
	}
	// Another resource's tags are its own.
	if got := tagsOf(t, db, arn+"x"); len(got) != 0 {
		t.Errorf("other resource: %v", got)
	}
	if err := db.DeleteAllTags(ctx, arn); err != nil {
		t.Fatal(err)
	}
	if got := tagsOf(t, db, arn); len(got) != 0 {
		t.Errorf("after DeleteAllTags: %v", got)
	}
}

// TestAddTagsLimitIsAtomic: an AddTags that would pass the limit changes
// nothing, even the keys it would only have overwritten.
func TestAddTagsLimitIsAtomic(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	const arn = "arn:aws:sagemaker:us-east-1:123456789012:endpoint/e"
	if err := db.AddTags(ctx, arn, []sagebox.Tag{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}, 3); err != nil {
		t.Fatal(err)
	}
	err := db.AddTags(ctx, arn, []sagebox.Tag{{Key: "a", Value: "changed"}, {Key: "c", Value: "3"}, {Key: "d", Value: "4"}}, 3)
	if !errors.Is(err, metastore.ErrTooManyTags) {
		t.Fatalf("AddTags past the limit: err = %v, want ErrTooManyTags", err)
	}
	want := []sagebox.Tag{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}
	if got := tagsOf(t, db, arn); !reflect.DeepEqual(got, want) {
		t.Errorf("Tags = %v, want %v (unchanged)", got, want)
	}
	// Overwriting keys at the limit is fine.
	if err := db.AddTags(ctx, arn, []sagebox.Tag{{Key: "c", Value: "3"}, {Key: "a", Value: "x"}}, 3); err != nil {
		t.Errorf("AddTags reaching the limit exactly: %v", err)
	}
}
