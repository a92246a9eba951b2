package staging

import (
	"github.com/sagebox/sagebox/internal/archive"

	"context"
	"fmt"
	"log/slog"
)

// Stager stages and collects one job's data. The zero value is not
// usable: set Objects.
type Stager struct {
	Objects Objects
	// CopyChannels copies channel objects instead of hard-linking them,
	// for scripts that modify their input files in place.
	CopyChannels bool
	// Notes receives the lines meant for the job's log (in the server,
	// "sagebox: ..." lines of the hosts' streams). hosts are Host.Index
	// values. Nil drops them.
	Notes func(ctx context.Context, hosts []int, msg string)
	// Log is for the operator; nil means slog.Default().
	Log *slog.Logger
	// ArchiveLimits bounds what the source directory's archive may unpack
	// to (a tar bomb fails the job instead of filling the disk); zero
	// fields mean no limit. LimitsFrom says where the limits come from,
	// for the error a user sees ("ResourceConfig.VolumeSizeInGB is 1").
	ArchiveLimits archive.Limits
	LimitsFrom    string
	// LocalPaths says which of this machine's paths file:// may name.
	LocalPaths LocalPaths
}

func (s *Stager) note(ctx context.Context, hosts []Host, format string, args ...any) {
	if s.Notes == nil {
		return
	}
	idx := make([]int, len(hosts))
	for i, h := range hosts {
		idx[i] = h.Index
	}
	s.Notes(ctx, idx, fmt.Sprintf(format, args...))
}

func (s *Stager) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}
