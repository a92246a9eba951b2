"""Trains one small StyleNet per style, on CPU in seconds, and writes each as
a SageMaker model.tar.gz (model.pth, style.json, code/inference.py):

  python3 make_styles.py OUT_DIR        → OUT_DIR/<style>/model.tar.gz

Each style is a picture filter written as a few tensor operations (sepia
toning, a pencil sketch, a soft dream-like glow); the network learns to
imitate it from synthetic pictures (smooth colour fields with sharp shapes).
Seeds are fixed, so the same weights come out every time on one machine.
"""
import io
import json
import os
import sys
import tarfile
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "code"))
from inference import StyleNet  # noqa: E402

STEPS = 300
SIZE = 32
HIDDEN = 12


def gray(x):
    return (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3])


def blur(x, k=5, sigma=1.5):
    r = torch.arange(k, dtype=torch.float32) - k // 2
    g = torch.exp(-(r ** 2) / (2 * sigma ** 2))
    g = g / g.sum()
    kernel = (g[:, None] * g[None, :]).expand(x.shape[1], 1, k, k)
    return F.conv2d(F.pad(x, (k // 2,) * 4, mode="replicate"), kernel, groups=x.shape[1])


def sepia(x):
    m = torch.tensor([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168], [0.272, 0.534, 0.131]])
    return torch.einsum("oc,bchw->bohw", m, x).clamp(0, 1)


def sketch(x):
    g = F.pad(gray(x), (1, 1, 1, 1), mode="replicate")
    sx = torch.tensor([[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]]).view(1, 1, 3, 3)
    edges = F.conv2d(g, sx).abs() + F.conv2d(g, sx.transpose(2, 3)).abs()
    return (1.0 - 1.5 * edges).clamp(0, 1).expand(-1, 3, -1, -1)


def dream(x):
    soft = blur(x)
    tint = torch.tensor([1.15, 0.85, 1.25]).view(1, 3, 1, 1)  # magenta glow
    return (0.15 + 0.8 * soft * tint).clamp(0, 1)


STYLES = {"sepia": sepia, "sketch": sketch, "dream": dream}


def pictures(gen, n):
    """Synthetic training pictures: smooth colour fields plus sharp rectangles."""
    x = F.interpolate(torch.rand(n, 3, 4, 4, generator=gen), size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    for i in range(n):
        for _ in range(3):
            y0, x0 = torch.randint(0, SIZE - 8, (2,), generator=gen).tolist()
            h, w = torch.randint(4, 16, (2,), generator=gen).tolist()
            x[i, :, y0:y0 + h, x0:x0 + w] = torch.rand(3, 1, 1, generator=gen)
    return x


def train(name, target, seed):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    net = StyleNet(HIDDEN)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    for step in range(STEPS):
        x = pictures(gen, 16)
        loss = F.mse_loss(net(x), target(x))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net, loss.item()


def package(out_dir, name, net):
    state = io.BytesIO()
    torch.save(net.state_dict(), state)
    files = {
        "model.pth": state.getvalue(),
        "style.json": json.dumps({"name": name, "hidden": HIDDEN}).encode(),
        "code/inference.py": open(os.path.join(HERE, "code", "inference.py"), "rb").read(),
    }
    os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    path = os.path.join(out_dir, name, "model.tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        for arcname, data in files.items():
            info = tarfile.TarInfo(arcname)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return path


def main(out_dir):
    torch.set_num_threads(1)
    for seed, (name, target) in enumerate(STYLES.items()):
        start = time.monotonic()
        net, loss = train(name, target, seed)
        path = package(out_dir, name, net)
        print(f"{name}: loss {loss:.4f} after {STEPS} steps in {time.monotonic() - start:.1f} s → {path}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "models")
