"""The TorchServe-compatible context, errors and the thread rule (in-process)."""

import os
import sys

import pytest

from sagebox_runtime import errors
from sagebox_runtime.context import Context, ContextView, Headers
from sagebox_runtime.wire import Request


def batch_ctx():
    c = Context("/opt/ml/model", None, 4, "sagebox", "1.0")
    c.begin_batch([
        Request(10, "", "", [("X-Amzn-Sagemaker-Custom-Attributes", "a"), ("X-Multi", "1"), ("x-multi", "2")], b""),
        Request(11, "", "", [], b""),
        Request(12, "", "", [("Accept", "text/csv")], b""),
    ])
    return c


def test_view_indexes_its_own_requests():
    c = batch_ctx()
    one = ContextView(c, (2,))
    assert one.request_ids == {0: 12}
    assert one.get_request_header(0, "accept") == "text/csv"
    with pytest.raises(IndexError, match="1 request"):
        one.get_request_header(1, "accept")
    sub = ContextView(c, (0, 2))
    assert sub.request_ids == {0: 10, 1: 12}
    assert sub.get_request_header(0, "X-AMZN-SAGEMAKER-CUSTOM-ATTRIBUTES") == "a"
    assert sub.get_all_request_header(0)["x-multi"] == "1, 2"
    assert sub.request_processor[1].get_request_property("Accept") == "text/csv"


def test_view_response_setters_land_on_the_batch_index():
    c = batch_ctx()
    v = ContextView(c, (1,))
    v.set_response_status(201, "made")
    v.set_response_header(0, "X-Amzn-SageMaker-Custom-Attributes", "out")
    v.set_response_header(0, "Content-Type", "text/plain")
    assert c.responses[1].status == 201 and c.responses[1].phrase == "made"
    assert c.responses[1].content_type == "text/plain"
    assert dict(c.responses[1].headers) == {"X-Amzn-SageMaker-Custom-Attributes": "out"}
    assert 0 not in c.responses and 2 not in c.responses


def test_view_attributes_persist_on_the_worker_context():
    c = batch_ctx()
    ContextView(c, ()).tokenizer = "tok"
    assert ContextView(c, (0,)).tokenizer == "tok"
    assert ContextView(c, (0,)).system_properties["batch_size"] == 4
    ContextView(c, ()).metrics.add_time("x", 1.0)  # no-op, no error


def test_headers_case_insensitive():
    h = Headers([("Content-Type", "a")])
    h["content-type"] = "b"
    assert dict(h) == {"content-type": "b"} and h["CONTENT-TYPE"] == "b" and "Content-type" in h
    assert h.get("nope", 1) == 1


def test_status_of():
    assert errors.status_of(errors.BadInput("x")) == 400
    assert errors.status_of(errors.GenericInferenceToolkitError(429)) == 429
    assert errors.GenericInferenceToolkitError(429).message == "Too Many Requests"
    e = errors.BaseInferenceToolkitError(503, "busy", "Busy")
    assert (errors.status_of(e), str(e), e.phrase) == (503, "busy", "Busy")

    class PredictionException(Exception):
        def __init__(self, msg, code):
            super().__init__(msg)
            self.error_code = code

    assert errors.status_of(PredictionException("x", 418)) == 418
    assert errors.status_of(PredictionException("x", 200)) == 500
    assert errors.status_of(MemoryError()) == 507
    assert errors.status_of(RuntimeError("CUDA out of memory. Tried to allocate")) == 507
    assert errors.status_of(ValueError("x")) == 500
    assert errors.status_of(errors.UnsupportedFormatError("image/png")) == 415


def test_thread_rule(monkeypatch):
    torch = pytest.importorskip("torch")
    from sagebox_runtime import worker

    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert worker.configure_threads(4) is None
        monkeypatch.delenv("OMP_NUM_THREADS")
        monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
        assert worker.configure_threads(1) is None
        monkeypatch.setattr(worker, "_usable_cpus", lambda: 16)
        assert worker.configure_threads(4) == 4 and torch.get_num_threads() == 4
        assert worker.configure_threads(32) == 1
        monkeypatch.setenv("SAGEMAKER_MODEL_SERVER_WORKERS", "8")
        assert worker.configure_threads(0) == 2
    finally:
        torch.set_num_threads(before)


def test_blas_threads_follow_the_thread_rule(monkeypatch):
    from sagebox_runtime import worker

    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(worker, "_usable_cpus", lambda: 8)
    # Only before torch is loaded: pretend it is not.
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    worker._limit_blas_threads(4)
    assert os.environ["OPENBLAS_NUM_THREADS"] == "2"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")  # the user's choice wins
    worker._limit_blas_threads(4)
    assert os.environ["OPENBLAS_NUM_THREADS"] == "3"
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    worker._limit_blas_threads(1)  # one worker: library defaults
    assert "OPENBLAS_NUM_THREADS" not in os.environ
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the user chose threads
    worker._limit_blas_threads(4)
    assert "OPENBLAS_NUM_THREADS" not in os.environ


def test_original_request_is_the_request_itself_without_a_pipeline():
    c = Context("/opt/ml/model", None, 2)
    c.begin_batch([Request(1, "text/csv", "", [], b"1,2"), Request(2, "", "application/json", [], b"x")])
    o = ContextView(c, (0,)).original_request
    assert (o.body, o.content_type, o.accept) == (b"1,2", "text/csv", None)
    o = ContextView(c, (0, 1)).get_original_request(1)
    assert (o.body, o.content_type, o.accept) == (b"x", None, "application/json")
    with pytest.raises(IndexError):
        ContextView(c, (0,)).get_original_request(1)


def test_original_request_of_a_later_pipeline_stage():
    c = Context("/opt/ml/model", None, 2)
    c.begin_batch([
        Request(1, "application/json", "", [], b"[3.0]", ("text/csv", "text/csv", b"1,2")),
        Request(2, "application/json", "", [], b"[4.0]", ("application/json", "", b"[9]")),
    ])
    # Per-request handlers get a view whose index 0 is their request.
    o = ContextView(c, (1,)).original_request
    assert (o.body, o.content_type, o.accept) == (b"[9]", "application/json", None)
    v = ContextView(c, (0, 1))
    assert v.get_original_request(0).body == b"1,2" and v.get_original_request(0).accept == "text/csv"
    assert v.original_request.content_type == "text/csv"
