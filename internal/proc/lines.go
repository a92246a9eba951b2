package proc

import (
	"bytes"
	"strings"
	"sync"
)

// Sink receives a process's output one line at a time, without the line
// end. stream is "stdout" or "stderr". line is only valid during the call.
type Sink func(stream string, line []byte)

// maxLine is the longest line delivered in one piece; longer ones are cut
// into pieces of this size.
const maxLine = 64 << 10

// LineWriter is an io.Writer that hands each complete line written to it
// to a Sink (and a trailing "\r" is dropped). Flush delivers an unfinished
// last line. It is not safe for concurrent writers.
type LineWriter struct {
	stream string
	sink   Sink
	ring   *ring
	buf    []byte
}

// NewLineWriter returns a LineWriter delivering lines of stream to sink.
func NewLineWriter(stream string, sink Sink) *LineWriter {
	return &LineWriter{stream: stream, sink: sink}
}

func (l *LineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.buf = append(l.buf, p...)
			if len(l.buf) >= maxLine {
				l.emit(l.buf)
				l.buf = l.buf[:0]
			}
			break
		}
		if len(l.buf) > 0 {
			l.buf = append(l.buf, p[:i]...)
			l.emit(l.buf)
			l.buf = l.buf[:0]
		} else {
			l.emit(p[:i])
		}
		p = p[i+1:]
	}
	return n, nil
}

// Flush delivers what is left of an unfinished line.
func (l *LineWriter) Flush() {
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = l.buf[:0]
	}
}

func (l *LineWriter) emit(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if l.ring != nil {
		l.ring.add(string(line))
	}
	if l.sink != nil {
		l.sink(l.stream, line)
	}
}

// ring keeps the last lines added to it.
type ring struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newRing(n int) *ring { return &ring{lines: make([]string, n)} }

func (r *ring) add(line string) {
	r.mu.Lock()
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
	r.mu.Unlock()
}

// last returns up to n of the last lines, oldest first.
func (r *ring) last(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	count := r.next
	if r.full {
		count = len(r.lines)
	}
	n = min(n, count)
	out := make([]string, 0, n)
	for i := n; i > 0; i-- {
		out = append(out, r.lines[(r.next-i+len(r.lines))%len(r.lines)])
	}
	return out
}

// JoinTail joins lines with newlines and keeps at most maxBytes from the
// end (marked with a leading "…").
func JoinTail(lines []string, maxBytes int) string {
	s := strings.Join(lines, "\n")
	if maxBytes > 0 && len(s) > maxBytes {
		s = "…" + s[len(s)-maxBytes:]
	}
	return s
}

// lastLinesOf returns up to n last non-empty-trailing lines of b.
func lastLinesOf(b []byte, n int) []string {
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
