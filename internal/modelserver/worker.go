package modelserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sagebox/sagebox/internal/batch"
	"github.com/sagebox/sagebox/internal/wire"
)

// WorkerState is where a worker slot is in its life.
//
//	          Start
//	            │
//	            ▼
//	┌──────▶ starting ──(HELLO, LOAD, LOADED ok)──▶ loaded ◀──┐
//	│           │                                    │  │     │ batch
//	│           │ crash, timeout, model_fn error     │  └─────┘
//	│           ▼                                    │
//	└─────── backoff ◀──── crash, timeout, ──────────┘
//	                       protocol error
//
// Any state goes to stopped when the server shuts down.
type WorkerState string

// Worker states.
const (
	WorkerStarting WorkerState = "starting"
	WorkerLoaded   WorkerState = "loaded"
	WorkerBackoff  WorkerState = "backoff"
	WorkerStopped  WorkerState = "stopped"
)

// LoadError is a worker's failure to come up: the process could not start,
// exited or timed out before loading, or model_fn raised.
type LoadError struct {
	Worker int
	// Type, Message and Traceback describe the Python exception when
	// model_fn (or the runtime) raised; otherwise Type is empty.
	Type      string
	Message   string
	Traceback string
}

// Error describes the failure for logs and for /ping.
func (e *LoadError) Error() string {
	if e.Type != "" {
		return fmt.Sprintf("worker %d could not load the model: %s: %s", e.Worker, e.Type, e.Message)
	}
	return fmt.Sprintf("worker %d could not load the model: %s", e.Worker, e.Message)
}

// errStopped ends a worker's life because the server is stopping.
var errStopped = errors.New("worker stopped")

// worker is one slot of the pool: it keeps one Python process alive,
// restarting it with backoff, and feeds it batches.
type worker struct {
	id     int
	gpu    int
	srv    *Server
	logger *slog.Logger

	// Used by the serving goroutine only.
	handlerAvg time.Duration // moving average of handler time, batches of one
	calls      []*call
	reqs       []wire.Request
	enc        wire.InferEncoder
	res        wire.Result

	mu         sync.Mutex
	state      WorkerState
	pid        int
	everLoaded bool
	loadErr    *LoadError // set while the last start attempt failed before LOADED
	restarts   int
	lastErr    string
}

