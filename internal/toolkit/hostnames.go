package toolkit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The simulated hosts algo-1..N all live on this machine. SageMaker scripts
// know them by name (SM_HOSTS, SM_CURRENT_HOST, MASTER_ADDR=algo-1) and
// connect to those names, so the names must resolve, in every program a
// job starts. Names says how.
//
// NamesOwnAddress (the default where the server may create mount
// namespaces, i.e. as root): each job gets a /24 of loopback addresses,
// 127.<a>.<b>.0/24 (Linux routes all of 127.0.0.0/8 to lo, so nothing is
// configured), and host i the address 127.<a>.<b>.<i+1>. Each host's
// process runs in a mount namespace of its own where the job's hosts file
// (HostsFile) is bind-mounted over /etc/hosts, and in a UTS namespace whose
// host name is the host's name, as in SageMaker's containers. The ordinary
// resolver reads /etc/hosts, so Python's socket module, torch's c10d
// store, Gloo, Open MPI and a shell all see the same names; listening on
// one's own host name binds one's own address.
//
// NamesNSSWrapper (the fallback elsewhere): Debian's libnss-wrapper through
// LD_PRELOAD with a hosts file mapping every name to 127.0.0.1. Programs
// that do not resolve through glibc's NSS (torch 1.13's c10d store server
// cannot even bind under it) do not see the names, so it is used only for
// multi-host jobs without a launcher, and torchrun and mpirun rendezvous on
// 127.0.0.1.
//
// NamesNone: the names do not resolve, and MASTER_ADDR is 127.0.0.1.
type Names uint8

// The ways host names resolve.
const (
	NamesNone Names = iota
	NamesNSSWrapper
	NamesOwnAddress
)

// MaxHosts is the most hosts a job's /24 has addresses for.
const MaxHosts = 254

// Subnet is a job's loopback /24: 127.<Subnet[0]>.<Subnet[1]>.0/24.
type Subnet [2]byte

// HostAddress is the address of the host at index i (0-based).
func (n Subnet) HostAddress(i int) string {
	return fmt.Sprintf("127.%d.%d.%d", n[0], n[1], i+1)
}

// String is the subnet in CIDR notation.
func (n Subnet) String() string { return fmt.Sprintf("127.%d.%d.0/24", n[0], n[1]) }

// ParseSubnet is the subnet of a loopback address 127.a.b.c.
func ParseSubnet(addr string) (Subnet, bool) {
	p := strings.Split(addr, ".")
	if len(p) != 4 || p[0] != "127" {
		return Subnet{}, false
	}
	var n Subnet
	for i := range 2 {
		v, err := strconv.ParseUint(p[i+1], 10, 8)
		if err != nil {
			return Subnet{}, false
		}
		n[i] = byte(v)
	}
	return n, true
}

// hostsFileHeader starts every job's hosts file; SubnetOfHostsFile reads
// the first entry after it.
const hostsFileHeader = "# sagebox: this training job's hosts, each with its own loopback address; the machine's /etc/hosts follows\n"

// HostsFile is the /etc/hosts a job's hosts see: every host name with its
// address in subnet, then the machine's own /etc/hosts (system: localhost,
// the machine's host name and whatever else it lists) without the lines
// that name one of the job's hosts.
func HostsFile(system []byte, hosts []string, subnet Subnet) ([]byte, error) {
	if len(hosts) > MaxHosts {
		return nil, ClientErrorf("a job on this machine can have at most %d hosts; it asks for %d", MaxHosts, len(hosts))
	}
	mine := map[string]bool{}
	var b bytes.Buffer
	b.WriteString(hostsFileHeader)
	for i, h := range hosts {
		mine[h] = true
		fmt.Fprintf(&b, "%s\t%s\n", subnet.HostAddress(i), h)
	}
	sc := bufio.NewScanner(bytes.NewReader(system))
	for sc.Scan() {
		line := sc.Text()
		entry, _, _ := strings.Cut(line, "#")
		f := strings.Fields(entry)
		clash := false
		for _, name := range f[min(1, len(f)):] {
			clash = clash || mine[name]
		}
		if !clash {
			b.WriteString(line + "\n")
		}
	}
	return b.Bytes(), nil
}

// SubnetOfHostsFile reads the subnet back from a file HostsFile wrote.
func SubnetOfHostsFile(b []byte) (Subnet, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(hostsFileHeader))
	if !ok {
		return Subnet{}, false
	}
	addr, _, _ := bytes.Cut(rest, []byte("\t"))
	return ParseSubnet(string(addr))
}

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

// WriteNSSHostsFile writes nss_wrapper's hosts file, mapping every host
// name to 127.0.0.1, and returns its path.
func WriteNSSHostsFile(dir string, hosts []string) (string, error) {
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

// preloadNSSWrapper puts nss_wrapper with hostsFile into env.
func preloadNSSWrapper(env map[string]string, nssWrapper, hostsFile string) {
	if pre := env["LD_PRELOAD"]; pre != "" {
		env["LD_PRELOAD"] = nssWrapper + " " + pre
	} else {
		env["LD_PRELOAD"] = nssWrapper
	}
	env["NSS_WRAPPER_HOSTS"] = hostsFile
}

// MasterAddr is the master's address as launchers and scripts get it:
// its name (algo-1) where names resolve, else 127.0.0.1.
func (s *Spec) MasterAddr(names Names) string {
	if names == NamesNone || len(s.Hosts) == 0 {
		return "127.0.0.1"
	}
	return s.Hosts[0]
}
