package training

import (
	"context"

	"github.com/sagebox/sagebox/internal/staging"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// Channels, the source directory, checkpoints and artifacts are moved by
// internal/staging (its doc and channels.go say how keys are placed and
// files linked); this file and its neighbours are the runner's calls.

// stager is the job's staging.Stager: the runner's object store, its
// CopyChannels setting, and notes to the hosts' log streams.
func (jr *jobRun) stager() *staging.Stager {
	return &staging.Stager{
		Objects:      jr.r.objects,
		CopyChannels: jr.r.cfg.CopyChannels,
		Log:          jr.log,
		Notes: func(ctx context.Context, idx []int, msg string) {
			var hosts []*hostRun
			for _, i := range idx {
				if i >= 0 && i < len(jr.hosts) {
					hosts = append(hosts, jr.hosts[i])
				}
			}
			jr.note(ctx, hosts, "%s", msg)
		},
	}
}

// stagingHosts are the job's hosts as staging sees them.
func (jr *jobRun) stagingHosts() []staging.Host {
	out := make([]staging.Host, len(jr.hosts))
	for i, h := range jr.hosts {
		out[i] = staging.Host{Index: h.info.Index, Name: h.info.Name, Tree: wsTree(h.info.Workspace)}
	}
	return out
}

// stageChannel stages c into every host's input/data/<channel>/.
func (jr *jobRun) stageChannel(ctx context.Context, c toolkit.Channel) error {
	return jr.stager().StageChannel(ctx, stagingChannel(c), len(jr.hosts), jr.stagingHosts())
}

func stagingChannel(c toolkit.Channel) staging.Channel {
	return staging.Channel{Name: c.Name, URI: c.URI, DataType: c.DataType, Distribution: c.Distribution, Compression: c.Compression}
}
