// Package capacity is the machine's one budget that training hosts and
// endpoint instances draw on, so that 200 CreateTrainingJob calls do not
// start 200 interpreters at once (the reliability probe's R5: 124 torch
// scripts ran together on a 2-CPU, 23 GB machine, which only the OOM killer
// would have stopped).
//
// A Pool has a number of slots in each dimension (CPU slots, memory, GPUs).
// Work asks for what all of its hosts or instances need together:
//
//   - work that could never fit, even on an idle machine, is refused at once
//     with an error that names the limit (the API answers
//     ResourceLimitExceeded);
//   - work that fits but not now either waits in arrival order (Reserve:
//     training jobs queue in Starting, as jobs behind an account's instance
//     quota would) or is refused naming what holds the capacity
//     (TryReserve: endpoints, which should fail fast rather than hang);
//   - Claim records work that already runs (a job re-adopted after a
//     restart) even past the budget: it is running whether or not it fits.
//
// Reservations are released by their owner when the work ends.
package capacity

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Resources is an amount of capacity.
type Resources struct {
	// Slots are CPU slots: one per training host or endpoint instance by
	// default (see Pool).
	Slots int
	// MemoryMiB is memory in MiB.
	MemoryMiB int64
	// GPUs are devices.
	GPUs int
}

func (r Resources) add(o Resources) Resources {
	return Resources{r.Slots + o.Slots, r.MemoryMiB + o.MemoryMiB, r.GPUs + o.GPUs}
}

func (r Resources) sub(o Resources) Resources {
	return Resources{r.Slots - o.Slots, r.MemoryMiB - o.MemoryMiB, r.GPUs - o.GPUs}
}

// fits reports whether r fits within free.
func (r Resources) fits(free Resources) bool {
	return r.Slots <= free.Slots && r.MemoryMiB <= free.MemoryMiB && r.GPUs <= free.GPUs
}

func (r Resources) String() string {
	parts := []string{fmt.Sprintf("%d slots", r.Slots), fmt.Sprintf("%d MiB of memory", r.MemoryMiB)}
	if r.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d GPUs", r.GPUs))
	}
	return strings.Join(parts, ", ")
}

// ErrTooLarge is wrapped by the error for work that could never fit.
var ErrTooLarge = errors.New("more than the machine's capacity")

// ErrBusy is wrapped by TryReserve's error for work that does not fit now.
var ErrBusy = errors.New("capacity in use")

// Pool is the machine's capacity. It is safe for concurrent use.
type Pool struct {
	total Resources

	mu      sync.Mutex
	used    Resources
	held    map[string]Resources // by owner
	waiters list.List            // of *waiter, in arrival order
}

type waiter struct {
	owner string
	want  Resources
	ready chan struct{} // closed once reserved
}

// NewPool returns a pool of total capacity.
func NewPool(total Resources) *Pool {
	return &Pool{total: total, held: map[string]Resources{}}
}

// Total is the pool's capacity.
func (p *Pool) Total() Resources { return p.total }

// Used is what is reserved now.
func (p *Pool) Used() Resources {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// Waiting is how many reservations wait.
func (p *Pool) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiters.Len()
}

// Check says whether want could ever fit: an error wrapping ErrTooLarge
// names the dimension and both amounts.
func (p *Pool) Check(want Resources) error {
	var over []string
	if want.Slots > p.total.Slots {
		over = append(over, fmt.Sprintf("%d slots (the machine has %d)", want.Slots, p.total.Slots))
	}
	if want.MemoryMiB > p.total.MemoryMiB {
		over = append(over, fmt.Sprintf("%d MiB of memory (the machine has %d MiB)", want.MemoryMiB, p.total.MemoryMiB))
	}
	if want.GPUs > p.total.GPUs {
		over = append(over, fmt.Sprintf("%d GPUs (the machine has %d)", want.GPUs, p.total.GPUs))
	}
	if len(over) > 0 {
		return fmt.Errorf("%w: it needs %s", ErrTooLarge, strings.Join(over, " and "))
	}
	return nil
}

