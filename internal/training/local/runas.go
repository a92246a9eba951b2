package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sagebox/sagebox/internal/training/driver"
)

// RunAs makes user code run as an unprivileged user while the server runs
// as root (`sagebox server --run-as USER` or `--run-as-uids FIRST-LAST`).
// Jobs then cannot read the metadata database, the object store, the
// logs or (with a uid range) each other's workspaces: RestrictDataDir
// closes the data directory to other users, each host's workspace is
// owned by the job's uid and mode 0700, and the job's state directory
// (supervisor records, output.log) stays root's and 0700.
//
// Endpoint instances (internal/hosting) use the same mechanism: their
// model directories are chowned to the user and proc.Spec.Credential
// runs the model server as it.
type RunAs struct {
	// UID and GID are the user every job runs as when Count is 0. With
	// Count > 0, each job gets its own uid, the lowest of UID..UID+Count-1
	// that no workspace on disk is owned by, with gid equal to it; such a
	// uid need not exist in /etc/passwd.
	UID, GID uint32
	Count    int
}

// enabled says whether jobs run as another user.
func (r *RunAs) enabled() bool { return r != nil }

// perJob says whether each job has a uid of its own.
func (r *RunAs) perJob() bool { return r != nil && r.Count > 0 }

func (r *RunAs) inRange(uid uint32) bool {
	return uid >= r.UID && uint64(uid) < uint64(r.UID)+uint64(r.Count)
}

// Entries of the data directory a job must still reach: the unpacked
// Python runtime (on PYTHONPATH), the requirements cache (its
// interpreter), the workspaces, and endpoint instances' model
// directories (endpoints/<ep>/models/, chowned to the instances' user)
// and sockets (runtime/<id>/).
var openDataEntries = map[string]fs.FileMode{"runtime": 0o755, "cache": 0o755, "jobs": 0o711, "endpoints": 0o711}

// RestrictDataDir closes dataDir to users other than its owner, for
// RunAs: the directory itself becomes 0711 (enterable, not listable),
// runtime/ and cache/ stay readable, jobs/ 0711, and every other entry
// (meta.db and its journal files, logs/, s3/, keys) loses its group and
// other permissions. SQLite creates its -wal and -shm files with the
// database's mode, so they stay closed too.
func RestrictDataDir(dataDir string) error {
	if err := os.Chmod(dataDir, 0o711); err != nil {
		return fmt.Errorf("restrict data dir: %w", err)
	}
	for name, mode := range openDataEntries {
		p := filepath.Join(dataDir, name)
		if err := os.MkdirAll(p, mode); err != nil {
			return fmt.Errorf("restrict data dir: %w", err)
		}
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("restrict data dir: %w", err)
		}
	}
	// The runtime is unpacked through a temporary directory (0700).
	err := filepath.WalkDir(filepath.Join(dataDir, "runtime"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.Type()&fs.ModeSymlink != 0 {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		add := fs.FileMode(0o044)
		if e.IsDir() {
			add = 0o055
		}
		return os.Chmod(p, info.Mode().Perm()|add)
	})
	if err != nil {
		return fmt.Errorf("restrict data dir: open the runtime to jobs: %w", err)
	}
	ents, err := os.ReadDir(dataDir)
	if err != nil {
		return fmt.Errorf("restrict data dir: %w", err)
	}
	for _, e := range ents {
		if _, open := openDataEntries[e.Name()]; open || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("restrict data dir: %w", err)
		}
		if err := os.Chmod(filepath.Join(dataDir, e.Name()), info.Mode().Perm()&0o700); err != nil {
			return fmt.Errorf("restrict data dir: %w", err)
		}
	}
	return nil
}

