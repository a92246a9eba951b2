package metastore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

// at is the fixed clock of these tests: a moment plus d.
func at(d time.Duration) time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(d) }

func openDB(t testing.TB) (*metastore.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "meta.db")
	db, err := metastore.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db, path
}

// newJob returns a job as CreateTrainingJob stores it, created at epoch+offset.
func newJob(name string, offset time.Duration) *sagebox.TrainingJob {
	created := sagebox.NewTime(at(offset))
	return &sagebox.TrainingJob{
		TrainingJobName:        name,
		TrainingJobArn:         "arn:aws:sagemaker:us-east-1:123456789012:training-job/" + name,
		RoleArn:                "arn:aws:iam::123456789012:role/SageMakerRole",
		AlgorithmSpecification: &sagebox.AlgorithmSpecification{TrainingImage: "img", TrainingInputMode: "File"},
		HyperParameters:        map[string]string{"sagemaker_program": `"train.py"`},
		OutputDataConfig:       &sagebox.OutputDataConfig{S3OutputPath: "s3://bucket/out"},
		ResourceConfig:         &sagebox.ResourceConfig{InstanceType: "ml.m5.xlarge", InstanceCount: 1, VolumeSizeInGB: 30},
		StoppingCondition:      &sagebox.StoppingCondition{MaxRuntimeInSeconds: 86400},
		TrainingJobStatus:      sagebox.StatusInProgress,
		SecondaryStatus:        sagebox.SecondaryStarting,
		SecondaryStatusTransitions: []sagebox.StatusTransition{
			{Status: sagebox.SecondaryStarting, StartTime: created, StatusMessage: "Preparing the instances for training"},
		},
		CreationTime:     created,
		LastModifiedTime: created,
		ProfilingStatus:  "Disabled",
	}
}

func mustCreate(t testing.TB, db *metastore.DB, jobs ...*sagebox.TrainingJob) {
	t.Helper()
	for _, j := range jobs {
		if err := db.CreateTrainingJob(context.Background(), j); err != nil {
			t.Fatalf("CreateTrainingJob(%s): %v", j.TrainingJobName, err)
		}
	}
}

func TestCreateAndGetRoundTrip(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	job := newJob("job-a", 0)
	job.Environment = map[string]string{"A": "1"}
	job.ProfilerConfig = sagebox.RawJSON(`{"DisableProfiler":false}`)
	mustCreate(t, db, job)

	got, err := db.TrainingJob(ctx, "job-a")
	if err != nil {
		t.Fatalf("TrainingJob: %v", err)
	}
	if !reflect.DeepEqual(got, job) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", got, job)
	}
	// Names are unique ignoring case, as the lower-cased ARN implies.
	if got, err := db.TrainingJob(ctx, "JOB-A"); err != nil || got.TrainingJobName != "job-a" {
		t.Errorf("TrainingJob(JOB-A) = %v, %v; want job-a", got, err)
	}
}

func TestCreateDuplicate(t *testing.T) {
	db, _ := openDB(t)
	mustCreate(t, db, newJob("dup", 0))
	for _, name := range []string{"dup", "DUP"} {
		t.Run(name, func(t *testing.T) {
			err := db.CreateTrainingJob(context.Background(), newJob(name, time.Second))
			var se *sagebox.Error
			if !errors.As(err, &se) || se.Code != sagebox.ErrResourceInUse {
				t.Fatalf("err = %v; want *sagebox.Error ResourceInUse", err)
			}
			want := "Training job names must be unique within an AWS account and region, and a training job with this name already exists (arn:aws:sagemaker:us-east-1:123456789012:training-job/dup)"
			if se.Message != want {
				t.Errorf("message = %q\nwant %q", se.Message, want)
			}
		})
	}
}

func TestCreateRejectsIncompleteJob(t *testing.T) {
	db, _ := openDB(t)
	tests := map[string]*sagebox.TrainingJob{
		"no name":          {CreationTime: sagebox.NewTime(at(0))},
		"no creation time": {TrainingJobName: "x"},
	}
	for name, job := range tests {
		t.Run(name, func(t *testing.T) {
			if err := db.CreateTrainingJob(context.Background(), job); err == nil {
				t.Fatal("CreateTrainingJob succeeded; want an error")
			}
		})
	}
}

