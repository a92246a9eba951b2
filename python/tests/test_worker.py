"""End to end: a real worker subprocess, real TorchScript models, real frames."""

import io
import json
import os
import struct

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import conftest  # noqa: E402
from conftest import Worker, jbody, make_mlp, req, write_code  # noqa: E402
from sagebox_runtime import wire  # noqa: E402

CA = "X-Amzn-Sagemaker-Custom-Attributes"  # Go's canonical form of the header


def npy(arr):
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def save_scripted(model_dir, name="model.pt", seed=0):
    return conftest.save_scripted(torch, model_dir, name, seed)


# ================================================================ defaults


@pytest.fixture(scope="module")
def defaults_worker(tmp_path_factory, worker_factory):
    model_dir = tmp_path_factory.mktemp("defaults")
    model = save_scripted(model_dir)  # no code/ at all
    w = worker_factory()
    loaded = w.load(model_dir)
    return w, loaded, model


def expect(model, x):
    with torch.no_grad():
        return model(torch.tensor(x, dtype=torch.float32))


def test_defaults_loaded_with_warning_naming_missing_file(defaults_worker):
    w, loaded, _ = defaults_worker
    assert loaded["ok"] is True
    assert loaded["batch_aware"] is True and loaded["mode"] == "default-batched"
    assert w.hello["version"] == 1 and w.hello["pid"] == w.proc.pid
    assert any("code/inference.py does not exist" in m for m in loaded["warnings"])
    assert "code/inference.py does not exist" in w.stderr()


def test_defaults_json_in_json_out(defaults_worker):
    w, _, model = defaults_worker
    x = [[1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 0.0, 2.0]]
    res = w.one(json.dumps(x))
    assert res.content_type == "application/json"  # default accept
    np.testing.assert_allclose(jbody(res), expect(model, x).tolist(), rtol=1e-6)
    # 1-D input goes to the model as-is
    np.testing.assert_allclose(jbody(w.one("[1, 2, 3, 4]", accept="*/*")), expect(model, [1, 2, 3, 4]).tolist(), rtol=1e-6)


def test_defaults_mime_params_and_case_ignored(defaults_worker):
    w, _, model = defaults_worker
    res = w.one("[[1,2,3,4]]", content_type="Application/JSON; charset=utf-8", accept="application/json; charset=utf-8")
    np.testing.assert_allclose(jbody(res), expect(model, [[1, 2, 3, 4]]).tolist(), rtol=1e-6)
    assert res.content_type == "application/json"


def test_defaults_csv_both_ways(defaults_worker):
    w, _, model = defaults_worker
    res = w.one("1,2,3,4\n5,6,7,8\n", content_type="text/csv", accept="text/csv")
    assert res.status == 200 and res.content_type == "text/csv"
    got = np.genfromtxt(io.StringIO(res.body.decode()), delimiter=",")
    np.testing.assert_allclose(got, expect(model, [[1, 2, 3, 4], [5, 6, 7, 8]]).numpy(), rtol=1e-6)


def test_defaults_npy_both_ways(defaults_worker):
    w, _, model = defaults_worker
    x = np.array([[1, 2, 3, 4]], dtype=np.float32)
    res = w.one(npy(x), content_type="application/x-npy", accept="application/x-npy")
    assert res.status == 200 and res.content_type == "application/x-npy"
    got = np.load(io.BytesIO(res.body), allow_pickle=False)
    np.testing.assert_allclose(got, expect(model, x.tolist()).numpy(), rtol=1e-6)


def test_defaults_npz_in(defaults_worker):
    w, _, model = defaults_worker
    buf = io.BytesIO()
    np.savez(buf, x=np.array([[4, 3, 2, 1]], dtype=np.float32))
    res = w.one(buf.getvalue(), content_type="application/x-npz")
    np.testing.assert_allclose(jbody(res), expect(model, [[4, 3, 2, 1]]).tolist(), rtol=1e-6)


def test_defaults_accept_q_values(defaults_worker):
    w, _, _ = defaults_worker
    res = w.one("[[1,2,3,4]]", accept="application/json;q=0.2, text/csv;q=0.9, image/png")
    assert res.status == 200 and res.content_type == "text/csv"
    res = w.one("[[1,2,3,4]]", accept="image/png, application/x-npy;q=0.5")
    assert res.content_type == "application/x-npy"
    res = w.one("[[1,2,3,4]]", accept="application/json;q=0, */*")
    assert res.content_type == "text/csv"


