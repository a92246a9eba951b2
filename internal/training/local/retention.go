package local

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// A finished job's workspaces (code, channels, model, output, checkpoints)
// are removed once its artifacts are uploaded, unless the operator keeps
// them (Config.KeepWorkspaces, KeepFailedWorkspaces): then the job's
// directory gets a marker saying until when it is kept, and every Release
// (and Sweep, at start) removes those past their time. Nothing the user
// cannot see or delete through the API stays behind for good.

// fileKeepUntil marks a released job's directory kept until its mtime.
const fileKeepUntil = ".keep-until"

func (d *Driver) retain(job string, failed bool) {
	keep := d.cfg.KeepWorkspaces
	if failed {
		keep = d.cfg.KeepFailedWorkspaces
	}
	dir := d.jobDir(job)
	if keep <= 0 {
		if err := os.RemoveAll(dir); err != nil {
			d.log.Warn("removing a finished job's workspace failed", "job", job, "err", err)
		}
	} else if err := markKeep(dir, d.cfg.Now().Add(keep)); err != nil {
		d.log.Warn("marking a finished job's workspace failed", "job", job, "err", err)
	}
	d.Sweep()
}

func markKeep(dir string, until time.Time) error {
	p := filepath.Join(dir, fileKeepUntil)
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		return err
	}
	return os.Chtimes(p, until, until)
}

// Sweep removes the workspaces of released jobs whose keep time is over.
func (d *Driver) Sweep() {
	marks, _ := filepath.Glob(filepath.Join(d.cfg.DataDir, "jobs", "*", fileKeepUntil))
	now := d.cfg.Now()
	for _, m := range marks {
		st, err := os.Stat(m)
		if err != nil || st.ModTime().After(now) {
			continue
		}
		if err := os.RemoveAll(filepath.Dir(m)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("removing an expired workspace failed", "dir", filepath.Dir(m), "err", err)
		}
	}
}
