package metastore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/sqldb"
)

// ErrExists is returned (unwrapped) by CreateModel, CreateEndpointConfig
// and CreateEndpoint when a resource of that kind already has the name
// (compared case-insensitively). The caller words the API's error.
var ErrExists = errors.New("metastore: already exists")

// ResourceQuery selects and orders models, endpoint configs or endpoints
// for their List operations. Zero values mean "no filter" and the API's
// defaults (SortBy CreationTime, SortOrder Descending, 10 per page).
type ResourceQuery struct {
	NameContains                                  string
	StatusEquals                                  string // endpoints only
	CreationTimeAfter, CreationTimeBefore         time.Time
	LastModifiedTimeAfter, LastModifiedTimeBefore time.Time // endpoints only
	SortBy                                        string    // SortByName or SortByCreationTime
	SortOrder                                     string
	MaxResults                                    int
	NextToken                                     string // ErrInvalidToken when not from the same sort
}

// kind is how one resource type is stored: its table and how to read the
// indexed columns off a value and to encode and decode its body.
type kind[T any] struct {
	table   string
	name    func(*T) string
	arn     func(*T) string
	tags    func(*T) []sagebox.Tag
	status  func(*T) string
	created func(*T) *sagebox.Time
	changed func(*T) *sagebox.Time // nil: same as created
	encode  func(*T) ([]byte, error)
	decode  func([]byte) (*T, error)
}

var (
	models = kind[sagebox.Model]{
		table:   "models",
		name:    func(m *sagebox.Model) string { return m.ModelName },
		arn:     func(m *sagebox.Model) string { return m.ModelArn },
		tags:    func(m *sagebox.Model) []sagebox.Tag { return m.Tags },
		status:  func(*sagebox.Model) string { return "" },
		created: func(m *sagebox.Model) *sagebox.Time { return m.CreationTime },
		encode: func(m *sagebox.Model) ([]byte, error) {
			c := *m
			c.Tags = nil
			return json.Marshal(&c)
		},
		decode: decodeJSON[sagebox.Model],
	}
	endpointConfigs = kind[sagebox.EndpointConfig]{
		table:   "endpoint_configs",
		name:    func(c *sagebox.EndpointConfig) string { return c.EndpointConfigName },
		arn:     func(c *sagebox.EndpointConfig) string { return c.EndpointConfigArn },
		tags:    func(c *sagebox.EndpointConfig) []sagebox.Tag { return c.Tags },
		status:  func(*sagebox.EndpointConfig) string { return "" },
		created: func(c *sagebox.EndpointConfig) *sagebox.Time { return c.CreationTime },
		encode: func(c *sagebox.EndpointConfig) ([]byte, error) {
			cc := *c
			cc.Tags = nil
			return json.Marshal(&cc)
		},
		decode: decodeJSON[sagebox.EndpointConfig],
	}
	endpoints = kind[sagebox.Endpoint]{
		table:   "endpoints",
		name:    func(e *sagebox.Endpoint) string { return e.EndpointName },
		arn:     func(e *sagebox.Endpoint) string { return e.EndpointArn },
		tags:    func(e *sagebox.Endpoint) []sagebox.Tag { return e.Tags },
		status:  func(e *sagebox.Endpoint) string { return e.EndpointStatus },
		created: func(e *sagebox.Endpoint) *sagebox.Time { return e.CreationTime },
		changed: func(e *sagebox.Endpoint) *sagebox.Time { return e.LastModifiedTime },
		encode: func(e *sagebox.Endpoint) ([]byte, error) {
			c := *e
			c.Tags = nil
			return json.Marshal(storedEndpoint{Endpoint: &c, Internal: &c.Internal})
		},
		decode: func(b []byte) (*sagebox.Endpoint, error) {
			s := storedEndpoint{Endpoint: &sagebox.Endpoint{}}
			if err := json.Unmarshal(b, &s); err != nil {
				return nil, err
			}
			if s.Internal != nil {
				s.Endpoint.Internal = *s.Internal
			}
			return s.Endpoint, nil
		},
	}
)

// storedEndpoint is an endpoint as its body column holds it: the API's
// shape plus sagebox's record under a key no SageMaker member has.
type storedEndpoint struct {
	*sagebox.Endpoint
	Internal *sagebox.EndpointInternal `json:"_sagebox,omitempty"`
}

func decodeJSON[T any](b []byte) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, err
	}
	return v, nil
}

// CreateModel stores a new model and its Tags (under ModelArn) in one
// transaction, or returns ErrExists. ModelName and CreationTime must be set.
func (db *DB) CreateModel(ctx context.Context, m *sagebox.Model) error {
	return create(ctx, db, models, m)
}

