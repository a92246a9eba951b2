package logstore_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/logstore"
)

func messages(evs []logstore.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Message)
	}
	return out
}

// stream10 holds "m 0".."m 9" at timestamps 100..109.
func stream10(t *testing.T) *logstore.Store {
	t.Helper()
	s := openStore(t)
	mustAppend(t, s, "g", "s", lines("m", 100, 10))
	return s
}

func TestEventsRanges(t *testing.T) {
	s := stream10(t)
	tests := []struct {
		name string
		q    logstore.EventQuery
		want string
	}{
		{"head", logstore.EventQuery{StartFromHead: true, Limit: 3}, "m 0,m 1,m 2"},
		{"tail by default", logstore.EventQuery{Limit: 3}, "m 7,m 8,m 9"},
		{"start inclusive", logstore.EventQuery{StartFromHead: true, StartTime: ptr(105), Limit: 2}, "m 5,m 6"},
		{"end exclusive", logstore.EventQuery{EndTime: ptr(103)}, "m 0,m 1,m 2"},
		{"window", logstore.EventQuery{StartTime: ptr(104), EndTime: ptr(106), StartFromHead: true}, "m 4,m 5"},
		{"tail of window", logstore.EventQuery{StartTime: ptr(101), EndTime: ptr(106), Limit: 2}, "m 4,m 5"},
		{"empty window", logstore.EventQuery{StartTime: ptr(200), StartFromHead: true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := s.Events(context.Background(), "g", "s", tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(messages(page.Events), ","); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
			for _, e := range page.Events {
				if e.IngestionTime != clockMS {
					t.Errorf("ingestion time = %d; want %d", e.IngestionTime, clockMS)
				}
			}
		})
	}
}

// TestEventsTokens walks forwards and backwards with the tokens.
func TestEventsTokens(t *testing.T) {
	s := stream10(t)
	ctx := context.Background()
	page, err := s.Events(ctx, "g", "s", logstore.EventQuery{StartFromHead: true, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	var fwd []string
	for i := 0; len(page.Events) > 0; i++ {
		if i > 5 {
			t.Fatal("forward reading does not end")
		}
		fwd = append(fwd, messages(page.Events)...)
		if page, err = s.Events(ctx, "g", "s", logstore.EventQuery{NextToken: page.NextForwardToken, Limit: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if want := messages10(); !reflect.DeepEqual(fwd, want) {
		t.Errorf("forward = %v; want %v", fwd, want)
	}

	page, err = s.Events(ctx, "g", "s", logstore.EventQuery{Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	var back []string
	for i := 0; len(page.Events) > 0; i++ {
		if i > 5 {
			t.Fatal("backward reading does not end")
		}
		back = append(messages(page.Events), back...)
		if page, err = s.Events(ctx, "g", "s", logstore.EventQuery{NextToken: page.NextBackwardToken, Limit: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if want := messages10(); !reflect.DeepEqual(back, want) {
		t.Errorf("backward = %v; want %v", back, want)
	}
}

func messages10() []string {
	var out []string
	for i := 0; i < 10; i++ {
		out = append(out, fmt.Sprintf("m %d", i))
	}
	return out
}

// TestEventsStableForwardToken: at the end of a stream the forward token
// comes back unchanged, and picks up events appended later.
func TestEventsStableForwardToken(t *testing.T) {
	s := stream10(t)
	ctx := context.Background()
	page, err := s.Events(ctx, "g", "s", logstore.EventQuery{StartFromHead: true})
	if err != nil || len(page.Events) != 10 {
		t.Fatalf("first read: %d events, %v", len(page.Events), err)
	}
	token := page.NextForwardToken
	for i := 0; i < 2; i++ {
		again, err := s.Events(ctx, "g", "s", logstore.EventQuery{NextToken: token, StartFromHead: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Events) != 0 || again.NextForwardToken != token {
			t.Fatalf("at end: %d events, token %q; want none and %q", len(again.Events), again.NextForwardToken, token)
		}
	}
	mustAppend(t, s, "g", "s", []sagebox.LogEvent{{Timestamp: 109, Message: "late same ms"}, {Timestamp: 110, Message: "new"}})
	next, err := s.Events(ctx, "g", "s", logstore.EventQuery{NextToken: token})
	if err != nil {
		t.Fatal(err)
	}
	if got := messages(next.Events); !reflect.DeepEqual(got, []string{"late same ms", "new"}) {
		t.Errorf("after append: %v", got)
	}

	// An empty stream read from the head gives a forward token that later
	// yields the stream's first events.
	mustAppend(t, s, "g", "empty", nil)
	empty, err := s.Events(ctx, "g", "empty", logstore.EventQuery{StartFromHead: true})
	if err != nil || len(empty.Events) != 0 || empty.NextForwardToken == "" {
		t.Fatalf("empty stream: %+v, %v", empty, err)
	}
	mustAppend(t, s, "g", "empty", lines("first", 5, 1))
	first, err := s.Events(ctx, "g", "empty", logstore.EventQuery{NextToken: empty.NextForwardToken})
	if err != nil || len(first.Events) != 1 {
		t.Errorf("after first append: %+v, %v", first, err)
	}
}

// TestEventsOrder: events come back by timestamp, arrival order breaking
// ties, whatever order they were appended in.
func TestEventsOrder(t *testing.T) {
	s := openStore(t)
	mustAppend(t, s, "g", "s", []sagebox.LogEvent{{Timestamp: 3, Message: "c"}, {Timestamp: 1, Message: "a"}})
	mustAppend(t, s, "g", "s", []sagebox.LogEvent{{Timestamp: 2, Message: "b"}, {Timestamp: 3, Message: "d"}})
	page, err := s.Events(context.Background(), "g", "s", logstore.EventQuery{StartFromHead: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(messages(page.Events), ""); got != "abcd" {
		t.Errorf("order = %q; want abcd", got)
	}
}

// TestEventsSDKLoop replays the SageMaker SDK's log_stream/multi_stream_iter
// position logic ((timestamp, skip) and startTime, startFromHead, nextToken
// until an empty page) while lines keep arriving, and checks every line is
// printed exactly once.
func TestEventsSDKLoop(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	var printed []string
	posTS, skip := int64(0), 0
	read := func() {
		var token string
		for {
			page, err := s.Events(ctx, "g", "s", logstore.EventQuery{StartTime: &posTS, StartFromHead: true, NextToken: token})
			if err != nil {
				t.Fatal(err)
			}
			token = page.NextForwardToken
			evs := page.Events
			if len(evs) == 0 {
				return
			}
			if len(evs) > skip {
				evs, skip = evs[skip:], 0
			} else {
				skip -= len(evs)
				evs = nil
			}
			for _, e := range evs {
				printed = append(printed, e.Message)
				if e.Timestamp == posTS {
					skip++
				} else {
					posTS, skip = e.Timestamp, 1
				}
			}
		}
	}
	var want []string
	for round := 0; round < 5; round++ {
		// Several lines per millisecond, as a fast training loop writes.
		var batch []sagebox.LogEvent
		for i := 0; i < 7; i++ {
			msg := fmt.Sprintf("r%d l%d", round, i)
			batch = append(batch, sagebox.LogEvent{Timestamp: int64(1000 + round*2 + i/3), Message: msg})
			want = append(want, msg)
		}
		mustAppend(t, s, "g", "s", batch)
		read()
	}
	if !reflect.DeepEqual(printed, want) {
		t.Errorf("printed %v\nwant    %v", printed, want)
	}
}

func TestEventsPageBytes(t *testing.T) {
	s := openStore(t)
	big := strings.Repeat("x", 200_000)
	var evs []sagebox.LogEvent
	for i := 0; i < 8; i++ {
		evs = append(evs, sagebox.LogEvent{Timestamp: int64(i), Message: big})
	}
	mustAppend(t, s, "g", "s", evs)
	page, err := s.Events(context.Background(), "g", "s", logstore.EventQuery{StartFromHead: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 5 {
		t.Errorf("got %d events of 200 kB; want 5 (1 MB cap)", len(page.Events))
	}
	rest, err := s.Events(context.Background(), "g", "s", logstore.EventQuery{NextToken: page.NextForwardToken})
	if err != nil || len(rest.Events) != 3 {
		t.Errorf("second page: %d events, %v; want 3", len(rest.Events), err)
	}
}

func TestEventsErrors(t *testing.T) {
	s := stream10(t)
	tests := []struct {
		name, group, stream, token string
		want                       error
	}{
		{"missing group", "nope", "s", "", logstore.ErrGroupNotFound},
		{"missing stream", "g", "nope", "", logstore.ErrStreamNotFound},
		{"garbage token", "g", "s", "x/1/2", logstore.ErrInvalidToken},
		{"token without id", "g", "s", "f/1", logstore.ErrInvalidToken},
		{"token with text", "g", "s", "f/a/1", logstore.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Events(context.Background(), tt.group, tt.stream, logstore.EventQuery{NextToken: tt.token})
			if err != tt.want {
				t.Errorf("err = %v; want %v", err, tt.want)
			}
		})
	}
}
