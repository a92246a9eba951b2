package training

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sagebox/sagebox"
)

// mnistScript is the SageMaker SDK's PyTorch MNIST example in shape: the
// dataset comes from torchvision.datasets.MNIST over the training channel
// (download=False: the files are staged by sagebox), a small CNN trains one
// epoch, the test set is scored and the model saved to SM_MODEL_DIR.
const mnistScript = `
import argparse, os, torch, torch.nn as nn, torch.nn.functional as F
from torchvision import datasets, transforms
p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--data-dir", default=os.environ["SM_CHANNEL_TRAINING"])
p.add_argument("--model-dir", default=os.environ["SM_MODEL_DIR"])
a = p.parse_args()
tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
train = torch.utils.data.DataLoader(datasets.MNIST(a.data_dir, train=True, download=False, transform=tf), batch_size=16, shuffle=True)
test = torch.utils.data.DataLoader(datasets.MNIST(a.data_dir, train=False, download=False, transform=tf), batch_size=16)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 5)
        self.fc = nn.Linear(4 * 12 * 12, 10)
    def forward(self, x):
        return F.log_softmax(self.fc(torch.flatten(F.max_pool2d(F.relu(self.conv(x)), 2), 1)), dim=1)
torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(a.epochs):
    for x, y in train:
        opt.zero_grad(); loss = F.nll_loss(model(x), y); loss.backward(); opt.step()
    print(f"epoch {epoch} loss={loss.item():.4f}", flush=True)
correct = sum((model(x).argmax(1) == y).sum().item() for x, y in test)
print(f"test images={len(test.dataset)} correct={correct}", flush=True)
torch.save(model.state_dict(), os.path.join(a.model_dir, "model.pth"))
`

// idx is an MNIST idx file: magic, dimensions, then the bytes.
func idx(magic uint32, dims []uint32, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, magic)
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, d)
	}
	b.Write(data)
	return b.Bytes()
}

// mnistFiles are n tiny MNIST-format images per split: digit d is a bright
// square at a position of its own, so the classes are learnable.
func mnistFiles(n int) map[string][]byte {
	out := map[string][]byte{}
	for _, split := range []struct{ prefix string }{{"train"}, {"t10k"}} {
		images := make([]byte, 0, n*28*28)
		labels := make([]byte, 0, n)
		for i := 0; i < n; i++ {
			d := i % 10
			img := make([]byte, 28*28)
			r, c := 2+(d/5)*12, 2+(d%5)*5
			for y := r; y < r+8; y++ {
				for x := c; x < c+4; x++ {
					img[y*28+x] = 255
				}
			}
			images = append(images, img...)
			labels = append(labels, byte(d))
		}
		out[split.prefix+"-images-idx3-ubyte"] = idx(2051, []uint32{uint32(n), 28, 28}, images)
		out[split.prefix+"-labels-idx1-ubyte"] = idx(2049, []uint32{uint32(n)}, labels)
	}
	return out
}

// TestTorchvisionScript: SageMaker's PyTorch container has torchvision, and
// the SDK's MNIST example reads its data with torchvision.datasets from the
// channel; such a script runs unchanged.
func TestTorchvisionScript(t *testing.T) {
	skipShort(t)
	requireTorch(t)
	if err := exec.Command(testPython, "-c", "import torchvision").Run(); err != nil {
		if os.Getenv("SAGEBOX_STRICT_TOOLS") == "1" {
			t.Fatalf("%s cannot import torchvision (SAGEBOX_STRICT_TOOLS=1; make deps installs python3-torchvision)", testPython)
		}
		t.Skip("torchvision not installed")
	}
	t.Parallel()
	e := newEnv(t)
	for name, body := range mnistFiles(200) {
		e.putObject("mnist/MNIST/raw/"+name, body)
	}
	hps := e.putSource("mnist", map[string]string{"mnist.py": mnistScript})
	hps["sagemaker_program"] = `"mnist.py"`
	hps["epochs"] = "2"
	e.submit(newTestJob("mnist", hps, withChannel("training", "s3://bkt/mnist/", "FullyReplicated")))
	j := e.mem.waitEnd(t, "mnist", 3*time.Minute)
	logs := e.logs.text("mnist/")
	if j.TrainingJobStatus != sagebox.StatusCompleted {
		t.Fatalf("%s %q\n%s", j.TrainingJobStatus, j.FailureReason, logs)
	}
	if !strings.Contains(logs, "epoch 1 loss=") || !strings.Contains(logs, "test images=200 correct=") {
		t.Errorf("logs:\n%s", logs)
	}
	if files := e.extractObject("output/mnist/output/model.tar.gz"); files["model.pth"] == "" {
		t.Errorf("model.tar.gz holds %v", keys(files))
	}
}
