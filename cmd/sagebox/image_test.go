package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakePython is an executable that answers the torch probe with out.
func fakePython(t *testing.T, out string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho '"+out+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTrainingImageLikeTheSDK: the CLI names a DLC-shaped image whose
// framework and py versions the SDK can parse back and look an inference
// image up with.
func TestTrainingImageLikeTheSDK(t *testing.T) {
	cases := []struct {
		name, probe, fw, py, want string
	}{
		{"debian torch: version trimmed, AWS's py for 1.13", "1.13.0a0 311", "", "", "pytorch-training:1.13-cpu-py39"},
		{"pip torch with local suffix", "2.3.1+cpu 311", "", "", "pytorch-training:2.3-cpu-py311"},
		{"torch sagebox has no table entry for: local python", "2.9.1 313", "", "", "pytorch-training:2.9-cpu-py313"},
		{"flags win", "1.13.0a0 311", "2.1.0", "py310", "pytorch-training:2.1-cpu-py310"},
		{"py flag without the prefix", "1.13.0a0 311", "", "3.11", "pytorch-training:1.13-cpu-py311"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			py := fakePython(t, c.probe)
			e := &env{getenv: func(k string) string {
				if k == "SAGEBOX_PYTHON" {
					return py
				}
				return ""
			}}
			got, err := resolveTrainingImage(context.Background(), e, "eu-west-1", c.fw, c.py)
			if err != nil {
				t.Fatal(err)
			}
			if want := "763104351884.dkr.ecr.eu-west-1.amazonaws.com/" + c.want; got != want {
				t.Errorf("image = %s, want %s", got, want)
			}
		})
	}
	e := &env{getenv: func(k string) string {
		if k == "SAGEBOX_PYTHON" {
			return fakePython(t, "- 311")
		}
		return ""
	}}
	if _, err := resolveTrainingImage(context.Background(), e, "us-east-1", "", ""); err == nil || !strings.Contains(err.Error(), "--framework-version") {
		t.Errorf("no torch anywhere: err = %v, want advice to pass --framework-version", err)
	}
}

// TestLocalFrameworkReadsTheRealInterpreter runs the probe on Debian's
// python3 with torch.
func TestLocalFrameworkReadsTheRealInterpreter(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import importlib.util as u; assert u.find_spec('torch')").Run(); err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatalf("torch is required (SAGEBOX_STRICT_TOOLS=1): %v", err)
		}
		t.Skip("no torch for /usr/bin/python3")
	}
	torch, py, err := localFramework(context.Background(), func(k string) string {
		if k == "SAGEBOX_PYTHON" {
			return "/usr/bin/python3"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/usr/bin/python3", "-c", "import sys, torch; print(torch.__version__, 'py%d%d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := torch+" "+py, strings.TrimSpace(string(out)); got != want {
		t.Errorf("localFramework = %q, python says %q", got, want)
	}
}
