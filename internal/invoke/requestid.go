package invoke

import (
	crand "crypto/rand"
	"math/rand/v2"
	"sync"

	"github.com/google/uuid"
)

// requestIDs makes the x-amzn-RequestId of each invocation: a random
// (version 4) UUID, as AWS's, drawn from ChaCha8 generators seeded from
// crypto/rand rather than from crypto/rand itself, which costs a system
// call and two allocations per request on the runtime's hot path. The
// ids need only be unique; ChaCha8 is a cryptographic generator, so they
// are as unpredictable as uuid.New's.
type requestIDs struct {
	pool sync.Pool // *rand.ChaCha8
}

func (g *requestIDs) next() string {
	c, _ := g.pool.Get().(*rand.ChaCha8)
	if c == nil {
		var seed [32]byte
		crand.Read(seed[:]) // never fails (crypto/rand panics instead)
		c = rand.NewChaCha8(seed)
	}
	var u uuid.UUID
	c.Read(u[:])
	g.pool.Put(c)
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}
