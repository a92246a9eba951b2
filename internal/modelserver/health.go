package modelserver

import (
	"context"
	"errors"
	"fmt"
)

// healthChanged wakes WaitReady callers.
func (s *Server) healthChanged() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// WorkerStatus describes one worker slot.
type WorkerStatus struct {
	ID int `json:"id"`
	// Container is the worker's container's hostname in a multi-container
	// model; empty otherwise.
	Container string      `json:"container,omitempty"`
	GPU       int         `json:"gpu_id"`
	PID       int         `json:"pid,omitempty"`
	State     WorkerState `json:"state"`
	Restarts  int         `json:"restarts"`
	// LastError is why the worker last failed, if it has.
	LastError string `json:"last_error,omitempty"`
}

// Health is a snapshot of the server's state.
type Health struct {
	// Ready is true when every worker has loaded the model at least once,
	// at least one has it loaded now, and none is failing to load it.
	Ready bool `json:"ready"`
	// Phase is one of the Phase constants.
	Phase string `json:"phase"`
	// Message explains a server that is not ready.
	Message string         `json:"message,omitempty"`
	Workers []WorkerStatus `json:"workers"`
	// Containers is each container's health in a multi-container model
	// (Serial, Direct); empty for a single model.
	Containers []ContainerHealth `json:"containers,omitempty"`
	// Err is set when the model cannot be served as things stand: Start
	// failed, or a worker's last attempt to load the model failed (it keeps
	// retrying with backoff).
	Err error `json:"-"`
}

// Health returns the server's current state.
func (s *Server) Health() Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := Health{Phase: s.phase, Err: s.err}
	everLoaded, loadedNow := 0, 0
	why := "" // the first worker's reason for being down
	for _, w := range s.workers {
		w.mu.Lock()
		h.Workers = append(h.Workers, WorkerStatus{
			ID: w.id, GPU: w.gpu, PID: w.pid, State: w.state, Restarts: w.restarts, LastError: w.lastErr,
		})
		if w.everLoaded {
			everLoaded++
		}
		if w.state == WorkerLoaded {
			loadedNow++
		} else if why == "" && w.lastErr != "" {
			why = w.lastErr
		}
		if w.loadErr != nil && h.Err == nil {
			h.Err = w.loadErr
		}
		w.mu.Unlock()
	}
	switch {
	case s.phase != PhaseRunning:
		h.Message = "model server is " + s.phase
		if s.err != nil {
			h.Message += ": " + s.err.Error()
		}
	case h.Err != nil:
		h.Message = h.Err.Error()
	case everLoaded < len(s.workers):
		h.Message = fmt.Sprintf("loading the model: %d of %d workers loaded", everLoaded, len(s.workers))
	case loadedNow == 0:
		h.Message = "no worker has the model loaded (restarting)"
		if why != "" {
			h.Message += ": " + why
		}
	default:
		h.Ready = true
	}
	return h
}

// Ready reports whether the server can serve invocations (Health().Ready).
func (s *Server) Ready() bool { return s.Health().Ready }

// WaitReady blocks until the server is ready, returning nil, or until the
// model cannot be served (Health().Err, e.g. model_fn raised) or ctx ends,
// returning why.
func (s *Server) WaitReady(ctx context.Context) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		h := s.Health()
		switch {
		case h.Ready:
			return nil
		case h.Err != nil:
			return h.Err
		case h.Phase == PhaseStopping || h.Phase == PhaseStopped:
			return errors.New("model server stopped before the model loaded")
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for model to load (%s): %w", h.Message, ctx.Err())
		}
	}
}