def test_defaults_errors(defaults_worker):
    w, _, _ = defaults_worker
    res = w.one("hello", content_type="text/plain")
    assert res.status == 415 and "Implement input_fn" in res.error_message
    res = w.one(b"\x00", content_type="")
    assert res.status == 415 and "no Content-Type" in res.error_message
    res = w.one("[[1,2,3,4]]", accept="image/png")
    assert res.status == 406 and "output_fn" in res.error_message
    res = w.one("[[1, 2", content_type="application/json")
    assert res.status == 400 and "not valid JSON" in res.error_message
    assert res.traceback.startswith("Traceback")
    pickled = io.BytesIO()
    np.save(pickled, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    res = w.one(pickled.getvalue(), content_type="application/x-npy")
    assert res.status == 400 and "pickled NPY is refused" in res.error_message
    res = w.one("[[1,2,3]]")  # wrong feature count: the model itself fails
    assert res.status == 500 and res.error_type == "RuntimeError"
    assert w.one("[[1,2,3,4]]").status == 200  # still alive


def test_defaults_mixed_batch_each_request_on_its_own(defaults_worker):
    w, _, model = defaults_worker
    batch = [
        req(1, "[[1,2,3,4]]", accept="text/csv"),
        req(2, "[[1,2,"),
        req(3, "[[5,6,7,8],[1,1,1,1]]", accept="application/json"),
        req(4, "[1,2,3,4]", content_type="text/plain"),
        req(5, "9,9,9,9", content_type="text/csv", accept="application/x-npy"),
        req(6, "[[1,2,3,4]]", accept="image/png"),
        req(7, "[1,2,3]"),  # other shape: its own group, fails alone
    ]
    nanos, res = w.infer(batch)
    assert nanos > 0
    assert [r.status for r in res] == [200, 400, 200, 415, 200, 406, 500]
    got1 = np.genfromtxt(io.StringIO(res[0].body.decode()), delimiter=",")
    np.testing.assert_allclose(got1, expect(model, [1, 2, 3, 4]).numpy(), rtol=1e-6)  # 1 row, as sent
    np.testing.assert_allclose(json.loads(res[2].body), expect(model, [[5, 6, 7, 8], [1, 1, 1, 1]]).tolist(), rtol=1e-6)
    got5 = np.load(io.BytesIO(res[4].body))
    assert got5.shape == (3,)  # 1-D CSV row in, 1-D out
    np.testing.assert_allclose(got5, expect(model, [9, 9, 9, 9]).numpy(), rtol=1e-6)


def test_ping_pong(defaults_worker):
    w, _, _ = defaults_worker
    w.conn.send(wire.PING)
    assert w.conn.recv()[0] == wire.PONG


# ================================================================ batching


COUNTING = '''
import os
import torch

class Counting(torch.nn.Module):
    def __init__(self, inner, log):
        super().__init__()
        self.inner = inner
        self.log = log

    def forward(self, x):
        with open(self.log, "a") as f:
            f.write("%d\\n" % x.shape[0])
        if (x == 666).any():
            raise ValueError("poisoned input")
        return self.inner(x)

def model_fn(model_dir):
    inner = torch.jit.load(os.path.join(model_dir, "model.pt"))
    return Counting(inner, os.path.join(model_dir, "forward_calls"))
'''


@pytest.fixture(scope="module")
def counting_worker(tmp_path_factory, worker_factory):
    model_dir = tmp_path_factory.mktemp("counting")
    model = save_scripted(model_dir)
    write_code(model_dir, COUNTING)
    w = worker_factory()
    loaded = w.load(model_dir, batch_size=16)
    assert loaded["ok"] and loaded["batch_aware"] and loaded["mode"] == "default-batched", loaded
    log = model_dir / "forward_calls"

    def calls():
        if not log.exists():
            return []
        out = [int(x) for x in log.read_text().split()]
        log.unlink()
        return out

    return w, model, calls


def test_batch_runs_one_forward_pass(counting_worker):
    w, model, calls = counting_worker
    xs = [[[float(i), 1, 2, 3]] for i in range(5)] + [[float(i), 0, 0, 1] for i in range(3)] + [[[1, 1, 1, 1], [2, 2, 2, 2]]]
    batch = [req(i, json.dumps(x), accept=["application/json", "text/csv"][i % 2]) for i, x in enumerate(xs)]
    _, res = w.infer(batch)
    assert calls() == [10]  # 5 + 3 (1-D, one row each) + 2 rows, ONE call
    for i, (x, r) in enumerate(zip(xs, res)):
        assert r.status == 200, r
        want = expect(model, x).numpy()
        if r.content_type == "text/csv":
            got = np.genfromtxt(io.StringIO(r.body.decode()), delimiter=",")
        else:
            got = np.array(json.loads(r.body))
        assert got.shape == want.shape or (want.ndim == 2 and want.shape[0] == 1 and got.shape == want.shape[1:])
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-6)
    one = [np.array(json.loads(r.body)).shape for r in res if r.content_type == "application/json"]
    assert (3,) in one  # a 1-D request is squeezed back


