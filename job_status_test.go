package sagebox

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// history renders the transitions as "Status[start-end] ..." in seconds
// after t0, "-" for an open end.
func history(j *TrainingJob) string {
	var b strings.Builder
	for i, tr := range j.SecondaryStatusTransitions {
		if i > 0 {
			b.WriteByte(' ')
		}
		end := "-"
		if tr.EndTime != nil {
			end = itoa(int(tr.EndTime.Sub(t0).Seconds()))
		}
		b.WriteString(tr.Status + "[" + itoa(int(tr.StartTime.Sub(t0).Seconds())) + "-" + end + "]")
	}
	return b.String()
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestTransitionsCloseThePreviousOne(t *testing.T) {
	j := &TrainingJob{TrainingJobName: "j", ResourceConfig: &ResourceConfig{InstanceCount: 2}}
	j.Begin(at(0))
	mustDo(t, j.Advance(SecondaryDownloading, MsgDownloading, at(1)))
	j.TrainingStartTime = NewTime(at(1))
	mustDo(t, j.Advance(SecondaryTraining, MsgTraining, at(3)))
	mustDo(t, j.Advance(SecondaryUploading, MsgUploading, at(10)))
	mustDo(t, j.End(Outcome{Status: StatusCompleted, Secondary: SecondaryCompleted, Message: MsgCompleted}, at(12)))

	if got, want := history(j), "Starting[0-1] Downloading[1-3] Training[3-10] Uploading[10-12] Completed[12-12]"; got != want {
		t.Fatalf("transitions\n got %s\nwant %s", got, want)
	}
	if j.TrainingJobStatus != StatusCompleted || j.SecondaryStatus != SecondaryCompleted {
		t.Errorf("status %s/%s", j.TrainingJobStatus, j.SecondaryStatus)
	}
	if !j.LastModifiedTime.Equal(at(12)) || !j.TrainingEndTime.Equal(at(12)) || !j.CreationTime.Equal(at(0)) {
		t.Errorf("times: modified %v end %v created %v", j.LastModifiedTime, j.TrainingEndTime, j.CreationTime)
	}
	if *j.TrainingTimeInSeconds != 11 || *j.BillableTimeInSeconds != 22 {
		t.Errorf("training %d s, billable %d s; want 11 and 22 (2 instances)", *j.TrainingTimeInSeconds, *j.BillableTimeInSeconds)
	}
}

func TestRepeatedStatusOnlyUpdatesTheMessage(t *testing.T) {
	j := &TrainingJob{}
	j.Begin(at(0))
	mustDo(t, j.Advance(SecondaryTraining, "first", at(1)))
	mustDo(t, j.Advance(SecondaryTraining, "second", at(5)))
	if got := history(j); got != "Starting[0-1] Training[1--]" {
		t.Fatalf("transitions %s", got)
	}
	if m := j.SecondaryStatusTransitions[1].StatusMessage; m != "second" {
		t.Errorf("message %q", m)
	}
	if !j.LastModifiedTime.Equal(at(5)) {
		t.Errorf("LastModifiedTime %v", j.LastModifiedTime)
	}
}

func TestStoppingRecordsOnlyUploadingAndKeepsTheReason(t *testing.T) {
	for _, tc := range []struct {
		reason, recorded, ends string
	}{
		{SecondaryStopped, SecondaryStopping, SecondaryStopped},
		{SecondaryMaxRuntimeExceeded, SecondaryMaxRuntimeExceeded, SecondaryMaxRuntimeExceeded},
		{"", SecondaryStopping, SecondaryStopped}, // anything else is a plain stop
	} {
		j := &TrainingJob{}
		j.Begin(at(0))
		mustDo(t, j.Advance(SecondaryTraining, MsgTraining, at(1)))
		if j.StopReason() != "" {
			t.Fatalf("stop reason %q before a stop", j.StopReason())
		}
		mustDo(t, j.RequestStop(tc.reason, "stop", at(2)))
		if err := j.RequestStop(tc.reason, "again", at(3)); !errors.Is(err, ErrNotInProgress) {
			t.Errorf("second stop: %v, want ErrNotInProgress", err)
		}
		mustDo(t, j.Advance(SecondaryTraining, MsgTraining, at(3))) // not recorded while stopping
		mustDo(t, j.Advance(SecondaryUploading, MsgUploading, at(4)))
		if j.TrainingJobStatus != StatusStopping {
			t.Errorf("status %s while stopping", j.TrainingJobStatus)
		}
		if j.StopReason() != tc.ends || !j.Internal.StopRequestedAt.Equal(at(2)) {
			t.Errorf("stop reason %q at %v, want %q at 2", j.StopReason(), j.Internal.StopRequestedAt, tc.ends)
		}
		mustDo(t, j.End(Outcome{Status: StatusStopped, Secondary: j.StopReason(), Message: MsgStopped}, at(6)))
		want := "Starting[0-1] Training[1-2] " + tc.recorded + "[2-4] Uploading[4-6] " + tc.ends + "[6-6]"
		if got := history(j); got != want {
			t.Errorf("reason %q: transitions\n got %s\nwant %s", tc.reason, got, want)
		}
	}
}

func TestStopReasonOfAJobStoredWithoutOne(t *testing.T) {
	j := &TrainingJob{TrainingJobStatus: StatusStopping, SecondaryStatus: SecondaryMaxRuntimeExceeded}
	if r := j.StopReason(); r != SecondaryMaxRuntimeExceeded {
		t.Errorf("got %q", r)
	}
	j.SecondaryStatus = SecondaryStopping
	if r := j.StopReason(); r != SecondaryStopped {
		t.Errorf("got %q", r)
	}
}

func TestEndedJobsDoNotChange(t *testing.T) {
	j := &TrainingJob{}
	j.Begin(at(0))
	mustDo(t, j.Fail("ClientError: boom", at(1)))
	before := history(j)
	for name, err := range map[string]error{
		"Advance":     j.Advance(SecondaryTraining, MsgTraining, at(2)),
		"RequestStop": j.RequestStop(SecondaryStopped, MsgStopping, at(2)),
		"End":         j.End(Outcome{Status: StatusCompleted, Secondary: SecondaryCompleted}, at(2)),
	} {
		if !errors.Is(err, ErrJobEnded) {
			t.Errorf("%s on a Failed job: %v, want ErrJobEnded", name, err)
		}
	}
	if got := history(j); got != before || got != "Starting[0-1] Failed[1-1]" {
		t.Errorf("transitions changed: %s", got)
	}
	if j.FailureReason != "ClientError: boom" || !j.TrainingEndTime.Equal(at(1)) || j.TrainingTimeInSeconds != nil {
		t.Errorf("failure %q end %v training %v", j.FailureReason, j.TrainingEndTime, j.TrainingTimeInSeconds)
	}
}

func TestTruncateRunes(t *testing.T) {
	long := strings.Repeat("é", MaxFailureReason+5) // 2 bytes each
	got := TruncateRunes(long, MaxFailureReason)
	if n := len([]rune(got)); n != MaxFailureReason || !strings.HasPrefix(long, got) {
		t.Errorf("%d runes, prefix %v", n, strings.HasPrefix(long, got))
	}
	if TruncateRunes("short", 10) != "short" || TruncateRunes("abc", 0) != "" {
		t.Error("short strings")
	}
}

func TestInternalIsNeverInTheAPIShape(t *testing.T) {
	j := &TrainingJob{TrainingJobName: "j"}
	j.Begin(at(0))
	mustDo(t, j.RequestStop(SecondaryMaxRuntimeExceeded, "time", at(1)))
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "StopReason") || strings.Contains(string(b), "Internal") {
		t.Errorf("API JSON shows sagebox's own record: %s", b)
	}
}
