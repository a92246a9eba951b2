"""Test helpers: a fake front end that drives a real worker subprocess.

Run with ``/usr/bin/python3 -m pytest python/tests -q`` from the repo root.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap

import pytest

# python/sagebox_runtime is embedded into the Go binary as a directory tree:
# keep __pycache__ out of it.
sys.dont_write_bytecode = True

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

from sagebox_runtime import wire  # noqa: E402

REPO_ROOT = os.path.dirname(PYTHON_DIR)
GOLDEN_DIR = os.path.join(REPO_ROOT, "internal", "wire", "testdata")
TIMEOUT = 60


class Worker:
    """A worker subprocess connected to a socket this test listens on."""

    def __init__(self, env=None):
        self.dir = tempfile.mkdtemp(prefix="sbx", dir="/tmp")  # short: sun_path limit
        self.path = os.path.join(self.dir, "w.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.listener.settimeout(TIMEOUT)
        self.stderr_path = os.path.join(self.dir, "stderr")
        self._stderr = open(self.stderr_path, "wb")
        e = dict(os.environ)
        e["PYTHONPATH"] = PYTHON_DIR + os.pathsep + e.get("PYTHONPATH", "")
        e.setdefault("OMP_NUM_THREADS", "1")
        e["PYTHONDONTWRITEBYTECODE"] = "1"
        e.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sagebox_runtime", "worker", "--socket", self.path],
            stdout=self._stderr,
            stderr=self._stderr,
            env=e,
        )
        try:
            sock, _ = self.listener.accept()
        except socket.timeout:
            self.proc.kill()
            raise AssertionError("worker did not connect: %s" % self.stderr())
        sock.settimeout(TIMEOUT)
        self.conn = wire.Connection(sock)
        mtype, payload = self.conn.recv()
        assert mtype == wire.HELLO, mtype
        self.hello = wire.decode_json(payload)

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def load(self, model_dir, **fields):
        msg = {
            "model_dir": str(model_dir),
            "program": "inference.py",
            "gpu_id": -1,
            "batch_size": 8,
            "worker_id": 0,
            "server_name": "sagebox",
            "server_version": "test",
            "default_accept": "application/json",
        }
        msg.update(fields)
        self.conn.send_json(wire.LOAD, msg)
        mtype, payload = self.conn.recv()
        assert mtype == wire.LOADED, mtype
        return wire.decode_json(payload)

    def infer(self, requests):
        self.conn.send(wire.INFER, wire.encode_infer(requests))
        mtype, payload = self.conn.recv()
        assert mtype == wire.RESULT, (mtype, self.stderr())
        nanos, results = wire.decode_result(payload)
        assert [r.id for r in results] == [r.id for r in requests]
        return nanos, results

    def one(self, body, content_type="application/json", accept="", headers=(), rid=1):
        if isinstance(body, str):
            body = body.encode()
        _, (res,) = self.infer([wire.Request(rid, content_type, accept, list(headers), body)])
        return res

    def close(self):
        try:
            self.conn.close()
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        finally:
            self.listener.close()
            self._stderr.close()
            shutil.rmtree(self.dir, ignore_errors=True)
        return self.proc.returncode


def req(rid, body, content_type="application/json", accept="", headers=()):
    if isinstance(body, str):
        body = body.encode()
    return wire.Request(rid, content_type, accept, list(headers), body)


def write_code(model_dir, source, name="inference.py"):
    code = os.path.join(str(model_dir), "code")
    os.makedirs(code, exist_ok=True)
    with open(os.path.join(code, name), "w") as f:
        f.write(textwrap.dedent(source))


def jbody(res):
    assert res.status == 200, (res.status, res.error_type, res.error_message, res.traceback)
    return json.loads(res.body)


@pytest.fixture(scope="session")
def torch_mod():
    return pytest.importorskip("torch")


def make_mlp(torch, in_features=4, out_features=3, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(in_features, 8), torch.nn.ReLU(), torch.nn.Linear(8, out_features)
    ).eval()


def save_scripted(torch, model_dir, name="model.pt", seed=0):
    """Save make_mlp's model as TorchScript in model_dir; returns the model."""
    os.makedirs(str(model_dir), exist_ok=True)
    m = make_mlp(torch, seed=seed)
    torch.jit.script(m).save(os.path.join(str(model_dir), name))
    return m


@pytest.fixture(scope="module")
def worker_factory():
    workers = []

    def start(**kw):
        w = Worker(**kw)
        workers.append(w)
        return w

    yield start
    for w in workers:
        w.close()
