package invoke

import (
	"testing"

	"github.com/google/uuid"
)

// The request ids are version 4 UUIDs, as uuid.NewString's were, and do
// not repeat.
func TestRequestIDsAreRandomUUIDs(t *testing.T) {
	var g requestIDs
	seen := map[string]bool{}
	for range 10000 {
		s := g.next()
		u, err := uuid.Parse(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != s {
			t.Fatalf("%q: version %d variant %v", s, u.Version(), u.Variant())
		}
		if seen[s] {
			t.Fatalf("%q repeated", s)
		}
		seen[s] = true
	}
}
