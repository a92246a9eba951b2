package modelserver

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// progressPage is a page of shared memory in which a worker records which
// request it is running and since when (python/sagebox_runtime/worker.py):
//
//	u64 id of the first request of the INFER being handled
//	u64 CLOCK_MONOTONIC nanoseconds when its handlers started, 0 once done
//	u64 recycle request: 0, or why the worker asks to be replaced once the
//	    answers it wrote are read (recycleOutOfMemory, recycleMaxRSS)
//
// little-endian, at offset 0. The worker writes it with two stores per
// INFER and no system call. It lets the worker hold answers back while
// more requests are already waiting for it (one write for several answers)
// without the front end losing track: when the worker dies or runs long,
// the page says which request was running.
type progressPage struct {
	path string
	mem  []byte
}

// Recycle requests (offset 16 of the page). The worker writes one before
// the answer after which it must be replaced, then stops taking requests.
const (
	recycleOutOfMemory = 1 // a handler raised MemoryError
	recycleMaxRSS      = 2 // its peak RSS passed Config.WorkerMaxRSS
)

// recycle returns the worker's recycle request, 0 for none (or no page).
// It is one load from shared memory: the front end checks it after every
// answer.
func (p *progressPage) recycle() uint64 {
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(p.mem[16:24])
}

// progressSize is the page's size on disk and in memory.
const progressSize = 4096

// newProgressPage creates the page's file at path and maps it.
func newProgressPage(path string) (*progressPage, error) {
	_ = os.Remove(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create progress page: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(progressSize); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("size progress page: %w", err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, progressSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("map progress page: %w", err)
	}
	return &progressPage{path: path, mem: mem}, nil
}

// close unmaps the page and removes its file.
func (p *progressPage) close() {
	if p == nil {
		return
	}
	_ = unix.Munmap(p.mem)
	_ = os.Remove(p.path)
}

// read returns the id and start time the worker last recorded. The worker
// may be writing while it reads (byte by byte, for all Go knows), so it
// reads until two reads agree.
func (p *progressPage) read() (id uint64, started int64) {
	for range 100 {
		id = binary.LittleEndian.Uint64(p.mem[0:8])
		started = int64(binary.LittleEndian.Uint64(p.mem[8:16]))
		if binary.LittleEndian.Uint64(p.mem[0:8]) == id && int64(binary.LittleEndian.Uint64(p.mem[8:16])) == started {
			return id, started
		}
	}
	return id, started
}

// running returns the index in calls of the one the worker is running
// handlers for, or -1 when it is running none of them (it is between
// requests, or the page is missing).
func (p *progressPage) running(calls []*call) int {
	if p == nil {
		return -1
	}
	id, started := p.read()
	if started == 0 {
		return -1
	}
	return callIndex(calls, id)
}

// callIndex returns the index in calls of the one for request id, or -1.
func callIndex(calls []*call, id uint64) int {
	for i, c := range calls {
		if c.req.ID == id {
			return i
		}
	}
	return -1
}

// progressMark is one reading of the page.
type progressMark struct {
	id      uint64
	started int64
}

// extendDeadline decides, when a read deadline for the answer to calls[0]
// passed, whether the worker deserves more time, and until when. It does
// when it is running one of calls whose request timeout has not passed
// since the handlers started (the answers before it are held back with
// its own), and when it is between requests but moved on since last seen
// (a full timeout from now). last is updated.
func (p *progressPage) extendDeadline(calls []*call, timeout time.Duration, last *progressMark) (time.Time, bool) {
	if p == nil {
		return time.Time{}, false
	}
	id, started := p.read()
	mark := progressMark{id, started}
	moved := mark != *last
	*last = mark
	now := time.Now()
	if started == 0 {
		return now.Add(timeout), moved
	}
	if callIndex(calls, id) < 0 {
		return now.Add(timeout), moved
	}
	ran := time.Duration(monotonicNow() - started)
	if ran >= timeout {
		return time.Time{}, false
	}
	return now.Add(timeout - ran), true
}

// monotonicNow reads CLOCK_MONOTONIC, the clock the worker records start
// times with (Python's time.monotonic_ns).
func monotonicNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}
