package training

import (
	"context"
	"os"
	"path/filepath"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/statefile"
	"github.com/sagebox/sagebox/internal/toolkit"
)

const fileOutcome = "outcome.json"

// end finishes a job with outcome o: it records o (so that a restart
// during the upload finishes the same way), moves to Uploading, syncs
// checkpoints a last time, uploads the artifacts when anything ran, and
// sets the terminal status. A job that failed before launching goes
// straight to Failed, as SageMaker's download failures do.
func (jr *jobRun) end(ctx context.Context, o outcome) {
	if ctx.Err() != nil {
		return
	}
	dir := jr.r.stateDir(jr.name)
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if err := statefile.WriteJSON(filepath.Join(dir, fileOutcome), o); err != nil {
			jr.log.Warn("recording the outcome failed", "err", err)
		}
	}
	var modelURI string
	if o.Launched {
		if _, err := jr.r.transition(ctx, jr.name, sagebox.SecondaryUploading, msgUploading, nil); err != nil {
			jr.abort(ctx, err)
			return
		}
		if err := jr.r.driver.SyncCheckpoints(ctx, jr.job); err != nil && ctx.Err() == nil {
			jr.log.Warn("final checkpoint sync failed", "err", err)
			jr.note(ctx, jr.hosts, "final checkpoint sync failed: %v", err)
		}
		uri, err := jr.r.driver.Collect(ctx, jr.job)
		if ctx.Err() != nil {
			return // closing: Recover redoes the upload
		}
		if err != nil {
			jr.log.Error("artifact upload failed", "err", err)
			jr.note(ctx, jr.hosts, "artifact upload failed: %v", err)
			if o.Status == sagebox.StatusCompleted {
				reason := "ClientError: Artifact upload failed: " + err.Error()
				if r, ok := jobReason(err); ok {
					reason = r
				}
				o = failedOutcome(sagebox.TruncateRunes(reason, sagebox.MaxFailureReason), true)
			}
		}
		modelURI = uri
	}
	var finals []map[string]toolkit.FinalMetric
	for _, h := range jr.hosts {
		finals = append(finals, h.tail.st.Final)
	}
	fm := toolkit.FinalMetricData(finals)
	_, err := jr.r.finalize(ctx, jr.name, o, func(j *sagebox.TrainingJob) {
		if modelURI != "" {
			j.ModelArtifacts = &sagebox.ModelArtifacts{S3ModelArtifacts: modelURI}
		}
		if len(fm) > 0 {
			j.FinalMetricDataList = fm
		}
	})
	if err != nil {
		jr.abort(ctx, err)
		return
	}
	jr.release(o.Status != sagebox.StatusCompleted)
	jr.log.Info("training job ended", "status", o.Status, "secondary", o.Secondary, "reason", o.FailureReason)
}

// release gives back what the ended job held: its place in the machine's
// capacity, and whatever the driver holds for it (devices, workspaces).
func (jr *jobRun) release(failed bool) {
	if c := jr.r.cfg.Capacity; c != nil {
		c.Release(jr.capacityOwner())
	}
	if jr.job != nil {
		jr.r.driver.Release(jr.job, failed)
	}
}
