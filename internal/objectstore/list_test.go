package objectstore

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"
)

// entry is one listing entry: a key or (when cp) a common prefix.
type entry struct {
	name string
	cp   bool
}

func (e entry) String() string {
	if e.cp {
		return e.name + "(cp)"
	}
	return e.name
}

// referenceList is the obviously correct listing: walk every key in byte
// order, roll up, skip what is at or before the marker.
func referenceList(keys []string, opts ListOptions) []entry {
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	var out []entry
	for _, k := range sorted {
		if !strings.HasPrefix(k, opts.Prefix) {
			continue
		}
		if cp, ok := commonPrefix(k, opts.Prefix, opts.Delimiter); ok {
			if cp <= opts.StartAfter || len(out) > 0 && out[len(out)-1] == (entry{cp, true}) {
				continue
			}
			out = append(out, entry{cp, true})
			continue
		}
		if k <= opts.StartAfter {
			continue
		}
		out = append(out, entry{k, false})
	}
	return out
}

func entries(res ListResult) []entry {
	var out []entry
	for _, o := range res.Objects {
		out = append(out, entry{o.Key, false})
	}
	for _, p := range res.CommonPrefixes {
		out = append(out, entry{p, true})
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return out
}

func TestListCases(t *testing.T) {
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	keys := []string{
		"a", "a/b", "a/b/c", "a/c", "a+b", "a b", "ab", "b/1", "b/2", "b/3/x", "c", "photos/2024/jan.jpg",
		"photos/2024/feb.jpg", "photos/2025/mar.jpg", "photos/index.html", "z/", "z//", "ü", "\x7f",
	}
	for _, k := range keys {
		mustPut(t, s, "bkt", k, k)
	}
	tests := []struct {
		name string
		opts ListOptions
		want string
	}{
		{"everything in byte order", ListOptions{}, "a,a b,a+b,a/b,a/b/c,a/c,ab,b/1,b/2,b/3/x,c,photos/2024/feb.jpg,photos/2024/jan.jpg,photos/2025/mar.jpg,photos/index.html,z/,z//,\x7f,ü"},
		{"root with delimiter", ListOptions{Delimiter: "/"}, "a,a b,a+b,a/(cp),ab,b/(cp),c,photos/(cp),z/(cp),\x7f,ü"},
		{"prefix with delimiter", ListOptions{Prefix: "photos/", Delimiter: "/"}, "photos/2024/(cp),photos/2025/(cp),photos/index.html"},
		{"prefix without delimiter", ListOptions{Prefix: "a/"}, "a/b,a/b/c,a/c"},
		{"prefix that is a key", ListOptions{Prefix: "a", Delimiter: "/"}, "a,a b,a+b,a/(cp),ab"},
		{"multi-char delimiter", ListOptions{Delimiter: "20"}, "a,a b,a+b,a/b,a/b/c,a/c,ab,b/1,b/2,b/3/x,c,photos/20(cp),photos/index.html,z/,z//,\x7f,ü"},
		{"start after a key", ListOptions{StartAfter: "b/1"}, "b/2,b/3/x,c,photos/2024/feb.jpg,photos/2024/jan.jpg,photos/2025/mar.jpg,photos/index.html,z/,z//,\x7f,ü"},
		{"start after a common prefix", ListOptions{Delimiter: "/", StartAfter: "a/"}, "ab,b/(cp),c,photos/(cp),z/(cp),\x7f,ü"},
		{"start after inside a common prefix", ListOptions{Delimiter: "/", StartAfter: "b/2"}, "c,photos/(cp),z/(cp),\x7f,ü"},
		{"start after before prefix", ListOptions{Prefix: "b/", StartAfter: "a"}, "b/1,b/2,b/3/x"},
		{"start after past prefix", ListOptions{Prefix: "b/", StartAfter: "c"}, ""},
		{"empty delimited prefix", ListOptions{Prefix: "z/", Delimiter: "/"}, "z/,z//(cp)"},
		{"no match", ListOptions{Prefix: "nothing"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.List(context.Background(), "bkt", tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries(res) {
				got = append(got, e.String())
			}
			if strings.Join(got, ",") != tt.want {
				t.Fatalf("got  %q\nwant %q", strings.Join(got, ","), tt.want)
			}
			if res.IsTruncated || res.NextMarker != "" {
				t.Fatalf("untruncated listing says truncated=%v next=%q", res.IsTruncated, res.NextMarker)
			}
			for _, o := range res.Objects {
				if o.Size != int64(len(o.Key)) || o.ETag != md5ETag(o.Key) || o.LastModified.IsZero() || o.Bucket != "bkt" {
					t.Fatalf("listed object info %+v", o)
				}
			}
		})
	}
}

// TestListPagesMatchReference pages through random key sets with every mix
// of options and compares the concatenated pages with referenceList.
func TestListPagesMatchReference(t *testing.T) {
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	rng := rand.New(rand.NewSource(1))
	alphabet := []string{"a", "b", "/", "-", "ü", "z", "+", " "}
	var keys []string
	seen := map[string]bool{}
	for len(keys) < 400 {
		var sb strings.Builder
		for n := 1 + rng.Intn(7); n > 0; n-- {
			sb.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		k := sb.String()
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	bulkInsert(t, s, "bkt", keys)

	for _, prefix := range []string{"", "a", "a/", "b/a", "ü"} {
		for _, delim := range []string{"", "/", "a", "ü"} {
			for _, max := range []int{1, 2, 7, 1000} {
				for _, start := range []string{"", "a/", "b"} {
					opts := ListOptions{Prefix: prefix, Delimiter: delim, MaxKeys: max, StartAfter: start}
					want := referenceList(keys, opts)
					var got []entry
					pages := 0
					for {
						res, err := s.List(context.Background(), "bkt", opts)
						if err != nil {
							t.Fatal(err)
						}
						page := entries(res)
						if len(page) > max {
							t.Fatalf("%+v: page of %d entries", opts, len(page))
						}
						got = append(got, page...)
						pages++
						if !res.IsTruncated {
							break
						}
						if res.NextMarker == "" || len(page) == 0 || res.NextMarker != page[len(page)-1].name {
							t.Fatalf("%+v: truncated page with marker %q after %v", opts, res.NextMarker, page)
						}
						opts.StartAfter = res.NextMarker
						if pages > len(keys)+2 {
							t.Fatalf("%+v: listing does not end", opts)
						}
					}
					if !slices.Equal(got, want) {
						t.Fatalf("prefix=%q delim=%q max=%d start=%q:\ngot  %v\nwant %v", prefix, delim, max, start, got, want)
					}
				}
			}
		}
	}
}

// bulkInsert adds index rows for keys directly, one transaction, no data
// files: listing never opens them, and it keeps large listing tests fast.
func bulkInsert(t testing.TB, s *Store, bucket string, keys []string) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO objects
		(bucket, key, size, etag, modified, file, content_type, headers, meta, checksums, checksum_type, parts)
		VALUES (?, ?, ?, ?, ?, ?, 'binary/octet-stream', '{}', '{}', '{}', '', '')`)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	for i, k := range keys {
		if _, err := stmt.ExecContext(ctx, bucket, []byte(k), len(k), md5ETag(k), now, fmt.Sprintf("00/fake%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	stmt.Close()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestListManyKeys(t *testing.T) {
	s := newTestStore(t)
	mustBucket(t, s, "bkt")
	var keys []string
	for d := 0; d < 50; d++ {
		for f := 0; f < 600; f++ {
			keys = append(keys, fmt.Sprintf("train/shard-%03d/part-%05d.bin", d, f))
		}
	}
	keys = append(keys, "train/manifest.json")
	bulkInsert(t, s, "bkt", keys)
	ctx := context.Background()

	start := time.Now()
	res, err := s.List(ctx, "bkt", ListOptions{Prefix: "train/", Delimiter: "/"})
	if err != nil {
		t.Fatal(err)
	}
	rollup := time.Since(start)
	if len(res.CommonPrefixes) != 50 || len(res.Objects) != 1 || res.IsTruncated {
		t.Fatalf("roll-up: %d prefixes, %d objects, truncated=%v", len(res.CommonPrefixes), len(res.Objects), res.IsTruncated)
	}

	start = time.Now()
	n, pages := 0, 0
	opts := ListOptions{Prefix: "train/"}
	for {
		res, err := s.List(ctx, "bkt", opts)
		if err != nil {
			t.Fatal(err)
		}
		n += len(res.Objects)
		pages++
		if !res.IsTruncated {
			break
		}
		opts.StartAfter = res.NextMarker
	}
	full := time.Since(start)
	if n != len(keys) || pages != 31 {
		t.Fatalf("paged %d keys in %d pages, want %d in 31", n, pages, len(keys))
	}
	t.Logf("30001 keys: roll-up of 50 prefixes %v, full paging %v", rollup, full)
	// Generous bounds: a roll-up must not scan the 30000 keys beneath it.
	if rollup > 2*time.Second || full > 20*time.Second {
		t.Fatalf("listing too slow: roll-up %v, paging %v", rollup, full)
	}
}
