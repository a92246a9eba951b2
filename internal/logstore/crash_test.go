package logstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sagebox/sagebox/internal/crashtest"
	"github.com/sagebox/sagebox/internal/logstore"
)

// TestCrashDurability SIGKILLs a child process that keeps appending batches
// and checks that every batch it saw Append return for is readable.
func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	acked := crashtest.KillAfter(t, "TestCrashHelper", []string{"LOGSTORE_CRASH_HELPER=" + dir}, 50)

	s, err := logstore.Open(context.Background(), dir)
	if err != nil {
		t.Fatalf("Open after crash: %v", err)
	}
	defer s.Close()
	page, err := s.Events(context.Background(), "g", "s", logstore.EventQuery{StartFromHead: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) < acked*10 {
		t.Errorf("%d events after SIGKILL; want at least %d acknowledged", len(page.Events), acked*10)
	}
}

// TestCrashHelper is the child of TestCrashDurability; it does nothing in a
// normal test run.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv("LOGSTORE_CRASH_HELPER")
	if dir == "" {
		t.Skip("helper process only")
	}
	s, err := logstore.Open(context.Background(), dir)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	for i := 1; ; i++ {
		if err := s.Append(context.Background(), "g", "s", lines(fmt.Sprintf("batch %d", i), int64(i*10), 10)); err != nil {
			fmt.Println("append:", err)
			os.Exit(1)
		}
		fmt.Println(crashtest.Ack(i))
	}
}
