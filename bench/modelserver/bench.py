"""Model-server benchmark: sagebox vs FastAPI + uvicorn vs the handlers called directly.

    bench/modelserver/run.sh [options]          (make bench-modelserver builds bin/sagebox first)
    python3 bench/modelserver/bench.py --bin bin/sagebox [--duration 10] [--repeat 3] [--json out.json]

One run measures, each configuration in fresh processes:

    sagebox (unbatched)        sagebox model-server, SAGEMAKER_TS_BATCH_SIZE=1
    sagebox (batch 16, 5 ms)   SAGEMAKER_TS_BATCH_SIZE=16, SAGEMAKER_TS_MAX_BATCH_DELAY=5
                               (both with SAGEBOX_SCHED_BATCH=true, the setting for a
                               dedicated serving host; --sagebox-env changes it)
    FastAPI + uvicorn          serve_fastapi.py (uvicorn --workers N, TCP_NODELAY, uvloop/httptools)
    direct loop                direct.py: input_fn -> predict_fn -> output_fn in a loop, no HTTP
    HTTP floor                 httpfloor/: a fasthttp server answering a constant, no handler
                               (what any HTTP server and wrk cost per request here)

at concurrency 1 and 32 (wrk -t1 -cC --latency; post.lua POSTs the body), all
serving bench/modelserver/model/code/inference.py with the same number of
worker processes (--workers, default 2) and one torch/BLAS thread per worker
(OMP_NUM_THREADS=1 and MKL_NUM_THREADS=1 for every process), then prints a
table and the goal ratios with PASS/MISS. Standard library only; wrk from
Debian.

Per cell it also accounts CPU (Linux /proc): CPU time per request of the
server's processes (sagebox: Go front end and Python workers apart) and of
wrk, the machine's idle CPU, and "other": CPU used by programs outside the
benchmark. Before each cell it waits (up to --quiet-wait seconds) for the
machine to be quiet, and flags cells that competed with other programs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL_DIR = os.path.join(HERE, "model")
TICK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1

GOALS = {
    "throughput": 2.0,  # sagebox / FastAPI req/s at c=32
    "added_p50_ms": 0.3,  # sagebox unbatched p50 - direct p50 at c=1
    "batching": 4.0,  # sagebox batched / unbatched req/s at c=32
}
HTTP_FLOOR = "HTTP floor (no handler)"
OTHER_LIMIT = 0.1  # cores used by other programs above which a cell is flagged


# ---------------------------------------------------------------- helpers


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_body(path, seed=0, features=64):
    """A realistic request: one row of 64 floats with 6 decimals, ~670 bytes."""
    r = random.Random(seed)
    body = json.dumps({"inputs": [[round(r.gauss(0, 1), 6) for _ in range(features)]]})
    with open(path, "w") as f:
        f.write(body)
    return len(body)


def proc_stat(pid):
    """(session id, cpu seconds) of a process, or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            b = f.read()
    except OSError:
        return None
    rest = b[b.rindex(b")") + 2 :].split()
    # rest[0] is field 3 (state): session is field 6, utime 14, stime 15.
    return int(rest[3]), (int(rest[11]) + int(rest[12])) / TICK


def session_cpu(sid):
    """CPU seconds per pid of every process in session sid."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st is not None and st[0] == sid:
                out[int(name)] = st[1]
    return out


def machine_cpu():
    """(busy, idle) CPU seconds of the whole machine since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / TICK, (idle + iowait) / TICK


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def wait_quiet(args, log):
    """Wait until the machine has been quiet (busy < OTHER_LIMIT cores) for
    one second, at most args.quiet_wait seconds; adds the wait to args.waited."""
    t0 = time.time()
    while True:
        b0, _ = machine_cpu()
        time.sleep(1)
        b1, _ = machine_cpu()
        if b1 - b0 < OTHER_LIMIT or time.time() - t0 >= args.quiet_wait:
            waited = time.time() - t0 - 1
            if waited >= 1:
                args.waited += waited
                log("    waited %.0f s for other programs to quiet down (%.2f CPUs busy now)" % (waited, b1 - b0))
            return


