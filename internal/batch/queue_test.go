package batch

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

// fakeClock is a manual clock; timers fire when Advance passes their
// deadline. timers receives one value per NewTimer call so tests can wait
// until a taker is sleeping.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	pending []*fakeTimer
	timers  chan time.Duration
}

type fakeTimer struct {
	clock *fakeClock
	at    time.Time
	c     chan time.Time
	done  bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1000, 0), timers: make(chan time.Duration, 100)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	t := &fakeTimer{clock: c, at: c.now.Add(d), c: make(chan time.Time, 1)}
	c.pending = append(c.pending, t)
	c.mu.Unlock()
	c.timers <- d
	return t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.pending {
		if !t.done && !t.at.After(c.now) {
			t.done = true
			t.c <- c.now
		}
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// waitTimer waits until the taker has started its batch timer and returns
// the duration it asked for.
func waitTimer(t *testing.T, c *fakeClock) time.Duration {
	t.Helper()
	select {
	case d := <-c.timers:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("taker never started a timer")
		return 0
	}
}

type nextResult struct {
	batch []int
	err   error
}

func nextAsync(ctx context.Context, q *Queue[int]) <-chan nextResult {
	ch := make(chan nextResult, 1)
	go func() {
		b, err := q.Next(ctx, nil)
		ch <- nextResult{b, err}
	}()
	return ch
}

func recv(t *testing.T, ch <-chan nextResult) nextResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return")
		return nextResult{}
	}
}

func notYet(t *testing.T, ch <-chan nextResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("Next returned early: %v", r)
	case <-time.After(20 * time.Millisecond):
	}
}

