"""Builds the pipeline's two models as SageMaker model.tar.gz files:

  python3 make_models.py OUT_DIR
  → OUT_DIR/classifier/model.tar.gz   model.pth + code/{inference.py,rows.py}
    OUT_DIR/postprocess/model.tar.gz  config.json + code/{inference.py,rows.py}
    OUT_DIR/test.csv                  held-out digits: label, then 64 pixel values

The classifier is trained here on scikit-learn's bundled digits (a few
seconds on CPU, fixed seed)."""
import io
import json
import os
import sys
import tarfile

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


def train(x, y):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(150):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model


def package(path, files):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for arcname, data in files.items():
            info = tarfile.TarInfo(arcname)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))


def code(model):
    read = lambda *p: open(os.path.join(HERE, *p), "rb").read()  # noqa: E731
    return {"code/inference.py": read(model, "inference.py"), "code/rows.py": read("rows.py")}


def main(out_dir):
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    split = int(len(x) * 0.8)
    tr, te = order[:split], order[split:]
    model = train(x[tr], y[tr])
    with torch.no_grad():
        acc = (model(torch.from_numpy(x[te])).argmax(1).numpy() == y[te]).mean()
    state = io.BytesIO()
    torch.save(model.state_dict(), state)
    package(os.path.join(out_dir, "classifier", "model.tar.gz"), {"model.pth": state.getvalue(), **code("classifier")})
    config = {"min_confidence": 0.7, "min_ink": 2.0}
    package(os.path.join(out_dir, "postprocess", "model.tar.gz"),
            {"config.json": json.dumps(config).encode(), **code("postprocess")})
    rows = np.concatenate([y[te, None].astype(np.float32), x[te]], axis=1)
    np.savetxt(os.path.join(out_dir, "test.csv"), rows, delimiter=",", fmt="%g")
    print(f"classifier: {acc:.4f} accuracy on {len(te)} held-out digits; models and test.csv in {out_dir}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "models"))
