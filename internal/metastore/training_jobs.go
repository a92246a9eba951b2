package metastore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/sqldb"
)

// CreateTrainingJob stores a new job, and its Tags under its
// TrainingJobArn in the tag table, in one transaction (the stored job keeps
// no Tags). job.TrainingJobName and job.CreationTime must be set; so must
// TrainingJobArn when the job has tags. A job with the same name (compared
// case-insensitively, as the lower-cased ARN implies) yields a
// *sagebox.Error with code sagebox.ErrResourceInUse.
func (db *DB) CreateTrainingJob(ctx context.Context, job *sagebox.TrainingJob) error {
	if len(job.Tags) > 0 && job.TrainingJobArn == "" {
		return fmt.Errorf("create training job %s: tags but no TrainingJobArn", job.TrainingJobName)
	}
	row, err := jobRow(job)
	if err != nil {
		return fmt.Errorf("create training job: %w", err)
	}
	err = db.sql.WriteTx(ctx, func(tx *sql.Tx) error {
		existing, err := getJob(ctx, tx, job.TrainingJobName)
		switch {
		case err == nil:
			return &sagebox.Error{
				Code: sagebox.ErrResourceInUse,
				Message: "Training job names must be unique within an AWS account and region, and a training job with this name already exists (" +
					existing.TrainingJobArn + ")",
			}
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO training_jobs (name, status, creation_time, last_modified, body) VALUES (?, ?, ?, ?, ?)`,
			row.name, row.status, row.created, row.modified, row.body); err != nil {
			return err
		}
		return putTags(ctx, tx, job.TrainingJobArn, job.Tags)
	})
	if err != nil {
		var se *sagebox.Error
		if errors.As(err, &se) {
			return err
		}
		return fmt.Errorf("create training job %s: %w", job.TrainingJobName, err)
	}
	return nil
}

// TrainingJob returns the named job, or ErrNotFound.
func (db *DB) TrainingJob(ctx context.Context, name string) (*sagebox.TrainingJob, error) {
	var job *sagebox.TrainingJob
	err := db.sql.Read(ctx, sqldb.PointRead, func(r *sql.DB) (err error) {
		job, err = getJob(ctx, r, name)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get training job %s: %w", name, err)
	}
	return job, nil
}

// UpdateTrainingJob reads the named job, lets fn change it, and writes it
// back, all in one transaction: concurrent updates are serialised and none is
// lost. fn's error aborts the update and is returned unchanged; a missing job
// yields ErrNotFound. fn must not call db (the transaction holds the only
// write connection) and must not rename the job. fn owns LastModifiedTime:
// the store indexes whatever fn leaves there. It returns the job as stored.
func (db *DB) UpdateTrainingJob(ctx context.Context, name string, fn func(*sagebox.TrainingJob) error) (*sagebox.TrainingJob, error) {
	var updated *sagebox.TrainingJob
	var fnErr error
	err := db.sql.WriteTx(ctx, func(tx *sql.Tx) error {
		job, err := getJob(ctx, tx, name)
		if err != nil {
			return err
		}
		stored := job.TrainingJobName
		if err := fn(job); err != nil {
			fnErr = err
			return err
		}
		if job.TrainingJobName != stored {
			return fmt.Errorf("update may not rename %s to %s", stored, job.TrainingJobName)
		}
		row, err := jobRow(job)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE training_jobs SET status = ?, creation_time = ?, last_modified = ?, body = ? WHERE name = ?`,
			row.status, row.created, row.modified, row.body, stored); err != nil {
			return err
		}
		updated = job
		return nil
	})
	switch {
	case fnErr != nil:
		return nil, fnErr
	case errors.Is(err, ErrNotFound):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("update training job %s: %w", name, err)
	}
	return updated, nil
}

// TrainingJobsWithStatus returns every job whose TrainingJobStatus is one of
// statuses, oldest first. The runner uses it at start-up to find jobs a
// previous server left InProgress or Stopping.
func (db *DB) TrainingJobsWithStatus(ctx context.Context, statuses ...string) ([]*sagebox.TrainingJob, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	args := make([]any, len(statuses))
	for i, s := range statuses {
		args[i] = s
	}
	q := `SELECT body FROM training_jobs WHERE status IN (?` + strings.Repeat(", ?", len(statuses)-1) +
		`) ORDER BY creation_time, name`
	var jobs []*sagebox.TrainingJob
	err := db.sql.Read(ctx, sqldb.BulkRead, func(r *sql.DB) (err error) {
		jobs, err = queryJobs(ctx, r, q, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list training jobs with status %v: %w", statuses, err)
	}
	return jobs, nil
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getJob(ctx context.Context, q querier, name string) (*sagebox.TrainingJob, error) {
	var body []byte
	err := q.QueryRowContext(ctx, `SELECT body FROM training_jobs WHERE name = ?`, name).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return decodeJob(body)
}

func queryJobs(ctx context.Context, q querier, query string, args ...any) ([]*sagebox.TrainingJob, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []*sagebox.TrainingJob
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		job, err := decodeJob(body)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, job)
	}
	return jobs, rows.Err()
}

// storedJob is a job as the body column holds it: the API's shape plus
// sagebox's own record under a key no SageMaker member has.
type storedJob struct {
	*sagebox.TrainingJob
	Internal *sagebox.JobInternal `json:"_sagebox,omitempty"`
}

func decodeJob(body []byte) (*sagebox.TrainingJob, error) {
	s := storedJob{TrainingJob: &sagebox.TrainingJob{}}
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("decode stored training job: %w", err)
	}
	if s.Internal != nil {
		s.TrainingJob.Internal = *s.Internal
	}
	s.TrainingJob.Tags = nil // bodies written before the tag table held them
	return s.TrainingJob, nil
}

// row is a job as the training_jobs table holds it.
type row struct {
	name, status      string
	created, modified int64
	body              []byte
}

func jobRow(job *sagebox.TrainingJob) (row, error) {
	if job.TrainingJobName == "" {
		return row{}, errors.New("training job has no name")
	}
	if job.CreationTime == nil {
		return row{}, fmt.Errorf("training job %s has no CreationTime", job.TrainingJobName)
	}
	noTags := *job
	noTags.Tags = nil // the tag table holds them
	s := storedJob{TrainingJob: &noTags}
	if job.Internal != (sagebox.JobInternal{}) {
		s.Internal = &job.Internal
	}
	body, err := json.Marshal(s)
	if err != nil {
		return row{}, fmt.Errorf("encode training job %s: %w", job.TrainingJobName, err)
	}
	r := row{
		name:     job.TrainingJobName,
		status:   job.TrainingJobStatus,
		created:  job.CreationTime.UnixMilli(),
		modified: job.CreationTime.UnixMilli(),
		body:     body,
	}
	if job.LastModifiedTime != nil {
		r.modified = job.LastModifiedTime.UnixMilli()
	}
	return r, nil
}
