package metastore_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/metastore"
)

// listFixture creates five jobs:
//
//	name      created  status      last modified
//	alpha     +1s      Completed   +10s
//	Bravo-x   +2s      InProgress  +2s
//	charlie   +3s      Failed      +30s
//	delta-x   +3s      InProgress  +3s
//	echo      +5s      Stopped     +50s
func listFixture(t *testing.T) *metastore.DB {
	t.Helper()
	db, _ := openDB(t)
	for _, f := range []struct {
		name     string
		created  int
		status   string
		modified int
	}{
		{"alpha", 1, sagebox.StatusCompleted, 10},
		{"Bravo-x", 2, sagebox.StatusInProgress, 2},
		{"charlie", 3, sagebox.StatusFailed, 30},
		{"delta-x", 3, sagebox.StatusInProgress, 3},
		{"echo", 5, sagebox.StatusStopped, 50},
	} {
		j := newJob(f.name, time.Duration(f.created)*time.Second)
		j.TrainingJobStatus = f.status
		j.LastModifiedTime = sagebox.NewTime(at(time.Duration(f.modified) * time.Second))
		mustCreate(t, db, j)
	}
	return db
}

func TestListTrainingJobs(t *testing.T) {
	db := listFixture(t)
	tests := []struct {
		name string
		q    metastore.TrainingJobQuery
		want []string
	}{
		{"defaults: newest first", metastore.TrainingJobQuery{}, []string{"echo", "delta-x", "charlie", "Bravo-x", "alpha"}},
		{"creation ascending, ties by name", metastore.TrainingJobQuery{SortOrder: "Ascending"}, []string{"alpha", "Bravo-x", "charlie", "delta-x", "echo"}},
		{"name ascending ignores case", metastore.TrainingJobQuery{SortBy: "Name", SortOrder: "Ascending"}, []string{"alpha", "Bravo-x", "charlie", "delta-x", "echo"}},
		{"name descending", metastore.TrainingJobQuery{SortBy: "Name"}, []string{"echo", "delta-x", "charlie", "Bravo-x", "alpha"}},
		{"status ascending", metastore.TrainingJobQuery{SortBy: "Status", SortOrder: "Ascending"}, []string{"alpha", "charlie", "Bravo-x", "delta-x", "echo"}},
		{"name contains, any case", metastore.TrainingJobQuery{NameContains: "X"}, []string{"delta-x", "Bravo-x"}},
		{"status equals", metastore.TrainingJobQuery{StatusEquals: "InProgress"}, []string{"delta-x", "Bravo-x"}},
		{"created after (strict)", metastore.TrainingJobQuery{CreationTimeAfter: at(3 * time.Second)}, []string{"echo"}},
		{"created before (strict)", metastore.TrainingJobQuery{CreationTimeBefore: at(3 * time.Second)}, []string{"Bravo-x", "alpha"}},
		{"modified window", metastore.TrainingJobQuery{LastModifiedTimeAfter: at(5 * time.Second), LastModifiedTimeBefore: at(40 * time.Second)}, []string{"charlie", "alpha"}},
		{"combined filters", metastore.TrainingJobQuery{NameContains: "a", StatusEquals: "InProgress", SortBy: "Name"}, []string{"delta-x", "Bravo-x"}},
		{"max results", metastore.TrainingJobQuery{MaxResults: 2}, []string{"echo", "delta-x"}},
		{"nothing matches", metastore.TrainingJobQuery{NameContains: "zulu"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs, _, err := db.ListTrainingJobs(context.Background(), tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(jobs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
}

// TestListPagination pages through every sort with page size 2 and checks
// the concatenation equals the unpaged listing, and that the last page has
// no token.
func TestListPagination(t *testing.T) {
	db := listFixture(t)
	ctx := context.Background()
	for _, sortBy := range []string{"Name", "CreationTime", "Status"} {
		for _, order := range []string{"Ascending", "Descending"} {
			t.Run(sortBy+"/"+order, func(t *testing.T) {
				q := metastore.TrainingJobQuery{SortBy: sortBy, SortOrder: order, MaxResults: 100}
				all, token, err := db.ListTrainingJobs(ctx, q)
				if err != nil || token != "" {
					t.Fatalf("unpaged: %v, token %q", err, token)
				}
				q.MaxResults = 2
				var paged []*sagebox.TrainingJob
				for pages := 0; ; pages++ {
					if pages > 5 {
						t.Fatal("pagination does not end")
					}
					jobs, next, err := db.ListTrainingJobs(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					paged = append(paged, jobs...)
					if next == "" {
						break
					}
					q.NextToken = next
				}
				if !reflect.DeepEqual(names(paged), names(all)) {
					t.Errorf("paged %v; want %v", names(paged), names(all))
				}
			})
		}
	}
}

// TestListStableUnderInserts inserts jobs between page reads: the pages of
// the original jobs neither repeat nor skip any of them.
func TestListStableUnderInserts(t *testing.T) {
	db := listFixture(t)
	ctx := context.Background()
	for _, order := range []string{"Ascending", "Descending"} {
		t.Run(order, func(t *testing.T) {
			q := metastore.TrainingJobQuery{SortBy: "Name", SortOrder: order, MaxResults: 2}
			seen := map[string]int{}
			for i := 0; ; i++ {
				jobs, next, err := db.ListTrainingJobs(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range jobs {
					seen[j.TrainingJobName]++
				}
				// Names that sort before and after every cursor position.
				mustCreate(t, db, newJob(fmt.Sprintf("aa-%s-%d", order, i), time.Hour), newJob(fmt.Sprintf("zz-%s-%d", order, i), time.Hour))
				if next == "" {
					break
				}
				q.NextToken = next
			}
			for _, name := range []string{"alpha", "Bravo-x", "charlie", "delta-x", "echo"} {
				if seen[name] != 1 {
					t.Errorf("%s seen %d times; want once", name, seen[name])
				}
			}
			for name, n := range seen {
				if n != 1 {
					t.Errorf("%s seen %d times", name, n)
				}
			}
		})
	}
}

func TestListInvalidToken(t *testing.T) {
	db := listFixture(t)
	ctx := context.Background()
	_, token, err := db.ListTrainingJobs(ctx, metastore.TrainingJobQuery{MaxResults: 1})
	if err != nil || token == "" {
		t.Fatalf("first page: token %q, %v", token, err)
	}
	tests := map[string]metastore.TrainingJobQuery{
		"garbage":       {NextToken: "!!!"},
		"not json":      {NextToken: "bm90IGpzb24"},
		"other sort":    {NextToken: token, SortBy: "Name"},
		"other order":   {NextToken: token, SortOrder: "Ascending"},
		"empty object":  {NextToken: "e30"},
		"unknown sort":  {SortBy: "Size"},
		"unknown order": {SortOrder: "Up"},
	}
	for name, q := range tests {
		t.Run(name, func(t *testing.T) {
			if _, _, err := db.ListTrainingJobs(ctx, q); err == nil {
				t.Fatal("ListTrainingJobs succeeded; want an error")
			}
		})
	}
	if _, _, err := db.ListTrainingJobs(ctx, metastore.TrainingJobQuery{NextToken: "!!!"}); err != metastore.ErrInvalidToken {
		t.Errorf("err = %v; want ErrInvalidToken", err)
	}
}
