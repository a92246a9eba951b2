package training

import (
	"context"
	"time"
)

// Checkpoints (contract 6.2) are downloaded by the driver's Prepare before
// the processes start, synced every Config.CheckpointInterval while they
// run, and synced a last time after they end.

// syncCheckpointsLoop asks the driver to upload changed checkpoint files
// until ctx ends.
func (jr *jobRun) syncCheckpointsLoop(ctx context.Context) {
	if jr.spec.Checkpoint == nil || jr.spec.Checkpoint.S3Uri == "" {
		return
	}
	t := time.NewTicker(jr.r.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := jr.r.driver.SyncCheckpoints(ctx, jr.job); err != nil && ctx.Err() == nil {
				jr.log.Warn("checkpoint sync failed", "err", err)
			}
		}
	}
}
