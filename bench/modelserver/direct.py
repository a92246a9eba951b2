"""The limit: the handlers of code/inference.py called directly in a loop.

    python3 direct.py --model-dir model --body body.json --duration 10 [--procs 2] [--batch 16]

No HTTP, no IPC: each process loads the model with model_fn once, then, for
--duration seconds, times one call at a time of

    input_fn(body) -> predict_fn -> output_fn              (--batch 1)
    16 x input_fn -> predict_batch_fn -> 16 x output_fn      (--batch 16)

on the same request body the HTTP benchmarks send (as str: what sagebox hands
input_fn for application/json). --procs runs that many processes in
parallel (one per server worker: the throughput ceiling of the machine).
Prints one line: DIRECT_JSON {requests, duration_us, p50_us, p90_us, p99_us,
mean_us}, latencies per call (a call is one request with --batch 1, one
batch with --batch 16), requests counted per input.
"""

import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import time


def _load(model_dir):
    spec = importlib.util.spec_from_file_location(
        "inference", os.path.join(model_dir, "code", "inference.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _loop(model_dir, body, duration, warmup, batch, barrier, out):
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or 1))
    mod = _load(model_dir)
    model = mod.model_fn(model_dir)
    input_fn, predict_fn, output_fn = mod.input_fn, mod.predict_fn, mod.output_fn
    predict_batch_fn = getattr(mod, "predict_batch_fn", None)
    ctype = accept = "application/json"

    if batch == 1:

        def call():
            output_fn(predict_fn(input_fn(body, ctype), model), accept)

    else:
        rng = range(batch)

        def call():
            preds = predict_batch_fn([input_fn(body, ctype) for _ in rng], model)
            for p in preds:
                output_fn(p, accept)

    perf = time.perf_counter_ns
    # Everyone loaded: warm up together, then measure together.
    barrier.wait()
    t_end = perf() + int(warmup * 1e9)
    while perf() < t_end:
        call()
    lat = []
    t_end = perf() + int(duration * 1e9)
    t0 = perf()
    t = t0
    while t < t_end:
        call()
        t1 = perf()
        lat.append(t1 - t)
        t = t1
    out.put((len(lat) * batch, t - t0, lat))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model-dir", required=True)
    p.add_argument("--body", required=True)
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--warmup", type=float, default=2)
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--batch", type=int, default=1)
    args = p.parse_args()
    with open(args.body, "rb") as f:
        body = f.read().decode("utf-8")

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    barrier = ctx.Barrier(args.procs)
    procs = [
        ctx.Process(
            target=_loop,
            args=(args.model_dir, body, args.duration, args.warmup, args.batch, barrier, q),
        )
        for _ in range(args.procs)
    ]
    for pr in procs:
        pr.start()
    results = [q.get() for _ in procs]
    for pr in procs:
        pr.join()
    reqs = sum(r[0] for r in results)
    dur = max(r[1] for r in results)
    lat = sorted(x for r in results for x in r[2])

    def pct(q):
        return lat[min(len(lat) - 1, int(q / 100 * len(lat)))] / 1000

    print(
        "DIRECT_JSON "
        + json.dumps(
            {
                "requests": reqs,
                "duration_us": dur / 1000,
                "p50_us": pct(50),
                "p90_us": pct(90),
                "p99_us": pct(99),
                "mean_us": sum(lat) / len(lat) / 1000,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
