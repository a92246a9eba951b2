package wire

import (
	"encoding/json"
	"fmt"
)

// Hello is the payload of HELLO, the worker's first frame.
type Hello struct {
	Version int    `json:"version"`
	PID     int    `json:"pid"`
	Python  string `json:"python"`
}

// Load is the payload of LOAD: what the worker needs to load the model.
type Load struct {
	ModelDir      string `json:"model_dir"`
	Program       string `json:"program"`
	GPUID         int    `json:"gpu_id"`
	BatchSize     int    `json:"batch_size"`
	WorkerID      int    `json:"worker_id"`
	Workers       int    `json:"workers"`
	ServerName    string `json:"server_name"`
	ServerVersion string `json:"server_version"`
	DefaultAccept string `json:"default_accept"`
	// Progress is the path of the progress page the worker records the
	// request it runs in (doc.go); empty for none.
	Progress string `json:"progress,omitempty"`
	// MaxAnswer is the most bytes one answer may carry in a RESULT (body,
	// content type and headers; error strings are cut to fit); the worker
	// fails a larger answer alone. 0: no limit given.
	MaxAnswer int64 `json:"max_answer,omitempty"`
	// MaxRSS, when positive, asks the worker to ask for its own recycling
	// (progress page, doc.go) once its peak RSS passed this many bytes.
	MaxRSS int64 `json:"max_rss,omitempty"`
	// CodeDir is the user code's directory (SAGEMAKER_SUBMIT_DIRECTORY
	// when it names a local directory); empty means <model_dir>/code.
	CodeDir string `json:"code_dir,omitempty"`
	// OriginalRequest says every INFER element carries the original
	// request (Request.Original): a serial pipeline's later stages.
	OriginalRequest bool `json:"original_request,omitempty"`
}

// Loaded is the payload of LOADED, the worker's answer to LOAD.
type Loaded struct {
	OK         bool       `json:"ok"`
	BatchAware bool       `json:"batch_aware,omitempty"`
	Error      *ErrorInfo `json:"error,omitempty"`
}

// ErrorInfo describes a Python exception.
type ErrorInfo struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// AppendJSON appends a frame of type t whose payload is v encoded as JSON.
func AppendJSON(dst []byte, t Type, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("encode %s: %w", t, err)
	}
	return AppendFrame(dst, t, b), nil
}

// DecodeJSON decodes a JSON payload of a frame of type t into v.
func DecodeJSON(t Type, p []byte, v any) error {
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("decode %s: %w: %w", t, ErrMalformed, err)
	}
	return nil
}