// run keeps the worker's process alive until ctx is done or the queue is
// closed and drained.
func (w *worker) run(ctx context.Context) {
	defer w.setState(WorkerStopped, 0, nil)
	failures := 0
	for gen := 1; ; gen++ {
		loaded, err := w.life(ctx, gen)
		if ctx.Err() != nil || errors.Is(err, errStopped) {
			return
		}
		if loaded {
			failures = 0
		}
		delay := time.Duration(0)
		if failures > 0 {
			delay = w.srv.cfg.RestartBackoff << min(failures-1, 30)
			delay = min(delay, w.srv.cfg.RestartBackoffMax)
		}
		failures++
		w.setState(WorkerBackoff, 0, err)
		w.srv.metrics.restarts.Inc()
		w.logger.Warn("worker will restart", "delay", delay, "error", err)
		if !w.srv.restartWait(ctx, delay) {
			return
		}
		w.mu.Lock()
		w.restarts++
		w.mu.Unlock()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// setState records a state change and tells waiters. pid 0 keeps the
// current pid.
func (w *worker) setState(st WorkerState, pid int, err error) {
	w.mu.Lock()
	was := w.state
	w.state = st
	if pid != 0 {
		w.pid = pid
	}
	switch st {
	case WorkerLoaded:
		w.everLoaded = true
		w.loadErr = nil
		w.lastErr = ""
	case WorkerBackoff:
		w.loadErr = nil
		errors.As(err, &w.loadErr)
		if err != nil {
			w.lastErr = err.Error()
		}
	}
	w.mu.Unlock()
	if was == WorkerLoaded && st != WorkerLoaded {
		w.srv.loaded.Add(-1)
	} else if was != WorkerLoaded && st == WorkerLoaded {
		w.srv.loaded.Add(1)
	}
	w.srv.healthChanged()
}

// life starts one worker process, loads the model and serves batches until
// the process fails or the server stops. It reports whether the model was
// loaded, and why the life ended.
func (w *worker) life(ctx context.Context, gen int) (loaded bool, err error) {
	s := w.srv
	w.setState(WorkerStarting, 0, nil)
	sock := filepath.Join(s.sockDir, fmt.Sprintf("w%d-%d.sock", w.id, gen))
	_ = os.Remove(sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return false, &LoadError{Worker: w.id, Message: fmt.Sprintf("listen on %s: %v", sock, err)}
	}
	ln.SetUnlinkOnClose(true)
	defer ln.Close()
	// Without a progress page the worker answers every request with its
	// own write and failures are blamed on the first unanswered request.
	pg, err := newProgressPage(filepath.Join(s.sockDir, fmt.Sprintf("w%d-%d.progress", w.id, gen)))
	if err != nil { // pg is nil
		w.logger.Warn("worker runs without a progress page", "error", err)
	}
	defer pg.close()

	p, err := startProcess(procSpec{
		path:          s.python,
		args:          []string{"-m", "sagebox_runtime", "worker", "--socket", sock},
		dir:           s.modelDir,
		env:           s.workerEnv,
		logger:        w.logger,
		supervisor:    s.cfg.Supervisor,
		removeOnDeath: s.tempDirs(),
	})
	if err != nil {
		return false, &LoadError{Worker: w.id, Message: err.Error()}
	}
	logger := w.logger.With("pid", p.pid)
	w.setState(WorkerStarting, p.pid, nil)
	logger.Info("worker started", "gpu_id", w.gpu, "socket", sock)

	// lifeCtx ends when the process exits or the server stops; either way
	// the listener and connection are closed so blocked I/O returns.
	lifeCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var connMu sync.Mutex
	var conn *net.UnixConn
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-p.exited:
		case <-lifeCtx.Done():
		}
		cancel()
		ln.Close()
		connMu.Lock()
		if conn != nil {
			conn.Close()
		}
		connMu.Unlock()
	}()
	connected := false
	defer func() {
		cancel()
		<-watchDone
		w.stopProcess(p, connected && (errors.Is(err, errStopped) || s.ctx.Err() != nil))
		logger.Info("worker ended", "how", p.exitDescription())
	}()

	register := func(c *net.UnixConn) {
		connected = true
		connMu.Lock()
		conn = c
		connMu.Unlock()
		if lifeCtx.Err() != nil { // the watcher may have run already
			c.Close()
		}
	}
	c, br, err := w.handshake(ln, p, pg, register, logger)
	if err != nil {
		return false, err
	}
	w.setState(WorkerLoaded, 0, nil)
	logger.Info("model loaded")
	return true, w.serve(ctx, lifeCtx, c, br, p, pg)
}

// stopProcess ends p. Gently means the server is stopping and the worker
// was connected: the closed connection asks it to exit, then SIGTERM, then
// SIGKILL after the grace period. Otherwise it is killed at once.
func (w *worker) stopProcess(p *process, gently bool) {
	if gently {
		if !p.wait(2 * time.Second) {
			p.stop(w.srv.cfg.ShutdownGrace)
		}
	} else if w.srv.ctx.Err() != nil {
		p.stop(w.srv.cfg.ShutdownGrace)
	} else {
		p.signal(syscall.SIGKILL) // it failed; nothing to save
		<-p.exited
	}
	// Nothing of it is left: internal/proc kills what remains of its group
	// (and, under the supervisor, everything it forked) once it exits.
}

// loadFailure describes a process that ended while doing step, before it
// loaded the model.
func (w *worker) loadFailure(p *process, step string) *LoadError {
	<-p.exited
	msg := fmt.Sprintf("worker process %s while %s", p.exitDescription(), step)
	if tail := p.stderrTail(20, 4096); tail != "" {
		msg += "; last stderr lines:\n" + tail
	}
	return &LoadError{Worker: w.id, Message: msg}
}

