package toolkit

import (
	"os"
	"strings"
	"testing"
)

func TestNSSWrapperEnv(t *testing.T) {
	s, err := NewSpec(newTestJob("j", map[string]string{"sagemaker_program": `"train.py"`}, withHosts(2)), "")
	if err != nil {
		t.Fatal(err)
	}
	h := Host{Name: "algo-2", Index: 1, Workspace: Workspace{Root: "/w"}}
	env := s.Env(h, ConfigFiles{}, Platform{Base: []string{"LD_PRELOAD=libother.so"}})
	if env["MASTER_ADDR"] != "127.0.0.1" || env["NSS_WRAPPER_HOSTS"] != "" {
		t.Errorf("without names: %v", env)
	}
	env = s.Env(h, ConfigFiles{}, Platform{Base: []string{"LD_PRELOAD=libother.so"}, Names: NamesNSSWrapper, NSSWrapper: "/lib/libnss_wrapper.so", NSSHostsFile: "/h"})
	if env["LD_PRELOAD"] != "/lib/libnss_wrapper.so libother.so" || env["NSS_WRAPPER_HOSTS"] != "/h" || env["MASTER_ADDR"] != "algo-1" {
		t.Errorf("env = %v", env)
	}
	env = s.Env(h, ConfigFiles{}, Platform{Base: []string{"LD_PRELOAD=libother.so"}, Names: NamesOwnAddress})
	if env["LD_PRELOAD"] != "libother.so" || env["NSS_WRAPPER_HOSTS"] != "" || env["MASTER_ADDR"] != "algo-1" {
		t.Errorf("own addresses: env = %v", env)
	}
	dir := t.TempDir()
	p, err := WriteNSSHostsFile(dir, []string{"algo-1", "algo-2"})
	b, _ := os.ReadFile(p)
	if err != nil || !strings.Contains(string(b), "127.0.0.1 algo-2\n") {
		t.Errorf("hosts file %q, %v", b, err)
	}
}

func TestHostsFile(t *testing.T) {
	system := "127.0.0.1\tlocalhost\n::1 localhost ip6-localhost\n127.0.1.1 vm.example vm\n10.0.0.5 algo-2 # stale\n# a comment\n\n"
	n := Subnet{12, 34}
	b, err := HostsFile([]byte(system), []string{"algo-1", "algo-2", "algo-3"}, n)
	if err != nil {
		t.Fatal(err)
	}
	want := hostsFileHeader + "127.12.34.1\talgo-1\n127.12.34.2\talgo-2\n127.12.34.3\talgo-3\n" +
		"127.0.0.1\tlocalhost\n::1 localhost ip6-localhost\n127.0.1.1 vm.example vm\n# a comment\n\n"
	if string(b) != want {
		t.Errorf("hosts file:\n%s\nwant:\n%s", b, want)
	}
	if got, ok := SubnetOfHostsFile(b); !ok || got != n {
		t.Errorf("subnet read back: %v %v", got, ok)
	}
	if _, ok := SubnetOfHostsFile([]byte(system)); ok {
		t.Error("a subnet read from a file sagebox did not write")
	}
	if n.String() != "127.12.34.0/24" || n.HostAddress(253) != "127.12.34.254" {
		t.Errorf("%s %s", n, n.HostAddress(253))
	}
	many := make([]string, MaxHosts+1)
	if _, err := HostsFile(nil, many, n); err == nil || !strings.Contains(reasonText(err), "at most 254 hosts") {
		t.Errorf("err = %v", err)
	}
}

func TestUnresolvedHost(t *testing.T) {
	line := "W20261203 14:20:11.735620 22173 socket.cpp:601] [c10d] The IPv6 network addresses of (algo-9, 7791) cannot be retrieved (gai error: -2 - Name or service not known)."
	if got := UnresolvedHost(line); got != "algo-9" {
		t.Errorf("UnresolvedHost = %q", got)
	}
	// EAI_AGAIN (-3) is a transient failure: torch is right to retry it.
	if got := UnresolvedHost(strings.Replace(line, "-2 - Name or service not known", "-3 - Temporary failure in name resolution", 1)); got != "" {
		t.Errorf("a temporary failure counted: %q", got)
	}
	nss := "W20261203 14:43:35.611163 12109 socket.cpp:601] [c10d] The IPv6 network addresses of (algo-1, 7797) cannot be retrieved (gai error: -9 - Address family for hostname not supported)."
	if got := UnresolvedHost(nss); got != "algo-1" {
		t.Errorf("UnresolvedHost(nss_wrapper's) = %q", got)
	}
	// Three in a row for the same name make it a failure.
	var c ErrorCapture
	for i, l := range []string{line, nss, line, "other", line} {
		c.Add("[default0]:"+l, "/code")
		if i < 4 && c.Unresolved != "" {
			t.Fatalf("after %d lines: %q", i+1, c.Unresolved)
		}
	}
	c.Add(line, "/code")
	if c.Unresolved != "algo-9" {
		t.Errorf("capture: %q", c.Unresolved)
	}
	hosts := []string{"algo-1", "algo-2"}
	if r := UnresolvedHostError("algo-9", hosts); !strings.Contains(r, `"algo-9"`) || !strings.Contains(r, "this job's hosts are algo-1, algo-2 (SM_HOSTS), its master is MASTER_ADDR=algo-1") {
		t.Errorf("reason: %s", r)
	}
	if r := UnresolvedHostError("algo-1", hosts); !strings.Contains(r, "libnss-wrapper") || !strings.Contains(r, "run sagebox as root") {
		t.Errorf("reason for a job host: %s", r)
	}
}
