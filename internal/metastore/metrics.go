package metastore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/sqldb"
)

// AddMetrics appends points to the named job's metric time series, all in
// one transaction. A missing job yields ErrNotFound. NaN values are kept.
func (db *DB) AddMetrics(ctx context.Context, job string, points []sagebox.MetricPoint) error {
	if len(points) == 0 {
		return nil
	}
	err := db.sql.WriteTx(ctx, func(tx *sql.Tx) error {
		name, err := storedName(ctx, tx, job)
		if err != nil {
			return err
		}
		stmt, err := tx.PrepareContext(ctx,
			`INSERT INTO training_job_metrics (job, name, value, timestamp) VALUES (?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, p := range points {
			var value any = p.Value
			if math.IsNaN(p.Value) {
				value = nil
			}
			if _, err := stmt.ExecContext(ctx, name, p.Name, value, p.Timestamp.UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("add metrics to %s: %w", job, err)
	}
	return nil
}

// Metrics returns the named job's metric points in time order (ties in the
// order they were added), with millisecond timestamps in UTC. A missing job
// yields ErrNotFound; a job without metrics yields an empty slice.
func (db *DB) Metrics(ctx context.Context, job string) ([]sagebox.MetricPoint, error) {
	var points []sagebox.MetricPoint
	err := db.sql.Read(ctx, sqldb.PointRead, func(r *sql.DB) (err error) {
		points, err = readMetrics(ctx, r, job)
		return err
	})
	return points, err
}

func readMetrics(ctx context.Context, r *sql.DB, job string) ([]sagebox.MetricPoint, error) {
	if _, err := storedName(ctx, r, job); errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	} else if err != nil {
		return nil, fmt.Errorf("read metrics of %s: %w", job, err)
	}
	rows, err := r.QueryContext(ctx,
		`SELECT name, value, timestamp FROM training_job_metrics WHERE job = ? ORDER BY timestamp, id`, job)
	if err != nil {
		return nil, fmt.Errorf("read metrics of %s: %w", job, err)
	}
	defer rows.Close()
	points := []sagebox.MetricPoint{}
	for rows.Next() {
		var (
			p     sagebox.MetricPoint
			value sql.NullFloat64
			ms    int64
		)
		if err := rows.Scan(&p.Name, &value, &ms); err != nil {
			return nil, fmt.Errorf("read metrics of %s: %w", job, err)
		}
		p.Value = math.NaN()
		if value.Valid {
			p.Value = value.Float64
		}
		p.Timestamp = time.UnixMilli(ms).UTC()
		points = append(points, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read metrics of %s: %w", job, err)
	}
	return points, nil
}

// storedName returns the job's name as stored (names match ignoring case),
// or ErrNotFound.
func storedName(ctx context.Context, q querier, job string) (string, error) {
	var name string
	err := q.QueryRowContext(ctx, `SELECT name FROM training_jobs WHERE name = ?`, job).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return name, err
}