// handshake accepts the worker's connection and runs HELLO and LOAD within
// the startup timeout.
func (w *worker) handshake(ln *net.UnixListener, p *process, pg *progressPage, register func(*net.UnixConn), logger *slog.Logger) (*net.UnixConn, *bufio.Reader, error) {
	s := w.srv
	timeout := s.cfg.StartupTimeout
	deadline := time.Now().Add(timeout)
	fail := func(step string, err error) error {
		if s.ctx.Err() != nil {
			return errStopped
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			p.signal(syscall.SIGKILL)
			return &LoadError{Worker: w.id, Message: fmt.Sprintf(
				"worker did not finish %s within the startup timeout of %s (SAGEMAKER_STARTUP_TIMEOUT); it was killed", step, timeout)}
		}
		if p.wait(2 * time.Second) {
			return w.loadFailure(p, step)
		}
		return &LoadError{Worker: w.id, Message: fmt.Sprintf("%s: %v", step, err)}
	}

	_ = ln.SetDeadline(deadline)
	conn, err := ln.AcceptUnix()
	if err != nil {
		return nil, nil, fail("connecting", err)
	}
	ln.Close()
	register(conn)
	_ = conn.SetDeadline(deadline)
	br := bufio.NewReaderSize(conn, 64<<10)
	rd := wire.NewReader(br, 1<<20)

	p1, err := rd.ReadFrameOf(wire.TypeHello, nil)
	if err != nil {
		conn.Close()
		return nil, nil, fail("starting (HELLO)", err)
	}
	var hello wire.Hello
	if err := wire.DecodeJSON(wire.TypeHello, p1, &hello); err != nil {
		conn.Close()
		return nil, nil, fail("starting (HELLO)", err)
	}
	if hello.Version != wire.Version {
		conn.Close()
		return nil, nil, &LoadError{Worker: w.id, Message: fmt.Sprintf(
			"worker speaks protocol version %d, this server speaks %d (a sagebox_runtime from another release on PYTHONPATH?)", hello.Version, wire.Version)}
	}
	logger.Debug("worker connected", "python", hello.Python)

	var progress string
	if pg != nil {
		progress = pg.path
	}
	load, err := wire.AppendJSON(nil, wire.TypeLoad, wire.Load{
		ModelDir:      s.modelDir,
		Program:       s.cfg.Program,
		GPUID:         w.gpu,
		BatchSize:     s.cfg.BatchSize,
		WorkerID:      w.id,
		Workers:       s.workerCount,
		ServerName:    "sagebox",
		ServerVersion: s.cfg.ServerVersion,
		DefaultAccept: s.cfg.DefaultAccept,
		Progress:      progress,
		MaxAnswer:     s.answerLimit,
		MaxRSS:        s.cfg.WorkerMaxRSS,
		CodeDir:       s.codeDir,
		// Stages after a pipeline's first get the client's request too.
		OriginalRequest: s.cfg.OriginalRequest,
	})
	if err == nil {
		_, err = conn.Write(load)
	}
	if err != nil {
		conn.Close()
		return nil, nil, fail("receiving LOAD", err)
	}
	p2, err := wire.NewReader(br, 16<<20).ReadFrameOf(wire.TypeLoaded, nil)
	if err != nil {
		conn.Close()
		return nil, nil, fail("loading the model", err)
	}
	var loaded wire.Loaded
	if err := wire.DecodeJSON(wire.TypeLoaded, p2, &loaded); err != nil {
		conn.Close()
		return nil, nil, fail("loading the model", err)
	}
	if !loaded.OK {
		conn.Close()
		le := &LoadError{Worker: w.id, Message: "model loading failed"}
		if loaded.Error != nil {
			le.Type, le.Message, le.Traceback = loaded.Error.Type, loaded.Error.Message, loaded.Error.Traceback
		}
		logger.Error("model loading failed", "type", le.Type, "message", le.Message, "traceback", le.Traceback)
		return nil, nil, le
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, br, nil
}

// serve feeds batches to a loaded worker until it fails or the queue is
// closed and empty.
func (w *worker) serve(ctx, lifeCtx context.Context, conn *net.UnixConn, br *bufio.Reader, p *process, pg *progressPage) error {
	s := w.srv
	rd := wire.NewReader(br, s.resultFrameLimit)
	for {
		s.idle.Add(1)
		calls, err := s.queue.Next(lifeCtx, w.calls[:0])
		s.idle.Add(-1)
		w.calls = calls
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, batch.ErrClosed) {
				return errStopped
			}
			// The process exited while idle: nothing was lost.
			<-p.exited
			return fmt.Errorf("worker process %s while idle", p.exitDescription())
		}
		if s.cfg.BatchSize == 1 {
			calls = w.share(calls)
		}
		if calls = w.dropAbandoned(calls, time.Now()); len(calls) == 0 {
			continue
		}
		if s.cfg.BatchSize == 1 && len(calls) > 1 {
			err = w.pipeline(ctx, conn, br, rd, p, pg, calls)
		} else if err = w.roundTrip(ctx, conn, rd, p, calls); err == nil && pg.recycle() != 0 {
			err = w.recycled(p, pg)
		}
		if err != nil {
			clear(w.calls)
			return err
		}
		clear(w.calls)
	}
}