// Reserve reserves want for owner, waiting behind earlier reservations
// until it fits or ctx is done. An owner holds one reservation; reserving
// again adds to it.
func (p *Pool) Reserve(ctx context.Context, owner string, want Resources) error {
	if err := p.Check(want); err != nil {
		return err
	}
	p.mu.Lock()
	if p.waiters.Len() == 0 && want.fits(p.total.sub(p.used)) {
		p.take(owner, want)
		p.mu.Unlock()
		return nil
	}
	w := &waiter{owner: owner, want: want, ready: make(chan struct{})}
	e := p.waiters.PushBack(w)
	p.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		defer p.mu.Unlock()
		select {
		case <-w.ready: // reserved meanwhile: give it back
			p.give(owner, want)
		default:
			p.waiters.Remove(e)
			p.admit() // a large waiter leaving may let smaller ones in
		}
		return ctx.Err()
	}
}

// TryReserve reserves want for owner now or says why not: ErrTooLarge, or
// ErrBusy naming what holds the capacity.
func (p *Pool) TryReserve(owner string, want Resources) error {
	if err := p.Check(want); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiters.Len() == 0 && want.fits(p.total.sub(p.used)) {
		p.take(owner, want)
		return nil
	}
	return fmt.Errorf("%w: it needs %s, and %s of %s are in use by %s", ErrBusy, want, p.used, p.total, p.holders())
}

// Claim records want for owner without waiting, even past the capacity:
// for work that already runs.
func (p *Pool) Claim(owner string, want Resources) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.take(owner, want)
}

// Release returns everything owner holds and admits waiters that now fit.
func (p *Pool) Release(owner string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.held[owner]; ok {
		p.give(owner, r)
	}
}

// Holds is what owner holds.
func (p *Pool) Holds(owner string) Resources {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[owner]
}

func (p *Pool) take(owner string, r Resources) {
	p.used = p.used.add(r)
	p.held[owner] = p.held[owner].add(r)
}

// give returns r of owner's reservation and admits waiters. p.mu is held.
func (p *Pool) give(owner string, r Resources) {
	p.used = p.used.sub(r)
	left := p.held[owner].sub(r)
	if left == (Resources{}) {
		delete(p.held, owner)
	} else {
		p.held[owner] = left
	}
	p.admit()
}

// admit reserves for waiters in arrival order while the first one fits:
// a large reservation is not overtaken by smaller ones forever. p.mu is
// held.
func (p *Pool) admit() {
	for e := p.waiters.Front(); e != nil; e = p.waiters.Front() {
		w := e.Value.(*waiter)
		if !w.want.fits(p.total.sub(p.used)) {
			return
		}
		p.waiters.Remove(e)
		p.take(w.owner, w.want)
		close(w.ready)
	}
}

// holders names the owners holding capacity, largest first (at most 5).
// p.mu is held.
func (p *Pool) holders() string {
	names := make([]string, 0, len(p.held))
	for o := range p.held {
		names = append(names, o)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := p.held[names[i]], p.held[names[j]]
		if a.Slots != b.Slots {
			return a.Slots > b.Slots
		}
		return names[i] < names[j]
	})
	more := ""
	if len(names) > 5 {
		more = fmt.Sprintf(" and %d more", len(names)-5)
		names = names[:5]
	}
	if len(names) == 0 {
		return "earlier requests still waiting"
	}
	return strings.Join(names, ", ") + more
}

// ReleasePart returns r of what owner holds (at most all of it) and admits
// waiters that now fit: for work that shrinks, such as an endpoint that
// stops some of its instances.
func (p *Pool) ReleasePart(owner string, r Resources) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.held[owner]
	if !ok {
		return
	}
	r = Resources{min(r.Slots, h.Slots), min(r.MemoryMiB, h.MemoryMiB), min(r.GPUs, h.GPUs)}
	p.give(owner, r)
}
