package training

import (
	"context"

	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// stageSourceDir puts the user's code into ws/code and checks that the
// entry point is there (staging.Stager.StageSourceDir).
func (r *Runner) stageSourceDir(ctx context.Context, s *toolkit.Spec, ws toolkit.Workspace) error {
	st := &staging.Stager{Objects: r.objects, Log: r.log}
	return st.StageSourceDir(ctx, s.SubmitDir, s.EntryPoint, wsTree(ws))
}
