"""Model 1 of the pipeline: the digits classifier. Rows of 64 pixel values in
(text/csv or application/json), class probabilities out:
{"probabilities": [[p0..p9], ...]} (application/json, whatever the Accept:
the next container reads it).

It clamps pixel values to [0, 1], the range it was trained on, so it answers
every row, also rows it should not be trusted with: judging those needs the
raw request, which is what model 2 looks at."""
import json
import os

import torch
from torch import nn

from rows import parse_rows

FEATURES = 64


def model_fn(model_dir):
    state = torch.load(os.path.join(model_dir, "model.pth"), map_location="cpu")
    model = nn.Sequential(nn.Linear(FEATURES, state["0.weight"].shape[0]), nn.ReLU(),
                          nn.Linear(state["0.weight"].shape[0], 10))
    model.load_state_dict(state)
    return model.eval()


def input_fn(body, content_type):
    rows = parse_rows(body, content_type)
    if any(len(r) != FEATURES for r in rows):
        raise ValueError(f"every row must have {FEATURES} pixel values")
    return torch.tensor(rows, dtype=torch.float32).clamp(0.0, 1.0)


def predict_fn(data, model):
    with torch.no_grad():
        return torch.softmax(model(data), dim=1)


def output_fn(probabilities, accept):
    probs = [[round(p, 6) for p in row] for row in probabilities.tolist()]
    return json.dumps({"probabilities": probs}), "application/json"