def http_get(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def tail(path, n=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def wait_ready(url, proc, timeout, log_path, streak=1):
    """Wait for streak successive 200s from url (each on a new connection, so
    with one socket per worker they reach every worker sooner or later)."""
    deadline = time.time() + timeout
    ok = 0
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit("server exited with %s while starting; log:\n%s" % (proc.returncode, tail(log_path)))
        try:
            ok = ok + 1 if http_get(url, timeout=1)[0] == 200 else 0
        except OSError:
            ok = 0
        if ok >= streak:
            return
        time.sleep(0.1 if ok == 0 else 0.01)
    raise SystemExit("server not ready after %ds; log:\n%s" % (timeout, tail(log_path)))


def start(cmd, env, log_path):
    """Start cmd in a session (and process group) of its own."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc):
    """SIGTERM the process group we started, SIGKILL after 15 s."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    try:  # stragglers of the group (uvicorn's workers) once the leader is gone
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def sagebox_metrics(base):
    """Selected sums from sagebox's /_sagebox/metrics."""
    try:
        _, text = http_get(base + "/_sagebox/metrics")
    except OSError:
        return {}
    out = {}
    for line in text.decode().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].startswith("sagebox_model_") and parts[0].endswith(("_sum", "_count")):
            out[parts[0]] = float(parts[1])
    return out


def base_env():
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["MKL_NUM_THREADS"] = "1"
    env.pop("PYTHONPATH", None)
    return env


# ---------------------------------------------------------------- cells


class Cell:
    """One configuration at one concurrency (the median of --repeat runs)."""

    def __init__(self, config, conc, rps, p50, p99, **kw):
        self.config = config
        self.conc = conc
        self.rps = rps
        self.p50 = p50  # ms
        self.p99 = p99  # ms
        self.errors = kw.get("errors", 0)
        self.cpu = kw.get("cpu", {})  # label -> CPU µs per request
        self.idle = kw.get("idle")  # idle CPUs during the cell
        self.other = kw.get("other")  # CPUs used by other programs
        self.batch = kw.get("batch")  # mean batch size (sagebox)
        self.handler_us = kw.get("handler_us")  # time in handler code per request (sagebox)
        self.spread = kw.get("spread", "")
        self.note = kw.get("note", "")

    def as_dict(self):
        return dict(self.__dict__)


def median_cell(runs):
    """The run with the median throughput, annotated with the spread."""
    runs = sorted(runs, key=lambda c: c.rps)
    mid = runs[(len(runs) - 1) // 2]
    if len(runs) > 1:
        mid.spread = "runs %s req/s" % "/".join("%.0f" % c.rps for c in runs)
    return mid


def run_wrk(url, conc, duration, body_file, timeout_s=10):
    env = dict(os.environ, BODY_FILE=body_file)
    cmd = ["wrk", "-t1", "-c%d" % conc, "-d%ds" % duration, "--latency", "--timeout", "%ds" % timeout_s,
           "-s", os.path.join(HERE, "post.lua"), url]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("WRK_JSON "):
            return json.loads(line[len("WRK_JSON ") :])
    raise SystemExit("wrk failed (%s):\n%s\n%s" % (out.returncode, out.stdout, out.stderr))


def measure_http(name, url, proc, split, conc, args, body_file, log, metrics_base=None):
    """One cell: quiet wait, warm-up, then wrk for args.duration with CPU accounting.

    split(pid) names the part of the server a process belongs to.
    """
    runs = []
    for _ in range(args.repeat):
        wait_quiet(args, log)
        if args.warmup > 0:
            run_wrk(url, conc, args.warmup, body_file)
        sid = os.getsid(proc.pid)
        met0 = sagebox_metrics(metrics_base) if metrics_base else {}
        cpu0, m0, w0 = session_cpu(sid), machine_cpu(), children_cpu()
        r = run_wrk(url, conc, args.duration, body_file)
        cpu1, m1, w1 = session_cpu(sid), machine_cpu(), children_cpu()
        met1 = sagebox_metrics(metrics_base) if metrics_base else {}
        n = max(r["requests"], 1)
        secs = r["duration_us"] / 1e6
        parts = {}
        for pid, c in cpu1.items():
            label = split(pid)
            parts[label] = parts.get(label, 0.0) + c - cpu0.get(pid, c)
        wrk_cpu = w1 - w0
        ours = sum(parts.values()) + wrk_cpu
        cpu = {k: v / n * 1e6 for k, v in sorted(parts.items())}
        cpu["wrk"] = wrk_cpu / n * 1e6
        d = {k: met1.get(k, 0) - met0.get(k, 0) for k in met1}
        batch = handler = None
        if d.get("sagebox_model_batch_size_count", 0) > 0:
            batch = d["sagebox_model_batch_size_sum"] / d["sagebox_model_batch_size_count"]
            handler = d["sagebox_model_handler_seconds_sum"] / n * 1e6
        runs.append(
            Cell(
                name,
                conc,
                rps=n / secs,
                p50=r["p50_us"] / 1000,
                p99=r["p99_us"] / 1000,
                errors=r["err_connect"] + r["err_read"] + r["err_write"] + r["err_status"] + r["err_timeout"],
                cpu=cpu,
                idle=(m1[1] - m0[1]) / secs,
                other=max(0.0, (m1[0] - m0[0]) - ours) / secs,
                batch=batch,
                handler_us=handler,
            )
        )
    cell = median_cell(runs)
    log("    c=%-3d %8.0f req/s  p50 %.3f ms  p99 %.3f ms" % (conc, cell.rps, cell.p50, cell.p99))
    return cell


def run_sagebox(name, batch, delay_ms, args, body_file, tmp, log, extra_env=None, binary=None):
    port = free_port()
    env = base_env()
    env.update(parse_env(args.sagebox_env))
    env.update(extra_env or {})
    env.update(
        SAGEBOX_PYTHON=args.python,
        SAGEMAKER_MODEL_SERVER_WORKERS=str(args.workers),
        SAGEMAKER_TS_BATCH_SIZE=str(batch),
        SAGEMAKER_TS_MAX_BATCH_DELAY=str(delay_ms),
        XDG_CACHE_HOME=os.path.join(tmp, "cache"),
    )
    log_path = os.path.join(tmp, "sagebox-%d.log" % batch)
    proc = start(
        [binary or args.bin, "model-server", "--model-dir", MODEL_DIR, "--host", "127.0.0.1", "--port", str(port), "--log-level", "info"],
        env,
        log_path,
    )
    base = "http://127.0.0.1:%d" % port
    try:
        wait_ready(base + "/ping", proc, 180, log_path)
        front = proc.pid
        cells = [
            measure_http(name, base + "/invocations", proc, lambda pid: "Go" if pid == front else "Python",
                         c, args, body_file, log, base)
            for c in args.concurrency
        ]
    finally:
        stop(proc)
    gomax = [l for l in tail(log_path, 400).splitlines() if "gomaxprocs=" in l]
    for c in cells:
        if gomax:
            c.note = "GOMAXPROCS " + gomax[-1].split("gomaxprocs=")[1].split()[0]
    return cells


def run_fastapi(args, body_file, tmp, log):
    port = free_port()
    env = base_env()
    env["MODEL_DIR"] = MODEL_DIR
    log_path = os.path.join(tmp, "fastapi.log")
    cmd = [args.python, os.path.join(HERE, "serve_fastapi.py"), "--port", str(port), "--workers", str(args.workers)]
    if args.fastapi_sched_batch:
        cmd = ["chrt", "--batch", "0"] + cmd
    if args.fastapi_shared_socket:
        cmd.append("--shared-socket")
    proc = start(cmd, env, log_path)
    base = "http://127.0.0.1:%d" % port
    try:
        wait_ready(base + "/ping", proc, 180, log_path, streak=20)
        info = next((l for l in tail(log_path, 50).splitlines() if l.startswith("uvicorn ")), "")
        cells = [
            measure_http("FastAPI + uvicorn", base + "/invocations", proc, lambda pid: "Python", c, args, body_file, log)
            for c in args.concurrency
        ]
    finally:
        stop(proc)
    for c in cells:
        c.note = info
    return cells


def run_httpfloor(args, body_file, tmp, log):
    """The HTTP floor: httpfloor/ (built here with go build) under wrk at the
    highest concurrency, with sagebox's GOMAXPROCS rule."""
    binary = os.path.join(tmp, "httpfloor")
    if not os.path.exists(binary):
        if not shutil.which("go"):
            log("    skipped: go is not installed")
            return []
        out = subprocess.run(["go", "build", "-o", binary, "./bench/modelserver/httpfloor"], cwd=ROOT,
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit("building httpfloor failed:\n" + out.stderr)
    port = free_port()
    env = base_env()
    env["GOMAXPROCS"] = str(max(1, NCPU // 2))
    log_path = os.path.join(tmp, "httpfloor.log")
    proc = start([binary, "-addr", "127.0.0.1:%d" % port], env, log_path)
    base = "http://127.0.0.1:%d" % port
    try:
        wait_ready(base + "/ping", proc, 30, log_path)
        cell = measure_http(HTTP_FLOOR, base + "/invocations", proc, lambda pid: "Go", max(args.concurrency),
                            args, body_file, log)
    finally:
        stop(proc)
    cell.note = "fasthttp, constant answer, GOMAXPROCS %s" % env["GOMAXPROCS"]
    return [cell]


def run_direct(args, body_file, procs, batch, label, conc, log):
    runs = []
    for _ in range(args.repeat):
        wait_quiet(args, log)
        out = subprocess.run(
            [args.python, os.path.join(HERE, "direct.py"), "--model-dir", MODEL_DIR, "--body", body_file,
             "--duration", str(args.duration), "--warmup", str(max(args.warmup, 1)),
             "--procs", str(procs), "--batch", str(batch)],
            env=base_env(), capture_output=True, text=True,
        )
        line = next((l for l in out.stdout.splitlines() if l.startswith("DIRECT_JSON ")), None)
        if line is None:
            raise SystemExit("direct.py failed:\n%s\n%s" % (out.stdout, out.stderr))
        r = json.loads(line[len("DIRECT_JSON ") :])
        runs.append(Cell(label, conc, rps=r["requests"] / (r["duration_us"] / 1e6), p50=r["p50_us"] / 1000, p99=r["p99_us"] / 1000))
    cell = median_cell(runs)
    cell.note = "%d process%s, no HTTP%s" % (
        procs, "" if procs == 1 else "es", "; p50/p99 per batch of %d" % batch if batch > 1 else "")
    log("    c=%-3d %8.0f req/s  p50 %.3f ms  p99 %.3f ms" % (conc, cell.rps, cell.p50, cell.p99))
    return cell


# ---------------------------------------------------------------- report


def report(cells, args, body_len, started, waited, out):
    def find(config, conc):
        return next((c for c in cells if c.config == config and c.conc == conc), None)

    cpu_model = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu_model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    w = out.write
    w("\nsagebox model-server benchmark, %s\n" % started.strftime("%Y-%m-%d %H:%M %Z").strip())
    w("machine: %s, %d CPUs, %s, Python %s\n" % (cpu_model or platform.processor(), NCPU, platform.platform(terse=True), platform.python_version()))
    w("model: MLP 64-256-256-10 (85,002 parameters, ~0.17 MFLOP per row), JSON in (%d bytes) and out\n" % body_len)
    w("setup: %d workers per server, OMP_NUM_THREADS=1 everywhere; wrk -t1; %d s per cell after %d s of warm-up; "
      "median of %d run%s\n" % (args.workers, args.duration, args.warmup, args.repeat, "" if args.repeat == 1 else "s"))
    w("sagebox environment: %s; FastAPI %s\n\n" % (
        args.sagebox_env if args.sagebox_env not in ("", "-") else "defaults",
        "under SCHED_BATCH (chrt --batch 0)" if args.fastapi_sched_batch else "under the default policy"))

    head = "%-26s %3s %9s %8s %8s   %-26s %5s %5s  %s\n"
    w(head % ("configuration", "c", "req/s", "p50 ms", "p99 ms", "CPU µs/req: server | wrk", "idle", "other", "notes"))
    w("-" * 132 + "\n")
    for c in cells:
        if c.cpu:
            server = " + ".join("%s %.0f" % (k, v) for k, v in c.cpu.items() if k != "wrk")
            cpu = "%s | %.0f" % (server, c.cpu.get("wrk", 0))
        else:
            cpu = ""
        notes = []
        if c.batch is not None:
            notes.append("batch %.1f, handlers %.0f µs/req" % (c.batch, c.handler_us))
        if c.errors:
            notes.append("%d ERRORS" % c.errors)
        for s in (c.note, c.spread):
            if s:
                notes.append(s)
        w(head % (c.config, c.conc, "%.0f" % c.rps, "%.3f" % c.p50, "%.3f" % c.p99, cpu,
                  "" if c.idle is None else "%.2f" % c.idle, "" if c.other is None else "%.2f" % c.other, "; ".join(notes)))

    w("\ngoals\n")
    verdicts = []

    def goal(label, value, target, ok, detail):
        verdicts.append(ok)
        w("  %-52s %9s  goal %-8s %s   %s\n" % (label, value, target, "PASS" if ok else "MISS", detail))

    sb1, sb32 = find("sagebox (unbatched)", 1), find("sagebox (unbatched)", 32)
    bb32 = find(args.batched_name, 32)
    fa1, fa32 = find("FastAPI + uvicorn", 1), find("FastAPI + uvicorn", 32)
    d1, d32, db = find("direct loop", 1), find("direct loop", 32), find(args.direct_batch_name, 32)
    if sb32 and fa32:
        r = sb32.rps / fa32.rps
        goal("throughput vs FastAPI (both unbatched), c=32", "%.2fx" % r, ">= %gx" % GOALS["throughput"],
             r >= GOALS["throughput"], "%.0f vs %.0f req/s" % (sb32.rps, fa32.rps))
    if sb1 and d1:
        a = sb1.p50 - d1.p50
        goal("p50 added over the direct call, unbatched, c=1", "%.3f ms" % a, "<= %g ms" % GOALS["added_p50_ms"],
             a <= GOALS["added_p50_ms"], "%.3f - %.3f ms" % (sb1.p50, d1.p50))
    if bb32 and sb32:
        r = bb32.rps / sb32.rps
        goal("batching: batched / unbatched throughput, c=32", "%.2fx" % r, ">= %gx" % GOALS["batching"],
             r >= GOALS["batching"], "%.0f vs %.0f req/s" % (bb32.rps, sb32.rps))

    w("\nfor reference\n")
    if bb32 and fa32:
        w("  throughput vs FastAPI, sagebox batched, c=32:    %.2fx (%.0f vs %.0f req/s)\n" % (bb32.rps / fa32.rps, bb32.rps, fa32.rps))
    if db and d32:
        w("  batching ceiling of the handlers themselves:     %.2fx (direct loop, batch %d / unbatched, %d processes)\n"
          % (db.rps / d32.rps, args.batch_size, args.workers))
    if fa1 and d1:
        w("  p50 added over the direct call, FastAPI, c=1:    %.3f ms\n" % (fa1.p50 - d1.p50))
    if sb1 and fa1:
        w("  p50 at c=1, sagebox / FastAPI:                   %.3f / %.3f ms\n" % (sb1.p50, fa1.p50))
    if sb32 and d32:
        w("  sagebox unbatched, share of the direct limit:    %.0f%% (%.0f of %.0f req/s)\n" % (100 * sb32.rps / d32.rps, sb32.rps, d32.rps))
    if fa32 and d32:
        w("  FastAPI, share of the direct limit:              %.0f%%\n" % (100 * fa32.rps / d32.rps))
    if bb32 and db:
        w("  sagebox batched, share of the batched limit:     %.0f%% (%.0f of %.0f req/s)\n" % (100 * bb32.rps / db.rps, bb32.rps, db.rps))
    floor = find(HTTP_FLOOR, max(args.concurrency))
    if floor and floor.cpu:
        # CPU per request of HTTP alone (server + wrk), and of the handlers
        # alone (each direct process keeps one CPU busy): no server that
        # runs these handlers behind HTTP here can spend less than their
        # sum, so NCPU divided by it bounds its throughput from above.
        http_us = sum(floor.cpu.values())
        w("  HTTP floor, CPU per request:                     %.0f µs (server %.0f + wrk %.0f; %.0f req/s)\n"
          % (http_us, floor.cpu.get("Go", 0), floor.cpu.get("wrk", 0), floor.rps))
        if d32:
            ceiling = NCPU / (args.workers / d32.rps + http_us / 1e6)
            w("  ceiling for ANY server, unbatched:               %.0f req/s = %.2fx FastAPI (%.0f µs handlers + %.0f µs HTTP per request)\n"
              % (ceiling, ceiling / fa32.rps if fa32 else 0, args.workers / d32.rps * 1e6, http_us))
        if db and d32:
            ceiling_b = NCPU / (args.workers / db.rps + http_us / 1e6)
            w("  ceiling for ANY server, batch %-2d:                %.0f req/s = %.2fx the unbatched ceiling%s\n"
              % (args.batch_size, ceiling_b, ceiling_b / ceiling,
                 ", %.2fx sagebox unbatched" % (ceiling_b / sb32.rps) if sb32 else ""))

    w("\nnotes\n"
      "  * wrk runs on the same %d CPUs as the servers and competes with them: its CPU per request is in the\n"
      "    table. The direct rows pay for nothing but the handlers (no HTTP, no IPC, caches always warm).\n"
      "  * 'idle' and 'other' are CPUs (of %d) left idle and used by programs outside the benchmark.\n"
      "  * direct loop c=1 is one process timing each call; c=32 is %d processes (one per worker) in parallel.\n"
      "  * sagebox batched at c=1 waits out the 5 ms batch delay for requests that never come: that is what\n"
      "    SAGEMAKER_TS_MAX_BATCH_DELAY means, not overhead.\n"
      "  * the ceilings are generous: the direct loop's handlers run with warm caches and no one to share\n"
      "    their CPU with, and the floor moves no request to any worker.\n" % (NCPU, NCPU, args.workers))
    flagged = [c for c in cells if c.other is not None and c.other > OTHER_LIMIT]
    if flagged:
        w("  * WARNING: other programs used CPU during %s; those numbers are low. Rerun on a quiet machine.\n"
          % ", ".join("%s c=%d (%.2f)" % (c.config, c.conc, c.other) for c in flagged))
    if waited:
        w("  * waited %.0f s in all for the machine to be quiet before cells.\n" % waited)
    if fa1 and fa1.p50 > 1.0:
        w("  * WARNING: FastAPI p50 at c=1 is %.1f ms: delayed-ACK stalls (TCP_NODELAY missing?).\n" % fa1.p50)
    return verdicts


def parse_env(spec):
    """'K=V,K2=V2' (or '-' for nothing) as a dict."""
    if spec in ("", "-"):
        return {}
    out = {}
    for kv in spec.split(","):
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise SystemExit("%r is not KEY=VALUE" % kv)
        out[k] = v
    return out


def run_ab(args, body_file, tmp, log):
    """--ab: alternate fresh sagebox servers A and B, --pairs times, at one
    batch size; print each pair and the median ratio B/A. For deciding a
    change on a machine whose speed drifts: each pair runs within seconds."""
    env_a, env_b = parse_env(args.ab[0]), parse_env(args.ab[1])
    bin_b = args.bin_b or args.bin
    delay = args.batch_delay if args.ab_batch > 1 else 0
    rows = []
    for i in range(args.pairs):
        pair = []
        for label, env, binary in (("A", env_a, args.bin), ("B", env_b, bin_b)):
            cells = run_sagebox("%s pair %d" % (label, i + 1), args.ab_batch, delay, args, body_file, tmp, log,
                                extra_env=env, binary=binary)
            pair.append(cells)
        rows.append(pair)
    print("A: %s %s\nB: %s %s\nbatch %d, %d workers, %d s per run, %d pairs\n" % (
        args.bin, args.ab[0], bin_b, args.ab[1], args.ab_batch, args.workers, args.duration, args.pairs))
    for ci, c in enumerate(args.concurrency):
        print("c=%d" % c)
        ratios = []
        for i, (a, b) in enumerate(rows):
            r = b[ci].rps / a[ci].rps
            ratios.append(r)
            print("  pair %d  A %7.0f req/s p50 %.3f ms | B %7.0f req/s p50 %.3f ms | B/A %.3f"
                  % (i + 1, a[ci].rps, a[ci].p50, b[ci].rps, b[ci].p50, r))
        print("  median B/A %.3f (min %.3f, max %.3f)\n" % (statistics.median(ratios), min(ratios), max(ratios)))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "bin", "sagebox"), help="sagebox binary (default bin/sagebox)")
    p.add_argument("--python", default="/usr/bin/python3", help="interpreter with torch, FastAPI and uvicorn")
    p.add_argument("--workers", type=int, default=2, help="worker processes per server (default 2)")
    p.add_argument("--duration", type=int, default=10, help="seconds per cell (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="seconds of warm-up before each cell (default 2)")
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of every configuration, interleaved; each cell reports its median (default 1)")
    p.add_argument("--quiet-wait", type=float, default=30, help="longest wait for a quiet machine before a cell, s")
    p.add_argument("--concurrency", default="1,32", help="wrk connections, comma-separated (default 1,32)")
    p.add_argument("--batch-size", type=int, default=16, help="batched configuration (default 16)")
    p.add_argument("--batch-delay", type=int, default=5, help="batched configuration, ms (default 5)")
    p.add_argument("--only", default="sagebox,batched,fastapi,floor,direct",
                   help="configurations to run, a comma-separated subset of sagebox,batched,fastapi,floor,direct")
    p.add_argument("--json", help="also write the cells as JSON to this file")
    p.add_argument("--ab", nargs=2, metavar=("ENV_A", "ENV_B"),
                   help="instead of the table: alternate sagebox servers with these extra environments "
                        "('K=V,K2=V2' or '-') and print the ratio B/A per pair")
    p.add_argument("--bin-b", help="with --ab: the sagebox binary for B (default --bin)")
    p.add_argument("--pairs", type=int, default=8, help="with --ab: pairs of runs (default 8)")
    p.add_argument("--ab-batch", type=int, default=16, help="with --ab: SAGEMAKER_TS_BATCH_SIZE (default 16)")
    p.add_argument("--sagebox-env", default="SAGEBOX_SCHED_BATCH=true",
                   help="extra environment of every sagebox server ('K=V,K2=V2' or '-'; default "
                        "SAGEBOX_SCHED_BATCH=true, the dedicated-host setting; --ab environments apply on top)")
    p.add_argument("--fastapi-sched-batch", action="store_true",
                   help="run FastAPI under SCHED_BATCH too (chrt --batch 0); it gains nothing from it here")
    p.add_argument("--fastapi-shared-socket", action="store_true",
                   help="serve FastAPI from one shared socket (uvicorn --workers) instead of one per worker")
    args = p.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.batched_name = "sagebox (batch %d, %d ms)" % (args.batch_size, args.batch_delay)
    args.direct_batch_name = "direct loop, batch %d" % args.batch_size
    only = set(args.only.split(","))
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (Debian package wrk; make deps)")
    if only & {"sagebox", "batched"} and not os.access(args.bin, os.X_OK):
        raise SystemExit("%s not found: build it first (make build)" % args.bin)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    started = datetime.datetime.now().astimezone()
    tmp = tempfile.mkdtemp(prefix="sagebox-bench-")
    body_file = os.path.join(tmp, "body.json")
    body_len = make_body(body_file)
    args.waited = 0.0
    if args.ab:
        try:
            return run_ab(args, body_file, tmp, log)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    log("load average before: %s" % open("/proc/loadavg").read().strip())
    cells = []
    # --repeat runs whole rounds of every configuration, interleaved, rather
    # than back-to-back runs of one: the machine's speed drifts over minutes
    # (other tenants of the host), and the goals are ratios between cells.
    one = argparse.Namespace(**vars(args))
    one.repeat = 1
    rounds = []
    try:
        for n in range(args.repeat):
            if args.repeat > 1:
                log("round %d of %d" % (n + 1, args.repeat))
            rnd = []
            if "sagebox" in only:
                log("sagebox (unbatched)")
                rnd += run_sagebox("sagebox (unbatched)", 1, 0, one, body_file, tmp, log)
            if "batched" in only:
                log(args.batched_name)
                rnd += run_sagebox(args.batched_name, args.batch_size, args.batch_delay, one, body_file, tmp, log)
            if "fastapi" in only:
                log("FastAPI + uvicorn")
                rnd += run_fastapi(one, body_file, tmp, log)
            if "floor" in only:
                log(HTTP_FLOOR)
                rnd += run_httpfloor(one, body_file, tmp, log)
            if "direct" in only:
                log("direct loop")
                for c in args.concurrency:
                    rnd.append(run_direct(one, body_file, 1 if c == 1 else args.workers, 1, "direct loop", c, log))
                if max(args.concurrency) > 1:
                    rnd.append(run_direct(one, body_file, args.workers, args.batch_size, args.direct_batch_name,
                                          max(args.concurrency), log))
            rounds.append(rnd)
            args.waited = one.waited
        # The median of each cell over the rounds, in the order of a round.
        for i, first in enumerate(rounds[0]):
            notes = first.note
            cell = median_cell([r[i] for r in rounds])
            cell.note = cell.note or notes
            cells.append(cell)
    finally:
        if os.environ.get("BENCH_KEEP_TMP"):
            log("logs kept in " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    report(cells, args, body_len, started, args.waited, sys.stdout)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"started": started.isoformat(), "cells": [c.as_dict() for c in cells]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
