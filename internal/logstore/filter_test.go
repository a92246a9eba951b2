package logstore_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/logstore"
)

// filterFixture: two training streams interleaved in time, one endpoint
// stream, and a stream in another group.
func filterFixture(t *testing.T) *logstore.Store {
	t.Helper()
	s := openStore(t)
	mustAppend(t, s, "g", "job/algo-1-1", []sagebox.LogEvent{
		{Timestamp: 10, Message: "epoch 1 loss=0.5"},
		{Timestamp: 30, Message: "ERROR out of memory"},
		{Timestamp: 50, Message: "epoch 2 loss=0.25"},
	})
	mustAppend(t, s, "g", "job/algo-2-1", []sagebox.LogEvent{
		{Timestamp: 20, Message: "WARN slow step"},
		{Timestamp: 40, Message: "epoch 1 loss=0.6"},
	})
	mustAppend(t, s, "g", "AllTraffic/i-1", []sagebox.LogEvent{{Timestamp: 35, Message: "ping ok"}})
	mustAppend(t, s, "other", "job/algo-1-1", []sagebox.LogEvent{{Timestamp: 1, Message: "elsewhere"}})
	return s
}

func mustPattern(t *testing.T, src string) *logstore.Pattern {
	t.Helper()
	p, err := logstore.ParsePattern(src)
	if err != nil {
		t.Fatalf("ParsePattern(%q): %v", src, err)
	}
	return p
}

func TestFilter(t *testing.T) {
	s := filterFixture(t)
	tests := []struct {
		name         string
		q            logstore.FilterQuery
		want         string
		wantSearched []string
	}{
		{"everything interleaved", logstore.FilterQuery{},
			"epoch 1 loss=0.5|WARN slow step|ERROR out of memory|ping ok|epoch 1 loss=0.6|epoch 2 loss=0.25",
			[]string{"AllTraffic/i-1", "job/algo-1-1", "job/algo-2-1"}},
		{"prefix", logstore.FilterQuery{StreamPrefix: "job/"},
			"epoch 1 loss=0.5|WARN slow step|ERROR out of memory|epoch 1 loss=0.6|epoch 2 loss=0.25",
			[]string{"job/algo-1-1", "job/algo-2-1"}},
		{"names, missing ignored", logstore.FilterQuery{StreamNames: []string{"job/algo-2-1", "nope"}},
			"WARN slow step|epoch 1 loss=0.6", []string{"job/algo-2-1"}},
		{"time bounds both inclusive", logstore.FilterQuery{StartTime: ptr(20), EndTime: ptr(40)},
			"WARN slow step|ERROR out of memory|ping ok|epoch 1 loss=0.6", nil},
		{"term", logstore.FilterQuery{Pattern: mustPattern(t, "epoch")},
			"epoch 1 loss=0.5|epoch 1 loss=0.6|epoch 2 loss=0.25", nil},
		{"or terms", logstore.FilterQuery{Pattern: mustPattern(t, "?ERROR ?WARN")},
			"WARN slow step|ERROR out of memory", nil},
		{"phrase and limit", logstore.FilterQuery{Pattern: mustPattern(t, `"epoch 1"`), Limit: 1},
			"epoch 1 loss=0.5", nil},
		{"no stream matches", logstore.FilterQuery{StreamPrefix: "zzz"}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := s.Filter(context.Background(), "g", tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(messages(page.Events), "|"); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if tt.wantSearched != nil && !reflect.DeepEqual(page.SearchedStreams, tt.wantSearched) {
				t.Errorf("searched %v; want %v", page.SearchedStreams, tt.wantSearched)
			}
			for _, e := range page.Events {
				if e.Stream == "" || e.ID == 0 {
					t.Errorf("event %+v lacks its stream or id", e)
				}
			}
		})
	}
}

