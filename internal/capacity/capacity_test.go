package capacity

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func host(n int) Resources { return Resources{Slots: n, MemoryMiB: int64(n) * 512} }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWorkThatCanNeverFitIsRefused(t *testing.T) {
	p := NewPool(Resources{Slots: 8, MemoryMiB: 4096, GPUs: 1})
	err := p.Reserve(context.Background(), "job-a", Resources{Slots: 9, MemoryMiB: 8192, GPUs: 2})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	want := "more than the machine's capacity: it needs 9 slots (the machine has 8) and 8192 MiB of memory (the machine has 4096 MiB) and 2 GPUs (the machine has 1)"
	if err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
	if p.Used() != (Resources{}) || p.Waiting() != 0 {
		t.Errorf("a refusal changed the pool: used %v, waiting %d", p.Used(), p.Waiting())
	}
}

func TestReservationsWaitInArrivalOrder(t *testing.T) {
	p := NewPool(host(4))
	ctx := context.Background()
	if err := p.Reserve(ctx, "running", host(3)); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	for i, w := range []struct {
		owner string
		n     int
	}{{"big", 4}, {"small-1", 1}, {"small-2", 1}} {
		go func() {
			if err := p.Reserve(ctx, w.owner, host(w.n)); err != nil {
				t.Error(err)
			}
			order <- w.owner
		}()
		waitFor(t, w.owner+" queued", func() bool { return p.Waiting() == i+1 })
	}
	waitFor(t, "three waiting", func() bool { return p.Waiting() == 3 })
	// One slot is free, but the big reservation came first: the small
	// ones may not overtake it.
	select {
	case o := <-order:
		t.Fatalf("%s was admitted past an earlier waiter", o)
	case <-time.After(50 * time.Millisecond):
	}
	p.Release("running")
	if o := <-order; o != "big" {
		t.Fatalf("first admitted %s, want big", o)
	}
	p.Release("big")
	<-order
	<-order
	if u := p.Used(); u != host(2) {
		t.Errorf("used %v", u)
	}
}

func TestACanceledWaiterLeavesAndLetsOthersIn(t *testing.T) {
	p := NewPool(host(2))
	if err := p.Reserve(context.Background(), "a", host(1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Reserve(ctx, "big", host(2)) }()
	waitFor(t, "big queued", func() bool { return p.Waiting() == 1 })
	small := make(chan error, 1)
	go func() { small <- p.Reserve(context.Background(), "small", host(1)) }()
	waitFor(t, "small queued", func() bool { return p.Waiting() == 2 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled reservation: %v", err)
	}
	if err := <-small; err != nil {
		t.Fatal(err)
	}
	if p.Holds("big") != (Resources{}) || p.Used() != host(2) {
		t.Errorf("used %v, big holds %v", p.Used(), p.Holds("big"))
	}
}

func TestTryReserveSaysWhatHoldsTheCapacity(t *testing.T) {
	p := NewPool(host(2))
	if err := p.TryReserve("training-job/a", host(2)); err != nil {
		t.Fatal(err)
	}
	err := p.TryReserve("endpoint/e", host(1))
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "it needs 1 slots, 512 MiB of memory, and 2 slots, 1024 MiB of memory of 2 slots, 1024 MiB of memory are in use") ||
		!strings.HasSuffix(err.Error(), "in use by training-job/a") {
		t.Errorf("got %v", err)
	}
	p.Release("training-job/a")
	if err := p.TryReserve("endpoint/e", host(1)); err != nil {
		t.Errorf("after the release: %v", err)
	}
}

func TestClaimMayExceedTheCapacity(t *testing.T) {
	p := NewPool(host(1))
	p.Claim("recovered-1", host(1))
	p.Claim("recovered-2", host(1))
	if u := p.Used(); u != host(2) {
		t.Fatalf("used %v", u)
	}
	done := make(chan struct{})
	go func() { p.Reserve(context.Background(), "new", host(1)); close(done) }()
	waitFor(t, "new queued", func() bool { return p.Waiting() == 1 })
	p.Release("recovered-1")
	select {
	case <-done:
		t.Fatal("admitted while the pool is still full")
	case <-time.After(20 * time.Millisecond):
	}
	p.Release("recovered-2")
	<-done
}

func TestReleasePartGivesBackSomeAndAdmitsWaiters(t *testing.T) {
	p := NewPool(Resources{Slots: 3, MemoryMiB: 3})
	if err := p.TryReserve("endpoint/a", Resources{Slots: 3, MemoryMiB: 3}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Reserve(context.Background(), "training-job/x", Resources{Slots: 1, MemoryMiB: 1}) }()
	for p.Waiting() == 0 {
		time.Sleep(time.Millisecond)
	}
	p.ReleasePart("endpoint/a", Resources{Slots: 1, MemoryMiB: 1})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := p.Holds("endpoint/a"); got != (Resources{Slots: 2, MemoryMiB: 2}) {
		t.Errorf("endpoint holds %v, want 2 slots", got)
	}
	p.ReleasePart("endpoint/a", Resources{Slots: 5, MemoryMiB: 5}) // more than held: all of it
	if got := p.Used(); got != (Resources{Slots: 1, MemoryMiB: 1}) {
		t.Errorf("used %v, want only the job's", got)
	}
}
