package training

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sagebox/sagebox"
	"github.com/sagebox/sagebox/internal/logtail"
	"github.com/sagebox/sagebox/internal/statefile"
	"github.com/sagebox/sagebox/internal/toolkit"
)

// A host's output reaches the log store like this: the process writes to
// output.log (through the shim, no pipe); every poll the runner reads what
// is new from the saved offset, splits it into lines, appends them as
// events (one per line, millisecond timestamps that never go backwards) to
// stream <job>/algo-N-<epoch> of /aws/sagemaker/TrainingJobs, matches the
// metric regexes, and only then saves the new offset (with the metrics'
// last values and the error capture) to tail.json. A runner that is closed
// between polls and a new one that resumes from tail.json therefore neither
// lose nor repeat a line; a hard crash between an append and saving the
// offset can repeat that one batch.
//
// A line is what ends in "\n". Carriage-return progress bars are collapsed
// to what a terminal would show (the text after the last "\r"), metrics are
// matched against every "\r" segment, empty lines are dropped (CloudWatch
// rejects empty events), and a line longer than maxLineBytes is cut.

const (
	maxLineBytes   = 256 << 10 // CloudWatch's event size limit
	maxReadPerPoll = 8 << 20
	maxBatchEvents = 5000
)

// tailState is tail.json.
type tailState struct {
	Offset  int64                          `json:"offset"`
	LastMS  int64                          `json:"last_ms"`
	Final   map[string]toolkit.FinalMetric `json:"final,omitempty"`
	Capture toolkit.ErrorCapture           `json:"capture"`
}

// tailer reads one host's output (its task's append-only log).
type tailer struct {
	out       io.ReaderAt // nil until the task is known: nothing to read
	statePath string
	st        tailState
}

func openTailer(stateDir string) (*tailer, error) {
	t := &tailer{statePath: filepath.Join(stateDir, fileTail)}
	if err := statefile.ReadJSON(t.statePath, &t.st); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return t, nil
}

// read returns the complete lines written after the saved offset and the
// offset after them. With final, a trailing line without "\n" counts too.
func (t *tailer) read(final bool) (lines []string, next int64, err error) {
	if t.out == nil {
		return nil, t.st.Offset, nil
	}
	f := t.out
	buf := make([]byte, 0, 64<<10)
	next = t.st.Offset
	for {
		chunk := make([]byte, 1<<20)
		n, err := f.ReadAt(chunk, next+int64(len(buf)))
		buf = append(buf, chunk[:n]...)
		if errors.Is(err, io.EOF) || n == 0 || len(buf) >= maxReadPerPoll {
			break
		}
		if err != nil {
			return nil, t.st.Offset, fmt.Errorf("read output log: %w", err)
		}
	}
	lines, n := logtail.SplitLines(buf, maxLineBytes, final)
	return lines, next + int64(n), nil
}

func (t *tailer) save() error { return statefile.WriteJSON(t.statePath, t.st) }

// pumpLogs moves h's new output into the log store and metrics. It runs
// with a context that Close does not cancel, so a poll is never cut in half
// (see the comment at the top of this file).
func (jr *jobRun) pumpLogs(ctx context.Context, h *hostRun, final bool) error {
	ctx = context.WithoutCancel(ctx)
	for {
		lines, next, err := h.tail.read(final)
		if err != nil {
			return err
		}
		if next == h.tail.st.Offset {
			return nil
		}
		st := h.tail.st // a copy, committed only after the append
		st.Capture = st.Capture.Clone()
		if st.Final == nil {
			st.Final = map[string]toolkit.FinalMetric{}
		} else {
			st.Final = cloneFinal(st.Final)
		}
		nowMS := max(jr.r.now().UnixMilli(), st.LastMS)
		ts := time.UnixMilli(nowMS)
		var events []sagebox.LogEvent
		var points []sagebox.MetricPoint
		for _, line := range lines {
			line = strings.ToValidUTF8(strings.TrimSuffix(line, "\r"), "\uFFFD")
			msg := line
			if strings.Contains(line, "\r") {
				segs := strings.Split(line, "\r")
				msg = ""
				for _, s := range segs {
					if s != "" {
						msg = s
					}
					points = append(points, jr.metrics.Match(s, ts)...)
				}
			} else {
				points = append(points, jr.metrics.Match(line, ts)...)
			}
			st.Capture.Add(msg, jr.codeDir(h.index))
			if strings.TrimSpace(msg) != "" {
				events = append(events, sagebox.LogEvent{Timestamp: nowMS, Message: msg})
			}
		}
		for len(events) > 0 {
			n := min(len(events), maxBatchEvents)
			if err := jr.r.logs.Append(ctx, sagebox.TrainingLogGroup, h.stream, events[:n]); err != nil {
				return fmt.Errorf("append logs: %w", err)
			}
			events = events[n:]
		}
		if len(points) > 0 {
			if err := jr.r.jobs.AddMetrics(ctx, jr.name, points); err != nil {
				h.log.Warn("recording metrics failed", "err", err)
			}
			for _, p := range points {
				st.Final[p.Name] = toolkit.FinalMetric{Value: p.Value, TimeMS: p.Timestamp.UnixMilli()}
			}
		}
		st.Offset, st.LastMS = next, nowMS
		h.tail.st = st
		if err := h.tail.save(); err != nil {
			return err
		}
		if !final {
			return nil
		}
	}
}

func cloneFinal(m map[string]toolkit.FinalMetric) map[string]toolkit.FinalMetric {
	out := make(map[string]toolkit.FinalMetric, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// note appends sagebox's own lines (staging, pip) to hosts' streams, with
// a prefix so they are told apart from the script's output.
func (jr *jobRun) note(ctx context.Context, hosts []*hostRun, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	jr.appendLines(ctx, hosts, strings.Split(msg, "\n"), "sagebox: ")
}

func (jr *jobRun) appendLines(ctx context.Context, hosts []*hostRun, lines []string, prefix string) {
	ms := jr.r.now().UnixMilli()
	var events []sagebox.LogEvent
	for _, l := range lines {
		l = strings.ToValidUTF8(strings.TrimRight(l, "\r"), "\uFFFD")
		if i := strings.LastIndexByte(l, '\r'); i >= 0 {
			l = l[i+1:]
		}
		if strings.TrimSpace(l) != "" {
			events = append(events, sagebox.LogEvent{Timestamp: ms, Message: prefix + l})
		}
	}
	if len(events) == 0 {
		return
	}
	for _, h := range hosts {
		if err := jr.r.logs.Append(context.WithoutCancel(ctx), sagebox.TrainingLogGroup, h.stream, events); err != nil {
			jr.log.Warn("appending to log stream failed", "host", h.name, "err", err)
		}
	}
}

// lineWriter is an io.Writer (for pip's output) that sends complete lines
// to hosts' streams as they come.
type lineWriter struct {
	jr    *jobRun
	ctx   context.Context
	hosts []*hostRun
	mu    sync.Mutex
	buf   []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if i := bytes.LastIndexByte(w.buf, '\n'); i >= 0 {
		lines := strings.Split(string(w.buf[:i]), "\n")
		w.buf = append(w.buf[:0], w.buf[i+1:]...)
		w.jr.appendLines(w.ctx, w.hosts, lines, "")
	}
	return len(p), nil
}

// Flush sends a last partial line.
func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.jr.appendLines(w.ctx, w.hosts, []string{string(w.buf)}, "")
		w.buf = nil
	}
}
