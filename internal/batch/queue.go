// Package batch implements dynamic batching for the model server: a bounded
// FIFO of waiting requests per model from which workers take batches.
//
// A batch starts with the first waiting request; the taker then waits up to
// MaxDelay, measured from the moment it took that first request, for more
// requests until the batch holds BatchSize of them. Only one taker forms a
// batch at a time, so concurrent workers do not split a burst into many
// small batches (TorchServe's pollBatch behaves the same way). Requests
// whose context is done when they reach the front are dropped.
//
// The package does no I/O; time comes from an injectable Clock.
package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrClosed is returned by Push after Close, and by Next once a closed queue
// is empty.
var ErrClosed = errors.New("queue closed")

// ErrFull is matched (errors.Is) by the *FullError that Push returns.
var ErrFull = errors.New("queue full")

// FullError is returned by Push when the queue holds its capacity.
type FullError struct {
	// Waiting is the number of requests in the queue.
	Waiting int
}

// Error says how many requests are waiting.
func (e *FullError) Error() string { return fmt.Sprintf("queue is full (%d waiting)", e.Waiting) }

// Is reports whether target is ErrFull.
func (e *FullError) Is(target error) bool { return target == ErrFull }

// Config sets the limits of a Queue.
type Config struct {
	// Capacity is the most requests that may wait; at least 1.
	Capacity int
	// BatchSize is the most requests in one batch; at least 1.
	BatchSize int
	// MaxDelay is how long a taker waits for a batch to fill, measured
	// from when it took the first request. Zero means no waiting.
	MaxDelay time.Duration
	// Clock defaults to SystemClock.
	Clock Clock
}

type entry[T any] struct {
	ctx context.Context
	v   T
}

// Queue is a bounded FIFO of requests from which batches are taken. T is
// usually a pointer to the caller's per-request state. All methods are safe
// for concurrent use.
type Queue[T comparable] struct {
	cfg Config

	mu     sync.Mutex
	ring   []entry[T] // length Capacity, more only after a Requeue over capacity
	head   int
	n      int
	closed bool

	// notify holds a token when something was pushed or the queue closed
	// since the current taker last looked.
	notify chan struct{}
	// taker holds a token while no one is forming a batch.
	taker chan struct{}
}

// New returns an empty queue. Values below 1 for Capacity and BatchSize
// are taken as 1.
func New[T comparable](cfg Config) *Queue[T] {
	cfg.Capacity = max(cfg.Capacity, 1)
	cfg.BatchSize = max(cfg.BatchSize, 1)
	cfg.MaxDelay = max(cfg.MaxDelay, 0)
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	q := &Queue[T]{
		cfg:    cfg,
		ring:   make([]entry[T], cfg.Capacity),
		notify: make(chan struct{}, 1),
		taker:  make(chan struct{}, 1),
	}
	q.taker <- struct{}{}
	return q
}

// Config returns the queue's configuration with defaults applied.
func (q *Queue[T]) Config() Config { return q.cfg }

// Len returns the number of waiting requests.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Push appends v. ctx is the request's context: once it is done, v is
// dropped instead of being handed to a taker. Push never blocks; it returns
// a *FullError when the queue is at capacity and ErrClosed after Close.
func (q *Queue[T]) Push(ctx context.Context, v T) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	if q.n >= q.cfg.Capacity {
		n := q.n
		q.mu.Unlock()
		return &FullError{Waiting: n}
	}
	if q.n == len(q.ring) {
		q.grow(q.n + 1) // only after a Requeue went over capacity
	}
	q.ring[(q.head+q.n)%len(q.ring)] = entry[T]{ctx: ctx, v: v}
	q.n++
	q.mu.Unlock()
	q.wake()
	return nil
}

