package staging

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// LocalPaths says which paths of this machine a job may name through
// sagebox's file:// extension (channels, the source directory, the output
// path). The zero value allows every path, as on a single-user machine; the
// server narrows it: a server that listens beyond loopback allows only the
// directories its operator names (sagebox server --allow-local-paths).
type LocalPaths struct {
	// Deny refuses every file:// path. Why says why, for the error
	// ("this server listens on 0.0.0.0:7070").
	Deny bool
	Why  string
	// Roots, when set, allow only paths under one of them (after
	// symlinks are resolved, so a link inside a root cannot lead out).
	Roots []string
}

// check returns a ClientError when p (a path or a file:// URI, named in
// the error as given) may not be used; what names the member ("channel
// \"train\"", "sagemaker_submit_directory").
func (l LocalPaths) check(what, p string) error {
	if l.Deny {
		why := ""
		if l.Why != "" {
			why = " (" + l.Why + ")"
		}
		return clientErrorf("%s %s: this server does not allow paths on its machine%s; use an s3:// URI, or ask its operator to allow the directory with --allow-local-paths", what, p, why)
	}
	if len(l.Roots) == 0 {
		return nil
	}
	real := resolve(strings.TrimPrefix(p, "file://"))
	for _, r := range l.Roots {
		root := resolve(r)
		if real == root || strings.HasPrefix(real, root+string(filepath.Separator)) {
			return nil
		}
	}
	return clientErrorf("%s %s is outside the directories this server allows (--allow-local-paths %s)", what, p, strings.Join(l.Roots, " "))
}

// resolve is p, cleaned, with the symlinks of its longest existing prefix
// resolved (a path that does not exist yet, such as an output directory,
// is judged by where it would be created).
func resolve(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for cur := p; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return p
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}