def test_batch_single_request_passes_through(counting_worker):
    w, _, calls = counting_worker
    assert w.one("[1,2,3,4]").status == 200
    assert calls() == [4]  # 1-D tensor given to the model unchanged (dim 0 = 4 features)


def test_batch_incompatible_shapes_group_separately(counting_worker):
    w, _, calls = counting_worker
    batch = [req(1, "[[1,2,3,4]]"), req(2, "[[1,2,3]]"), req(3, "[[4,3,2,1]]"), req(4, "[[1,2,3],[1,2,3]]")]
    _, res = w.infer(batch)
    assert [r.status for r in res] == [200, 500, 200, 500]
    c = calls()
    # rows of 4 features: one call with 2 rows; the 3-feature group fails as a
    # batch of 3 rows, then is retried one request at a time
    assert c[0] == 2 and sorted(c[1:]) == [1, 2, 3]


def test_batch_failure_inside_forward_fails_only_its_request(counting_worker):
    w, model, calls = counting_worker
    batch = [req(i, json.dumps([[i, 2, 3, 4]])) for i in range(3)] + [req(3, "[[666, 0, 0, 0]]"), req(4, "bad json")]
    _, res = w.infer(batch)
    assert [r.status for r in res] == [200, 200, 200, 500, 400]
    assert res[3].error_type == "ValueError" and res[3].error_message == "poisoned input"
    assert "poisoned input" in res[3].traceback
    for i in range(3):
        np.testing.assert_allclose(jbody(res[i]), expect(model, [[i, 2, 3, 4]]).tolist(), rtol=1e-5)
    assert calls() == [4, 1, 1, 1, 1]  # the batched try, then one by one


def test_batch_fallback_warns_once_per_dtype_and_shape(tmp_path, worker_factory):
    # a fresh worker: the warning is once per worker, so counting_worker's
    # earlier tests must not have used it up
    save_scripted(tmp_path)
    write_code(tmp_path, COUNTING)
    w = worker_factory()
    assert w.load(tmp_path, batch_size=16)["ok"]
    poisoned = [req(i, json.dumps([[i, 2, 3, 4]])) for i in range(2)] + [req(2, "[[666, 0, 0, 0]]")]
    for _ in range(2):  # same dtype/shape twice: one warning
        _, res = w.infer(poisoned)
        assert [r.status for r in res] == [200, 200, 500]
    err = w.stderr()
    lines = [l for l in err.splitlines() if "batched forward pass" in l]
    assert len(lines) == 1, err
    line = lines[0]
    assert "WARNING" in line and "float32" in line and "(4,)" in line
    assert "ValueError: poisoned input" in line and "one by one" in line
    # another row shape (3 features: the model itself fails) warns on its own, once
    for _ in range(2):
        _, res = w.infer([req(i, "[[1,2,3]]") for i in range(2)])
        assert [r.status for r in res] == [500, 500]
    lines = [l for l in w.stderr().splitlines() if "batched forward pass" in l]
    assert len(lines) == 2 and "(3,)" in lines[1] and "RuntimeError" in lines[1], lines


# ================================================================ custom handlers with and without context

CUSTOM = '''
import json
import os
import torch
from sagemaker_inference import errors, decoder  # sagebox's stand-in

def pre_model_fn(model_dir):
    open(os.path.join(model_dir, "hooks"), "a").write("pre\\n")

def model_fn(model_dir, context):
    with open(os.path.join(model_dir, "model_fn_calls"), "a") as f:
        f.write("call\\n")
    context.loaded_by = "model_fn"
    return torch.jit.load(os.path.join(model_dir, "model.pt"))

def model_warmup_fn(model_dir, model, context):
    model(torch.zeros(1, 4))
    open(os.path.join(model_dir, "hooks"), "a").write("warmup gpu=%r\\n" % context.system_properties["gpu_id"])

def input_fn(input_data, content_type):
    if content_type == "application/x-raise":
        raise errors.GenericInferenceToolkitError(422, "custom 422 from input_fn")
    if content_type and content_type.startswith("application/json"):
        return {"x": torch.tensor(decoder.decode(input_data, content_type), dtype=torch.float32), "raw": type(input_data).__name__}
    return {"raw": type(input_data).__name__, "len": len(input_data)}

def predict_fn(data, model):
    if "x" in data:
        data["y"] = model(data["x"]).tolist()
        del data["x"]
    return data

class Unserializable:
    pass

def output_fn(prediction, accept, context):
    ca = context.get_request_header(0, "x-amzn-sagemaker-custom-attributes")
    if ca is not None:
        context.set_response_header(0, "X-Amzn-SageMaker-Custom-Attributes", "echo:" + ca)
    if accept == "application/x-unserializable":
        return Unserializable()
    if accept == "text/plain":
        return "plain!", "text/plain; charset=utf-8"
    if accept == "application/x-status":
        context.set_response_status(404, "no such thing")
        return "gone"
    return json.dumps({
        "prediction": prediction,
        "accept": accept,
        "props": context.system_properties,
        "ids": context.request_ids,
        "request_id": context.get_request_id(0),
        "loaded_by": context.loaded_by,
        "headers": dict(context.get_all_request_header(0)),
    })
'''


