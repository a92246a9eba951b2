package training

import (
	"fmt"
	"os"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/staging"
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
	s, err := newJobSpec(job, region)
	if err != nil {
		return nil, err
	}
	in := &HostInputs{
		Hosts: s.hosts, SourceDir: s.submitDir, EntryPoint: s.entry,
		Output: staging.Output{Path: s.outputPath, Job: s.name, Compression: s.compression},
	}
	for _, c := range s.channels {
		in.Channels = append(in.Channels, c.staging())
	}
	if c := s.checkpoint; c != nil {
		in.Checkpoint = staging.CheckpointConfig{S3Uri: c.S3Uri, LocalPath: c.LocalPath}
	}
	return in, nil
}

// PrepareHostTree makes host's /opt/ml-shaped directories under root
// (keeping what is there) and writes input/config's
// hyperparameters.json, inputdataconfig.json and resourceconfig.json as
// the runner writes them for that host.
func PrepareHostTree(job *sagebox.TrainingJob, region, host, root string) error {
	s, err := newJobSpec(job, region)
	if err != nil {
		return err
	}
	known := false
	for _, h := range s.hosts {
		known = known || h == host
	}
	if !known {
		return fmt.Errorf("host %q is not one of the job's hosts %v", host, s.hosts)
	}
	ws := workspace{root: root}
	dirs := []string{ws.configDir(), ws.codeDir(), ws.modelDir(), ws.outputDataDir(), ws.intermediateDir(), ws.checkpointDir()}
	for _, c := range s.channels {
		dirs = append(dirs, ws.channelDir(c.name))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	cf, err := s.configFiles(host)
	if err != nil {
		return err
	}
	return cf.write(ws)
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
