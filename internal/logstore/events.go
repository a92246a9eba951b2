package logstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
)

// MaxPageBytes bounds the events of one page: the sum of their message sizes
// plus EventOverhead bytes per event, as CloudWatch counts its 1 MB limit.
const (
	MaxPageBytes  = 1 << 20
	EventOverhead = 26
)

// Event is one stored log event.
type Event struct {
	ID            int64  // unique in the store, increasing with arrival
	Stream        string // the stream's name (set by Filter)
	Timestamp     int64  // epoch milliseconds, as appended
	IngestionTime int64  // epoch milliseconds, when appended
	Message       string
}

// EventQuery reads a stream the way GetLogEvents does.
type EventQuery struct {
	StartTime *int64 // inclusive; nil for no bound
	EndTime   *int64 // exclusive; nil for no bound
	// StartFromHead reads the oldest events first when NextToken is empty;
	// otherwise the newest Limit events are returned (still oldest first).
	StartFromHead bool
	Limit         int // 0 means 10000
	NextToken     string
}

// EventPage is one page of a stream.
type EventPage struct {
	Events            []Event // oldest first
	NextForwardToken  string
	NextBackwardToken string
}

// Events returns one page of the events of stream in group. A missing group
// or stream yields ErrGroupNotFound / ErrStreamNotFound, a token that does not
// parse ErrInvalidToken. When a forward read finds nothing new,
// NextForwardToken is the token it was given.
func (s *Store) Events(ctx context.Context, group, stream string, q EventQuery) (EventPage, error) {
	ids, err := s.lookup(ctx, group, stream)
	if err != nil {
		return EventPage{}, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 10000
	}
	forward := q.StartFromHead
	var from *gap
	if q.NextToken != "" {
		g, fwd, err := parseGapToken(q.NextToken)
		if err != nil {
			return EventPage{}, err
		}
		from, forward = &g, fwd
	}

	var where strings.Builder
	where.WriteString("stream_id = ?")
	args := []any{ids.stream}
	if q.StartTime != nil {
		where.WriteString(" AND timestamp >= ?")
		args = append(args, *q.StartTime)
	}
	if q.EndTime != nil {
		where.WriteString(" AND timestamp < ?")
		args = append(args, *q.EndTime)
	}
	order := "ASC"
	if from != nil {
		cmp := ">="
		if !forward {
			cmp = "<"
		}
		where.WriteString(" AND (timestamp, id) " + cmp + " (?, ?)")
		args = append(args, from.Time, from.ID)
	}
	if !forward {
		order = "DESC"
	}
	rows, err := s.sql.R.QueryContext(ctx, `SELECT id, timestamp, ingestion_time, message FROM log_events WHERE `+
		where.String()+` ORDER BY timestamp `+order+`, id `+order+` LIMIT ?`, append(args, limit)...)
	if err != nil {
		return EventPage{}, fmt.Errorf("read log events of %s/%s: %w", group, stream, err)
	}
	defer rows.Close()
	var page EventPage
	size := 0
	for rows.Next() {
		var ev Event
		if err := rows.Scan(&ev.ID, &ev.Timestamp, &ev.IngestionTime, &ev.Message); err != nil {
			return EventPage{}, fmt.Errorf("read log events of %s/%s: %w", group, stream, err)
		}
		size += len(ev.Message) + EventOverhead
		if size > MaxPageBytes && len(page.Events) > 0 {
			break
		}
		page.Events = append(page.Events, ev)
	}
	if err := rows.Err(); err != nil {
		return EventPage{}, fmt.Errorf("read log events of %s/%s: %w", group, stream, err)
	}
	if !forward {
		slices.Reverse(page.Events)
	}

	if n := len(page.Events); n > 0 {
		first, last := page.Events[0], page.Events[n-1]
		page.NextForwardToken = after(last.Timestamp, last.ID).token(true)
		page.NextBackwardToken = gap{first.Timestamp, first.ID}.token(false)
		return page, nil
	}
	// Nothing in range: every gap in it is the same position.
	g := gap{Time: math.MinInt64}
	switch {
	case from != nil:
		g = *from
	case q.StartTime != nil:
		g.Time = *q.StartTime
	}
	page.NextForwardToken, page.NextBackwardToken = g.token(true), g.token(false)
	if q.NextToken != "" {
		// Hand the caller's token back verbatim, as CloudWatch does.
		if forward {
			page.NextForwardToken = q.NextToken
		} else {
			page.NextBackwardToken = q.NextToken
		}
	}
	return page, nil
}
