package logstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/logstore"
)

// clockMS is the ingestion clock of these tests, in epoch milliseconds.
const clockMS = 1_772_366_400_000

func openStore(t testing.TB) *logstore.Store {
	t.Helper()
	s, err := logstore.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s.Now = func() time.Time { return time.UnixMilli(clockMS) }
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// lines returns n events "<prefix> i" with timestamps start, start+1, ...
func lines(prefix string, start int64, n int) []sagebox.LogEvent {
	evs := make([]sagebox.LogEvent, n)
	for i := range evs {
		evs[i] = sagebox.LogEvent{Timestamp: start + int64(i), Message: fmt.Sprintf("%s %d", prefix, i)}
	}
	return evs
}

func mustAppend(t testing.TB, s *logstore.Store, group, stream string, evs []sagebox.LogEvent) {
	t.Helper()
	if err := s.Append(context.Background(), group, stream, evs); err != nil {
		t.Fatalf("Append(%s, %s): %v", group, stream, err)
	}
}

func ptr(v int64) *int64 { return &v }

func TestAppendStatistics(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	mustAppend(t, s, "g", "empty", nil)
	mustAppend(t, s, "g", "st", []sagebox.LogEvent{{Timestamp: 50, Message: "abc"}, {Timestamp: 20, Message: "de"}})
	mustAppend(t, s, "g", "st", []sagebox.LogEvent{{Timestamp: 30, Message: "f"}})

	empty, err := s.Stream(ctx, "g", "empty")
	if err != nil {
		t.Fatal(err)
	}
	if empty.FirstEventTimestamp != nil || empty.LastEventTimestamp != nil || empty.LastIngestionTime != nil || empty.CreationTime != clockMS {
		t.Errorf("empty stream = %+v; want no event times", empty)
	}
	st, err := s.Stream(ctx, "g", "st")
	if err != nil {
		t.Fatal(err)
	}
	if *st.FirstEventTimestamp != 20 || *st.LastEventTimestamp != 50 || *st.LastIngestionTime != clockMS || st.StoredBytes != 6 {
		t.Errorf("stream = first %d last %d ingestion %d bytes %d; want 20 50 %d 6",
			*st.FirstEventTimestamp, *st.LastEventTimestamp, *st.LastIngestionTime, st.StoredBytes, clockMS)
	}
	groups, _, err := s.Groups(ctx, logstore.GroupQuery{})
	if err != nil || len(groups) != 1 || groups[0].StoredBytes != 6 {
		t.Errorf("Groups = %+v, %v", groups, err)
	}
	if err := s.Append(ctx, "", "x", nil); err == nil {
		t.Error("Append with no group succeeded")
	}
}

func TestCreateGroupAndStream(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"create group", func() error { return s.CreateGroup(ctx, "g") }, nil},
		{"group again", func() error { return s.CreateGroup(ctx, "g") }, logstore.ErrGroupExists},
		{"stream", func() error { return s.CreateStream(ctx, "g", "a") }, nil},
		{"stream again", func() error { return s.CreateStream(ctx, "g", "a") }, logstore.ErrStreamExists},
		{"stream in missing group", func() error { return s.CreateStream(ctx, "nope", "a") }, logstore.ErrGroupNotFound},
		{"lookup missing group", func() error { _, err := s.Stream(ctx, "nope", "a"); return err }, logstore.ErrGroupNotFound},
		{"lookup missing stream", func() error { _, err := s.Stream(ctx, "g", "b"); return err }, logstore.ErrStreamNotFound},
		{"append to created stream", func() error { return s.Append(ctx, "g", "a", lines("x", 1, 1)) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(); err != tt.want {
				t.Errorf("err = %v; want %v", err, tt.want)
			}
		})
	}
}

func TestGroups(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	for _, g := range []string{"/aws/sagemaker/TrainingJobs", "/aws/sagemaker/Endpoints/a", "/aws/sagemaker/Endpoints/b", "other"} {
		mustAppend(t, s, g, "s", nil)
	}
	groups, next, err := s.Groups(ctx, logstore.GroupQuery{Prefix: "/aws/sagemaker/Endpoints/"})
	if err != nil || next != "" || len(groups) != 2 || groups[0].Name != "/aws/sagemaker/Endpoints/a" {
		t.Fatalf("prefix: %+v, %q, %v", groups, next, err)
	}
	var all []string
	q := logstore.GroupQuery{Limit: 3}
	for {
		page, next, err := s.Groups(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range page {
			all = append(all, g.Name)
		}
		if next == "" {
			break
		}
		q.NextToken = next
	}
	if len(all) != 4 || all[3] != "other" {
		t.Errorf("paged groups = %v", all)
	}
	if _, _, err := s.Groups(ctx, logstore.GroupQuery{NextToken: "zz"}); err != logstore.ErrInvalidToken {
		t.Errorf("bad token err = %v", err)
	}
}

// TestConcurrentAppends appends to many streams at once and checks every
// event landed exactly once.
func TestConcurrentAppends(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	const streams, batches, per = 8, 20, 100
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("job/algo-%d", i+1)
			for b := 0; b < batches; b++ {
				if err := s.Append(ctx, sagebox.TrainingLogGroup, name, lines(fmt.Sprintf("%s b%d", name, b), int64(b*per), per)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]int{}
	q := logstore.FilterQuery{}
	for {
		page, err := s.Filter(ctx, sagebox.TrainingLogGroup, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			seen[e.Stream+" "+e.Message]++
		}
		if page.NextToken == "" {
			break
		}
		q.NextToken = page.NextToken
	}
	if len(seen) != streams*batches*per {
		t.Errorf("got %d distinct events; want %d", len(seen), streams*batches*per)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%q seen %d times; want once", k, n)
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	s := openStore(b)
	ctx := context.Background()
	batch := lines("epoch 1 step 100 loss=0.1234 accuracy=0.9876 some more text to make a realistic line", 0, 100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Append(ctx, sagebox.TrainingLogGroup, "job/algo-1-1", batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "lines/s")
}
