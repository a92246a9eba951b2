package local

import (
	"errors"
	"io/fs"
	"os"
)

func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
