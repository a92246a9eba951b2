package logstore_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/logstore"
)

func streamNames(streams []logstore.Stream) []string {
	var out []string
	for _, s := range streams {
		out = append(out, s.Name)
	}
	return out
}

func TestStreams(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	g := sagebox.TrainingLogGroup
	mustAppend(t, s, g, "job-b/algo-1-100", lines("x", 300, 1))
	mustAppend(t, s, g, "job-a/algo-2-100", lines("x", 100, 1))
	mustAppend(t, s, g, "job-a/algo-1-100", lines("x", 200, 1))
	mustAppend(t, s, g, "job-a/algo-3-100", nil) // no events yet

	tests := []struct {
		name string
		q    logstore.StreamQuery
		want []string
	}{
		{"by name", logstore.StreamQuery{}, []string{"job-a/algo-1-100", "job-a/algo-2-100", "job-a/algo-3-100", "job-b/algo-1-100"}},
		{"prefix", logstore.StreamQuery{Prefix: "job-a/"}, []string{"job-a/algo-1-100", "job-a/algo-2-100", "job-a/algo-3-100"}},
		{"prefix descending", logstore.StreamQuery{Prefix: "job-a/", Descending: true}, []string{"job-a/algo-3-100", "job-a/algo-2-100", "job-a/algo-1-100"}},
		{"prefix matches nothing", logstore.StreamQuery{Prefix: "job-c/"}, nil},
		{"last event time", logstore.StreamQuery{OrderBy: "LastEventTime"}, []string{"job-a/algo-3-100", "job-a/algo-2-100", "job-a/algo-1-100", "job-b/algo-1-100"}},
		{"last event time descending", logstore.StreamQuery{OrderBy: "LastEventTime", Descending: true}, []string{"job-b/algo-1-100", "job-a/algo-1-100", "job-a/algo-2-100", "job-a/algo-3-100"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next, err := s.Streams(ctx, g, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if next != "" {
				t.Errorf("token %q although everything fitted", next)
			}
			if !reflect.DeepEqual(streamNames(got), tt.want) {
				t.Errorf("got %v; want %v", streamNames(got), tt.want)
			}
		})
		t.Run(tt.name+"/paged", func(t *testing.T) {
			q := tt.q
			q.Limit = 1
			var all []logstore.Stream
			for i := 0; ; i++ {
				if i > len(tt.want) {
					t.Fatal("pagination does not end")
				}
				page, next, err := s.Streams(ctx, g, q)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, page...)
				if next == "" {
					break
				}
				q.NextToken = next
			}
			if !reflect.DeepEqual(streamNames(all), tt.want) {
				t.Errorf("got %v; want %v", streamNames(all), tt.want)
			}
		})
	}
}

// TestStreamsNoTokenWhenExactlyFull covers the SageMaker SDK's loop: a page
// holding every stream, even exactly limit of them, carries no token.
func TestStreamsNoTokenWhenExactlyFull(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	for _, n := range []string{"j/algo-1-1", "j/algo-2-1"} {
		mustAppend(t, s, "g", n, nil)
	}
	page, next, err := s.Streams(ctx, "g", logstore.StreamQuery{Prefix: "j/", Limit: 2})
	if err != nil || len(page) != 2 || next != "" {
		t.Errorf("got %d streams, token %q, %v; want 2 and no token", len(page), next, err)
	}
}

func TestStreamsErrors(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	mustAppend(t, s, "g", "a", nil)
	mustAppend(t, s, "g", "b", nil)
	_, token, err := s.Streams(ctx, "g", logstore.StreamQuery{Limit: 1})
	if err != nil || token == "" {
		t.Fatalf("first page: %q, %v", token, err)
	}
	tests := []struct {
		name  string
		group string
		q     logstore.StreamQuery
		want  error
	}{
		{"missing group", "nope", logstore.StreamQuery{}, logstore.ErrGroupNotFound},
		{"garbage token", "g", logstore.StreamQuery{NextToken: "%%%"}, logstore.ErrInvalidToken},
		{"token of another order", "g", logstore.StreamQuery{NextToken: token, OrderBy: "LastEventTime"}, logstore.ErrInvalidToken},
		{"token of another direction", "g", logstore.StreamQuery{NextToken: token, Descending: true}, logstore.ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := s.Streams(ctx, tt.group, tt.q); err != tt.want {
				t.Errorf("err = %v; want %v", err, tt.want)
			}
		})
	}
}
