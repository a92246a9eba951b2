package logtail

import (
	"reflect"
	"testing"
)

func TestSplitLines(t *testing.T) {
	for _, c := range []struct {
		in       string
		max      int
		final    bool
		want     []string
		consumed int
	}{
		{"a\nbb\n", 16, false, []string{"a", "bb"}, 5},
		{"a\nunfinished", 16, false, []string{"a"}, 2},
		{"a\nunfinished", 16, true, []string{"a", "unfinished"}, 12},
		{"abcdefgh\n", 4, false, []string{"abcd", "efgh"}, 9}, // a long line in pieces
		{"abcdefg", 4, false, []string{"abcd"}, 4},            // a long unfinished one too
		{"abcd\n", 4, false, []string{"abcd"}, 5},
		{"", 4, true, nil, 0},
	} {
		got, n := SplitLines([]byte(c.in), c.max, c.final)
		if !reflect.DeepEqual(got, c.want) || n != c.consumed {
			t.Errorf("SplitLines(%q, final=%v) = %q, %d; want %q, %d", c.in, c.final, got, n, c.want, c.consumed)
		}
	}
}