func mustPush(t *testing.T, q *Queue[int], vs ...int) {
	t.Helper()
	for _, v := range vs {
		if err := q.Push(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNextBatchFormation(t *testing.T) {
	tests := []struct {
		name      string
		batchSize int
		delay     time.Duration
		before    []int // pushed before Next
		after     []int // pushed after the timer started
		advance   time.Duration
		want      []int
		left      int
	}{
		{"size one does not wait", 1, time.Second, []int{1, 2}, nil, 0, []int{1}, 1},
		{"full batch returns at once", 3, time.Second, []int{1, 2, 3, 4}, nil, 0, []int{1, 2, 3}, 1},
		{"fills while waiting", 3, time.Second, []int{1}, []int{2, 3}, 0, []int{1, 2, 3}, 0},
		{"size cap while waiting", 2, time.Second, []int{1}, []int{2, 3}, 0, []int{1, 2}, 1},
		{"delay cap", 4, 100 * time.Millisecond, []int{1}, []int{2}, 100 * time.Millisecond, []int{1, 2}, 0},
		{"zero delay", 4, 0, []int{1, 2}, nil, 0, []int{1, 2}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			q := New[int](Config{Capacity: 10, BatchSize: tt.batchSize, MaxDelay: tt.delay, Clock: clock})
			mustPush(t, q, tt.before...)
			ch := nextAsync(context.Background(), q)
			if tt.after != nil || tt.advance > 0 {
				if d := waitTimer(t, clock); d != tt.delay {
					t.Fatalf("timer for %v, want %v", d, tt.delay)
				}
				for _, v := range tt.after {
					mustPush(t, q, v)
				}
				if tt.advance > 0 {
					notYet(t, ch)
					clock.Advance(tt.advance - time.Nanosecond)
					notYet(t, ch)
					clock.Advance(time.Nanosecond)
				}
			}
			r := recv(t, ch)
			if r.err != nil || !reflect.DeepEqual(r.batch, tt.want) {
				t.Fatalf("Next = %v, %v; want %v", r.batch, r.err, tt.want)
			}
			if q.Len() != tt.left {
				t.Fatalf("Len = %d, want %d", q.Len(), tt.left)
			}
		})
	}
}

func TestDelayMeasuredFromFirstTake(t *testing.T) {
	clock := newFakeClock()
	q := New[int](Config{Capacity: 10, BatchSize: 8, MaxDelay: 100 * time.Millisecond, Clock: clock})
	ch := nextAsync(context.Background(), q)
	// Time passes while nothing waits: it does not count.
	notYet(t, ch)
	clock.Advance(time.Hour)
	mustPush(t, q, 1)
	waitTimer(t, clock)
	clock.Advance(60 * time.Millisecond)
	mustPush(t, q, 2)
	notYet(t, ch)
	clock.Advance(40 * time.Millisecond)
	if r := recv(t, ch); !reflect.DeepEqual(r.batch, []int{1, 2}) {
		t.Fatalf("batch %v", r.batch)
	}
}

func TestQueueFull(t *testing.T) {
	q := New[int](Config{Capacity: 2})
	mustPush(t, q, 1, 2)
	err := q.Push(context.Background(), 3)
	var full *FullError
	if !errors.As(err, &full) || !errors.Is(err, ErrFull) || full.Waiting != 2 {
		t.Fatalf("Push = %v, want *FullError{2}", err)
	}
	if err.Error() != "queue is full (2 waiting)" {
		t.Fatalf("message %q", err)
	}
}

func TestCancelledRequestsAreDropped(t *testing.T) {
	q := New[int](Config{Capacity: 10, BatchSize: 3})
	gone, cancel := context.WithCancel(context.Background())
	mustPush(t, q, 1)
	if err := q.Push(gone, 2); err != nil {
		t.Fatal(err)
	}
	mustPush(t, q, 3, 4)
	cancel()
	b, err := q.Next(context.Background(), nil)
	if err != nil || !reflect.DeepEqual(b, []int{1, 3, 4}) {
		t.Fatalf("Next = %v, %v", b, err)
	}
}

func TestRemove(t *testing.T) {
	q := New[int](Config{Capacity: 3, BatchSize: 3})
	// Wrap around the ring first.
	mustPush(t, q, 9, 9)
	if b, _ := q.Next(context.Background(), nil); len(b) != 2 {
		t.Fatalf("batch %v", b)
	}
	mustPush(t, q, 1, 2, 3)
	if !q.Remove(2) || q.Remove(2) || q.Len() != 2 {
		t.Fatalf("Remove/Len wrong: len %d", q.Len())
	}
	mustPush(t, q, 4)
	b, err := q.Next(context.Background(), nil)
	if err != nil || !reflect.DeepEqual(b, []int{1, 3, 4}) {
		t.Fatalf("Next = %v, %v", b, err)
	}
}

func TestNextContextDone(t *testing.T) {
	clock := newFakeClock()
	q := New[int](Config{Capacity: 10, BatchSize: 4, MaxDelay: time.Second, Clock: clock})

	// Before the first request: ctx's error.
	ctx, cancel := context.WithCancel(context.Background())
	ch := nextAsync(ctx, q)
	notYet(t, ch)
	cancel()
	if r := recv(t, ch); !errors.Is(r.err, context.Canceled) || len(r.batch) != 0 {
		t.Fatalf("Next = %v, %v", r.batch, r.err)
	}

	// While filling: what it holds, no error.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	mustPush(t, q, 1)
	ch = nextAsync(ctx, q)
	waitTimer(t, clock)
	cancel()
	if r := recv(t, ch); r.err != nil || !reflect.DeepEqual(r.batch, []int{1}) {
		t.Fatalf("Next = %v, %v", r.batch, r.err)
	}
}

func TestCloseDrains(t *testing.T) {
	clock := newFakeClock()
	q := New[int](Config{Capacity: 10, BatchSize: 2, MaxDelay: time.Hour, Clock: clock})
	mustPush(t, q, 1, 2, 3)
	q.Close()
	if err := q.Push(context.Background(), 4); !errors.Is(err, ErrClosed) {
		t.Fatalf("Push after Close = %v", err)
	}
	want := [][]int{{1, 2}, {3}}
	for _, w := range want {
		b, err := q.Next(context.Background(), nil)
		if err != nil || !reflect.DeepEqual(b, w) {
			t.Fatalf("Next = %v, %v; want %v", b, err, w)
		}
	}
	if _, err := q.Next(context.Background(), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next on empty closed queue = %v", err)
	}
}

func TestCloseWakesWaitingTakers(t *testing.T) {
	clock := newFakeClock()
	q := New[int](Config{Capacity: 10, BatchSize: 2, MaxDelay: time.Hour, Clock: clock})
	a := nextAsync(context.Background(), q)
	b := nextAsync(context.Background(), q)
	notYet(t, a)
	q.Close()
	for _, ch := range []<-chan nextResult{a, b} {
		if r := recv(t, ch); !errors.Is(r.err, ErrClosed) {
			t.Fatalf("Next = %v, %v", r.batch, r.err)
		}
	}
}

func TestCloseWhileFilling(t *testing.T) {
	clock := newFakeClock()
	q := New[int](Config{Capacity: 10, BatchSize: 4, MaxDelay: time.Hour, Clock: clock})
	mustPush(t, q, 1)
	ch := nextAsync(context.Background(), q)
	waitTimer(t, clock)
	q.Close()
	if r := recv(t, ch); r.err != nil || !reflect.DeepEqual(r.batch, []int{1}) {
		t.Fatalf("Next = %v, %v", r.batch, r.err)
	}
}

func TestConcurrentTakersDoNotSplitBatches(t *testing.T) {
	clock := newFakeClock()
	q := New[int](Config{Capacity: 100, BatchSize: 4, MaxDelay: time.Second, Clock: clock})
	a := nextAsync(context.Background(), q)
	b := nextAsync(context.Background(), q)
	mustPush(t, q, 1)
	waitTimer(t, clock)
	mustPush(t, q, 2, 3, 4, 5)
	// One taker returns 1..4 at once; the other takes 5 and waits for more.
	waitTimer(t, clock)
	clock.Advance(time.Second)
	first := recv(t, a)
	second := recv(t, b)
	if len(first.batch)+len(second.batch) != 5 || (len(first.batch) != 4 && len(second.batch) != 4) {
		t.Fatalf("batches %v and %v, want one of 4 and one of 1", first.batch, second.batch)
	}
}

func TestManyProducersAndTakers(t *testing.T) {
	q := New[int](Config{Capacity: 1000, BatchSize: 8, MaxDelay: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const total = 2000
	var got sync.Map
	var wg sync.WaitGroup
	counts := make(chan int, total)
	for range 4 {
		wg.Go(func() {
			for {
				b, err := q.Next(ctx, nil)
				if err != nil {
					return
				}
				if len(b) > 8 {
					t.Errorf("batch of %d", len(b))
				}
				for _, v := range b {
					if _, dup := got.LoadOrStore(v, true); dup {
						t.Errorf("%d delivered twice", v)
					}
					counts <- v
				}
			}
		})
	}
	for i := range total {
		for q.Push(context.Background(), i) != nil {
			time.Sleep(time.Microsecond)
		}
	}
	for range total {
		select {
		case <-counts:
		case <-time.After(5 * time.Second):
			t.Fatal("lost requests")
		}
	}
	q.Close()
	wg.Wait()
}

func TestRequeue(t *testing.T) {
	ctx := context.Background()
	q := New[int](Config{Capacity: 3, BatchSize: 10})
	for _, v := range []int{1, 2} {
		if err := q.Push(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	// Taken 7, 8, 9 earlier; 8 and 9 were never started: back to the front,
	// in order, even though that goes over capacity (2 + 2 > 3).
	q.Requeue([]int{8, 9})
	if q.Len() != 4 {
		t.Fatalf("Len = %d, want 4", q.Len())
	}
	if err := q.Push(ctx, 3); !errors.Is(err, ErrFull) {
		t.Fatalf("Push over capacity = %v, want ErrFull", err)
	}
	got, err := q.Next(ctx, nil)
	if err != nil || !reflect.DeepEqual(got, []int{8, 9, 1, 2}) {
		t.Fatalf("Next = %v, %v; want [8 9 1 2]", got, err)
	}
	// Capacity applies again once drained; the grown ring keeps FIFO order
	// across wrap-around.
	for _, v := range []int{4, 5, 6} {
		if err := q.Push(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	q.Requeue([]int{7})
	q.Close()
	q.Requeue([]int{0}) // accepted after Close, for the drain
	if err := q.Push(ctx, 9); !errors.Is(err, ErrClosed) {
		t.Fatalf("Push after Close = %v", err)
	}
	got, err = q.Next(ctx, nil)
	if err != nil || !reflect.DeepEqual(got, []int{0, 7, 4, 5, 6}) {
		t.Fatalf("Next after Close = %v, %v; want [0 7 4 5 6]", got, err)
	}
	if _, err := q.Next(ctx, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next on a closed, empty queue = %v", err)
	}
}
