package metastore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/sqldb"
)

// Sort keys and orders of TrainingJobQuery, spelled as the API spells them.
const (
	SortByName         = "Name"
	SortByCreationTime = "CreationTime"
	SortByStatus       = "Status"
	SortAscending      = "Ascending"
	SortDescending     = "Descending"
)

// TrainingJobQuery selects and orders jobs for ListTrainingJobs. Zero values
// mean "no filter" and the API's defaults.
type TrainingJobQuery struct {
	// NameContains keeps jobs whose name contains it, ignoring case.
	NameContains string
	// StatusEquals keeps jobs with this TrainingJobStatus.
	StatusEquals string
	// CreationTimeAfter and CreationTimeBefore keep jobs created strictly
	// after / before them.
	CreationTimeAfter, CreationTimeBefore time.Time
	// LastModifiedTimeAfter and LastModifiedTimeBefore keep jobs last
	// modified strictly after / before them.
	LastModifiedTimeAfter, LastModifiedTimeBefore time.Time
	// SortBy is SortByName, SortByCreationTime (default) or SortByStatus.
	// Ties are broken by name.
	SortBy string
	// SortOrder is SortAscending or SortDescending (default).
	SortOrder string
	// MaxResults is the page size; 0 means 10.
	MaxResults int
	// NextToken continues a previous listing.
	NextToken string
}

// cursor is what a NextToken carries: the sort it belongs to and the sort
// key of the last job returned. Listing resumes strictly after that key, so
// jobs created or deleted meanwhile never shift a page (keyset pagination).
type cursor struct {
	SortBy    string `json:"b"`
	SortOrder string `json:"o"`
	Time      int64  `json:"t,omitempty"`
	Status    string `json:"s,omitempty"`
	Name      string `json:"n"`
}

// ListTrainingJobs returns one page of jobs matching q, and a token for the
// next page when more jobs match. A token that does not decode, or that
// belongs to a different SortBy/SortOrder, yields ErrInvalidToken.
func (db *DB) ListTrainingJobs(ctx context.Context, q TrainingJobQuery) ([]*sagebox.TrainingJob, string, error) {
	sortBy, order, limit := q.SortBy, q.SortOrder, q.MaxResults
	if sortBy == "" {
		sortBy = SortByCreationTime
	}
	if order == "" {
		order = SortDescending
	}
	if limit <= 0 {
		limit = 10
	}
	var column string // the sort column before the name tie-break
	switch sortBy {
	case SortByName:
	case SortByCreationTime:
		column = "creation_time"
	case SortByStatus:
		column = "status"
	default:
		return nil, "", fmt.Errorf("list training jobs: unknown SortBy %q", sortBy)
	}
	dir, cmp := "ASC", ">"
	switch order {
	case SortAscending:
	case SortDescending:
		dir, cmp = "DESC", "<"
	default:
		return nil, "", fmt.Errorf("list training jobs: unknown SortOrder %q", order)
	}

	var where []string
	var args []any
	filter := func(cond string, arg any) {
		where = append(where, cond)
		args = append(args, arg)
	}
	if q.NameContains != "" {
		filter("instr(lower(name), lower(?)) > 0", q.NameContains)
	}
	if q.StatusEquals != "" {
		filter("status = ?", q.StatusEquals)
	}
	for _, t := range []struct {
		cond string
		at   time.Time
	}{
		{"creation_time > ?", q.CreationTimeAfter},
		{"creation_time < ?", q.CreationTimeBefore},
		{"last_modified > ?", q.LastModifiedTimeAfter},
		{"last_modified < ?", q.LastModifiedTimeBefore},
	} {
		if !t.at.IsZero() {
			filter(t.cond, t.at.UnixMilli())
		}
	}
	if q.NextToken != "" {
		c, err := decodeCursor(q.NextToken)
		if err != nil || c.SortBy != sortBy || c.SortOrder != order {
			return nil, "", ErrInvalidToken
		}
		switch sortBy {
		case SortByName:
			filter("name "+cmp+" ?", c.Name)
		case SortByCreationTime:
			where = append(where, "(creation_time, name) "+cmp+" (?, ?)")
			args = append(args, c.Time, c.Name)
		case SortByStatus:
			where = append(where, "(status, name) "+cmp+" (?, ?)")
			args = append(args, c.Status, c.Name)
		}
	}

	query := "SELECT body FROM training_jobs"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY "
	if column != "" {
		query += column + " " + dir + ", "
	}
	query += "name " + dir + " LIMIT ?"
	args = append(args, limit+1)

	var jobs []*sagebox.TrainingJob
	err := db.sql.Read(ctx, sqldb.BulkRead, func(r *sql.DB) (err error) {
		jobs, err = queryJobs(ctx, r, query, args...)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("list training jobs: %w", err)
	}
	if len(jobs) <= limit {
		return jobs, "", nil
	}
	jobs = jobs[:limit]
	last := jobs[limit-1]
	c := cursor{SortBy: sortBy, SortOrder: order, Name: last.TrainingJobName}
	switch sortBy {
	case SortByCreationTime:
		c.Time = last.CreationTime.UnixMilli()
	case SortByStatus:
		c.Status = last.TrainingJobStatus
	}
	token, err := encodeCursor(c)
	if err != nil {
		return nil, "", fmt.Errorf("list training jobs: %w", err)
	}
	return jobs, token, nil
}

func encodeCursor(c cursor) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode pagination token: %w", err)
	}
	return unBase64(base64.RawURLEncoding.EncodeToString(b)), nil
}

// unBase64 appends "." and up to three "A"s so that the token's
// standard-base64 letters and digits number 1 more than a multiple of 4: no
// such string is valid base64. botocore's paginator first tries to read a
// StartingToken as its own base64 JSON, and a plain base64url JSON token
// whose length was a multiple of 4 decoded into request parameters when a
// caller resumed from the service's raw NextToken (as the SageMaker Python
// SDK does for FilterLogEvents). Now botocore passes it through, as it does
// with AWS's tokens.
func unBase64(s string) string {
	n := 0
	for _, r := range s {
		if r != '-' && r != '_' {
			n++
		}
	}
	return s + "." + strings.Repeat("A", (5-n%4)%4)
}

func decodeCursor(token string) (cursor, error) {
	var c cursor
	token, _, _ = strings.Cut(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return c, fmt.Errorf("decode pagination token: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("decode pagination token: %w", err)
	}
	return c, nil
}
