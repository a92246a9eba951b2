package hosting

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/logtail"
	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/statefile"
)

// An instance's output reaches the log store as a training host's does:
// every poll reads what is new in output.log from the offset saved in
// tail.json, appends its complete lines as events to stream
// <variant>/<instance-id> of /aws/sagemaker/Endpoints/<endpoint>, then
// saves the new offset; a restarted manager resumes from it.

const (
	logPoll        = 200 * time.Millisecond
	maxLineBytes   = 256 << 10
	maxReadPerPoll = 4 << 20
)

type tailState struct {
	Offset int64 `json:"offset"`
	LastMS int64 `json:"last_ms"`
}

// pumpLogs follows the instance's output until it has ended (then reads
// the rest) or ctx ends. It closes in.logDone.
func (m *Manager) pumpLogs(ctx context.Context, in *instance) {
	defer close(in.logDone)
	if m.cfg.Logs == nil {
		return
	}
	group, stream := LogGroup(in.ep.name), LogStream(in.variant, in.id)
	statePath := filepath.Join(in.dir, fileTail)
	var st tailState
	statefile.ReadJSON(statePath, &st)
	// The stream exists from the start, so `logs -f` finds it at once.
	if err := m.cfg.Logs.Append(context.WithoutCancel(ctx), group, stream, nil); err != nil {
		in.ep.log.Warn("create log stream", "error", err)
	}
	out := proc.OutputPath(in.dir)
	for {
		final := false
		select {
		case <-ctx.Done():
			return
		case <-in.h.Done():
			final = true
		case <-time.After(logPoll):
		}
		for {
			lines, next := readLines(out, st.Offset, final)
			if next == st.Offset {
				break
			}
			now := max(m.now().UnixMilli(), st.LastMS)
			var events []sagebox.LogEvent
			for _, l := range lines {
				l = strings.ToValidUTF8(strings.TrimSuffix(l, "\r"), "\uFFFD")
				if i := strings.LastIndex(l, "\r"); i >= 0 {
					l = l[i+1:]
				}
				if strings.TrimSpace(l) != "" {
					events = append(events, sagebox.LogEvent{Timestamp: now, Message: l})
				}
			}
			if err := m.cfg.Logs.Append(context.WithoutCancel(ctx), group, stream, events); err != nil {
				in.ep.log.Warn("append instance logs", "instance", in.id, "error", err)
				break
			}
			st.Offset, st.LastMS = next, now
			if err := statefile.WriteJSON(statePath, st); err != nil && !errors.Is(err, os.ErrNotExist) {
				in.ep.log.Warn("save log offset", "instance", in.id, "error", err)
			}
		}
		if final {
			return
		}
	}
}

// readLines returns the complete lines of the file at p after off and the
// offset after them; with final, a last line without "\n" too.
func readLines(p string, off int64, final bool) ([]string, int64) {
	f, err := os.Open(p)
	if err != nil {
		return nil, off
	}
	defer f.Close()
	buf := make([]byte, maxReadPerPoll)
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, off
	}
	buf = buf[:n]
	lines, n := logtail.SplitLines(buf, maxLineBytes, final)
	return lines, off + int64(n)
}
