package training

import (
	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// HostInputs is what a job's hosts stage before their processes start and
// where their artifacts go, decoded and checked from the job exactly as
// the runner does. `sagebox stage` and `sagebox collect` use it in a
// process that runs one host (a pod) with nothing but an S3 endpoint.
type HostInputs struct {
	Hosts      []string // algo-1..N
	Channels   []staging.Channel
	SourceDir  string // sagemaker_submit_directory, may be empty
	EntryPoint string
	Checkpoint staging.CheckpointConfig
	Output     staging.Output
}

// JobInputs decodes job. Its errors are the ClientErrors the runner would
// fail the job with.
func JobInputs(job *sagebox.TrainingJob, region string) (*HostInputs, error) {
	s, err := toolkit.NewSpec(job, region)
	if err != nil {
		return nil, err
	}
	in := &HostInputs{
		Hosts: s.Hosts, SourceDir: s.SubmitDir, EntryPoint: s.EntryPoint,
		Output: staging.Output{Path: s.OutputPath, Job: s.Name, Compression: s.Compression},
	}
	for _, c := range s.Channels {
		in.Channels = append(in.Channels, stagingChannel(c))
	}
	if c := s.Checkpoint; c != nil {
		in.Checkpoint = staging.CheckpointConfig{S3Uri: c.S3Uri, LocalPath: c.LocalPath}
	}
	return in, nil
}

// FailureReason is the FailureReason text err carries when it is a
// problem with the job itself ("ClientError: ..."), as the runner would
// record it.
func FailureReason(err error) (string, bool) {
	if _, ok := jobReason(err); !ok {
		return "", false
	}
	return failureReason(err), true
}