@pytest.fixture(scope="module")
def custom_worker(tmp_path_factory, worker_factory):
    model_dir = tmp_path_factory.mktemp("custom")
    model = save_scripted(model_dir)
    write_code(model_dir, CUSTOM)
    w = worker_factory()
    loaded = w.load(model_dir, batch_size=4, worker_id=2, server_version="9.9")
    assert loaded["ok"], loaded
    return w, model, model_dir, loaded


def test_custom_loaded_and_hooks(custom_worker):
    w, _, model_dir, loaded = custom_worker
    assert loaded["mode"] == "per-request" and loaded["batch_aware"] is False
    assert loaded["handlers"] == ["input_fn", "model_fn", "model_warmup_fn", "output_fn", "pre_model_fn", "predict_fn"]
    assert (model_dir / "hooks").read_text() == "pre\nwarmup gpu=None\n"


def test_custom_with_and_without_context(custom_worker):
    w, model, _, _ = custom_worker
    res = w.one('[[1,2,3,4]]', content_type="application/json; charset=utf-8", accept="", rid=41, headers=[("X-Trace", "t1")])
    out = jbody(res)
    assert res.content_type == "application/json"
    np.testing.assert_allclose(out["prediction"]["y"], expect(model, [[1, 2, 3, 4]]).tolist(), rtol=1e-6)
    assert out["prediction"]["raw"] == "str"  # JSON body decoded to str despite the charset
    assert out["accept"] == "application/json"  # missing Accept -> default accept
    assert out["props"] == {
        "model_dir": out["props"]["model_dir"],
        "gpu_id": None,
        "batch_size": 4,
        "server_name": "sagebox",
        "server_version": "9.9",
        "limit_max_image_pixels": True,
    }
    assert out["ids"] == {"0": 41} and out["request_id"] == 41
    assert out["loaded_by"] == "model_fn"  # attributes set in model_fn persist
    assert out["headers"] == {"X-Trace": "t1"}


def test_custom_bytes_for_other_types(custom_worker):
    w, _, _, _ = custom_worker
    out = jbody(w.one(b"\xff\x00\x01", content_type="application/octet-stream"))
    assert out["prediction"] == {"raw": "bytes", "len": 3}
    out = jbody(w.one(b"abc", content_type=""))
    assert out["prediction"] == {"raw": "bytes", "len": 3}


def test_custom_attributes_round_trip(custom_worker):
    w, _, _, _ = custom_worker
    res = w.one("[[1,2,3,4]]", headers=[(CA, "trace=abc,x=1")])
    assert res.status == 200
    assert res.headers == [("X-Amzn-SageMaker-Custom-Attributes", "echo:trace=abc,x=1")]


def test_custom_output_tuple_sets_content_type(custom_worker):
    w, _, _, _ = custom_worker
    res = w.one("[[1,2,3,4]]", accept="text/plain")
    assert (res.status, res.content_type, res.body) == (200, "text/plain; charset=utf-8", b"plain!")


def test_custom_body_only_gets_best_concrete_accept(custom_worker):
    w, _, _, _ = custom_worker
    res = w.one("[[1,2,3,4]]", accept="text/csv;q=0.1, application/vnd.custom+json")
    assert res.status == 200 and res.content_type == "application/vnd.custom+json"
    assert jbody(res)["accept"] == "text/csv;q=0.1, application/vnd.custom+json"  # raw Accept for output_fn


def test_custom_toolkit_error_status_honoured(custom_worker):
    w, _, _, _ = custom_worker
    res = w.one("{}", content_type="application/x-raise")
    assert res.status == 422 and res.error_message == "custom 422 from input_fn"
    assert res.error_type == "GenericInferenceToolkitError"


