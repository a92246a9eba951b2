package gpu

import (
	"log/slog"
	"slices"
	"sync"
)

// Allocator hands the view's GPUs out to owners (a training job, an
// endpoint instance) and takes them back. It never refuses: as in
// SageMaker local mode, where every container sees the machine's GPUs, a
// job that finds no free GPU still runs, on the least-loaded ones, shared
// with their current holders, and the sharing is logged as a warning.
// What it does guarantee is that concurrent owners spread: a GPU nobody
// holds is always given before a held one, and among held ones the one
// with the fewest holders (then the view's order) goes first.
//
// It keeps its state in memory only; after a server restart, recovered
// owners re-claim what they had with Claim. It is safe for concurrent use.
type Allocator struct {
	log  *slog.Logger
	devs []Device

	mu   sync.Mutex
	held map[string][]int // owner -> positions in devs
	load []int            // position -> number of owners holding it
}

// NewAllocator returns an allocator over devs (Discover's view).
func NewAllocator(devs []Device, logger *slog.Logger) *Allocator {
	if logger == nil {
		logger = slog.Default()
	}
	return &Allocator{
		log:  logger.With("system", "gpu"),
		devs: append([]Device(nil), devs...),
		held: map[string][]int{},
		load: make([]int, len(devs)),
	}
}

// Devices is the view the allocator hands out.
func (a *Allocator) Devices() []Device { return append([]Device(nil), a.devs...) }

// Reserve holds n GPUs for owner, on top of any it holds already, and
// returns the IDs (Device.ID, for CUDA_VISIBLE_DEVICES) of all it holds,
// in the view's order. Free GPUs go first, then the least-loaded held
// ones, shared (logged). It never gives one owner the same GPU twice, so
// asking for more than the view has gets the whole view (logged).
func (a *Allocator) Reserve(owner string, n int) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n > 0 {
		a.take(owner, n)
	}
	return a.ids(owner)
}

// ReserveFree holds for owner every GPU nobody holds, rounded down to a
// multiple of step (step < 1 counts as 1), and at least min of them: when
// fewer are free, the least-loaded held ones make up the difference,
// shared (logged). A job of N simulated hosts asks ReserveFree(job, N, N)
// and gives each host len/N of them. It returns the IDs of every GPU owner
// holds, in the view's order.
func (a *Allocator) ReserveFree(owner string, min, step int) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	free := 0
	for i, l := range a.load {
		if l == 0 && !slices.Contains(a.held[owner], i) {
			free++
		}
	}
	if step < 1 {
		step = 1
	}
	n := free - free%step
	if n < min {
		n = min
	}
	if n > 0 {
		a.take(owner, n)
	}
	return a.ids(owner)
}

// Claim makes owner hold exactly the GPUs ids names (IDs an earlier
// Reserve returned, kept by the owner across a server restart), whoever
// else holds them, and returns the IDs it could match, in the view's order.
// IDs that no longer name a GPU of the view (the machine changed) are
// dropped and logged.
func (a *Allocator) Claim(owner string, ids []string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.release(owner)
	var pos []int
	for _, id := range ids {
		i := slices.IndexFunc(a.devs, func(d Device) bool { return d.ID() == id })
		if i < 0 {
			a.log.Warn("a recovered owner's GPU is not in this machine's view any more", "owner", owner, "gpu", id)
			continue
		}
		if !slices.Contains(pos, i) {
			pos = append(pos, i)
		}
	}
	for _, i := range pos {
		if a.load[i] > 0 {
			a.log.Warn("recovered owner shares a GPU", "owner", owner, "gpu", a.devs[i].ID(), "holders", a.load[i]+1)
		}
		a.load[i]++
	}
	if len(pos) > 0 {
		slices.Sort(pos)
		a.held[owner] = pos
	}
	return a.ids(owner)
}

// Release gives back every GPU owner holds. Releasing an owner that holds
// nothing does nothing.
func (a *Allocator) Release(owner string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.release(owner)
}

// Held returns the IDs owner holds, in the view's order.
func (a *Allocator) Held(owner string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids(owner)
}

func (a *Allocator) release(owner string) {
	for _, i := range a.held[owner] {
		a.load[i]--
	}
	delete(a.held, owner)
}

// take adds n GPUs to owner's, least-loaded first (ties: view order),
// never one owner already holds. Caller holds mu.
func (a *Allocator) take(owner string, n int) {
	mine := a.held[owner]
	var cand []int
	for i := range a.devs {
		if !slices.Contains(mine, i) {
			cand = append(cand, i)
		}
	}
	if n > len(cand) {
		if len(a.devs) > 0 {
			a.log.Warn("more GPUs asked for than this machine has; the owner gets all of them", "owner", owner, "asked", n+len(mine), "gpus", len(a.devs))
		}
		n = len(cand)
	}
	slices.SortStableFunc(cand, func(x, y int) int { return a.load[x] - a.load[y] })
	for _, i := range cand[:n] {
		if a.load[i] > 0 {
			a.log.Warn("no free GPU left; sharing the least-loaded one", "owner", owner, "gpu", a.devs[i].ID(), "holders", a.load[i]+1)
		}
		a.load[i]++
		mine = append(mine, i)
	}
	slices.Sort(mine)
	if len(mine) > 0 {
		a.held[owner] = mine
	}
}

func (a *Allocator) ids(owner string) []string {
	pos := a.held[owner]
	if len(pos) == 0 {
		return nil
	}
	out := make([]string, len(pos))
	for j, i := range pos {
		out[j] = a.devs[i].ID()
	}
	return out
}
