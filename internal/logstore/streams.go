package logstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// Stream orders for StreamQuery.OrderBy, spelled as CloudWatch spells them.
const (
	OrderByLogStreamName = "LogStreamName"
	OrderByLastEventTime = "LastEventTime"
)

// Group is a log group as DescribeLogGroups shows it.
type Group struct {
	Name         string
	CreationTime int64 // epoch milliseconds
	StoredBytes  int64
}

// Stream is a log stream as DescribeLogStreams shows it. The event times are
// nil until the stream has events.
type Stream struct {
	Name                string
	CreationTime        int64 // epoch milliseconds
	FirstEventTimestamp *int64
	LastEventTimestamp  *int64
	LastIngestionTime   *int64
	StoredBytes         int64
}

// GroupQuery selects log groups.
type GroupQuery struct {
	Prefix    string // name prefix; empty for all
	Limit     int    // page size; 0 means 50
	NextToken string
}

// StreamQuery selects and orders the streams of one group.
type StreamQuery struct {
	Prefix     string // name prefix; empty for all
	OrderBy    string // OrderByLogStreamName (default) or OrderByLastEventTime
	Descending bool
	Limit      int // page size; 0 means 50
	NextToken  string
}

// Groups returns one page of log groups in name order, and a token when
// more remain (never when everything fitted).
func (s *Store) Groups(ctx context.Context, q GroupQuery) ([]Group, string, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	query := `SELECT name, creation_time, stored_bytes FROM log_groups WHERE substr(name, 1, ?) = ?`
	args := []any{utf8.RuneCountInString(q.Prefix), q.Prefix}
	if q.NextToken != "" {
		var c listCursor
		if err := decodeToken(q.NextToken, &c); err != nil || c.Name == "" {
			return nil, "", ErrInvalidToken
		}
		query += ` AND name > ?`
		args = append(args, c.Name)
	}
	query += ` ORDER BY name LIMIT ?`
	args = append(args, limit+1)
	rows, err := s.sql.R.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list log groups: %w", err)
	}
	defer rows.Close()
	var groups []Group
	for rows.Next() {
		var g Group
		if err := rows.Scan(&g.Name, &g.CreationTime, &g.StoredBytes); err != nil {
			return nil, "", fmt.Errorf("list log groups: %w", err)
		}
		groups = append(groups, g)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list log groups: %w", err)
	}
	if len(groups) <= limit {
		return groups, "", nil
	}
	groups = groups[:limit]
	token, err := encodeToken(listCursor{Name: groups[limit-1].Name})
	if err != nil {
		return nil, "", fmt.Errorf("list log groups: %w", err)
	}
	return groups, token, nil
}

// listCursor is the position a DescribeLogGroups/DescribeLogStreams token
// carries: the sort key of the last item returned.
type listCursor struct {
	OrderBy    string `json:"o,omitempty"`
	Descending bool   `json:"d,omitempty"`
	Time       int64  `json:"t,omitempty"`
	Name       string `json:"n"`
}

// noEvents sorts streams without events before every real timestamp.
const noEvents = math.MinInt64

