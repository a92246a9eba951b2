"""SageMaker inference handlers for the digits model: JSON rows of 64 pixel
values in, predicted digits out."""
import json
import os

import torch
from torch import nn


def model_fn(model_dir):
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    model.load_state_dict(torch.load(os.path.join(model_dir, "model.pth"), map_location="cpu"))
    return model.eval()


def input_fn(body, content_type):
    if content_type != "application/json":
        raise ValueError(f"unsupported content type {content_type}")
    return torch.tensor(json.loads(body), dtype=torch.float32)


def predict_fn(data, model):
    with torch.no_grad():
        return model(data).argmax(dim=1)


def output_fn(prediction, accept):
    return json.dumps({"predictions": prediction.tolist()}), "application/json"
