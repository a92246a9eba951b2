package training

import (
	"context"

	"github.com/sagebox/sagebox/internal/staging"
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
		out[i] = staging.Host{Index: h.info.index, Name: h.info.name, Tree: h.info.ws.tree()}
	}
	return out
}

// stageChannel stages c into every host's input/data/<channel>/.
func (jr *jobRun) stageChannel(ctx context.Context, c channelSpec) error {
	return jr.stager().StageChannel(ctx, c.staging(), len(jr.hosts), jr.stagingHosts())
}

func (c channelSpec) staging() staging.Channel {
	return staging.Channel{Name: c.name, URI: c.uri, DataType: c.dataType, Distribution: c.distribution, Compression: c.compression}
}
