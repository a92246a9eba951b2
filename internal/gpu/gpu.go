// Package gpu is the machine's one view of its GPUs and the allocator that
// hands them out to training jobs and model-server instances, so that
// concurrent work spreads over the GPUs instead of all starting on GPU 0.
//
// The view is what `nvidia-smi --list-gpus` lists, narrowed and ordered by
// the server's own CUDA_VISIBLE_DEVICES, as CUDA itself would narrow it.
// Discovery is a function (NvidiaSMI in production, a fixed list in
// tests), so nothing here needs a GPU.
package gpu

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Device is one GPU as nvidia-smi lists it.
type Device struct {
	// Index is nvidia-smi's index (PCI bus order).
	Index int
	// Name is the model, such as "NVIDIA H100 80GB HBM3".
	Name string
	// UUID is "GPU-..."; empty when nvidia-smi did not print one.
	UUID string
}

// ID is how children name the device in CUDA_VISIBLE_DEVICES: its UUID,
// which means the same GPU whatever CUDA_DEVICE_ORDER a child runs with,
// or its index when the UUID is unknown.
func (d Device) ID() string {
	if d.UUID != "" {
		return d.UUID
	}
	return strconv.Itoa(d.Index)
}

// Lister lists the machine's GPUs.
type Lister func(ctx context.Context) ([]Device, error)

// NvidiaSMI lists the GPUs with `nvidia-smi --list-gpus`. A machine without
// nvidia-smi (or where it fails) has none: the error says why.
func NvidiaSMI(ctx context.Context) ([]Device, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "--list-gpus").Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi --list-gpus: %w", err)
	}
	return ParseList(out), nil
}

var gpuLine = regexp.MustCompile(`^GPU (\d+): (.*?)\s*(?:\(UUID: ([^)]+)\))?\s*$`)

// ParseList reads nvidia-smi --list-gpus output: one "GPU N: NAME (UUID:
// GPU-...)" line per GPU. MIG devices, listed indented under their GPU, are
// not GPUs of their own here.
func ParseList(out []byte) []Device {
	var devs []Device
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := gpuLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		i, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		devs = append(devs, Device{Index: i, Name: m[2], UUID: strings.TrimSpace(m[3])})
	}
	return devs
}

// Visible narrows installed to what CUDA_VISIBLE_DEVICES (cvd, when set)
// lets a process use, in its order. Unset means all. Entries are indices
// (nvidia-smi's, that is PCI bus order, as with CUDA_DEVICE_ORDER=PCI_BUS_ID)
// or GPU UUIDs ("GPU-8a1b..."; a unique prefix is enough). As in CUDA, the
// list ends at the first entry that names no GPU ("-1", "NoDevFiles", an
// index or UUID that does not exist), so set but empty hides every GPU. A
// GPU named twice counts once.
func Visible(installed []Device, cvd string, set bool) []Device {
	if !set {
		return append([]Device(nil), installed...)
	}
	var out []Device
	seen := map[int]bool{}
	for _, e := range strings.Split(cvd, ",") {
		i, ok := lookupEntry(installed, strings.TrimSpace(e))
		if !ok {
			break
		}
		if seen[i] {
			continue
		}
		seen[i] = true
		out = append(out, installed[i])
	}
	return out
}

// lookupEntry finds the position in installed of one CUDA_VISIBLE_DEVICES
// entry.
func lookupEntry(installed []Device, e string) (int, bool) {
	if e == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(e); err == nil {
		for i, d := range installed {
			if d.Index == n && n >= 0 {
				return i, true
			}
		}
		return 0, false
	}
	if !strings.HasPrefix(strings.ToUpper(e), "GPU-") {
		return 0, false // NoDevFiles, MIG-..., garbage
	}
	found := -1
	for i, d := range installed {
		if d.UUID != "" && strings.HasPrefix(strings.ToLower(d.UUID), strings.ToLower(e)) {
			if found >= 0 {
				return 0, false // ambiguous prefix
			}
			found = i
		}
	}
	return found, found >= 0
}

// Discover is the view of this process: list's GPUs narrowed by the
// CUDA_VISIBLE_DEVICES that lookup (os.LookupEnv or one like it) returns.
// A failing list means no GPUs; the error is returned for logging.
func Discover(ctx context.Context, list Lister, lookup func(string) (string, bool)) ([]Device, error) {
	installed, err := list(ctx)
	if err != nil {
		return nil, err
	}
	cvd, set := lookup("CUDA_VISIBLE_DEVICES")
	return Visible(installed, cvd, set), nil
}