def test_custom_status_from_context(custom_worker):
    w, _, _, _ = custom_worker
    res = w.one("[[1,2,3,4]]", accept="application/x-status")
    assert res.status == 404 and res.error_message == "no such thing"


def test_custom_unserializable_return_is_500_and_worker_survives(custom_worker):
    w, _, _, _ = custom_worker
    res = w.one("[[1,2,3,4]]", accept="application/x-unserializable")
    assert res.status == 500 and "Unserializable" in res.error_message and "bytes or str" in res.error_message
    assert w.one("[[1,2,3,4]]").status == 200


def test_custom_batch_per_request_isolation_and_context_index(custom_worker):
    w, _, _, _ = custom_worker
    batch = [
        req(10, "[[1,2,3,4]]", headers=[(CA, "a")]),
        req(11, "{}", content_type="application/x-raise"),
        req(12, "[[1,2,3,4]]", headers=[(CA, "c")], accept="text/plain"),
        req(13, "[[1,2,3]]"),
    ]
    _, res = w.infer(batch)
    assert [r.status for r in res] == [200, 422, 200, 500]
    # each request's context index 0 is itself: headers are not mixed up
    assert res[0].headers == [("X-Amzn-SageMaker-Custom-Attributes", "echo:a")]
    assert res[2].headers == [("X-Amzn-SageMaker-Custom-Attributes", "echo:c")]
    assert json.loads(res[0].body)["ids"] == {"0": 10}


def test_custom_model_fn_ran_once(custom_worker):
    w, _, model_dir, _ = custom_worker
    for _ in range(3):
        w.one("[[1,2,3,4]]")
    assert (model_dir / "model_fn_calls").read_text() == "call\n"


# ================================================================ transform_fn

TRANSFORM = '''
import json
import torch

def transform_fn(model, input_data, content_type, accept):
    x = torch.tensor(json.loads(input_data), dtype=torch.float32)
    y = model(x).tolist()
    if accept == "application/x-tuple":
        return json.dumps(y), "application/x-mine"
    return json.dumps({"y": y, "ct": content_type, "accept": accept})
'''


def test_transform_fn(tmp_path, worker_factory):
    model = save_scripted(tmp_path)
    write_code(tmp_path, TRANSFORM, name="serve.py")
    w = worker_factory()
    loaded = w.load(tmp_path, program="serve.py")  # SAGEMAKER_PROGRAM
    assert loaded["ok"] and loaded["mode"] == "transform_fn" and not loaded["batch_aware"]
    _, res = w.infer([
        req(1, "[[1,2,3,4]]", content_type="application/json", accept="*/*"),
        req(2, "[[1,2,3,4]]", accept="application/x-tuple"),
        req(3, "not json"),
    ])
    out = jbody(res[0])
    np.testing.assert_allclose(out["y"], expect(model, [[1, 2, 3, 4]]).tolist(), rtol=1e-6)
    assert out["ct"] == "application/json" and out["accept"] == "application/json"
    assert res[0].content_type == "application/json"
    assert res[1].content_type == "application/x-mine"
    assert res[2].status == 500 and res[2].error_type == "JSONDecodeError"


# ================================================================ predict_batch_fn

BATCH_FN = '''
import torch
from sagebox_runtime.errors import BadInput

def predict_batch_fn(inputs, model, context):
    sizes = [t.shape[0] for t in inputs]
    with torch.no_grad():
        ys = model(torch.cat(inputs)).split(sizes)
    out = []
    for j, (x, y) in enumerate(zip(inputs, ys)):
        if (x < 0).any():
            out.append(BadInput("negative input in request %d" % context.get_request_id(j)))
            continue
        out.append({"y": y.tolist(), "n": len(inputs), "tag": context.get_request_header(j, "x-tag")})
    return out
'''


def test_predict_batch_fn(tmp_path, worker_factory):
    model = save_scripted(tmp_path)
    write_code(tmp_path, BATCH_FN)
    w = worker_factory()
    loaded = w.load(tmp_path)
    assert loaded["ok"] and loaded["batch_aware"] and loaded["mode"] == "predict_batch_fn", loaded
    _, res = w.infer([
        req(1, "[[1,2,3,4]]", headers=[("X-Tag", "one")]),
        req(2, "[[1,2"),  # decode fails: left out of inputs
        req(3, "[[-1,2,3,4]]", headers=[("X-Tag", "neg")]),
        req(4, "[[4,3,2,1],[0,0,0,0]]", headers=[("X-Tag", "four")]),
    ])
    assert [r.status for r in res] == [200, 400, 400, 200]
    a = jbody(res[0])
    assert a["n"] == 3 and a["tag"] == "one"  # one call with the 3 decodable inputs
    np.testing.assert_allclose(a["y"], expect(model, [[1, 2, 3, 4]]).tolist(), rtol=1e-5)
    assert res[2].error_message == "negative input in request 3"
    d = jbody(res[3])
    assert d["tag"] == "four" and len(d["y"]) == 2