// share keeps the part of calls, taken together with batching off, that
// is this worker's to run, and puts the rest back at the front of the
// queue: one call when its handlers are slow (pipelineQuick) or not yet
// timed, else an even share with the workers waiting for requests, so
// that no worker runs a queue of requests one after another while others
// stand idle.
func (w *worker) share(calls []*call) []*call {
	keep := len(calls)
	quick := pipelineQuick
	if w.srv.cfg.pipelineQuick > 0 {
		quick = w.srv.cfg.pipelineQuick
	}
	if w.handlerAvg >= quick {
		keep = 1
	} else if others := int(w.srv.idle.Load()); others > 0 {
		keep = (len(calls) + others) / (others + 1)
	}
	if keep >= len(calls) {
		return calls
	}
	w.srv.queue.Requeue(calls[keep:])
	clear(calls[keep:])
	return calls[:keep]
}

// observeHandler folds the handler time of a batch of one into handlerAvg.
func (w *worker) observeHandler(nanos uint64) {
	w.handlerAvg += (time.Duration(nanos) - w.handlerAvg) / 4
}

// abandonCheckAfter is how long a request must have waited in the queue
// before a worker taking it checks that its client is still connected.
// Requests normally wait far less and skip the check (a system call); when
// the server is overloaded and clients give up and hang up, their requests
// are dropped instead of taking a worker's time.
const abandonCheckAfter = 100 * time.Millisecond

// dropAbandoned answers, and removes from calls, the ones that waited at
// least abandonCheckAfter and whose client has closed its connection.
func (w *worker) dropAbandoned(calls []*call, now time.Time) []*call {
	kept := calls[:0]
	for _, c := range calls {
		if c.conn == nil || now.Sub(c.enqueued) < abandonCheckAfter || !clientGone(c.conn) {
			kept = append(kept, c)
			continue
		}
		c.err = errorf(StatusClientClosedRequest, TypeClientGone,
			"the client closed the connection after waiting %s for a worker", now.Sub(c.enqueued).Round(time.Millisecond))
		c.workerID = w.id
		c.done <- struct{}{}
	}
	clear(calls[len(kept):])
	return kept
}

// roundTrip sends one batch and delivers the worker's answers.
func (w *worker) roundTrip(ctx context.Context, conn *net.UnixConn, rd *wire.Reader, p *process, calls []*call) error {
	s := w.srv
	start := time.Now()
	reqs := w.requests(calls, start)
	s.metrics.batchSize.Observe(float64(len(calls)))

	_ = conn.SetDeadline(start.Add(s.cfg.RequestTimeout))
	bufs := w.enc.Encode(reqs)
	_, err := bufs.WriteTo(conn)
	var payload []byte
	if err == nil {
		// A fresh buffer per batch: response bodies alias it until the
		// handlers have written them.
		payload, err = rd.ReadFrameOf(wire.TypeResult, nil)
	}
	if err == nil {
		err = wire.DecodeResult(payload, &w.res)
	}
	clear(w.reqs)
	if err != nil {
		return w.failBatch(ctx, p, calls, err)
	}
	s.metrics.workerTime.Observe(time.Since(start).Seconds())
	s.metrics.handlerTime.Observe(float64(w.res.HandlerNanos) / 1e9)
	if len(calls) == 1 {
		w.observeHandler(w.res.HandlerNanos)
	}

	rs := w.res.Responses
	if len(rs) != len(calls) {
		return w.failBatch(ctx, p, calls, fmt.Errorf("%w: %d answers for %d requests", wire.ErrMalformed, len(rs), len(calls)))
	}
	for i := range rs {
		if rs[i].ID != calls[i].req.ID && !reorder(rs, calls, i) {
			return w.failBatch(ctx, p, calls, fmt.Errorf("%w: answer for unknown request id %d", wire.ErrMalformed, rs[i].ID))
		}
	}
	for i, c := range calls {
		w.deliver(c, &rs[i])
	}
	clear(rs)
	w.res.Responses = rs[:0]
	return nil
}