// Model returns the named model, or ErrNotFound.
func (db *DB) Model(ctx context.Context, name string) (*sagebox.Model, error) {
	return get(ctx, db, models, name)
}

// DeleteModel removes the named model and its tags, or returns ErrNotFound.
func (db *DB) DeleteModel(ctx context.Context, name string) error {
	return remove(ctx, db, models, name)
}

// ListModels returns one page of models matching q and the next page's token.
func (db *DB) ListModels(ctx context.Context, q ResourceQuery) ([]*sagebox.Model, string, error) {
	return list(ctx, db, models, q)
}

// CreateEndpointConfig stores a new endpoint config and its tags, or
// returns ErrExists.
func (db *DB) CreateEndpointConfig(ctx context.Context, c *sagebox.EndpointConfig) error {
	return create(ctx, db, endpointConfigs, c)
}

// EndpointConfig returns the named endpoint config, or ErrNotFound.
func (db *DB) EndpointConfig(ctx context.Context, name string) (*sagebox.EndpointConfig, error) {
	return get(ctx, db, endpointConfigs, name)
}

// DeleteEndpointConfig removes the named config and its tags, or returns
// ErrNotFound. Endpoints keep serving what they deployed from it.
func (db *DB) DeleteEndpointConfig(ctx context.Context, name string) error {
	return remove(ctx, db, endpointConfigs, name)
}

// ListEndpointConfigs returns one page of configs matching q.
func (db *DB) ListEndpointConfigs(ctx context.Context, q ResourceQuery) ([]*sagebox.EndpointConfig, string, error) {
	return list(ctx, db, endpointConfigs, q)
}

// CreateEndpoint stores a new endpoint and its tags, or returns ErrExists.
func (db *DB) CreateEndpoint(ctx context.Context, e *sagebox.Endpoint) error {
	return create(ctx, db, endpoints, e)
}

// Endpoint returns the named endpoint, or ErrNotFound.
func (db *DB) Endpoint(ctx context.Context, name string) (*sagebox.Endpoint, error) {
	return get(ctx, db, endpoints, name)
}

// UpdateEndpoint reads the named endpoint, lets fn change it and writes it
// back in one transaction (concurrent updates are serialised). fn's error
// aborts the update and is returned unchanged; a missing endpoint yields
// ErrNotFound. fn must not call db or rename the endpoint. It returns the
// endpoint as stored.
func (db *DB) UpdateEndpoint(ctx context.Context, name string, fn func(*sagebox.Endpoint) error) (*sagebox.Endpoint, error) {
	return update(ctx, db, endpoints, name, fn)
}

// DeleteEndpoint removes the named endpoint and its tags, or returns
// ErrNotFound.
func (db *DB) DeleteEndpoint(ctx context.Context, name string) error {
	return remove(ctx, db, endpoints, name)
}

// ListEndpoints returns one page of endpoints matching q.
func (db *DB) ListEndpoints(ctx context.Context, q ResourceQuery) ([]*sagebox.Endpoint, string, error) {
	return list(ctx, db, endpoints, q)
}