def test_predict_batch_fn_wrong_length_fails_every_request(tmp_path, worker_factory):
    save_scripted(tmp_path)
    write_code(tmp_path, "def predict_batch_fn(inputs, model):\n    return inputs[:1]\n")
    w = worker_factory()
    assert w.load(tmp_path)["ok"]
    _, res = w.infer([req(1, "[[1,2,3,4]]"), req(2, "[[1,2,3,4]]")])
    assert [r.status for r in res] == [500, 500]
    assert "one prediction per input" in res[0].error_message


# ================================================================ load failures (one worker, LOAD retried)

LOAD_FAILURES = [
    (
        "conflict",
        {"inference.py": "def transform_fn(m, d, c, a):\n    pass\ndef input_fn(d, c):\n    pass\n"},
        "ValueError",
        "transform_fn",
    ),
    (
        "arity",
        {"inference.py": "def input_fn(a, b, c, d):\n    pass\n"},
        "TypeError",
        "input_fn in code/inference.py takes 4 parameters (a, b, c, d) but 2 (input_data, content_type) or 3",
    ),
    (
        "model_fn_raises",
        {"inference.py": "def model_fn(model_dir):\n    raise FileNotFoundError('weights.bin missing in ' + model_dir)\n"},
        "FileNotFoundError",
        "weights.bin missing",
    ),
    ("import_error", {"inference.py": "import not_a_module_xyz\n"}, "ModuleNotFoundError", "not_a_module_xyz"),
    ("torch_save", {"@torch.save": "model.pt"}, "ModelLoadError", "saved with torch.save, not TorchScript"),
    ("two_files", {"@script": "a.pt", "@script2": "b.pth"}, "ModelLoadError", "exactly one .pt or .pth"),
    ("nothing", {}, "ModelLoadError", "found 0 (none)"),
]


def _build(model_dir, files):
    os.makedirs(str(model_dir), exist_ok=True)
    for key, value in files.items():
        if key == "@torch.save":
            torch.save(make_mlp(torch).state_dict(), os.path.join(str(model_dir), value))
        elif key.startswith("@script"):
            torch.jit.script(make_mlp(torch)).save(os.path.join(str(model_dir), value))
        else:
            write_code(model_dir, value, name=key)


def test_load_failures_then_success(tmp_path, worker_factory):
    w = worker_factory()
    for name, files, etype, msg in LOAD_FAILURES:
        model_dir = tmp_path / name
        _build(model_dir, files)
        loaded = w.load(model_dir)
        assert loaded["ok"] is False, name
        assert loaded["error"]["type"] == etype, (name, loaded)
        assert msg in loaded["error"]["message"], (name, loaded)
        assert loaded["error"]["traceback"].startswith("Traceback"), name
    # INFER is still refused before a successful LOAD? No: retry LOAD instead.
    good = tmp_path / "good"
    save_scripted(good)
    write_code(good, "import os, torch\ndef model_fn(model_dir):\n    return torch.jit.load(os.path.join(model_dir, 'model.pt'))\n")
    loaded = w.load(good)
    assert loaded["ok"] is True, loaded
    assert w.one("[[1,2,3,4]]").status == 200
    # A second LOAD after success is a protocol error: the worker exits 2.
    w.conn.send_json(wire.LOAD, {"model_dir": str(good)})
    assert w.conn.recv() == (None, None)
    assert w.proc.wait(timeout=10) == 2
    assert "second LOAD" in w.stderr()


# ================================================================ progress page


PROGRESS = '''
import json, os, struct, time

def model_fn(model_dir):
    return None

def input_fn(data, content_type):
    return json.loads(data)

def predict_fn(data, model):
    time.sleep(data["sleep"])
    with open(os.environ["PROGRESS_PAGE"], "rb") as f:
        rid, started = struct.unpack("<QQ", f.read(16))
    return {"page_id": rid, "started": started, "now": time.monotonic_ns()}

def output_fn(prediction, accept):
    return json.dumps(prediction)
'''


