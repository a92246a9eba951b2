package local

import (
	"fmt"
	"testing"
)

func TestGPUShare(t *testing.T) {
	ids := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("GPU-%d", i))
		}
		return out
	}
	tests := []struct {
		gpus, host, n, count int
		visible              string
	}{
		{0, 0, 2, 0, ""},
		{8, 0, 1, 8, "GPU-0,GPU-1,GPU-2,GPU-3,GPU-4,GPU-5,GPU-6,GPU-7"},
		{8, 1, 2, 4, "GPU-4,GPU-5,GPU-6,GPU-7"},
		{1, 1, 2, 1, "GPU-0"},
		{3, 1, 2, 1, "GPU-1"},
		{2, 2, 3, 1, "GPU-0"},
	}
	for _, tt := range tests {
		c, v := gpuShare(ids(tt.gpus), tt.host, tt.n)
		if c != tt.count || v != tt.visible {
			t.Errorf("gpuShare(%d GPUs, host %d of %d) = %d %q, want %d %q", tt.gpus, tt.host, tt.n, c, v, tt.count, tt.visible)
		}
	}
}
