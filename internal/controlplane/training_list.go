package controlplane

import (
	"context"
	"errors"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

type listTrainingJobsInput struct {
	NextToken              string        `json:"NextToken"`
	MaxResults             *int64        `json:"MaxResults"`
	CreationTimeAfter      *sagebox.Time `json:"CreationTimeAfter"`
	CreationTimeBefore     *sagebox.Time `json:"CreationTimeBefore"`
	LastModifiedTimeAfter  *sagebox.Time `json:"LastModifiedTimeAfter"`
	LastModifiedTimeBefore *sagebox.Time `json:"LastModifiedTimeBefore"`
	NameContains           string        `json:"NameContains"`
	StatusEquals           string        `json:"StatusEquals"`
	SortBy                 string        `json:"SortBy"`
	SortOrder              string        `json:"SortOrder"`
	WarmPoolStatusEquals   string        `json:"WarmPoolStatusEquals"`
}

func (in *listTrainingJobsInput) validate() error {
	var v violations
	v.str("nextToken", in.NextToken, false, 0, 8192, &anyPattern)
	v.num("maxResults", in.MaxResults, 1, 100)
	v.str("nameContains", in.NameContains, false, 0, 63, &nameContainsPattern)
	v.enum("statusEquals", in.StatusEquals, "InProgress", "Completed", "Failed", "Stopping", "Stopped", "Deleting")
	v.enum("sortBy", in.SortBy, metastore.SortByName, metastore.SortByCreationTime, metastore.SortByStatus)
	v.enum("sortOrder", in.SortOrder, metastore.SortAscending, metastore.SortDescending)
	v.enum("warmPoolStatusEquals", in.WarmPoolStatusEquals, "Available", "Terminated", "Reused", "InUse")
	return v.err(sagebox.ErrValidation)
}

type trainingJobSummary struct {
	TrainingJobName   string        `json:"TrainingJobName"`
	TrainingJobArn    string        `json:"TrainingJobArn"`
	CreationTime      *sagebox.Time `json:"CreationTime"`
	TrainingEndTime   *sagebox.Time `json:"TrainingEndTime,omitempty"`
	LastModifiedTime  *sagebox.Time `json:"LastModifiedTime,omitempty"`
	TrainingJobStatus string        `json:"TrainingJobStatus"`
}

type listTrainingJobsOutput struct {
	TrainingJobSummaries []trainingJobSummary `json:"TrainingJobSummaries"`
	NextToken            string               `json:"NextToken,omitempty"`
}

// listTrainingJobs returns one page of job summaries: by default the 10
// newest. NextToken is present only when more jobs match.
func (h *Handler) listTrainingJobs(ctx context.Context, in *listTrainingJobsInput) (*listTrainingJobsOutput, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	out := &listTrainingJobsOutput{TrainingJobSummaries: []trainingJobSummary{}}
	if in.WarmPoolStatusEquals != "" {
		return out, nil // sagebox keeps no warm pools
	}
	q := metastore.TrainingJobQuery{
		NameContains:           in.NameContains,
		StatusEquals:           in.StatusEquals,
		CreationTimeAfter:      timeOf(in.CreationTimeAfter),
		CreationTimeBefore:     timeOf(in.CreationTimeBefore),
		LastModifiedTimeAfter:  timeOf(in.LastModifiedTimeAfter),
		LastModifiedTimeBefore: timeOf(in.LastModifiedTimeBefore),
		SortBy:                 in.SortBy,
		SortOrder:              in.SortOrder,
		NextToken:              in.NextToken,
	}
	if in.MaxResults != nil {
		q.MaxResults = int(*in.MaxResults)
	}
	jobs, next, err := h.jobs.ListTrainingJobs(ctx, q)
	if errors.Is(err, metastore.ErrInvalidToken) {
		return nil, sagebox.Errorf(sagebox.ErrValidation, "Invalid pagination token: %q was not returned by ListTrainingJobs with this SortBy and SortOrder.", in.NextToken)
	}
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		out.TrainingJobSummaries = append(out.TrainingJobSummaries, trainingJobSummary{
			TrainingJobName:   j.TrainingJobName,
			TrainingJobArn:    j.TrainingJobArn,
			CreationTime:      j.CreationTime,
			TrainingEndTime:   j.TrainingEndTime,
			LastModifiedTime:  j.LastModifiedTime,
			TrainingJobStatus: j.TrainingJobStatus,
		})
	}
	out.NextToken = next
	return out, nil
}

// timeOf unwraps an optional API timestamp; absent is the zero time.
func timeOf(t *sagebox.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