@pytest.fixture()
def progress_worker(tmp_path, worker_factory):
    page = tmp_path / "w.progress"
    page.write_bytes(b"\0" * 4096)
    write_code(tmp_path, PROGRESS)
    w = worker_factory(env={"PROGRESS_PAGE": str(page)})
    loaded = w.load(tmp_path, batch_size=1, progress=str(page))
    assert loaded["ok"], loaded
    return w, page


def _send_infers(w, rids, sleep):
    w.conn.send_parts([wire.frame(wire.INFER, wire.encode_infer([req(r, json.dumps({"sleep": sleep}))])) for r in rids])


def _read_result(w):
    mtype, payload = w.conn.recv()
    assert mtype == wire.RESULT, (mtype, w.stderr())
    _, (res,) = wire.decode_result(payload)
    return res


def test_progress_page_records_the_running_request(progress_worker):
    w, page = progress_worker
    _send_infers(w, [11, 12, 13], 0)
    for rid in (11, 12, 13):
        res = _read_result(w)
        assert res.id == rid and res.status == 200, res
        seen = jbody(res)
        # While its handlers ran, the page named this request and a start
        # time on the clock the front end reads (CLOCK_MONOTONIC).
        assert seen["page_id"] == rid, seen
        assert 0 < seen["started"] <= seen["now"], seen
    rid, started = struct.unpack("<QQ", page.read_bytes()[:16])
    assert (rid, started) == (13, 0)  # done: nothing running


def test_quick_answers_to_waiting_requests_go_out_in_one_write(progress_worker):
    w, _ = progress_worker
    # Three requests written at once, each answered in 0.3 ms: answered
    # one write at a time, the first answer would arrive 0.3 ms before the
    # second; held back, all three arrive together.
    _send_infers(w, [21, 22, 23], 0.0003)
    assert _read_result(w).id == 21
    assert w.conn.buffered_frame(), "the second answer did not arrive with the first"
    assert _read_result(w).id == 22
    assert w.conn.buffered_frame(), "the third answer did not arrive with the first"
    assert _read_result(w).id == 23
    # A PING behind a held answer is answered after it, in order.
    _send_infers(w, [24], 0)
    w.conn.send(wire.PING)
    assert _read_result(w).id == 24
    assert w.conn.recv()[0] == wire.PONG


def test_slow_answers_are_not_held(progress_worker):
    w, _ = progress_worker
    _send_infers(w, [31, 32], 0.1)
    assert _read_result(w).id == 31
    # Held back, the first answer would have waited 100 ms for the second.
    assert not w.conn.buffered_frame(), "a slow answer was held back"
    assert _read_result(w).id == 32


# ================================================================ protocol (no torch import needed)


def test_infer_before_load_exits_2():
    w = Worker()
    w.conn.send(wire.INFER, wire.encode_infer([req(1, "[]")]))
    assert w.conn.recv() == (None, None)
    assert w.proc.wait(timeout=10) == 2
    assert "INFER before a successful LOAD" in w.stderr()
    w.close()


def test_unknown_frame_exits_2_and_eof_exits_0():
    w = Worker()
    w.conn.send(0x7F, b"?")
    assert w.conn.recv() == (None, None)
    assert w.proc.wait(timeout=10) == 2
    assert "unexpected frame type 0x7f" in w.stderr()
    w.close()
    w = Worker()
    w.conn.send(wire.PING)
    assert w.conn.recv()[0] == wire.PONG
    assert w.close() == 0


def test_golden_infer_batch_through_a_worker(defaults_worker):
    from conftest import GOLDEN_DIR

    path = os.path.join(GOLDEN_DIR, "infer_batch.bin")
    if not os.path.exists(path):
        pytest.skip("no golden vectors in internal/wire/testdata (written by the Go side)")
    w, _, _ = defaults_worker
    with open(path, "rb") as f:
        w.conn.sock.sendall(f.read())  # the Go side's bytes, as is
    mtype, payload = w.conn.recv()
    assert mtype == wire.RESULT
    _, res = wire.decode_result(payload)
    assert [r.id for r in res] == [7, 8, 9223372036854775813]
    # CSV with charset and Accept */* (-> default JSON); no content type -> 415;
    # a truncated NPY -> 400
    assert [r.status for r in res] == [500, 415, 400]  # the 3-feature CSV does not fit the 4-feature model
    assert res[0].error_type == "RuntimeError"


# ================================================================ answer limit

SIZED = """
def model_fn(model_dir):
    return None

def input_fn(data, content_type):
    return data if isinstance(data, str) else data.decode()

def predict_fn(cmd, model):
    kind, _, n = cmd.partition(":")
    if kind == "raise":
        raise ValueError("x" * int(n))
    return kind, int(n)

def output_fn(pred, accept, context):
    kind, n = pred
    if kind == "header":
        context.set_response_header(0, "X-Big", "h" * n)
        return b"ok"
    if kind == "status":  # a handler's own error answer, with its body
        context.set_response_status(404)
    return b"b" * n
"""


