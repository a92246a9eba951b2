"""SageMaker inference handlers of one style endpoint (fast-neural-style-like):
a picture in, the same picture in this model's style out.

Request:  image/jpeg (also application/x-image, image/png): the picture's bytes.
Response: application/json {"prediction": "<base64 PNG>"}, the same size as
          the input.

The model directory holds model.pth (a StyleNet's weights), style.json
({"name": ..., "hidden": ...}) and this file as code/inference.py.
"""
import base64
import io
import json
import os

import numpy as np
import torch
from PIL import Image
from torch import nn

IMAGE_TYPES = ("image/jpeg", "application/x-image", "image/png")


class StyleNet(nn.Module):
    """A small image-to-image network: every output pixel is computed from a
    5x5 neighbourhood of the input, so a style can mix colours (1x1 terms),
    blur and emphasise edges (the spatial ones). Padding keeps the size."""

    def __init__(self, hidden=12):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, hidden, 3, padding=1, padding_mode="replicate"),
            nn.ReLU(),
            nn.Conv2d(hidden, hidden, 3, padding=1, padding_mode="replicate"),
            nn.ReLU(),
            nn.Conv2d(hidden, 3, 1),
        )

    def forward(self, x):
        return self.body(x)


def model_fn(model_dir):
    with open(os.path.join(model_dir, "style.json")) as f:
        style = json.load(f)
    net = StyleNet(style["hidden"])
    net.load_state_dict(torch.load(os.path.join(model_dir, "model.pth"), map_location="cpu"))
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    return net.eval()


def input_fn(body, content_type):
    media = (content_type or "").split(";")[0].strip().lower()
    if media not in IMAGE_TYPES:
        raise ValueError(f"unsupported content type {content_type!r}: send the picture as image/jpeg")
    try:
        image = Image.open(io.BytesIO(body))
        image.load()
    except Exception as e:  # PIL raises several kinds for bad data
        raise ValueError(f"the body is not a picture PIL can read: {e}") from e
    pixels = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
    return torch.from_numpy(pixels).permute(2, 0, 1).unsqueeze(0).contiguous()


def predict_fn(data, model):
    with torch.no_grad():
        return model(data).clamp(0.0, 1.0)


def output_fn(prediction, accept):
    pixels = (prediction[0].permute(1, 2, 0).numpy() * 255.0 + 0.5).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buf, format="PNG")
    return json.dumps({"prediction": base64.b64encode(buf.getvalue()).decode("ascii")}), "application/json"
