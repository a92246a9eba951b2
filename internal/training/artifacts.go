package training

import (
	"context"

	"github.com/sagebox/sagebox/internal/staging"
)

// uploadArtifacts uploads the model and output data of every host
// (contract 6.1, staging.Stager.UploadArtifacts) and returns
// ModelArtifacts.S3ModelArtifacts.
func (jr *jobRun) uploadArtifacts(ctx context.Context) (string, error) {
	trees := make([]staging.Tree, len(jr.hosts))
	for i, h := range jr.hosts {
		trees[i] = wsTree(h.info.Workspace)
	}
	out := staging.Output{Path: jr.spec.OutputPath, Job: jr.name, Compression: jr.spec.Compression}
	return jr.stager().UploadArtifacts(ctx, out, trees)
}
