"""``python -m sagebox_runtime worker --socket PATH``: one model-server worker.

The worker connects to the Unix socket the Go front end listens on, sends
HELLO, waits for LOAD (imports the user module, runs ``model_fn`` exactly
once), answers LOADED, then answers every INFER with one RESULT and every
PING with a PONG, until the front end closes the connection (exit 0).

* torch is imported only after HELLO, so the front end knows at once that
  the process is alive.
* A LOAD that fails is answered with ``{"ok": false, "error": {...}}``; the
  worker then waits for the front end to close the connection (or to send
  another LOAD, which retries with a fresh import).
* A frame it does not understand (unknown type, INFER before a successful
  LOAD, a second LOAD after one succeeded, a malformed payload) makes it
  print the reason on stderr and exit with status 2.
* Answers are written whole: a RESULT frame is never split over two writes.
  An answer larger than LOAD's ``max_answer`` (body, content type and
  headers) is replaced by a 500 that says so, for that request only, and
  error text that would not fit is cut: the front end would refuse the
  whole frame, and the worker with it.
  When LOAD names a progress page (field ``progress``, a file the front end
  maps too), the worker records in it which request it is running and since
  when, and holds an answer back while the next INFER has already arrived
  (the front end writes several at once with batching off), so that the
  answers to those go out in one write. Only quick answers are held (under
  1 ms of handler time), and none for longer than 1 ms plus the time of
  one more request. Each write is a system call, and on some virtual
  machines a system call costs a Python worker far more than the call
  itself (bench/README.md, round 5). The front end reads the page when the
  worker dies or runs long, to tell which request was running.
* Recycling: when a handler raised MemoryError (its request is answered
  507, saying so), or LOAD's ``max_rss`` is set and the peak RSS
  (getrusage, one system call per INFER, only then) passed it, the worker
  writes a recycle request into the progress page (offset 16) before the
  answer, then takes no more requests and waits for the front end to close
  the connection; the front end requeues what it had sent after it and
  starts a fresh worker. Without a progress page the worker exits instead.
* CPU threads: when neither ``OMP_NUM_THREADS`` nor ``MKL_NUM_THREADS`` is
  set and the model server runs more than one worker (LOAD field ``workers``,
  else ``SAGEMAKER_MODEL_SERVER_WORKERS``), each worker uses
  ``max(1, usable CPUs // workers)`` intra-op threads instead of torch's
  default of one per CPU, so N workers do not oversubscribe the machine;
  OpenBLAS's own pool gets the same size (OPENBLAS_NUM_THREADS, set before
  torch is imported, unless the user set it). With one worker torch's
  default is kept.
* SIGINT is ignored: the front end owns the worker's lifetime (EOF, SIGTERM
  or SIGKILL), so a Ctrl-C in the terminal does not kill requests in flight.
* Profiling: with ``SAGEBOX_WORKER_PROFILE=PREFIX`` set, the worker runs under
  cProfile and writes ``PREFIX.<pid>.pstats`` when the front end closes the
  connection (read it with ``python3 -m pstats``).
"""

from __future__ import annotations

import argparse
import gc
import logging
import mmap
import os
import platform
import signal
import socket
import struct
import sys
import time
import traceback

from . import wire

log = logging.getLogger("sagebox.worker")


class ProtocolExit(Exception):
    pass


def _setup_logging():
    level = os.environ.get("SAGEBOX_LOG_LEVEL") or os.environ.get("SAGEMAKER_CONTAINER_LOG_LEVEL") or "INFO"
    try:
        level = int(level)
    except ValueError:
        level = getattr(logging, str(level).upper(), logging.INFO)
    logging.basicConfig(
        stream=sys.stderr,
        level=level,
        format="%(asctime)s sagebox-worker[%(process)d] %(levelname)s %(message)s",
    )


