// Package statefile writes and reads the small state files sagebox keeps
// beside running work (launch records, exit statuses, log offsets,
// outcomes): atomically, through a temporary file and a rename, so that a
// reader, or a server restarted after a crash, never sees a partial file.
package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrCorrupt is wrapped by ReadJSON's error for a file that does not
// decode.
var ErrCorrupt = errors.New("corrupt state file")

// Write writes b to path atomically.
func Write(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteJSON writes v as JSON to path atomically.
func WriteJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	return Write(path, b)
}

// ReadJSON reads path into v. A missing file gives an error wrapping
// fs.ErrNotExist; one that does not decode, an error wrapping ErrCorrupt.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return nil
}