func TestTrainingJobNotFound(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	if _, err := db.TrainingJob(ctx, "missing"); err != metastore.ErrNotFound {
		t.Errorf("TrainingJob err = %v; want ErrNotFound", err)
	}
	_, err := db.UpdateTrainingJob(ctx, "missing", func(*sagebox.TrainingJob) error { return nil })
	if err != metastore.ErrNotFound {
		t.Errorf("UpdateTrainingJob err = %v; want ErrNotFound", err)
	}
	if err := db.AddMetrics(ctx, "missing", []sagebox.MetricPoint{{Name: "m"}}); err != metastore.ErrNotFound {
		t.Errorf("AddMetrics err = %v; want ErrNotFound", err)
	}
	if _, err := db.Metrics(ctx, "missing"); err != metastore.ErrNotFound {
		t.Errorf("Metrics err = %v; want ErrNotFound", err)
	}
}

func TestUpdateTrainingJob(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	mustCreate(t, db, newJob("upd", 0))

	t.Run("applies", func(t *testing.T) {
		later := sagebox.NewTime(at(time.Minute))
		got, err := db.UpdateTrainingJob(ctx, "upd", func(j *sagebox.TrainingJob) error {
			j.TrainingJobStatus = sagebox.StatusCompleted
			j.LastModifiedTime = later
			return nil
		})
		if err != nil || got.TrainingJobStatus != sagebox.StatusCompleted {
			t.Fatalf("UpdateTrainingJob = %v, %v", got, err)
		}
		stored, _ := db.TrainingJob(ctx, "upd")
		if stored.TrainingJobStatus != sagebox.StatusCompleted || !stored.LastModifiedTime.Equal(later.Time) {
			t.Errorf("stored = %+v", stored)
		}
		jobs, _, err := db.ListTrainingJobs(ctx, metastore.TrainingJobQuery{LastModifiedTimeAfter: at(30 * time.Second)})
		if err != nil || len(jobs) != 1 {
			t.Errorf("list by last modified = %d jobs, %v; want the updated job", len(jobs), err)
		}
	})
	t.Run("fn error aborts", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := db.UpdateTrainingJob(ctx, "upd", func(j *sagebox.TrainingJob) error {
			j.TrainingJobStatus = sagebox.StatusFailed
			return boom
		})
		if err != boom {
			t.Fatalf("err = %v; want fn's error unchanged", err)
		}
		stored, _ := db.TrainingJob(ctx, "upd")
		if stored.TrainingJobStatus != sagebox.StatusCompleted {
			t.Errorf("status = %s; the aborted update leaked", stored.TrainingJobStatus)
		}
	})
	t.Run("rename refused", func(t *testing.T) {
		_, err := db.UpdateTrainingJob(ctx, "upd", func(j *sagebox.TrainingJob) error {
			j.TrainingJobName = "other"
			return nil
		})
		if err == nil {
			t.Fatal("rename succeeded")
		}
	})
}

