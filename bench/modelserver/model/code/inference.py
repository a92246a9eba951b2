"""The benchmark model: a small MLP behind SageMaker-style handlers.

Every server in the benchmark serves THIS file: sagebox loads it as
code/inference.py, the FastAPI app imports it, and the direct loop calls it.

Model (chosen before any measurement, kept small on purpose):
    Linear(64, 256) -> ReLU -> Linear(256, 256) -> ReLU -> Linear(256, 10)
    85,002 parameters; 84,480 multiply-adds per row, i.e. ~0.17 MFLOP per
    request (2 FLOP per multiply-add, biases and ReLUs not counted).
Weights come from a fixed seed, so every process holds the same model.

Wire format, JSON in and out:
    in:  {"inputs": [[64 floats], ...]}  or a plain [[64 floats], ...] / [64 floats]
    out: {"outputs": [[10 floats], ...]} (one row per input row)

input_fn / predict_fn / output_fn are the standard SageMaker handlers that
FastAPI and the direct loop call per request. predict_batch_fn is sagebox's
opt-in batching extension (python/README.md, "Batching"): sagebox's worker
calls it ONCE per batch, with input_fn/output_fn still per request, and
ignores predict_fn. FastAPI and the direct loop never call it except for the
"direct, batch 16" limit row of the benchmark.
"""

import json

import torch
from torch import nn

IN_FEATURES = 64
HIDDEN = 256
OUT_FEATURES = 10


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(IN_FEATURES, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, OUT_FEATURES),
    )


def model_fn(model_dir):
    model = build_model()
    model.eval()
    return model


def input_fn(input_data, content_type):
    if content_type and not content_type.lower().startswith("application/json"):
        raise ValueError("expected application/json, got %s" % content_type)
    obj = json.loads(input_data)
    if isinstance(obj, dict):
        obj = obj["inputs"]
    x = torch.tensor(obj, dtype=torch.float32)
    if x.dim() == 1:
        x = x.unsqueeze(0)
    if x.dim() != 2 or x.shape[1] != IN_FEATURES:
        raise ValueError("expected rows of %d floats, got shape %s" % (IN_FEATURES, tuple(x.shape)))
    return x


def predict_fn(data, model):
    with torch.inference_mode():
        return model(data)


def output_fn(prediction, accept):
    return json.dumps({"outputs": prediction.tolist()}), "application/json"


def predict_batch_fn(inputs, model):
    if len(inputs) == 1:
        return [predict_fn(inputs[0], model)]
    with torch.inference_mode():
        out = model(torch.cat(inputs))
    return list(out.split([x.shape[0] for x in inputs]))
