package objectstore

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzKeyMapping stores arbitrary keys and checks that every accepted key
// lands in a file inside the store's data directory, reads back intact, and
// lists under itself; rejected keys must be rejected for a stated reason.
func FuzzKeyMapping(f *testing.F) {
	for _, k := range []string{
		"a", "a/b", "../../../../etc/passwd", "..", ".", "/", "//", "a/../../b", "./.", "\x00", "a\x00b",
		"%2e%2e/%2e%2e", "C:\\Windows\\system32", "ü/..", strings.Repeat("../", 300), "key with spaces+plus",
	} {
		f.Add(k)
	}
	s, err := OpenWithOptions(f.TempDir(), Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.CreateBucket(ctx, "fuzz"); err != nil {
		f.Fatal(err)
	}
	dataRoot := filepath.Join(s.Dir(), dataDir)
	f.Fuzz(func(t *testing.T, key string) {
		_, err := s.Put(ctx, "fuzz", key, strings.NewReader(key), PutOptions{})
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) && !errors.Is(err, ErrKeyTooLong) {
				t.Fatalf("Put(%q) = %v", key, err)
			}
			return
		}
		p, err := s.FilePath(ctx, "fuzz", key)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(dataRoot, p)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
			t.Fatalf("key %q maps to %s, outside %s", key, p, dataRoot)
		}
		if got := mustGet(t, s, "fuzz", key); got != key {
			t.Fatalf("key %q reads back %q", key, got)
		}
		res, err := s.List(ctx, "fuzz", ListOptions{Prefix: key, MaxKeys: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Objects) != 1 || res.Objects[0].Key != key {
			t.Fatalf("List(prefix=%q) = %+v", key, res)
		}
		if err := s.Delete(ctx, "fuzz", key); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzPrefixEnd checks the successor used to bound prefix scans: it sorts
// after every string with the prefix and not after any string without.
func FuzzPrefixEnd(f *testing.F) {
	f.Add("abc", "abd")
	f.Add("a\xff", "b")
	f.Add("\xff\xff", "")
	f.Fuzz(func(t *testing.T, p, other string) {
		end, ok := prefixEnd(p)
		if !ok {
			if strings.Trim(p, "\xff") != "" {
				t.Fatalf("prefixEnd(%q) has no successor", p)
			}
			return
		}
		with := p + other
		if with >= end {
			t.Fatalf("%q has prefix %q but is not below %q", with, p, end)
		}
		if !strings.HasPrefix(other, p) && other >= p && other < end {
			t.Fatalf("%q lacks prefix %q but lies in [%q, %q)", other, p, p, end)
		}
	})
}
