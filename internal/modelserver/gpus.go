package modelserver

import (
	"context"

	"github.com/sagebox/sagebox/internal/gpu"
)

// CountGPUs returns the number of GPUs workers can use: internal/gpu's view
// of the machine (nvidia-smi's GPUs, narrowed by the CUDA_VISIBLE_DEVICES
// that lookup returns; lookup is os.LookupEnv or one like it). It returns 0
// when nvidia-smi is missing or fails. Workers are pinned to gpu_id
// i % CountGPUs, an index into that view, which is what CUDA numbers the
// visible devices in the worker.
func CountGPUs(ctx context.Context, lookup func(string) (string, bool)) int {
	devs, _ := gpu.Discover(ctx, gpu.NvidiaSMI, lookup)
	return len(devs)
}
