package training

import (
	"context"
	"time"

	"github.com/sagebox/sagebox/internal/staging"
)

// Checkpoints (contract 6.2) are downloaded before the processes start,
// synced every Config.CheckpointInterval while they run, and synced a last
// time after they end; staging.CheckpointConfig says how.

// checkpoints resolves the job's checkpoint directories, once.
func (jr *jobRun) checkpoints(ctx context.Context) (*staging.Checkpoints, error) {
	if jr.ckptsDone {
		return jr.ckpts, nil
	}
	var cc staging.CheckpointConfig
	if c := jr.spec.Checkpoint; c != nil {
		cc = staging.CheckpointConfig{S3Uri: c.S3Uri, LocalPath: c.LocalPath}
	}
	ck, err := jr.stager().Checkpoints(ctx, cc, jr.stagingHosts())
	if err != nil {
		return nil, err
	}
	jr.ckpts, jr.ckptsDone = ck, true
	return ck, nil
}

// downloadCheckpoints copies S3Uri's objects into every checkpoint dir.
func (jr *jobRun) downloadCheckpoints(ctx context.Context) error {
	ck, err := jr.checkpoints(ctx)
	if err != nil {
		return err
	}
	return ck.Download(ctx)
}

// syncCheckpointsLoop uploads changed checkpoint files until ctx ends.
func (jr *jobRun) syncCheckpointsLoop(ctx context.Context) {
	if ck, _ := jr.checkpoints(ctx); ck == nil {
		return
	}
	t := time.NewTicker(jr.r.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := jr.syncCheckpoints(ctx); err != nil && ctx.Err() == nil {
				jr.log.Warn("checkpoint sync failed", "err", err)
			}
		}
	}
}

// syncCheckpoints uploads the files that changed since the last pass.
func (jr *jobRun) syncCheckpoints(ctx context.Context) error {
	ck, err := jr.checkpoints(ctx)
	if err != nil {
		return err
	}
	return ck.Sync(ctx)
}