// Endpoints returns every endpoint, oldest first: what the hosting manager
// brings back at start-up.
func (db *DB) Endpoints(ctx context.Context) ([]*sagebox.Endpoint, error) {
	var out []*sagebox.Endpoint
	err := db.sql.Read(ctx, sqldb.BulkRead, func(r *sql.DB) (err error) {
		out, err = queryBodies(ctx, r, endpoints, `SELECT body FROM endpoints ORDER BY creation_time, name`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list all endpoints: %w", err)
	}
	return out, nil
}

type resourceRow struct {
	name, status      string
	created, modified int64
	body              []byte
}

func toRow[T any](k kind[T], v *T) (resourceRow, error) {
	name := k.name(v)
	if name == "" {
		return resourceRow{}, fmt.Errorf("%s: resource has no name", k.table)
	}
	created := k.created(v)
	if created == nil {
		return resourceRow{}, fmt.Errorf("%s %s has no CreationTime", k.table, name)
	}
	body, err := k.encode(v)
	if err != nil {
		return resourceRow{}, fmt.Errorf("encode %s %s: %w", k.table, name, err)
	}
	r := resourceRow{name: name, status: k.status(v), created: created.UnixMilli(), modified: created.UnixMilli(), body: body}
	if k.changed != nil {
		if m := k.changed(v); m != nil {
			r.modified = m.UnixMilli()
		}
	}
	return r, nil
}

func create[T any](ctx context.Context, db *DB, k kind[T], v *T) error {
	if len(k.tags(v)) > 0 && k.arn(v) == "" {
		return fmt.Errorf("create %s %s: tags but no ARN", k.table, k.name(v))
	}
	row, err := toRow(k, v)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	err = db.sql.WriteTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+k.table+` WHERE name = ?`, row.name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return ErrExists
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO `+k.table+` (name, status, creation_time, last_modified, body) VALUES (?, ?, ?, ?, ?)`,
			row.name, row.status, row.created, row.modified, row.body); err != nil {
			return err
		}
		return putTags(ctx, tx, k.arn(v), k.tags(v))
	})
	if errors.Is(err, ErrExists) {
		return ErrExists
	}
	if err != nil {
		return fmt.Errorf("create %s %s: %w", k.table, row.name, err)
	}
	return nil
}

func get[T any](ctx context.Context, db *DB, k kind[T], name string) (*T, error) {
	var v *T
	err := db.sql.Read(ctx, sqldb.PointRead, func(r *sql.DB) (err error) {
		v, err = getOne(ctx, r, k, name)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", k.table, name, err)
	}
	return v, nil
}

func getOne[T any](ctx context.Context, q querier, k kind[T], name string) (*T, error) {
	var body []byte
	err := q.QueryRowContext(ctx, `SELECT body FROM `+k.table+` WHERE name = ?`, name).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	v, err := k.decode(body)
	if err != nil {
		return nil, fmt.Errorf("decode stored %s %s: %w", k.table, name, err)
	}
	return v, nil
}

func update[T any](ctx context.Context, db *DB, k kind[T], name string, fn func(*T) error) (*T, error) {
	var updated *T
	var fnErr error
	err := db.sql.WriteTx(ctx, func(tx *sql.Tx) error {
		v, err := getOne(ctx, tx, k, name)
		if err != nil {
			return err
		}
		stored := k.name(v)
		if err := fn(v); err != nil {
			fnErr = err
			return err
		}
		if k.name(v) != stored {
			return fmt.Errorf("update may not rename %s to %s", stored, k.name(v))
		}
		row, err := toRow(k, v)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE `+k.table+` SET status = ?, creation_time = ?, last_modified = ?, body = ? WHERE name = ?`,
			row.status, row.created, row.modified, row.body, stored); err != nil {
			return err
		}
		updated = v
		return nil
	})
	switch {
	case fnErr != nil:
		return nil, fnErr
	case errors.Is(err, ErrNotFound):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("update %s %s: %w", k.table, name, err)
	}
	return updated, nil
}

func remove[T any](ctx context.Context, db *DB, k kind[T], name string) error {
	err := db.sql.WriteTx(ctx, func(tx *sql.Tx) error {
		v, err := getOne(ctx, tx, k, name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+k.table+` WHERE name = ?`, name); err != nil {
			return err
		}
		if arn := k.arn(v); arn != "" {
			return deleteAllTags(ctx, tx, arn)
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete %s %s: %w", k.table, name, err)
	}
	return nil
}

func queryBodies[T any](ctx context.Context, q querier, k kind[T], query string, args ...any) ([]*T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		v, err := k.decode(body)
		if err != nil {
			return nil, fmt.Errorf("decode stored %s: %w", k.table, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func list[T any](ctx context.Context, db *DB, k kind[T], q ResourceQuery) ([]*T, string, error) {
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
	if sortBy != SortByName && sortBy != SortByCreationTime {
		return nil, "", fmt.Errorf("list %s: unknown SortBy %q", k.table, sortBy)
	}
	dir, cmp := "ASC", ">"
	switch order {
	case SortAscending:
	case SortDescending:
		dir, cmp = "DESC", "<"
	default:
		return nil, "", fmt.Errorf("list %s: unknown SortOrder %q", k.table, order)
	}
	var where []string
	var args []any
	filter := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
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
		if sortBy == SortByName {
			filter("name "+cmp+" ?", c.Name)
		} else {
			filter("(creation_time, name) "+cmp+" (?, ?)", c.Time, c.Name)
		}
	}
	query := "SELECT body FROM " + k.table
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY "
	if sortBy == SortByCreationTime {
		query += "creation_time " + dir + ", "
	}
	query += "name " + dir + " LIMIT ?"
	args = append(args, limit+1)

	var out []*T
	err := db.sql.Read(ctx, sqldb.BulkRead, func(r *sql.DB) (err error) {
		out, err = queryBodies(ctx, r, k, query, args...)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("list %s: %w", k.table, err)
	}
	if len(out) <= limit {
		return out, "", nil
	}
	out = out[:limit]
	last := out[limit-1]
	c := cursor{SortBy: sortBy, SortOrder: order, Name: k.name(last)}
	if sortBy == SortByCreationTime {
		c.Time = k.created(last).UnixMilli()
	}
	token, err := encodeCursor(c)
	if err != nil {
		return nil, "", fmt.Errorf("list %s: %w", k.table, err)
	}
	return out, token, nil
}
