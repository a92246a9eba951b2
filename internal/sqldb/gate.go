package sqldb

import (
	"container/list"
	"context"
	"sync"
)

// gate is a counting semaphore that admits waiters strictly in arrival
// order.
type gate struct {
	mu      sync.Mutex
	free    int
	waiters list.List // of chan struct{}, closed when admitted
}

func newGate(n int) *gate { return &gate{free: n} }

// acquire takes one unit, waiting behind everyone who asked earlier.
func (g *gate) acquire(ctx context.Context) error {
	g.mu.Lock()
	if g.free > 0 && g.waiters.Len() == 0 {
		g.free--
		g.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	e := g.waiters.PushBack(ready)
	g.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-ready: // admitted meanwhile: hand the unit on
			g.mu.Unlock()
			g.release()
		default:
			g.waiters.Remove(e)
			g.mu.Unlock()
		}
		return ctx.Err()
	}
}

// release returns one unit, to the longest waiter if there is one.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if front := g.waiters.Front(); front != nil {
		close(g.waiters.Remove(front).(chan struct{}))
		return
	}
	g.free++
}

// waiting is how many are queued.
func (g *gate) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiters.Len()
}