// requests collects the calls' requests for encoding, counting the time
// each waited in the queue until start.
func (w *worker) requests(calls []*call, start time.Time) []wire.Request {
	reqs := w.reqs[:0]
	for _, c := range calls {
		w.srv.metrics.queueTime.Observe(start.Sub(c.enqueued).Seconds())
		reqs = append(reqs, c.req)
	}
	w.reqs = reqs
	return reqs
}

// deliver hands c the worker's answer r.
func (w *worker) deliver(c *call, r *wire.Response) {
	c.status = int(r.Status)
	c.contentType = r.ContentType
	c.headers = r.Headers
	c.body = r.Body
	if r.Status >= 400 || r.Status < 100 {
		c.err = &Error{Code: int(r.Status), Type: r.ErrorType, Message: r.ErrorMessage, Traceback: r.Traceback}
	}
	c.workerID = w.id
	c.done <- struct{}{}
}

// pipeline sends calls, taken together while batching is off, as
// consecutive batches of one in a single write, and delivers each answer as
// it arrives. The handlers still see one request at a time; what the calls
// share is the write and the worker's wake-up, which on a busy machine cost
// more than a small model's forward pass. The worker may hold quick
// answers back while the next request is already waiting for it, and
// write them together (python/sagebox_runtime/worker.py); its progress
// page says which request it is running meanwhile. Each call has the full
// request timeout from when the worker started it (from when the call
// before it was answered, without a progress page). When the worker fails,
// the call it was running fails; the others it had not answered go back to
// the front of the queue: the ones after it were never started, and the
// ones before it, whose answers died with the worker, run again.
func (w *worker) pipeline(ctx context.Context, conn *net.UnixConn, br *bufio.Reader, rd *wire.Reader, p *process, pg *progressPage, calls []*call) error {
	s := w.srv
	start := time.Now()
	reqs := w.requests(calls, start)
	_ = conn.SetDeadline(start.Add(s.cfg.RequestTimeout))
	bufs := w.enc.EncodeEach(reqs)
	_, err := bufs.WriteTo(conn)
	clear(w.reqs)
	prev := start
	for i, c := range calls {
		if err == nil {
			if i > 0 {
				_ = conn.SetReadDeadline(prev.Add(s.cfg.RequestTimeout))
			}
			var payload []byte
			// A fresh buffer per answer: the body aliases it until the
			// HTTP handler has written it.
			if err = w.awaitAnswer(conn, br, pg, calls[i:]); err == nil {
				if payload, err = rd.ReadFrameOf(wire.TypeResult, nil); err == nil {
					err = wire.DecodeResult(payload, &w.res)
				}
			}
			if err == nil && (len(w.res.Responses) != 1 || w.res.Responses[0].ID != c.req.ID) {
				err = fmt.Errorf("%w: %d answers, or not for request %d, where one was due", wire.ErrMalformed, len(w.res.Responses), c.req.ID)
			}
		}
		if err != nil {
			k := i
			if j := pg.running(calls[i:]); j > 0 {
				k = i + j
			}
			again := make([]*call, 0, len(calls)-i-1)
			again = append(append(again, calls[i:k]...), calls[k+1:]...)
			s.queue.Requeue(again)
			return w.failBatch(ctx, p, calls[k:k+1], err)
		}
		now := time.Now()
		s.metrics.batchSize.Observe(1)
		s.metrics.workerTime.Observe(now.Sub(prev).Seconds())
		s.metrics.handlerTime.Observe(float64(w.res.HandlerNanos) / 1e9)
		w.observeHandler(w.res.HandlerNanos)
		prev = now
		id := c.req.ID // c belongs to its caller again once delivered
		w.deliver(c, &w.res.Responses[0])
		clear(w.res.Responses)
		w.res.Responses = w.res.Responses[:0]
		if pg.recycle() != 0 && w.recycleAfter(pg, id, calls[i+1:]) {
			// The worker takes no more requests: the ones it was sent
			// after this one go back to the queue, not yet started.
			s.queue.Requeue(calls[i+1:])
			return w.recycled(p, pg)
		}
	}
	return nil
}

// recycleAfter reports whether the worker's recycle request follows the
// answer to request answered: the page still names the request whose
// handlers ran last, and answers held back before it (rest) come out first.
func (w *worker) recycleAfter(pg *progressPage, answered uint64, rest []*call) bool {
	id, _ := pg.read()
	return id == answered || callIndex(rest, id) < 0
}

