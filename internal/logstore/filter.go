package logstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// FilterQuery searches the streams of one group the way FilterLogEvents
// does.
type FilterQuery struct {
	StreamNames  []string // only these streams (missing names are ignored)
	StreamPrefix string   // only streams whose name starts with it
	StartTime    *int64   // inclusive; nil for no bound
	EndTime      *int64   // inclusive, as FilterLogEvents defines it; nil for no bound
	Pattern      *Pattern // nil matches everything
	Limit        int      // 0 means 10000
	NextToken    string
}

// FilterPage is one page of matching events, interleaved across streams in
// (timestamp, arrival) order.
type FilterPage struct {
	Events          []Event
	SearchedStreams []string // the streams the query covered, by name
	// NextToken is set when events past this page may still match.
	NextToken string
}

// Scan sizes for Filter. A page stops early, with a token, once it has
// examined filterScanLimit events, so one call never reads a whole large
// group for a rare pattern.
const (
	filterBatch     = 1000
	filterScanLimit = 100_000
)

type filterCursor struct {
	Time int64 `json:"t"`
	ID   int64 `json:"i"`
}

// Filter returns one page of the events of group that match q. A missing
// group yields ErrGroupNotFound, a bad token ErrInvalidToken.
func (s *Store) Filter(ctx context.Context, group string, q FilterQuery) (FilterPage, error) {
	gid, err := groupID(ctx, s.sql.R, group)
	if errors.Is(err, ErrGroupNotFound) {
		return FilterPage{}, ErrGroupNotFound
	}
	if err != nil {
		return FilterPage{}, fmt.Errorf("filter log events of %s: %w", group, err)
	}
	var pos *filterCursor
	if q.NextToken != "" {
		pos = &filterCursor{}
		if err := decodeToken(q.NextToken, pos); err != nil || pos.ID == 0 {
			return FilterPage{}, ErrInvalidToken
		}
	}
	streams, err := s.selectStreams(ctx, gid, q)
	if err != nil {
		return FilterPage{}, fmt.Errorf("filter log events of %s: %w", group, err)
	}
	var page FilterPage
	if len(streams) == 0 {
		return page, nil
	}
	names := map[int64]string{}
	for _, st := range streams {
		names[st.id] = st.name
		page.SearchedStreams = append(page.SearchedStreams, st.name)
	}

	var where strings.Builder
	where.WriteString("group_id = ?")
	args := []any{gid}
	if len(q.StreamNames) > 0 || q.StreamPrefix != "" {
		where.WriteString(" AND stream_id IN (?" + strings.Repeat(", ?", len(streams)-1) + ")")
		for _, st := range streams {
			args = append(args, st.id)
		}
	}
	if q.StartTime != nil {
		where.WriteString(" AND timestamp >= ?")
		args = append(args, *q.StartTime)
	}
	if q.EndTime != nil {
		where.WriteString(" AND timestamp <= ?")
		args = append(args, *q.EndTime)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 10000
	}

	size, scanned := 0, 0
	for {
		batch, err := s.scanEvents(ctx, where.String(), args, pos)
		if err != nil {
			return FilterPage{}, fmt.Errorf("filter log events of %s: %w", group, err)
		}
		for _, ev := range batch {
			if q.Pattern.Match(ev.Message) {
				size += len(ev.Message) + EventOverhead
				if size > MaxPageBytes && len(page.Events) > 0 {
					return withToken(page, pos)
				}
				ev.Stream = names[ev.streamID]
				page.Events = append(page.Events, ev.Event)
			}
			pos = &filterCursor{ev.Timestamp, ev.ID}
			scanned++
			if len(page.Events) == limit || scanned >= filterScanLimit {
				more, err := s.moreEvents(ctx, where.String(), args, pos)
				if err != nil {
					return FilterPage{}, fmt.Errorf("filter log events of %s: %w", group, err)
				}
				if !more {
					return page, nil
				}
				return withToken(page, pos)
			}
		}
		if len(batch) < filterBatch {
			return page, nil
		}
	}
}

// withToken sets page's NextToken to resume after pos.
func withToken(page FilterPage, pos *filterCursor) (FilterPage, error) {
	token, err := encodeToken(pos)
	if err != nil {
		return FilterPage{}, fmt.Errorf("filter log events: %w", err)
	}
	page.NextToken = token
	return page, nil
}

type streamRef struct {
	id   int64
	name string
}

// selectStreams returns the streams q covers, in name order.
func (s *Store) selectStreams(ctx context.Context, gid int64, q FilterQuery) ([]streamRef, error) {
	query := `SELECT id, name FROM log_streams WHERE group_id = ? AND substr(name, 1, ?) = ?`
	args := []any{gid, utf8.RuneCountInString(q.StreamPrefix), q.StreamPrefix}
	if len(q.StreamNames) > 0 {
		query += ` AND name IN (?` + strings.Repeat(", ?", len(q.StreamNames)-1) + `)`
		for _, n := range q.StreamNames {
			args = append(args, n)
		}
	}
	rows, err := s.sql.R.QueryContext(ctx, query+` ORDER BY name`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var streams []streamRef
	for rows.Next() {
		var st streamRef
		if err := rows.Scan(&st.id, &st.name); err != nil {
			return nil, err
		}
		streams = append(streams, st)
	}
	return streams, rows.Err()
}

// scannedEvent is an event with the id of its stream.
type scannedEvent struct {
	Event
	streamID int64
}

// scanEvents reads the next batch of events after pos that satisfy where.
func (s *Store) scanEvents(ctx context.Context, where string, args []any, pos *filterCursor) ([]scannedEvent, error) {
	if pos != nil {
		where += " AND (timestamp, id) > (?, ?)"
		args = append(args[:len(args):len(args)], pos.Time, pos.ID)
	}
	rows, err := s.sql.R.QueryContext(ctx, `SELECT id, stream_id, timestamp, ingestion_time, message FROM log_events WHERE `+
		where+` ORDER BY timestamp, id LIMIT ?`, append(args[:len(args):len(args)], filterBatch)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var batch []scannedEvent
	for rows.Next() {
		var ev scannedEvent
		if err := rows.Scan(&ev.ID, &ev.streamID, &ev.Timestamp, &ev.IngestionTime, &ev.Message); err != nil {
			return nil, err
		}
		batch = append(batch, ev)
	}
	return batch, rows.Err()
}

// moreEvents reports whether any event after pos satisfies where.
func (s *Store) moreEvents(ctx context.Context, where string, args []any, pos *filterCursor) (bool, error) {
	rows, err := s.sql.R.QueryContext(ctx, `SELECT 1 FROM log_events WHERE `+where+
		` AND (timestamp, id) > (?, ?) LIMIT 1`, append(args[:len(args):len(args)], pos.Time, pos.ID)...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	more := rows.Next()
	return more, rows.Err()
}
