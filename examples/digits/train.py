"""A SageMaker PyTorch training script, unchanged from what runs on AWS:
it reads its data, hyperparameters and output paths from SM_* variables and
argv, and saves the model to SM_MODEL_DIR."""
import argparse
import json
import os

import numpy as np
import torch
from torch import nn


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "model"))
    p.add_argument("--train", default=os.environ.get("SM_CHANNEL_TRAINING", "data"))
    return p.parse_args()


def load(path):
    rows = np.loadtxt(path, delimiter=",", dtype=np.float32)
    return torch.from_numpy(rows[:, 1:]), torch.from_numpy(rows[:, 0]).long()


def main():
    args = parse_args()
    torch.manual_seed(0)
    x, y = load(os.path.join(args.train, "train.csv"))
    xt, yt = load(os.path.join(args.train, "test.csv"))
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    print(f"training on {len(x)} rows, testing on {len(xt)}; hosts={os.environ.get('SM_HOSTS')}")
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(x))
        total = 0.0
        for i in range(0, len(x), args.batch_size):
            idx = perm[i:i + args.batch_size]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        model.eval()
        with torch.no_grad():
            acc = (model(xt).argmax(1) == yt).float().mean().item()
        print(f"epoch={epoch + 1} loss={total / len(x):.4f} test_accuracy={acc:.4f}")
    os.makedirs(args.model_dir, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(args.model_dir, "model.pth"))
    # TorchScript too, so the default model_fn of the model server can load it as is.
    torch.jit.script(model).save(os.path.join(args.model_dir, "model.pt"))
    with open(os.path.join(args.model_dir, "metrics.json"), "w") as f:
        json.dump({"test_accuracy": acc}, f)
    print(f"saved model to {args.model_dir}")


if __name__ == "__main__":
    main()
