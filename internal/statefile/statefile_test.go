package statefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestRoundTripAndErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if err := WriteJSON(p, map[string]int{"offset": 42}); err != nil {
		t.Fatal(err)
	}
	var got map[string]int
	if err := ReadJSON(p, &got); err != nil || got["offset"] != 42 {
		t.Fatalf("read back %v, %v", got, err)
	}
	if err := ReadJSON(filepath.Join(dir, "missing.json"), &got); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	os.WriteFile(p, []byte("{half"), 0o644)
	if err := ReadJSON(p, &got); !errors.Is(err, ErrCorrupt) {
		t.Errorf("corrupt file: %v", err)
	}
	// No temporary file is left behind, also when the write fails.
	if err := WriteJSON(filepath.Join(dir, "no-such-dir", "x.json"), 1); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	if err := WriteJSON(p, make(chan int)); err == nil {
		t.Error("an unencodable value was written")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only state.json", len(entries))
	}
}
