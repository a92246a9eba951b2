package local

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sagebox/sagebox/internal/proc"
	"github.com/sagebox/sagebox/internal/statefile"
	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training/driver"
)

// fileHosts is the job's hosts file, at the job's state directory: the
// /etc/hosts its hosts see (toolkit.HostsFile), bind-mounted by each
// host's supervisor. It also records the job's loopback subnet.
const fileHosts = "hosts"

// systemHosts is the machine's hosts file, copied below the job's names.
const systemHosts = "/etc/hosts"

// names decides, once per job, how its host names resolve (see
// toolkit.Names): each host an address of its own where this machine lets
// the supervisor create mount namespaces; else nss_wrapper for multi-host
// jobs without a launcher (the only case it helps), else not at all.
func (d *Driver) names(job *driver.Job) (toolkit.Names, string) {
	if err := d.isolation(); err == nil {
		return toolkit.NamesOwnAddress, ""
	}
	if job.Spec.Dist == toolkit.DistNone && len(job.Hosts) > 1 {
		if nss := toolkit.FindNSSWrapper(); nss != "" {
			return toolkit.NamesNSSWrapper, nss
		}
	}
	return toolkit.NamesNone, ""
}

// isolation is whether host processes can get their own /etc/hosts and
// host name (proc.CheckIsolation), probed once; the first failure is
// logged once, saying what jobs get instead.
func (d *Driver) isolation() error {
	d.isoOnce.Do(func() {
		if d.cfg.NoHostIsolation {
			d.isoErr = errors.New("turned off in the configuration")
		} else {
			d.isoErr = proc.CheckIsolation()
		}
		if d.isoErr != nil {
			d.log.Warn("training hosts cannot have addresses and /etc/hosts of their own on this machine "+
				"(that needs root, for a mount namespace per host); multi-host jobs without a launcher resolve algo-N "+
				"through libnss-wrapper if installed (programs that bypass glibc's resolver, like torch's c10d store, "+
				"do not see the names), and torchrun and mpirun rendezvous on 127.0.0.1",
				"reason", d.isoErr)
		}
	})
	return d.isoErr
}

// hostsFile returns the path of job's hosts file, writing it on the first
// call: the job's names in a loopback /24 no other job on this machine
// has (chosen from the job's name, then the next free one), then the
// machine's own hosts file.
func (d *Driver) hostsFile(job *driver.Job) (string, error) {
	path := filepath.Join(job.StateDir, fileHosts)
	d.subnetMu.Lock()
	defer d.subnetMu.Unlock()
	if b, err := os.ReadFile(path); err == nil {
		if _, ok := toolkit.SubnetOfHostsFile(b); ok {
			return path, os.Chmod(path, 0o644) // (a crash may have come before the chmod below)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	taken := map[toolkit.Subnet]bool{}
	// Every job's state directory is <jobs>/<job>/<name>.
	jobs, name := filepath.Dir(filepath.Dir(job.StateDir)), filepath.Base(job.StateDir)
	others, _ := filepath.Glob(filepath.Join(jobs, "*", name, fileHosts))
	for _, p := range others {
		if b, err := os.ReadFile(p); err == nil {
			if n, ok := toolkit.SubnetOfHostsFile(b); ok {
				taken[n] = true
			}
		}
	}
	subnet, ok := freeSubnet(job.Name, taken)
	if !ok {
		return "", errors.New("every loopback subnet 127.1-254.x.0/24 is in use by another job")
	}
	system, err := os.ReadFile(systemHosts)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	b, err := toolkit.HostsFile(system, job.Spec.Hosts, subnet)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(job.StateDir, 0o755); err != nil {
		return "", err
	}
	if err := statefile.Write(path, b); err != nil {
		return "", fmt.Errorf("write hosts file: %w", err)
	}
	// Readable by every user, as /etc/hosts is (a job run as another
	// uid reads it through the bind mount, whatever the directory's mode).
	if err := os.Chmod(path, 0o644); err != nil {
		return "", fmt.Errorf("write hosts file: %w", err)
	}
	return path, nil
}

// freeSubnet is the first subnet not in taken, starting from one picked by
// the job's name: 127.a.b.0/24 with a in 1..254 (127.0.x.x is left to the
// machine: 127.0.0.1, Debian's 127.0.1.1).
func freeSubnet(job string, taken map[toolkit.Subnet]bool) (toolkit.Subnet, bool) {
	const n = 254 * 256
	h := fnv.New32a()
	h.Write([]byte(job))
	start := int(h.Sum32() % n)
	for i := range n {
		k := (start + i) % n
		s := toolkit.Subnet{byte(1 + k/256), byte(k % 256)}
		if !taken[s] {
			return s, true
		}
	}
	return toolkit.Subnet{}, false
}
