"""SageMaker inference handlers for the digits model, unchanged from what runs
on AWS's PyTorch inference containers.

Request: rows of 64 pixel values in [0, 1] (an 8x8 digit, row by row) as
  application/json   [[...64 numbers...], ...] or {"instances": [[...], ...]}
                     (one row alone, [...64 numbers...], is one instance too)
  text/csv           one row per line, 64 comma-separated numbers
  application/x-npy  a float array of shape (64,) or (n, 64)
Response (application/json, or text/csv with Accept: text/csv):
  {"predictions": [digit, ...], "probabilities": [[p0..p9], ...]}
"""
import io
import json
import os

import numpy as np
import torch
from torch import nn

FEATURES = 64


def model_fn(model_dir):
    state = torch.load(os.path.join(model_dir, "model.pth"), map_location="cpu")
    hidden = state["0.weight"].shape[0]
    model = nn.Sequential(nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    model.load_state_dict(state)
    return model.eval()


def _text(body):
    return body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body


def input_fn(body, content_type):
    media = (content_type or "").split(";")[0].strip().lower()
    if media == "application/json":
        rows = json.loads(_text(body))
        if isinstance(rows, dict):
            rows = rows["instances"]
        arr = np.asarray(rows, dtype=np.float32)
    elif media == "text/csv":
        lines = [line for line in _text(body).splitlines() if line.strip()]
        arr = np.asarray([[float(v) for v in line.split(",")] for line in lines], dtype=np.float32)
    elif media == "application/x-npy":
        arr = np.load(io.BytesIO(body), allow_pickle=False).astype(np.float32)
    else:
        raise ValueError(
            f"unsupported content type {content_type!r}: send application/json, text/csv or application/x-npy"
        )
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != FEATURES:
        raise ValueError(f"expected rows of {FEATURES} pixel values, got an array of shape {arr.shape}")
    return torch.from_numpy(arr)


def predict_fn(data, model):
    with torch.no_grad():
        return torch.softmax(model(data), dim=1)


def output_fn(probabilities, accept):
    labels = probabilities.argmax(dim=1).tolist()
    if (accept or "").split(";")[0].strip().lower() == "text/csv":
        return "".join(f"{label}\n" for label in labels), "text/csv"
    probs = [[round(p, 6) for p in row] for row in probabilities.tolist()]
    return json.dumps({"predictions": labels, "probabilities": probs}), "application/json"
