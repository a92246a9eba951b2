//go:build !unix

package objectstore

import (
	"fmt"
	"os"
)

// lockDir opens the lock file; without flock, exclusivity is not enforced.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	return f, nil
}

func unlockDir(f *os.File) {
	if f != nil {
		f.Close()
	}
}
