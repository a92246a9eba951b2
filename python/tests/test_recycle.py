"""A worker asks the front end to replace it after MemoryError or past max_rss."""

import os
import struct

from conftest import req, write_code
from sagebox_runtime import wire

CODE = """
def model_fn(d): return None
def input_fn(b, ct): return bytes(b)
def predict_fn(x, m):
    if x == b"oom":
        raise MemoryError("no room")
    return x
def output_fn(p, a): return p, "text/plain"
"""


def _page(tmp_path):
    path = tmp_path / "w.progress"
    path.write_bytes(b"\0" * 4096)
    return path


def _recycle(path):
    return struct.unpack_from("<Q", path.read_bytes(), 16)[0]


def _model(tmp_path):
    d = tmp_path / "model"
    d.mkdir()
    write_code(d, CODE)
    return d


def test_memory_error_answers_507_then_asks_to_be_recycled(tmp_path, worker_factory):
    page = _page(tmp_path)
    w = worker_factory()
    assert w.load(_model(tmp_path), batch_size=1, progress=str(page))["ok"]
    assert w.one(b"a", "application/octet-stream").status == 200
    assert _recycle(page) == 0
    res = w.one(b"oom", "application/octet-stream", rid=2)
    assert res.status == 507
    assert res.error_type == "MemoryError"
    assert "ran out of memory; it is being restarted" in res.error_message
    assert _recycle(page) == 1
    # It takes no more requests: this INFER is read and never answered.
    w.conn.send(wire.INFER, wire.encode_infer([req(3, b"b", "application/octet-stream")]))
    assert w.close() == 0


def test_memory_error_without_page_exits(tmp_path, worker_factory):
    w = worker_factory()
    assert w.load(_model(tmp_path), batch_size=1)["ok"]
    assert w.one(b"oom", "application/octet-stream").status == 507
    w.proc.wait(timeout=20)
    assert w.proc.returncode == 3


def test_max_rss_asks_to_be_recycled_after_the_answer(tmp_path, worker_factory):
    page = _page(tmp_path)
    w = worker_factory()
    assert w.load(_model(tmp_path), batch_size=1, progress=str(page), max_rss=1 << 20)["ok"]
    res = w.one(b"a", "application/octet-stream")
    assert res.status == 200 and bytes(res.body) == b"a"
    assert _recycle(page) == 2
    assert w.close() == 0


def test_no_recycle_under_max_rss(tmp_path, worker_factory):
    page = _page(tmp_path)
    w = worker_factory()
    assert w.load(_model(tmp_path), batch_size=1, progress=str(page), max_rss=1 << 40)["ok"]
    for i in range(3):
        assert w.one(b"a", "application/octet-stream", rid=i + 1).status == 200
    assert _recycle(page) == 0
    assert os.path.exists(page)
