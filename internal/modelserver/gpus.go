package modelserver

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"strings"
	"time"
)

// CountGPUs returns the number of GPUs workers can use: the GPUs that
// `nvidia-smi -L` lists, limited to those CUDA_VISIBLE_DEVICES names when it
// is set (lookup is os.LookupEnv or one like it). It returns 0 when
// nvidia-smi is missing or fails.
func CountGPUs(ctx context.Context, lookup func(string) (string, bool)) int {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "-L").Output()
	if err != nil {
		return 0
	}
	cvd, set := lookup("CUDA_VISIBLE_DEVICES")
	return visibleGPUs(countGPULines(out), cvd, set)
}

// countGPULines counts the "GPU n: ..." lines of nvidia-smi -L (MIG devices
// are listed indented under their GPU and are not counted).
func countGPULines(out []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "GPU ") {
			n++
		}
	}
	return n
}

// visibleGPUs applies CUDA_VISIBLE_DEVICES to the number of installed GPUs.
// CUDA stops at the first invalid entry, and "-1" or "" (set, but empty)
// hide everything; unset means all.
func visibleGPUs(installed int, cvd string, set bool) int {
	if !set {
		return installed
	}
	cvd = strings.TrimSpace(cvd)
	n := 0
	for _, e := range strings.Split(cvd, ",") {
		e = strings.TrimSpace(e)
		if e == "" || strings.HasPrefix(e, "-") || strings.EqualFold(e, "NoDevFiles") {
			break
		}
		n++
	}
	return min(n, installed)
}