// TestFilterPagination pages with limit 2 and checks the concatenation, and
// that the last page has no token.
func TestFilterPagination(t *testing.T) {
	s := filterFixture(t)
	ctx := context.Background()
	for _, pattern := range []string{"", "epoch", "-ping"} {
		t.Run(pattern, func(t *testing.T) {
			all, err := s.Filter(ctx, "g", logstore.FilterQuery{Pattern: mustPattern(t, pattern)})
			if err != nil || all.NextToken != "" {
				t.Fatalf("unpaged: %v, token %q", err, all.NextToken)
			}
			q := logstore.FilterQuery{Pattern: mustPattern(t, pattern), Limit: 2}
			var paged []string
			for i := 0; ; i++ {
				if i > 6 {
					t.Fatal("pagination does not end")
				}
				page, err := s.Filter(ctx, "g", q)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, messages(page.Events)...)
				if page.NextToken == "" {
					break
				}
				q.NextToken = page.NextToken
			}
			if !reflect.DeepEqual(paged, messages(all.Events)) {
				t.Errorf("paged %v; want %v", paged, messages(all.Events))
			}
		})
	}
}

func TestFilterErrors(t *testing.T) {
	s := filterFixture(t)
	if _, err := s.Filter(context.Background(), "nope", logstore.FilterQuery{}); err != logstore.ErrGroupNotFound {
		t.Errorf("missing group: %v", err)
	}
	if _, err := s.Filter(context.Background(), "g", logstore.FilterQuery{NextToken: "???"}); err != logstore.ErrInvalidToken {
		t.Errorf("bad token: %v", err)
	}
}

func TestPattern(t *testing.T) {
	tests := []struct {
		pattern string
		match   []string
		noMatch []string
	}{
		{"", []string{"", "anything"}, nil},
		{"   ", []string{"anything"}, nil},
		{"ERROR", []string{"ERROR x", "[ERROR]", "ERRORS"}, []string{"error", "ERR"}},
		{"ERROR memory", []string{"ERROR out of memory"}, []string{"ERROR", "memory"}},
		{`"out of memory"`, []string{"ERROR out of memory!"}, []string{"out of  memory"}},
		{`"say \"hi\""`, []string{`they say "hi"`}, []string{"say hi"}},
		{"?ERROR ?WARN", []string{"WARN a", "ERROR b"}, []string{"INFO c"}},
		{"epoch ?loss ?acc", []string{"epoch 1 loss", "epoch acc"}, []string{"epoch 1", "loss acc"}},
		{"ERROR -Retrying", []string{"ERROR fatal"}, []string{"ERROR Retrying", "fine"}},
		{`-"health check"`, []string{"GET /"}, []string{"GET /ping health check"}},
		{"%loss=[0-9.]+%", []string{"loss=0.5"}, []string{"loss=nan"}},
		{"?%^ERR% ?%^WARN%", []string{"ERROR", "WARN"}, []string{"x ERROR"}},
		{"% a b %", []string{"x a b y"}, []string{"a  b"}},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			p := mustPattern(t, tt.pattern)
			for _, m := range tt.match {
				if !p.Match(m) {
					t.Errorf("%q does not match %q", tt.pattern, m)
				}
			}
			for _, m := range tt.noMatch {
				if p.Match(m) {
					t.Errorf("%q matches %q", tt.pattern, m)
				}
			}
		})
	}
}

func TestPatternErrors(t *testing.T) {
	for _, src := range []string{`{ $.level = "ERROR" }`, "[ip, user]", `"unterminated`, "%unterminated", "%(%", "?", "ERROR -", "? x"} {
		t.Run(src, func(t *testing.T) {
			if _, err := logstore.ParsePattern(src); err == nil {
				t.Errorf("ParsePattern(%q) succeeded", src)
			}
		})
	}
}

// FuzzFilterPattern: parsing never panics or loops, and a parsed pattern
// matches any message without panicking; the empty pattern matches all.
func FuzzFilterPattern(f *testing.F) {
	for _, seed := range []string{"", "ERROR", `"a b"`, "?x ?y -z", "%a+%", `"\"`, "-\"q\"", "{", "? ", "%"} {
		f.Add(seed, "some ERROR message")
	}
	f.Fuzz(func(t *testing.T, pattern, msg string) {
		p, err := logstore.ParsePattern(pattern)
		if err != nil {
			return
		}
		p.Match(msg)
		if strings.TrimSpace(pattern) == "" && !p.Match(msg) {
			t.Errorf("empty pattern rejects %q", msg)
		}
	})
}
