package metastore

import (
	"context"
	"io/fs"
	"path/filepath"
	"reflect"
	"testing"
	"testing/fstest"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/sqldb"
)

// TestTagsMigration: a meta.db written before the tag table (tags inside
// the job's JSON) gets its tags moved into the table when Open migrates it.
func TestTagsMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "meta.db")
	v1, err := fs.ReadFile(migrationFiles, "migrations/0001_training_jobs.sql")
	if err != nil {
		t.Fatal(err)
	}
	old, err := sqldb.Open(ctx, path, sqldb.Options{Migrations: fstest.MapFS{"0001_training_jobs.sql": {Data: v1}}})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"TrainingJobName":"Old-Job","TrainingJobArn":"arn:aws:sagemaker:us-east-1:123456789012:training-job/old-job",` +
		`"Tags":[{"Key":"team","Value":"ml"},{"Key":"empty"}],"CreationTime":1772366400}`
	if _, err := old.W.ExecContext(ctx,
		`INSERT INTO training_jobs (name, status, creation_time, last_modified, body) VALUES ('Old-Job', 'Completed', 1, 1, ?)`, body); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open migrates: %v", err)
	}
	defer db.Close()
	got, err := db.Tags(ctx, "arn:aws:sagemaker:us-east-1:123456789012:training-job/old-job")
	if err != nil {
		t.Fatal(err)
	}
	want := []sagebox.Tag{{Key: "team", Value: "ml"}, {Key: "empty", Value: ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("migrated tags = %v, want %v", got, want)
	}
	job, err := db.TrainingJob(ctx, "old-job")
	if err != nil {
		t.Fatal(err)
	}
	if job.Tags != nil {
		t.Errorf("an old body's Tags still show on the job: %v", job.Tags)
	}
}