// Requeue puts vs back at the front of the queue, in order, for a taker
// that took them but could not start them (its worker died). It never
// refuses: not when the queue is closed (they are then taken by whoever
// drains it), nor over capacity (they were admitted once already).
func (q *Queue[T]) Requeue(vs []T) {
	if len(vs) == 0 {
		return
	}
	q.mu.Lock()
	if q.n+len(vs) > len(q.ring) {
		q.grow(q.n + len(vs))
	}
	for i := len(vs) - 1; i >= 0; i-- {
		q.head = (q.head - 1 + len(q.ring)) % len(q.ring)
		q.ring[q.head] = entry[T]{v: vs[i]}
		q.n++
	}
	q.mu.Unlock()
	q.wake()
}

// grow makes room for n entries, keeping their order. Called with mu held.
func (q *Queue[T]) grow(n int) {
	ring := make([]entry[T], max(n, 2*len(q.ring)))
	for i := 0; i < q.n; i++ {
		ring[i] = q.ring[(q.head+i)%len(q.ring)]
	}
	q.ring, q.head = ring, 0
}

// Remove takes v out of the queue if it is still waiting, for a caller that
// stopped waiting (its timeout passed, its client went away), and reports
// whether it was there.
func (q *Queue[T]) Remove(v T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := 0; i < q.n; i++ {
		if q.ring[(q.head+i)%len(q.ring)].v != v {
			continue
		}
		// Shift the later entries one place towards the head.
		for j := i; j < q.n-1; j++ {
			q.ring[(q.head+j)%len(q.ring)] = q.ring[(q.head+j+1)%len(q.ring)]
		}
		q.ring[(q.head+q.n-1)%len(q.ring)] = entry[T]{}
		q.n--
		return true
	}
	return false
}

// Close stops Push from accepting requests. Waiting requests can still be
// taken; once the queue is empty Next returns ErrClosed.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

func (q *Queue[T]) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// popLive appends waiting requests whose context is not done to dst until dst
// holds limit of them or the queue is empty, and reports whether the queue
// is closed.
func (q *Queue[T]) popLive(dst []T, limit int) ([]T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(dst) < limit && q.n > 0 {
		e := q.ring[q.head]
		q.ring[q.head] = entry[T]{}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		if e.ctx != nil && e.ctx.Err() != nil {
			continue
		}
		dst = append(dst, e.v)
	}
	return dst, q.closed
}

// Next waits for a batch and appends it to dst[:0]. It returns at least one
// request, or an error: ctx's error when ctx is done before the first
// request arrives, ErrClosed when the queue is closed and empty. Once it
// holds a request it always returns what it holds with a nil error, even if
// ctx ends while it waits for more.
func (q *Queue[T]) Next(ctx context.Context, dst []T) ([]T, error) {
	dst = dst[:0]
	select {
	case <-q.taker:
	case <-ctx.Done():
		return dst, ctx.Err()
	}
	defer func() { q.taker <- struct{}{} }()

	// Wait for the first request.
	var closed bool
	for {
		dst, closed = q.popLive(dst, q.cfg.BatchSize)
		if len(dst) > 0 {
			break
		}
		if closed {
			q.wake() // let the next taker see the close too
			return dst, ErrClosed
		}
		select {
		case <-q.notify:
		case <-ctx.Done():
			return dst, ctx.Err()
		}
	}
	if len(dst) == q.cfg.BatchSize || closed || q.cfg.MaxDelay == 0 {
		return dst, nil
	}

	// Fill the batch until it is full or MaxDelay has passed since the
	// first request was taken.
	timer := q.cfg.Clock.NewTimer(q.cfg.MaxDelay)
	defer timer.Stop()
	for {
		select {
		case <-q.notify:
		case <-timer.C():
			dst, _ = q.popLive(dst, q.cfg.BatchSize)
			return dst, nil
		case <-ctx.Done():
			return dst, nil
		}
		dst, closed = q.popLive(dst, q.cfg.BatchSize)
		if len(dst) == q.cfg.BatchSize || closed {
			if closed {
				q.wake()
			}
			return dst, nil
		}
	}
}
