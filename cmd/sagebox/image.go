package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// dlcPythonVersions is the Python of AWS's PyTorch training images for each
// PyTorch major.minor. The SageMaker SDK only names images that exist, and
// deploy() after attach() looks the inference image up from the framework
// and py versions that attach() parsed out of the training image, so the
// pair must be one AWS built.
var dlcPythonVersions = map[string]string{
	"1.8": "py36", "1.9": "py38", "1.10": "py38", "1.11": "py38", "1.12": "py38",
	"1.13": "py39", "2.0": "py310", "2.1": "py310", "2.2": "py310",
	"2.3": "py311", "2.4": "py311", "2.5": "py311", "2.6": "py312",
}

var majorMinor = regexp.MustCompile(`^(\d+)\.(\d+)`)

// trainingImage names a PyTorch training image the way the SageMaker SDK
// does: <account>.dkr.ecr.<region>.amazonaws.com/pytorch-training:<ver>-cpu-py<NN>.
// PyTorch.attach() parses the framework version and py version back out of
// it. The version is major.minor: the SDK resolves "1.13" to its newest
// 1.13.x image, while a local build's "1.13.0a0" would name none.
func trainingImage(region, frameworkVersion, pyVersion string) string {
	return fmt.Sprintf("763104351884.dkr.ecr.%s.amazonaws.com/pytorch-training:%s-cpu-%s", region, frameworkVersion, pyVersion)
}

// resolveTrainingImage names the training image of a CLI job. Versions the
// user did not give come from the interpreter the server runs jobs with
// (chosen as the server chooses it: $SAGEBOX_PYTHON, else the first of
// python3 on PATH and /usr/bin/python3 with torch); the py version is the
// one of AWS's image for that PyTorch when sagebox knows it, so that the
// SDK's deploy() after attach() finds an inference image.
func resolveTrainingImage(ctx context.Context, e *env, region, frameworkVersion, pyVersion string) (string, error) {
	localPy := ""
	if frameworkVersion == "" {
		torchVer, py, err := localFramework(ctx, e.getenv)
		if err != nil {
			return "", fmt.Errorf("name the training image: %w (or pass --framework-version)", err)
		}
		frameworkVersion, localPy = torchVer, py
	}
	m := majorMinor.FindStringSubmatch(frameworkVersion)
	if m == nil {
		return "", fmt.Errorf("framework version %q: want MAJOR.MINOR[.PATCH], e.g. 2.3", frameworkVersion)
	}
	frameworkVersion = m[1] + "." + m[2]
	if pyVersion == "" {
		pyVersion = dlcPythonVersions[frameworkVersion]
	}
	if pyVersion == "" {
		pyVersion = localPy
	}
	if pyVersion == "" {
		if _, py, err := localFramework(ctx, e.getenv); err == nil {
			pyVersion = py
		}
	}
	if pyVersion == "" {
		return "", fmt.Errorf("name the training image: no Python version known for PyTorch %s (pass --py-version, e.g. py311)", frameworkVersion)
	}
	if !strings.HasPrefix(pyVersion, "py") {
		pyVersion = "py" + strings.ReplaceAll(pyVersion, ".", "")
	}
	return trainingImage(region, frameworkVersion, pyVersion), nil
}

// probeTorch prints torch's version (read from torch/version.py, so torch
// is not imported: that takes seconds) and Python's, e.g. "1.13.0a0 311".
const probeTorch = "import importlib.util as u, os, re, sys\n" +
	"s = u.find_spec('torch')\n" +
	"p = s and s.origin and os.path.join(os.path.dirname(s.origin), 'version.py')\n" +
	"t = p and os.path.exists(p) and open(p).read()\n" +
	"m = t and re.search(r\"__version__\\s*=\\s*'([^']+)'\", t)\n" +
	"print(m.group(1) if m else '-', '%d%d' % sys.version_info[:2])\n"

// localFramework returns the torch version ("1.13.0a0") and Python version
// ("py311") of the interpreter sagebox runs user code with.
func localFramework(ctx context.Context, getenv func(string) string) (torch, py string, err error) {
	candidates := []string{"python3", "/usr/bin/python3"}
	if p := getenv("SAGEBOX_PYTHON"); p != "" {
		candidates = []string{p}
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var tried []string
	for _, c := range candidates {
		out, err := exec.CommandContext(ctx, c, "-c", probeTorch).Output()
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		f := strings.Fields(string(out))
		if len(f) != 2 || f[0] == "-" {
			tried = append(tried, c+": no torch")
			continue
		}
		return f[0], "py" + f[1], nil
	}
	return "", "", fmt.Errorf("no local Python with torch to read its version from (%s)", strings.Join(tried, "; "))
}