def _usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def thread_count(workers):
    """The per-worker CPU thread count of the rule in the module docstring, or
    None to keep the libraries' defaults."""
    if os.environ.get("OMP_NUM_THREADS") or os.environ.get("MKL_NUM_THREADS"):
        return None
    if not workers:
        try:
            workers = int(os.environ.get("SAGEMAKER_MODEL_SERVER_WORKERS") or 0)
        except ValueError:
            workers = 0
    if workers <= 1:
        return None
    return max(1, _usable_cpus() // workers)


def configure_threads(workers):
    """Apply the thread rule in the module docstring; returns the count set or None."""
    n = thread_count(workers)
    if n is None:
        return None
    import torch

    torch.set_num_threads(n)
    return n


def _limit_blas_threads(workers):
    """Size OpenBLAS's thread pool by the thread rule, before torch loads it.

    OpenBLAS (what Debian's torch and numpy use) starts its own pool of one
    thread per CPU when the library loads and ignores torch.set_num_threads:
    a worker would multiply a batch on every CPU while the other workers do
    the same. It reads OPENBLAS_NUM_THREADS (else OMP_NUM_THREADS) at load
    time only, so this runs before the first import of torch; a value the
    user set is kept.
    """
    n = thread_count(workers)
    if n is not None and "torch" not in sys.modules and not os.environ.get("OPENBLAS_NUM_THREADS"):
        os.environ["OPENBLAS_NUM_THREADS"] = str(n)


def _error_payload(exc, warnings=()):
    """LOADED's payload for a failed load; the warnings the handler gathered
    until then (a missing program, say) follow the message, a line each."""
    return {
        "ok": False,
        "error": {
            "type": type(exc).__name__,
            "message": (str(exc) or type(exc).__name__) + "".join("\nWarning: %s" % w for w in warnings),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        },
    }


def _load(conn, payload):
    """Handle a LOAD frame; returns the Handler or None when loading failed."""
    msg = wire.decode_json(payload)
    if not isinstance(msg, dict) or not isinstance(msg.get("model_dir"), str):
        raise ProtocolExit("LOAD without a model_dir: %r" % (msg,))
    h = None
    try:
        workers = int(msg.get("workers") or 0)
        _limit_blas_threads(workers)
        from .handler import Handler, LoadConfig

        cfg = LoadConfig(**msg)
        n = configure_threads(workers)
        if n:
            log.info("using %d CPU thread(s) per worker", n)
        h = Handler(cfg)
        info = h.load()
    except (Exception, SystemExit) as e:
        log.error("model load failed: %s: %s", type(e).__name__, e)
        conn.send_json(wire.LOADED, _error_payload(e, h.warnings if h is not None else ()))
        return None
    # The model's objects live as long as the worker: keep them out of the
    # cyclic GC's young generations so collections stay short under load.
    gc.collect()
    gc.freeze()
    conn.send_json(wire.LOADED, info)
    return h


# The progress page (LOAD field "progress"): u64 id of the first request of
# the INFER being handled, u64 CLOCK_MONOTONIC ns when its handlers started,
# 0 once they finished. Little-endian, at offset 0.
_PROGRESS = struct.Struct("<QQ")

# Offset 16 of the progress page: u64 recycle request, written before the
# answer after which the front end replaces this worker.
_RECYCLE = struct.Struct("<Q")
_RECYCLE_OFFSET = 16
_RECYCLE_OUT_OF_MEMORY = 1
_RECYCLE_MAX_RSS = 2
_PAGE_SIZE = 24


def _peak_rss():
    """This process's peak resident set size in bytes (one system call)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# Answers are held back only while they come this quickly, and none longer
# than this plus the time of one more request.
_HOLD_NS = 1_000_000


def _open_progress(path):
    """Map the front end's progress page; None (and the old one-write-per-
    answer behaviour) when there is none or it cannot be mapped."""
    if not path:
        return None
    try:
        fd = os.open(path, os.O_RDWR)
        try:
            return mmap.mmap(fd, _PAGE_SIZE)
        finally:
            os.close(fd)
    except (OSError, ValueError) as e:
        log.warning("cannot map the progress page %s (%s); answering each request with its own write", path, e)
        return None


# Error text kept when an error answer itself is over the answer limit.
_ERROR_TEXT_KEPT = 64 << 10


def _text_size(*texts):
    return sum(len(t.encode("utf-8", "surrogateescape")) for t in texts if t)


def _cut(text, keep):
    if len(text) <= keep:
        return text
    return text[: keep // 2] + "\n... (%d characters cut) ...\n" % (len(text) - keep) + text[-(keep // 2) :]


def _fit_answers(results, limit):
    """Make each answer fit in limit bytes, in place. An answer whose body,
    content type and headers are larger becomes a 500 that says so; an
    error whose text is too long keeps its start and end. Runs once per
    batch: answers well under the limit cost one length check each."""
    for i, r in enumerate(results):
        if len(r.body) + 4 * len(r.content_type) < limit // 2 and not (
            r.headers or r.error_message or r.traceback
        ):
            continue
        size = len(r.body) + _text_size(r.content_type, *(t for h in r.headers for t in h))
        if size > limit:
            msg = (
                "the response of %d bytes (body, content type and headers) is larger than the "
                "model server's limit of %d bytes per response (4 times the payload limit, "
                "SAGEMAKER_MAX_PAYLOAD_IN_MB, and at most 4 GiB per batch)" % (size, limit)
            )
            log.error("request %d: %s", r.id, msg)
            results[i] = wire.Result(r.id, 500, "", (), b"", "ResponseTooLarge", msg, "")
        elif size + _text_size(r.error_type, r.error_message, r.traceback) > limit:
            keep = min(_ERROR_TEXT_KEPT, max(limit - size, 2048) // 2)
            r.error_message = _cut(r.error_message, keep)
            r.traceback = _cut(r.traceback, keep)


def _internal_failure(requests, exc):
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return [
        wire.Result(r.id, 500, "", (), b"", "WorkerError", "internal worker error: %s" % exc, tb)
        for r in requests
    ]


def serve(conn):
    """The worker loop over a connected wire.Connection; returns the exit status."""
    conn.send_json(
        wire.HELLO,
        {"version": wire.PROTOCOL_VERSION, "pid": os.getpid(), "python": platform.python_version()},
    )
    handler = None
    recv = conn.recv
    perf = time.perf_counter_ns
    progress = None  # the front end's progress page, once LOAD named one
    max_answer = 0  # LOAD's limit on one answer's bytes; 0: none given
    pending = []  # parts of RESULT frames held back, in order
    held_since = 0  # perf_counter_ns when the first of them was ready
    max_rss = 0  # LOAD's peak RSS limit in bytes; 0: none
    original = False  # LOAD's original_request: INFER elements carry the original
    try:
        while True:
            mtype, payload = recv()
            if mtype == wire.INFER:
                if handler is None:
                    raise ProtocolExit("INFER before a successful LOAD")
                requests = wire.decode_infer(payload, original)
                rid = requests[0].id if requests else 0
                t0 = perf()
                if progress is not None:
                    _PROGRESS.pack_into(progress, 0, rid, time.monotonic_ns() or 1)
                try:
                    results = handler.run_batch(requests)
                except Exception as e:  # a bug here, never user code
                    results = _internal_failure(requests, e)
                if max_answer:
                    _fit_answers(results, max_answer)
                t1 = perf()
                recycle = 0
                if handler.out_of_memory:
                    recycle = _RECYCLE_OUT_OF_MEMORY
                elif max_rss and _peak_rss() > max_rss:
                    recycle = _RECYCLE_MAX_RSS
                if progress is None:
                    conn.send_result(t1 - t0, results)
                    if recycle:
                        log.error("worker must be recycled (reason %d) but has no progress page; exiting", recycle)
                        return 3
                    continue
                _PROGRESS.pack_into(progress, 0, rid, 0)
                if recycle:
                    # Ask to be replaced, answer, and take no more requests:
                    # the front end requeues the ones sent after this batch
                    # and kills this process.
                    _RECYCLE.pack_into(progress, _RECYCLE_OFFSET, recycle)
                    log.warning("asking to be recycled (reason %d: %s)", recycle,
                                "MemoryError" if recycle == _RECYCLE_OUT_OF_MEMORY else "peak RSS over the limit")
                    pending.extend(wire.result_frame_parts(t1 - t0, results))
                    conn.send_parts(pending)
                    pending.clear()
                    while recv()[0] is not None:
                        pass
                    return 0

                if not pending:
                    held_since = t1
                pending.extend(wire.result_frame_parts(t1 - t0, results))
                # Hold the answer back while the next INFER is already here
                # and answers are quick (module docstring).
                if t1 - t0 >= _HOLD_NS or t1 - held_since >= _HOLD_NS or not conn.buffered_frame():
                    conn.send_parts(pending)
                    pending.clear()
            elif mtype == wire.PING:
                pending.append(wire.frame(wire.PONG))
                conn.send_parts(pending)
                pending.clear()
            elif mtype == wire.LOAD:
                if handler is not None:
                    raise ProtocolExit("a second LOAD after the model was loaded")
                handler = _load(conn, payload)
                if handler is not None:
                    progress = _open_progress(handler.cfg.extra.get("progress"))
                    max_answer = int(handler.cfg.extra.get("max_answer") or 0)
                    max_rss = int(handler.cfg.extra.get("max_rss") or 0)
                    original = handler.cfg.original_request
            elif mtype is None:
                log.debug("front end closed the connection")
                return 0
            else:
                raise ProtocolExit(
                    "unexpected frame type 0x%02x (%s)" % (mtype, wire.NAMES.get(mtype, "unknown"))
                )
    except (ProtocolExit, wire.ProtocolError) as e:
        sys.stderr.write("sagebox-worker: protocol error: %s\n" % e)
        sys.stderr.flush()
        return 2
    except (BrokenPipeError, ConnectionResetError) as e:
        sys.stderr.write("sagebox-worker: connection to the front end lost: %s\n" % e)
        sys.stderr.flush()
        return 1


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m sagebox_runtime worker",
        description="Serve a model to the sagebox model-server front end over a Unix socket.",
    )
    p.add_argument("--socket", required=True, help="Unix socket path the front end listens on")
    args = p.parse_args(argv)

    _setup_logging()
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):
        pass
    # User code prints; make it reach the front end's log promptly.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except (AttributeError, ValueError):
            pass

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(args.socket)
    except OSError as e:
        sys.stderr.write("sagebox-worker: cannot connect to %s: %s\n" % (args.socket, e))
        return 1
    conn = wire.Connection(sock)
    prefix = os.environ.get("SAGEBOX_WORKER_PROFILE")
    try:
        if not prefix:
            return serve(conn)
        import cProfile

        prof = cProfile.Profile()
        try:
            return prof.runcall(serve, conn)
        finally:
            path = "%s.%d.pstats" % (prefix, os.getpid())
            prof.dump_stats(path)
            log.info("profile written to %s", path)
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
