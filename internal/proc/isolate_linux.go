package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// etcHosts is the file a command's own hosts file is bind-mounted over.
const etcHosts = "/etc/hosts"

// isolate gives the commands this thread will fork a mount namespace of
// their own, with hostsFile bind-mounted over /etc/hosts, and with
// hostname a UTS namespace whose host name is hostname. The rest of the
// machine is untouched: the mounts are private to the new namespace, which
// still receives the machine's later mounts (rslave).
//
// Namespaces are per thread: the calling goroutine is locked to its thread
// for good, so that the command, forked from it, inherits them, and the
// thread dies with the goroutine instead of going back to the pool.
func isolate(hostsFile, hostname string) error {
	runtime.LockOSThread()
	var flags int
	if hostsFile != "" {
		flags |= unix.CLONE_NEWNS
	}
	if hostname != "" {
		flags |= unix.CLONE_NEWUTS
	}
	if flags == 0 {
		return nil
	}
	if err := unix.Unshare(flags); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if hostsFile != "" {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			return fmt.Errorf("make / a slave mount: %w", err)
		}
		if err := unix.Mount(hostsFile, etcHosts, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mount %s over %s: %w", hostsFile, etcHosts, err)
		}
		// Read-only, so a script cannot edit the job's file through it;
		// best effort (the bind alone is what resolution needs).
		_ = unix.Mount("", etcHosts, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, "")
	}
	if hostname != "" {
		if err := unix.Sethostname([]byte(hostname)); err != nil {
			return fmt.Errorf("sethostname %q: %w", hostname, err)
		}
	}
	return nil
}

// CheckIsolation reports whether this process can give a command its own
// /etc/hosts and host name (Spec.HostsFile, Spec.Hostname): root, or the
// capabilities for unshare, mount and sethostname, and a regular
// /etc/hosts to mount over. It tries for real, on a thread that is thrown
// away afterwards; nothing outside that thread changes.
func CheckIsolation() error {
	if st, err := os.Stat(etcHosts); err != nil {
		return err
	} else if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", etcHosts)
	}
	f, err := os.CreateTemp("", "sagebox-hosts-probe-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	want := []byte("127.0.0.1 sagebox-probe\n")
	_, err = f.Write(want)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		// Returns without unlocking: the thread, in its own namespaces,
		// exits with the goroutine.
		if err := isolate(f.Name(), "sagebox-probe"); err != nil {
			done <- err
			return
		}
		got, err := os.ReadFile(etcHosts)
		switch {
		case err != nil:
			done <- err
		case !bytes.Equal(got, want):
			done <- errors.New("the bind mount over " + etcHosts + " did not take effect")
		default:
			done <- nil
		}
	}()
	return <-done
}
