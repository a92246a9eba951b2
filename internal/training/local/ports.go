package local

import (
	"sync"

	"github.com/sagebox/sagebox/internal/toolkit"
)

// Ports are the MASTER_PORTs handed to jobs not yet released, so that two
// jobs starting together are not both given 7777: the port is free until
// a script binds it, and torch's store binds it on every address, so the
// second job's store would fail (or its ranks join the first job's). One
// per server; drivers that run side by side (tests) share one.
type Ports struct {
	mu   sync.Mutex
	held map[string]int // job → port
}

// NewPorts returns an empty set.
func NewPorts() *Ports { return &Ports{held: map[string]int{}} }

// Claim returns job's port, choosing it on the first call: 7777 when free
// and not held, else a free port no other job holds.
func (p *Ports) Claim(job string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if port, ok := p.held[job]; ok {
		return port
	}
	port := toolkit.FreePort(func(n int) bool {
		for _, h := range p.held {
			if h == n {
				return true
			}
		}
		return false
	})
	p.held[job] = port
	return port
}

// Release gives job's port back.
func (p *Ports) Release(job string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held, job)
}
