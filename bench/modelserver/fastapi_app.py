"""The FastAPI baseline: the same code/inference.py behind FastAPI.

Imported once per uvicorn worker process (serve_fastapi.py), so model_fn runs
once per worker; input_fn -> predict_fn -> output_fn run per request, in an
``async def`` endpoint (no thread-pool hop: the fastest way FastAPI can call
a CPU-bound handler, and what a tuned deployment would do for a model this
small).

Environment: MODEL_DIR (the model directory holding code/inference.py).
"""

import importlib.util
import os

import torch
from fastapi import FastAPI, Request, Response

MODEL_DIR = os.environ["MODEL_DIR"]

# Same threading as sagebox's workers: one intra-op thread per worker when
# the machine runs one worker per core (serve_fastapi.py sets OMP_NUM_THREADS
# too; this makes it explicit).
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or 1))

_spec = importlib.util.spec_from_file_location(
    "inference", os.path.join(MODEL_DIR, "code", "inference.py")
)
inference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(inference)

model = inference.model_fn(MODEL_DIR)
input_fn = inference.input_fn
predict_fn = inference.predict_fn
output_fn = inference.output_fn

app = FastAPI()


@app.get("/ping")
async def ping():
    return {"status": "Healthy"}


@app.post("/invocations")
async def invocations(request: Request):
    body = await request.body()
    headers = request.headers
    data = input_fn(body, headers.get("content-type"))
    pred = predict_fn(data, model)
    out, ctype = output_fn(pred, headers.get("accept") or "application/json")
    return Response(content=out, media_type=ctype)
