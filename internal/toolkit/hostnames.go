package toolkit

import (
	"os"
	"path/filepath"
	"strings"
)

// The simulated hosts algo-1..N all live on this machine. SageMaker scripts
// know them by name (SM_HOSTS, SM_CURRENT_HOST, MASTER_ADDR=algo-1) and some
// connect to those names, so the names must resolve. Editing /etc/hosts
// would change the whole machine; instead, when Debian's libnss-wrapper is
// installed, each job's processes get it through LD_PRELOAD with a hosts
// file of their own (NSS_WRAPPER_HOSTS) that maps every algo-N to loopback.
// Other names still resolve through the system's normal lookup.
//
// This is done for multi-host jobs without a distribution launcher, the
// case where scripts connect to each other themselves: torchrun and mpirun
// rendezvous on 127.0.0.1, and torch 1.13's c10d store server cannot bind
// under nss_wrapper. Without nss_wrapper the names do not resolve, and
// MASTER_ADDR falls back to 127.0.0.1.

// nssWrapperCandidates are where Debian and other distributions put the library.
var nssWrapperCandidates = []string{
	"/usr/lib/x86_64-linux-gnu/libnss_wrapper.so",
	"/usr/lib/aarch64-linux-gnu/libnss_wrapper.so",
	"/usr/lib64/libnss_wrapper.so",
	"/usr/lib/libnss_wrapper.so",
}

// FindNSSWrapper returns the path of libnss_wrapper.so, or "" when absent.
func FindNSSWrapper() string {
	for _, p := range nssWrapperCandidates {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// WriteHostsFile writes a hosts file mapping every host name to loopback
// and returns its path.
func WriteHostsFile(dir string, hosts []string) (string, error) {
	// nss_wrapper's parser takes no comment lines.
	var b strings.Builder
	for _, h := range hosts {
		b.WriteString("127.0.0.1 " + h + "\n")
	}
	p := filepath.Join(dir, "hosts")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return p, nil
}

// resolveHostNames makes the job's host names resolvable in env (see the
// comment at the top of this file) and reports whether it could.
func resolveHostNames(env map[string]string, nssWrapper, hostsFile string) bool {
	if nssWrapper == "" || hostsFile == "" {
		return false
	}
	if pre := env["LD_PRELOAD"]; pre != "" {
		env["LD_PRELOAD"] = nssWrapper + " " + pre
	} else {
		env["LD_PRELOAD"] = nssWrapper
	}
	env["NSS_WRAPPER_HOSTS"] = hostsFile
	return true
}
