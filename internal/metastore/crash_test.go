package metastore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/crashtest"
	"github.com/sagebox/sagebox/internal/metastore"
)

// TestCrashDurability starts a child process that writes jobs and reports
// each one once its method returned, SIGKILLs the child mid-stream (no Close,
// no checkpoint), and checks every reported write is in the database.
func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "meta.db")
	acked := crashtest.KillAfter(t, "TestCrashHelper", []string{"METASTORE_CRASH_HELPER=" + path}, 20)

	db, err := metastore.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open after crash: %v", err)
	}
	defer db.Close()
	for i := 1; i <= acked; i++ {
		name := fmt.Sprintf("crash-%d", i)
		job, err := db.TrainingJob(context.Background(), name)
		if err != nil {
			t.Fatalf("%s lost after SIGKILL: %v", name, err)
		}
		if job.TrainingJobStatus != sagebox.StatusCompleted {
			t.Errorf("%s status = %s; its acknowledged update was lost", name, job.TrainingJobStatus)
		}
	}
}

// TestCrashHelper is the child of TestCrashDurability; it does nothing in a
// normal test run.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv("METASTORE_CRASH_HELPER")
	if path == "" {
		t.Skip("helper process only")
	}
	ctx := context.Background()
	db, err := metastore.Open(ctx, path)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	for i := 1; ; i++ {
		name := fmt.Sprintf("crash-%d", i)
		if err := db.CreateTrainingJob(ctx, newJob(name, time.Duration(i)*time.Second)); err != nil {
			fmt.Println("create:", err)
			os.Exit(1)
		}
		if _, err := db.UpdateTrainingJob(ctx, name, func(j *sagebox.TrainingJob) error {
			j.TrainingJobStatus = sagebox.StatusCompleted
			return nil
		}); err != nil {
			fmt.Println("update:", err)
			os.Exit(1)
		}
		fmt.Println(crashtest.Ack(i))
	}
}