// TestUpdateConcurrent runs many read-modify-write updates at once; none may
// be lost.
func TestUpdateConcurrent(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	mustCreate(t, db, newJob("race", 0))
	const workers, each = 16, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := db.UpdateTrainingJob(ctx, "race", func(j *sagebox.TrainingJob) error {
					n, _ := strconv.Atoi(j.HyperParameters["n"])
					j.HyperParameters["n"] = strconv.Itoa(n + 1)
					return nil
				})
				if err != nil {
					errs <- err
				}
				// Readers run alongside the writers.
				if _, err := db.TrainingJob(ctx, "race"); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	job, err := db.TrainingJob(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	if got := job.HyperParameters["n"]; got != strconv.Itoa(workers*each) {
		t.Errorf("counter = %s; want %d (updates were lost)", got, workers*each)
	}
}

func TestTrainingJobsWithStatus(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	statuses := []string{sagebox.StatusInProgress, sagebox.StatusCompleted, sagebox.StatusStopping, sagebox.StatusFailed}
	for i, s := range statuses {
		j := newJob(fmt.Sprintf("j%d", i), time.Duration(i)*time.Second)
		j.TrainingJobStatus = s
		mustCreate(t, db, j)
	}
	tests := []struct {
		statuses []string
		want     []string
	}{
		{nil, nil},
		{[]string{sagebox.StatusInProgress, sagebox.StatusStopping}, []string{"j0", "j2"}},
		{[]string{sagebox.StatusStopped}, nil},
		{[]string{sagebox.StatusFailed}, []string{"j3"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.statuses), func(t *testing.T) {
			jobs, err := db.TrainingJobsWithStatus(ctx, tt.statuses...)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(jobs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	mustCreate(t, db, newJob("m", 0))
	if got, err := db.Metrics(ctx, "m"); err != nil || len(got) != 0 {
		t.Fatalf("Metrics of a fresh job = %v, %v; want empty", got, err)
	}
	in := []sagebox.MetricPoint{
		{Name: "loss", Value: 0.5, Timestamp: at(2 * time.Second)},
		{Name: "loss", Value: 0.25, Timestamp: at(time.Second)},
		{Name: "acc", Value: math.Inf(1), Timestamp: at(time.Second)},
	}
	if err := db.AddMetrics(ctx, "m", in); err != nil {
		t.Fatal(err)
	}
	if err := db.AddMetrics(ctx, "M", []sagebox.MetricPoint{{Name: "loss", Value: math.NaN(), Timestamp: at(3 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Metrics(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	want := []sagebox.MetricPoint{in[1], in[2], in[0]}
	if len(got) != 4 || !reflect.DeepEqual(got[:3], want) {
		t.Fatalf("Metrics = %v; want %v then a NaN", got, want)
	}
	if !math.IsNaN(got[3].Value) {
		t.Errorf("last value = %v; want NaN", got[3].Value)
	}
}

// TestReopen checks that everything written is there after Close and Open.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "meta.db")
	db, err := metastore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, db, newJob("keep", 0))
	if err := db.AddMetrics(ctx, "keep", []sagebox.MetricPoint{{Name: "loss", Value: 1, Timestamp: at(0)}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = metastore.Open(ctx, path) // migrations must not run twice
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.TrainingJob(ctx, "keep"); err != nil {
		t.Errorf("TrainingJob after reopen: %v", err)
	}
	if m, err := db.Metrics(ctx, "keep"); err != nil || len(m) != 1 {
		t.Errorf("Metrics after reopen = %v, %v", m, err)
	}
}

func names(jobs []*sagebox.TrainingJob) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.TrainingJobName)
	}
	return out
}

// TestStopReasonIsStored: the stop reason is recorded with the job and read
// back, in the list queries too, and never as an API member.
func TestStopReasonIsStored(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	j := newJob("stopped-for-time", 0)
	mustCreate(t, db, j)
	if _, err := db.UpdateTrainingJob(ctx, j.TrainingJobName, func(j *sagebox.TrainingJob) error {
		return j.RequestStop(sagebox.SecondaryMaxRuntimeExceeded, "time is up", at(time.Minute))
	}); err != nil {
		t.Fatal(err)
	}
	got, err := db.TrainingJob(ctx, j.TrainingJobName)
	if err != nil {
		t.Fatal(err)
	}
	if got.Internal.StopReason != sagebox.SecondaryMaxRuntimeExceeded || !got.Internal.StopRequestedAt.Equal(at(time.Minute)) {
		t.Errorf("stored record %+v", got.Internal)
	}
	listed, err := db.TrainingJobsWithStatus(ctx, sagebox.StatusStopping)
	if err != nil || len(listed) != 1 || listed[0].Internal.StopReason != sagebox.SecondaryMaxRuntimeExceeded {
		t.Errorf("listed %v, %v", listed, err)
	}
}