@pytest.fixture(scope="module")
def sized_worker(tmp_path_factory, worker_factory):
    model_dir = tmp_path_factory.mktemp("sized")
    write_code(model_dir, SIZED)
    w = worker_factory()
    assert w.load(model_dir, batch_size=4, max_answer=1000)["ok"]
    return w


def test_an_answer_over_the_limit_fails_alone(sized_worker):
    w = sized_worker
    # Counted: body + content type ("application/json", 16 bytes) + headers.
    _, res = w.infer([req(1, "body:900"), req(2, "body:985"), req(3, "header:978"), req(4, "body:984")])
    assert [r.status for r in res] == [200, 500, 500, 200]
    assert len(res[0].body) == 900 and len(res[3].body) == 984
    for r in res[1:3]:
        assert r.error_type == "ResponseTooLarge" and r.body == b"" and r.headers == []
        assert "larger than the model server's limit of 1000 bytes" in r.error_message
    assert "response of 1001 bytes" in res[1].error_message
    assert "response of 1001 bytes" in res[2].error_message  # "X-Big" + 978 + "ok" + 16
    assert "request 2: the response of 1001 bytes" in w.stderr()
    assert w.one("body:10").status == 200  # the worker lives on
    # A status the handler set keeps its body while it fits, and fails like
    # any other answer when it does not.
    res = w.one("status:984")
    assert res.status == 404 and len(res.body) == 984
    res = w.one("status:985")
    assert res.status == 500 and res.error_type == "ResponseTooLarge" and res.body == b""


def test_an_error_over_the_limit_keeps_its_start_and_end(sized_worker):
    res = sized_worker.one("raise:200000")
    assert res.status == 500 and res.error_type == "ValueError"
    assert len(res.error_message) < 70_000 and "characters cut" in res.error_message
    assert res.error_message.startswith("xxx") and res.error_message.endswith("xxx")


def test_no_limit_given_no_limit_applied(tmp_path, worker_factory):
    write_code(tmp_path, SIZED)
    w = worker_factory()
    assert w.load(tmp_path, batch_size=1)["ok"]
    assert len(w.one("body:100000").body) == 100000


# ================================================================ pipelines


def test_pipeline_stage_reads_original_request(tmp_path, worker_factory):
    """A later stage of a serial pipeline (LOAD original_request) gets the
    client's request in context.original_request, per request of a batch,
    next to the previous stage's answer as its own input."""
    write_code(tmp_path, '''
        import json, torch

        def model_fn(model_dir):
            return None

        def input_fn(data, content_type, context):
            o = context.original_request
            raw = torch.tensor([float(v) for v in o.body.decode().split(",")])
            return torch.tensor(json.loads(data)), raw, o.content_type, o.accept

        def predict_fn(data, model):
            prev, raw, ctype, accept = data
            return {"sum": float((prev + raw).sum()), "ctype": ctype, "accept": accept}

        def output_fn(pred, accept):
            return json.dumps(pred)
    ''')
    w = worker_factory()
    assert w.load(tmp_path, original_request=True)["ok"]
    reqs = [
        wire.Request(1, "application/json", "", [], b"[1, 2]", ("text/csv", "application/json", b"10,20")),
        wire.Request(2, "application/json", "", [], b"[0, 0]", ("text/csv; charset=utf-8", "", b"3,4")),
    ]
    _, (a, b) = w.infer(reqs)
    assert jbody(a) == {"sum": 33.0, "ctype": "text/csv", "accept": "application/json"}
    assert jbody(b) == {"sum": 7.0, "ctype": "text/csv; charset=utf-8", "accept": None}


def test_code_dir_from_load(tmp_path, worker_factory):
    """LOAD's code_dir (a local SAGEMAKER_SUBMIT_DIRECTORY) replaces <model_dir>/code."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "helper.py").write_text("SCALE = 5\n")
    (src / "inference.py").write_text(
        "import helper\n"
        "def model_fn(model_dir):\n    return helper.SCALE\n"
        "def transform_fn(model, data, content_type, accept, context):\n"
        "    o = context.original_request\n"
        "    return str(model * int(data)) + ':' + o.body.decode()\n"
    )
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    w = worker_factory()
    assert w.load(model_dir, code_dir=str(src))["ok"]
    res = w.one("3")
    assert res.status == 200 and res.body == b"15:3"