// allocUID picks the uid for a new attempt of job: the lowest in range
// owning no workspace under jobs/ (other than job's own, which Prepare
// is about to recreate). Called with d.uidMu held until the workspaces
// are chowned.
func (d *Driver) allocUID(job string) (uint32, error) {
	r := d.cfg.RunAs
	used := map[uint32]bool{}
	dirs, _ := filepath.Glob(filepath.Join(d.cfg.DataDir, "jobs", "*", "*"))
	for _, p := range dirs {
		if filepath.Base(filepath.Dir(p)) == job {
			continue
		}
		if info, err := os.Lstat(p); err == nil && info.IsDir() {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && r.inRange(st.Uid) {
				used[st.Uid] = true
			}
		}
	}
	for i := 0; i < r.Count; i++ {
		if uid := r.UID + uint32(i); !used[uid] {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("all %d uids of --run-as-uids are in use by jobs whose workspaces are on disk", r.Count)
}

// credential is the user job's processes run as (nil without RunAs): with
// a uid range, the owner of its first host's workspace, set by Prepare.
func (d *Driver) credential(job *driver.Job) (*syscall.Credential, error) {
	r := d.cfg.RunAs
	if !r.enabled() {
		return nil, nil
	}
	if !r.perJob() {
		return &syscall.Credential{Uid: r.UID, Gid: r.GID, Groups: []uint32{}}, nil
	}
	info, err := os.Lstat(job.Hosts[0].Workspace.Root)
	if err != nil {
		return nil, fmt.Errorf("find the job's uid: %w", err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || !r.inRange(st.Uid) {
		return nil, fmt.Errorf("workspace %s is not owned by a uid of --run-as-uids", job.Hosts[0].Workspace.Root)
	}
	return &syscall.Credential{Uid: st.Uid, Gid: st.Uid, Groups: []uint32{}}, nil
}

// handOver gives the job's uid its workspaces, once staged: every
// directory and file is chowned to it and each host's root made 0700, so
// no other uid can enter. Files with more than one link are left alone:
// those are object-store files hard-linked in as channel data, which the
// job may read (0644) but must not modify through the link. The state
// directory stays root's and 0700.
func (d *Driver) handOver(job *driver.Job, uid, gid uint32) error {
	if err := os.Chmod(d.jobDir(job.Name), 0o711); err != nil {
		return fmt.Errorf("hand the workspace over: %w", err)
	}
	if err := os.Chmod(job.StateDir, 0o700); err != nil {
		return fmt.Errorf("hand the workspace over: %w", err)
	}
	for _, h := range job.Hosts {
		root := h.Workspace.Root
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.Type().IsRegular() {
				info, err := e.Info()
				if err != nil {
					return err
				}
				if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
					return nil
				}
			}
			return os.Lchown(p, int(uid), int(gid))
		})
		if err == nil {
			err = os.Chmod(root, 0o700)
		}
		if err != nil {
			return fmt.Errorf("hand the workspace over to uid %d: %w", uid, err)
		}
	}
	return nil
}

// closeWorkspace makes a host's fresh workspace (and the job's
// directories) closed to other users while it is staged as root, with
// RunAs; handOver gives it to the job's uid afterwards.
func (d *Driver) closeWorkspace(job *driver.Job, root string) error {
	if !d.cfg.RunAs.enabled() {
		return nil
	}
	for _, c := range []struct {
		path string
		mode fs.FileMode
	}{{d.jobDir(job.Name), 0o711}, {root, 0o700}} {
		if err := os.Chmod(c.path, c.mode); err != nil {
			return fmt.Errorf("close the workspace: %w", err)
		}
	}
	if err := os.MkdirAll(job.StateDir, 0o700); err != nil {
		return fmt.Errorf("close the workspace: %w", err)
	}
	return os.Chmod(job.StateDir, 0o700)
}

// prepareRunAs chooses the job's uid and hands its staged workspaces
// over to it.
func (d *Driver) prepareRunAs(job *driver.Job) error {
	r := d.cfg.RunAs
	if !r.enabled() {
		return nil
	}
	if !r.perJob() {
		return d.handOver(job, r.UID, r.GID)
	}
	d.uidMu.Lock()
	defer d.uidMu.Unlock()
	uid, err := d.allocUID(job.Name)
	if err != nil {
		return err
	}
	return d.handOver(job, uid, uid)
}

// packageDir is where a package entry point's virtual environment goes:
// the state directory, or with RunAs a directory of the job's uid (pip
// and the package's setup run as that uid, and the job must read it).
func (d *Driver) packageDir(job *driver.Job, cred *syscall.Credential) (string, error) {
	if cred == nil {
		return filepath.Join(job.StateDir, "venv"), nil
	}
	dir := filepath.Join(d.jobDir(job.Name), "package")
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
		return "", err
	}
	return filepath.Join(dir, "venv"), nil
}