// recycleError ends the life of a worker that asked to be replaced.
type recycleError struct {
	worker, pid int
	why         string
}

func (e *recycleError) Error() string {
	return fmt.Sprintf("worker %d (pid %d) %s; it is being restarted", e.worker, e.pid, e.why)
}

// recycled describes the recycle request on pg, for run to restart the
// worker at once (it was loaded, so without backoff).
func (w *worker) recycled(p *process, pg *progressPage) error {
	why := "asked to be recycled"
	switch pg.recycle() {
	case recycleOutOfMemory:
		why = "ran out of memory (MemoryError)"
	case recycleMaxRSS:
		why = fmt.Sprintf("passed its memory limit of %d MiB peak RSS (SAGEBOX_WORKER_MAX_RSS_MB)", w.srv.cfg.WorkerMaxRSS>>20)
	}
	err := &recycleError{worker: w.id, pid: p.pid, why: why}
	w.logger.Warn("recycling worker", "pid", p.pid, "reason", why)
	return err
}

// awaitAnswer waits for the worker's answer to calls[0] to start arriving.
// When the read deadline passes while the worker is still within the
// request timeout of the call it is running (the answer to calls[0] may be
// held back with that one's), the deadline moves (progressPage.extendDeadline).
// Once the answer starts, the whole frame has a request timeout to arrive.
func (w *worker) awaitAnswer(conn *net.UnixConn, br *bufio.Reader, pg *progressPage, calls []*call) error {
	var last progressMark
	for {
		_, err := br.Peek(1)
		if err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(w.srv.cfg.RequestTimeout))
			return nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		d, ok := pg.extendDeadline(calls, w.srv.cfg.RequestTimeout, &last)
		if !ok {
			return err
		}
		_ = conn.SetReadDeadline(d)
	}
}

// reorder swaps into place i the call whose id matches rs[i], and reports
// whether there was one. Workers answer in order; this is the slow path.
func reorder(rs []wire.Response, calls []*call, i int) bool {
	for j := i + 1; j < len(calls); j++ {
		if calls[j].req.ID == rs[i].ID {
			calls[i], calls[j] = calls[j], calls[i]
			return true
		}
	}
	return false
}

// failBatch answers every call of a batch that the worker could not
// complete, kills the worker if it is still running, and returns why.
func (w *worker) failBatch(ctx context.Context, p *process, calls []*call, cause error) error {
	s := w.srv
	var e *Error
	var err error
	switch {
	case ctx.Err() != nil:
		e = errorf(503, TypeUnavailable, "the model server shut down before worker %d answered", w.id)
		err = errStopped
	case errors.Is(cause, os.ErrDeadlineExceeded):
		p.signal(syscall.SIGKILL)
		e = errorf(504, TypeWorkerTimeout,
			"worker %d timed out after %s (SAGEMAKER_MODEL_SERVER_TIMEOUT); it was killed and is being restarted",
			w.id, s.cfg.RequestTimeout)
		err = fmt.Errorf("timed out after %s handling a batch of %d", s.cfg.RequestTimeout, len(calls))
	case errors.Is(cause, wire.ErrMalformed) || errors.Is(cause, wire.ErrFrameTooLarge) ||
		(errors.Is(cause, wire.ErrTruncated) && !p.wait(time.Second)):
		p.signal(syscall.SIGKILL)
		e = errorf(502, TypeWorkerDied, "worker %d sent an invalid answer (%v); it was killed and is being restarted", w.id, cause)
		err = fmt.Errorf("protocol error: %w", cause)
	default:
		// The connection broke: the process is gone or going.
		if !p.wait(2 * time.Second) {
			p.signal(syscall.SIGKILL)
			<-p.exited
		}
		how := p.exitDescription()
		msg := fmt.Sprintf("worker %d (pid %d) %s while handling this request; it is being restarted", w.id, p.pid, how)
		if tail := p.stderrTail(20, 4096); tail != "" {
			msg += ". Last stderr lines:\n" + tail
		}
		e = errorf(502, TypeWorkerDied, "%s", msg)
		err = fmt.Errorf("worker process %s during a batch of %d", how, len(calls))
	}
	for _, c := range calls {
		c.err = e
		c.workerID = w.id
		c.done <- struct{}{}
	}
	return err
}
