package gpu

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

const smi = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa-0000)\n" +
	"  MIG 1g.10gb      Device  0: (UUID: MIG-1111)\n" +
	"GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb-1111)\n" +
	"GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-bbcc-2222)\n" +
	"GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-dddd-3333)\n"

func fakeDevices(n int) []Device {
	devs := ParseList([]byte(smi))
	return devs[:n]
}

func TestParseList(t *testing.T) {
	devs := ParseList([]byte(smi))
	if len(devs) != 4 {
		t.Fatalf("parsed %d GPUs, want 4 (MIG lines are not GPUs): %+v", len(devs), devs)
	}
	want := Device{Index: 1, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-bbbb-1111"}
	if devs[1] != want {
		t.Errorf("devs[1] = %+v, want %+v", devs[1], want)
	}
	old := ParseList([]byte("GPU 0: Tesla K80\n"))
	if len(old) != 1 || old[0].UUID != "" || old[0].Name != "Tesla K80" || old[0].ID() != "0" {
		t.Errorf("a line without UUID: %+v", old)
	}
}

func TestVisible(t *testing.T) {
	tests := []struct {
		n    int
		cvd  string
		want string // indices, comma-separated
	}{
		{0, "unset", ""},
		{4, "unset", "0,1,2,3"},
		{4, "", ""},
		{4, " ", ""},
		{4, "0,2", "0,2"},
		{4, "2,0", "2,0"},
		{4, "1", "1"},
		{4, "-1", ""},
		{4, "0,-1,2", "0"},
		{2, "0,1,2,3", "0,1"},
		{4, "GPU-dddd-3333,GPU-aaaa", "3,0"},
		{4, "GPU-bb", ""}, // ambiguous prefix
		{4, "GPU-bbc, 1", "2,1"},
		{4, "1,1,3", "1,3"},
		{4, "NoDevFiles", ""},
		{4, "MIG-1111", ""},
	}
	for _, tt := range tests {
		t.Run(tt.cvd, func(t *testing.T) {
			cvd, set := tt.cvd, tt.cvd != "unset"
			if !set {
				cvd = ""
			}
			var got []string
			for _, d := range Visible(fakeDevices(tt.n), cvd, set) {
				got = append(got, strconv.Itoa(d.Index))
			}
			if s := strings.Join(got, ","); s != tt.want {
				t.Fatalf("Visible(%d GPUs, %q) = %q, want %q", tt.n, tt.cvd, s, tt.want)
			}
		})
	}
}

func TestDiscover(t *testing.T) {
	list := func(context.Context) ([]Device, error) { return fakeDevices(4), nil }
	env := func(k string) (string, bool) {
		if k == "CUDA_VISIBLE_DEVICES" {
			return "3,1", true
		}
		return "", false
	}
	devs, err := Discover(context.Background(), list, env)
	if err != nil || len(devs) != 2 || devs[0].Index != 3 || devs[1].Index != 1 {
		t.Fatalf("Discover = %+v, %v", devs, err)
	}
	broken := func(context.Context) ([]Device, error) { return nil, errors.New("no nvidia-smi") }
	if devs, err := Discover(context.Background(), broken, env); err == nil || devs != nil {
		t.Fatalf("Discover with a failing list = %+v, %v", devs, err)
	}
}

func newTestAllocator(t *testing.T, n int) (*Allocator, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	return NewAllocator(fakeDevices(n), slog.New(slog.NewTextHandler(&log, nil))), &log
}

func TestReserveSpreadsOwners(t *testing.T) {
	a, log := newTestAllocator(t, 4)
	j1 := a.ReserveFree("job1", 1, 1)
	if !slices.Equal(j1, []string{"GPU-aaaa-0000", "GPU-bbbb-1111", "GPU-bbcc-2222", "GPU-dddd-3333"}) {
		t.Fatalf("a job alone gets every free GPU: %v", j1)
	}
	a.Release("job1")
	i1 := a.Reserve("ep/instance-1", 1)
	i2 := a.Reserve("ep/instance-2", 1)
	if !slices.Equal(i1, []string{"GPU-aaaa-0000"}) || !slices.Equal(i2, []string{"GPU-bbbb-1111"}) {
		t.Fatalf("two instances: %v %v; want GPU 0 then GPU 1", i1, i2)
	}
	j2 := a.ReserveFree("job2", 2, 2)
	if !slices.Equal(j2, []string{"GPU-bbcc-2222", "GPU-dddd-3333"}) {
		t.Fatalf("a 2-host job gets the two free GPUs: %v", j2)
	}
	if strings.Contains(log.String(), "shar") {
		t.Fatalf("nothing was shared yet, but the log says so:\n%s", log)
	}
	// All held: the next one shares the least-loaded GPU and says so.
	a.Release("ep/instance-2")
	j3 := a.ReserveFree("job3", 1, 1)
	if !slices.Equal(j3, []string{"GPU-bbbb-1111"}) {
		t.Fatalf("job3 = %v, want the freed GPU 1", j3)
	}
	j4 := a.ReserveFree("job4", 1, 1)
	if len(j4) != 1 || !strings.Contains(log.String(), "sharing the least-loaded") {
		t.Fatalf("job4 = %v; log:\n%s", j4, log)
	}
	j5 := a.Reserve("job5", 1)
	if slices.Equal(j5, j4) {
		t.Fatalf("job5 shares %v with job4 although other GPUs have one holder", j5)
	}
}

func TestReserveFreeRoundsToHosts(t *testing.T) {
	a, _ := newTestAllocator(t, 4)
	a.Reserve("other", 1)
	got := a.ReserveFree("job", 2, 2) // 3 free: 2 hosts get one each, one stays free
	if len(got) != 2 {
		t.Fatalf("ReserveFree(2 hosts) with 3 free = %v, want 2", got)
	}
	if left := a.ReserveFree("next", 1, 1); len(left) != 1 || slices.Contains(got, left[0]) || slices.Contains(a.Held("other"), left[0]) {
		t.Fatalf("the left-over free GPU = %v", left)
	}
}

func TestMoreThanTheMachineHas(t *testing.T) {
	a, log := newTestAllocator(t, 2)
	got := a.ReserveFree("job", 3, 3)
	if len(got) != 2 || !strings.Contains(log.String(), "more GPUs asked for") {
		t.Fatalf("3 hosts on 2 GPUs: %v; log:\n%s", got, log)
	}
	none, _ := newTestAllocator(t, 0)
	if got := none.ReserveFree("job", 1, 1); got != nil {
		t.Fatalf("no GPUs: %v", got)
	}
}

func TestClaimAfterRestart(t *testing.T) {
	a, log := newTestAllocator(t, 4)
	had := []string{"GPU-dddd-3333", "GPU-bbbb-1111", "GPU-gone"}
	got := a.Claim("job", had)
	if !slices.Equal(got, []string{"GPU-bbbb-1111", "GPU-dddd-3333"}) || !strings.Contains(log.String(), "GPU-gone") {
		t.Fatalf("Claim = %v; log:\n%s", got, log)
	}
	// A new owner now spreads around what the recovered job holds.
	if n := a.Reserve("new", 2); !slices.Equal(n, []string{"GPU-aaaa-0000", "GPU-bbcc-2222"}) {
		t.Fatalf("after Claim, a new owner got %v", n)
	}
	// Claim replaces, and Release frees.
	a.Claim("job", []string{"GPU-aaaa-0000"})
	a.Release("new")
	a.Release("job")
	if free := a.ReserveFree("all", 0, 1); len(free) != 4 {
		t.Fatalf("after Release, free = %v", free)
	}
}

func TestAllocatorConcurrent(t *testing.T) {
	a, _ := newTestAllocator(t, 4)
	var wg sync.WaitGroup
	got := make([][]string, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = a.Reserve(strconv.Itoa(i), 1)
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, g := range got {
		if len(g) != 1 || seen[g[0]] {
			t.Fatalf("four concurrent owners on four GPUs: %v", got)
		}
		seen[g[0]] = true
	}
}

// On a machine with nvidia-smi, the real listing parses into GPUs with
// UUIDs, and CUDA_VISIBLE_DEVICES narrows it. Elsewhere it skips: nothing
// else in sagebox needs a GPU.
func TestNvidiaSMIOnThisMachine(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("no nvidia-smi on this machine")
	}
	devs, err := NvidiaSMI(context.Background())
	if err != nil {
		t.Skipf("nvidia-smi is installed but fails (no driver?): %v", err)
	}
	if len(devs) == 0 || devs[0].UUID == "" || !strings.HasPrefix(devs[0].UUID, "GPU-") {
		t.Fatalf("nvidia-smi --list-gpus parsed as %+v", devs)
	}
	first := func(k string) (string, bool) { return devs[0].UUID, k == "CUDA_VISIBLE_DEVICES" }
	if got, _ := Discover(context.Background(), NvidiaSMI, first); len(got) != 1 || got[0] != devs[0] {
		t.Fatalf("CUDA_VISIBLE_DEVICES=%s: %+v", devs[0].UUID, got)
	}
}

// NvidiaSMI runs the nvidia-smi it finds on PATH (a fake one here) with
// --list-gpus, and a failing one means no GPUs and an error.
func TestNvidiaSMIRunsTheTool(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\n[ \"$1\" = --list-gpus ] || exit 3\ncat <<'END'\n" + smi + "END\n"
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	devs, err := NvidiaSMI(context.Background())
	if err != nil || len(devs) != 4 || devs[3].UUID != "GPU-dddd-3333" {
		t.Fatalf("NvidiaSMI = %+v, %v", devs, err)
	}
	os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n"), 0o755)
	if devs, err := NvidiaSMI(context.Background()); err == nil || devs != nil {
		t.Fatalf("a failing nvidia-smi: %+v, %v", devs, err)
	}
}