// Streams returns one page of the streams of group, and a token when more
// remain (never when everything fitted: the SageMaker SDK loops for as long
// as a token is present). A missing group yields ErrGroupNotFound.
func (s *Store) Streams(ctx context.Context, group string, q StreamQuery) ([]Stream, string, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	orderBy := q.OrderBy
	if orderBy == "" {
		orderBy = OrderByLogStreamName
	}
	gid, err := groupID(ctx, s.sql.R, group)
	if errors.Is(err, ErrGroupNotFound) {
		return nil, "", ErrGroupNotFound
	}
	if err != nil {
		return nil, "", fmt.Errorf("list log streams of %s: %w", group, err)
	}

	dir, cmp := "ASC", ">"
	if q.Descending {
		dir, cmp = "DESC", "<"
	}
	query := `SELECT name, creation_time, first_event, last_event, last_ingestion, stored_bytes
		FROM log_streams WHERE group_id = ? AND substr(name, 1, ?) = ?`
	args := []any{gid, utf8.RuneCountInString(q.Prefix), q.Prefix}
	var c listCursor
	if q.NextToken != "" {
		if err := decodeToken(q.NextToken, &c); err != nil || c.OrderBy != orderBy || c.Descending != q.Descending {
			return nil, "", ErrInvalidToken
		}
	}
	switch orderBy {
	case OrderByLogStreamName:
		if q.NextToken != "" {
			query += ` AND name ` + cmp + ` ?`
			args = append(args, c.Name)
		}
		query += ` ORDER BY name ` + dir
	case OrderByLastEventTime:
		if q.NextToken != "" {
			query += ` AND (COALESCE(last_event, ?), name) ` + cmp + ` (?, ?)`
			args = append(args, int64(noEvents), c.Time, c.Name)
		}
		query += ` ORDER BY COALESCE(last_event, ?) ` + dir + `, name ` + dir
		args = append(args, int64(noEvents))
	default:
		return nil, "", fmt.Errorf("list log streams: unknown order %q", orderBy)
	}
	query += ` LIMIT ?`
	args = append(args, limit+1)

	rows, err := s.sql.R.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list log streams of %s: %w", group, err)
	}
	defer rows.Close()
	var streams []Stream
	for rows.Next() {
		st, err := scanStream(rows)
		if err != nil {
			return nil, "", fmt.Errorf("list log streams of %s: %w", group, err)
		}
		streams = append(streams, st)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list log streams of %s: %w", group, err)
	}
	if len(streams) <= limit {
		return streams, "", nil
	}
	streams = streams[:limit]
	last := streams[limit-1]
	next := listCursor{OrderBy: orderBy, Descending: q.Descending, Name: last.Name, Time: noEvents}
	if last.LastEventTimestamp != nil {
		next.Time = *last.LastEventTimestamp
	}
	token, err := encodeToken(next)
	if err != nil {
		return nil, "", fmt.Errorf("list log streams of %s: %w", group, err)
	}
	return streams, token, nil
}

// Stream returns one stream, or ErrGroupNotFound / ErrStreamNotFound.
func (s *Store) Stream(ctx context.Context, group, stream string) (Stream, error) {
	ids, err := s.lookup(ctx, group, stream)
	if err != nil {
		return Stream{}, err
	}
	st, err := scanStream(s.sql.R.QueryRowContext(ctx, `SELECT name, creation_time, first_event, last_event, last_ingestion, stored_bytes
		FROM log_streams WHERE id = ?`, ids.stream))
	if err != nil {
		return Stream{}, fmt.Errorf("get log stream %s/%s: %w", group, stream, err)
	}
	return st, nil
}

// lookup resolves group and stream names to ids, or returns
// ErrGroupNotFound / ErrStreamNotFound.
func (s *Store) lookup(ctx context.Context, group, stream string) (streamIDs, error) {
	key := streamKey{group, stream}
	s.mu.Lock()
	ids, ok := s.ids[key]
	s.mu.Unlock()
	if ok {
		return ids, nil
	}
	gid, err := groupID(ctx, s.sql.R, group)
	if errors.Is(err, ErrGroupNotFound) {
		return ids, ErrGroupNotFound
	}
	if err != nil {
		return ids, fmt.Errorf("find log group %s: %w", group, err)
	}
	ids.group = gid
	err = s.sql.R.QueryRowContext(ctx, `SELECT id FROM log_streams WHERE group_id = ? AND name = ?`, gid, stream).Scan(&ids.stream)
	if errors.Is(err, sql.ErrNoRows) {
		return ids, ErrStreamNotFound
	}
	if err != nil {
		return ids, fmt.Errorf("find log stream %s/%s: %w", group, stream, err)
	}
	s.mu.Lock()
	s.ids[key] = ids
	s.mu.Unlock()
	return ids, nil
}

func scanStream(row interface{ Scan(...any) error }) (Stream, error) {
	var (
		st                   Stream
		first, last, ingests sql.NullInt64
	)
	if err := row.Scan(&st.Name, &st.CreationTime, &first, &last, &ingests, &st.StoredBytes); err != nil {
		return st, err
	}
	st.FirstEventTimestamp = nullable(first)
	st.LastEventTimestamp = nullable(last)
	st.LastIngestionTime = nullable(ingests)
	return st, nil
}

func nullable(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}
