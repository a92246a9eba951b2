package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sagebox/sagebox/internal/toolkit"
	"github.com/sagebox/sagebox/internal/training/driver"
)

// Each job's hosts file holds a /24 no other job's file holds, the same
// one on every call for the same job (a restart reads it back), and the
// machine's entries after the job's.
func TestHostsFilePerJob(t *testing.T) {
	data := t.TempDir()
	d := New(Config{DataDir: data})
	job := func(name string, n int) *driver.Job {
		hosts := make([]string, n)
		for i := range hosts {
			hosts[i] = "algo-" + string(rune('1'+i))
		}
		return &driver.Job{Name: name, Spec: &toolkit.Spec{Hosts: hosts}, StateDir: filepath.Join(data, "jobs", name, ".sagebox")}
	}
	subnet := func(p string) toolkit.Subnet {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := toolkit.SubnetOfHostsFile(b)
		if !ok {
			t.Fatalf("%s has no subnet:\n%s", p, b)
		}
		return n
	}
	a := job("a", 2)
	pa, err := d.hostsFile(a)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(pa); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("hosts file mode: %v %v", st.Mode(), err)
	}
	b, _ := os.ReadFile(pa)
	na := subnet(pa)
	if !strings.Contains(string(b), na.HostAddress(1)+"\talgo-2\n") || !strings.Contains(string(b), "localhost") {
		t.Errorf("hosts file:\n%s", b)
	}
	// A new driver (a restarted server) finds the same file.
	if p, err := New(Config{DataDir: data}).hostsFile(a); err != nil || p != pa || subnet(p) != na {
		t.Errorf("again: %s %v %v", p, err, subnet(p))
	}
	// A job whose name hashes to a's subnet gets the next one.
	if got, _ := freeSubnet("a", map[toolkit.Subnet]bool{na: true}); got == na {
		t.Errorf("freeSubnet gave a taken subnet %s", got)
	}
	seen := map[toolkit.Subnet]string{na: "a"}
	for _, name := range []string{"b", "c", "d"} {
		p, err := d.hostsFile(job(name, 3))
		if err != nil {
			t.Fatal(err)
		}
		n := subnet(p)
		if other, dup := seen[n]; dup || n[0] == 0 {
			t.Errorf("job %s got %s (also %s's)", name, n, other)
		}
		seen[n] = name
	}
}

func TestPorts(t *testing.T) {
	p := NewPorts()
	a := p.Claim("a")
	if p.Claim("a") != a {
		t.Error("a job's port changed")
	}
	b := p.Claim("b")
	if b == a {
		t.Errorf("two jobs got port %d", a)
	}
	p.Release("a")
	if c := p.Claim("c"); c == b {
		t.Errorf("c got b's port %d", b)
	}
}
