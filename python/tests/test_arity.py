"""Handler signatures end to end: the ``context`` arity rule and load errors.

Every test drives a real worker subprocess (conftest.Worker) with real
TorchScript models. The rule under test (handler.py, ``_wants_context``) is
the SageMaker inference toolkit's ``Transformer._run_handler_function``:
``len(inspect.signature(fn).parameters)`` equal to the expected count -> no
context; one more -> the context is appended (positionally); anything else
-> an error, here at LOAD time, naming the function, the file and the
expected parameters.
"""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import conftest  # noqa: E402
from conftest import jbody, make_mlp, req, write_code  # noqa: E402

CA = "X-Amzn-Sagemaker-Custom-Attributes"  # Go's canonical form of the header


def save_scripted(model_dir, name="model.pt", seed=0):
    return conftest.save_scripted(torch, model_dir, name, seed)


def expect(model, x):
    with torch.no_grad():
        return model(torch.tensor(x, dtype=torch.float32)).tolist()


# ================================================================ every chain handler takes a context

WITH_CONTEXT = '''
import json
import os
import torch

SEEN = {}

def model_fn(model_dir, context):
    SEEN["model_fn"] = dict(context.system_properties)
    return torch.jit.load(os.path.join(model_dir, "model.pt"))

def input_fn(input_data, content_type, context):
    SEEN["input_fn"] = context.get_request_header(0, "x-amzn-sagemaker-custom-attributes")
    return torch.tensor(json.loads(input_data), dtype=torch.float32)

def predict_fn(data, model, context):
    SEEN["predict_fn"] = context.system_properties["gpu_id"]
    with torch.no_grad():
        return model(data)

def output_fn(prediction, accept, context):
    ca = context.get_request_header(0, "X-Amzn-SageMaker-Custom-Attributes") or ""
    context.set_response_header(0, "X-Amzn-SageMaker-Custom-Attributes", "seen=" + ca)
    context.set_response_content_type(0, "application/vnd.sagebox+json")
    if ca == "status=202":
        context.set_response_status(202, "Accepted")
    if ca == "status=409":
        context.set_response_status(409, "conflict from output_fn")
    return json.dumps({"y": prediction.tolist(), "accept": accept, "seen": SEEN, "ids": context.request_ids})
'''


@pytest.fixture(scope="module")
def ctx_worker(tmp_path_factory, worker_factory):
    model_dir = tmp_path_factory.mktemp("withctx")
    model = save_scripted(model_dir)
    write_code(model_dir, WITH_CONTEXT)
    w = worker_factory()
    loaded = w.load(model_dir, batch_size=3, server_name="sagebox-test", server_version="7.7", gpu_id=-1)
    assert loaded["ok"], loaded
    return w, model, model_dir, loaded


def test_context_handlers_loaded_per_request(ctx_worker):
    _, _, _, loaded = ctx_worker
    assert loaded["mode"] == "per-request" and loaded["batch_aware"] is False
    assert loaded["handlers"] == ["input_fn", "model_fn", "output_fn", "predict_fn"]
    assert loaded["warnings"] == []


def test_context_system_properties_reach_model_fn_and_predict_fn(ctx_worker):
    w, model, model_dir, _ = ctx_worker
    out = jbody(w.one("[[1,2,3,4]]"))
    np.testing.assert_allclose(out["y"], expect(model, [[1, 2, 3, 4]]), rtol=1e-6)
    props = out["seen"]["model_fn"]
    assert props["model_dir"] == str(model_dir)
    # On CPU gpu_id is None, as TorchServe's context gives it (not -1).
    assert props["gpu_id"] is None and out["seen"]["predict_fn"] is None
    assert props["batch_size"] == 3
    assert props["server_name"] == "sagebox-test" and props["server_version"] == "7.7"


def test_context_reads_request_header_and_sets_response(ctx_worker):
    w, _, _, _ = ctx_worker
    res = w.one("[[1,2,3,4]]", headers=[(CA, "trace=1")], rid=77)
    assert res.status == 200
    assert res.content_type == "application/vnd.sagebox+json"  # set through the context
    assert res.headers == [("X-Amzn-SageMaker-Custom-Attributes", "seen=trace=1")]
    out = json.loads(res.body)
    assert out["seen"]["input_fn"] == "trace=1"  # input_fn read it too
    assert out["ids"] == {"0": 77}
    assert out["accept"] == "application/json"  # default accept


def test_context_sets_response_status(ctx_worker):
    w, _, _, _ = ctx_worker
    res = w.one("[[1,2,3,4]]", headers=[(CA, "status=202")])
    assert res.status == 202 and res.content_type == "application/vnd.sagebox+json"
    assert res.headers == [("X-Amzn-SageMaker-Custom-Attributes", "seen=status=202")]
    res = w.one("[[1,2,3,4]]", headers=[(CA, "status=409")])
    assert res.status == 409 and res.error_message == "conflict from output_fn"
    assert res.headers == [("X-Amzn-SageMaker-Custom-Attributes", "seen=status=409")]


def test_context_per_request_in_a_batch(ctx_worker):
    w, _, _, _ = ctx_worker
    _, res = w.infer([
        req(1, "[[1,2,3,4]]", headers=[(CA, "a")]),
        req(2, "[[1,2,3,4]]"),
        req(3, "[[1,2,3,4]]", headers=[(CA, "status=202")]),
    ])
    assert [r.status for r in res] == [200, 200, 202]
    assert [r.headers for r in res] == [
        [("X-Amzn-SageMaker-Custom-Attributes", "seen=a")],
        [("X-Amzn-SageMaker-Custom-Attributes", "seen=")],
        [("X-Amzn-SageMaker-Custom-Attributes", "seen=status=202")],
    ]


# ================================================================ transform_fn with and without context

TRANSFORM_CTX = '''
import json
import torch

def transform_fn(model, input_data, content_type, accept, context):
    ca = context.get_request_header(0, "x-amzn-sagemaker-custom-attributes")
    context.set_response_header(0, "X-Amzn-SageMaker-Custom-Attributes", "tf=" + str(ca))
    context.set_response_content_type(0, "application/vnd.transform+json")
    if ca == "teapot":
        context.set_response_status(418, "short and stout")
        return "teapot body"
    with torch.no_grad():
        y = model(torch.tensor(json.loads(input_data), dtype=torch.float32))
    return json.dumps({
        "y": y.tolist(),
        "ct": content_type,
        "accept": accept,
        "props": context.system_properties,
    })
'''

TRANSFORM_NO_CTX = '''
import json
import torch

def transform_fn(model, input_data, content_type, accept):
    with torch.no_grad():
        y = model(torch.tensor(json.loads(input_data), dtype=torch.float32))
    return json.dumps({"y": y.tolist(), "ct": content_type, "accept": accept}), "application/x-plain-tf"
'''


def test_transform_fn_with_context(tmp_path, worker_factory):
    model = save_scripted(tmp_path)
    write_code(tmp_path, TRANSFORM_CTX)
    w = worker_factory()
    loaded = w.load(tmp_path, batch_size=2, server_version="1.2.3")
    assert loaded["ok"] and loaded["mode"] == "transform_fn" and loaded["handlers"] == ["transform_fn"], loaded
    _, res = w.infer([
        req(1, "[[1,2,3,4]]", accept="text/csv", headers=[(CA, "k=v")]),
        req(2, "[[1,2,3,4]]", headers=[(CA, "teapot")]),
    ])
    assert res[0].status == 200 and res[0].content_type == "application/vnd.transform+json"
    assert res[0].headers == [("X-Amzn-SageMaker-Custom-Attributes", "tf=k=v")]
    out = json.loads(res[0].body)
    np.testing.assert_allclose(out["y"], expect(model, [[1, 2, 3, 4]]), rtol=1e-6)
    assert out["ct"] == "application/json" and out["accept"] == "text/csv"
    props = out["props"]
    assert props["model_dir"] == str(tmp_path) and props["gpu_id"] is None
    assert props["batch_size"] == 2 and props["server_name"] == "sagebox" and props["server_version"] == "1.2.3"
    assert res[1].status == 418 and res[1].error_message == "short and stout"
    assert res[1].body == b"teapot body" and res[1].headers == [("X-Amzn-SageMaker-Custom-Attributes", "tf=teapot")]


def test_transform_fn_without_context(tmp_path, worker_factory):
    model = save_scripted(tmp_path)
    write_code(tmp_path, TRANSFORM_NO_CTX)
    w = worker_factory()
    loaded = w.load(tmp_path)
    assert loaded["ok"] and loaded["mode"] == "transform_fn", loaded
    res = w.one("[[4,3,2,1]]", accept="*/*", headers=[(CA, "ignored")])
    assert res.status == 200 and res.content_type == "application/x-plain-tf" and res.headers == []
    out = json.loads(res.body)
    np.testing.assert_allclose(out["y"], expect(model, [[4, 3, 2, 1]]), rtol=1e-6)
    assert out["ct"] == "application/json" and out["accept"] == "application/json"


# ================================================================ the toolkit's arity quirks

# Each handler records what it was called with; "ctx" means its last
# argument was the context. Every handler here ends up taking the context.
QUIRKS_WITH_CONTEXT = '''
import functools
import json
import os
import torch

SEEN = {}

def _kind(x):
    return "ctx" if hasattr(x, "get_request_header") else type(x).__name__

def pre_model_fn(model_dir, *rest):          # *args counts as one: 2 parameters
    SEEN["pre_model_fn"] = [_kind(r) for r in rest]

def model_fn(model_dir, extra=None):         # a default still counts: 2 parameters
    SEEN["model_fn"] = _kind(extra)
    return torch.jit.load(os.path.join(model_dir, "model.pt"))

model_warmup_fn = lambda model_dir, model, context: SEEN.__setitem__("model_warmup_fn", _kind(context))

class Decoder:
    def decode(self, input_data, content_type, context):   # bound: self does not count
        SEEN["input_fn"] = _kind(context)
        return torch.tensor(json.loads(input_data), dtype=torch.float32)

input_fn = Decoder().decode

class Predictor:
    def __call__(self, data, model, context):              # a callable object
        SEEN["predict_fn"] = _kind(context)
        with torch.no_grad():
            return model(data)

predict_fn = Predictor()

def _encode(tag, prediction, accept, context):
    SEEN["output_fn"] = _kind(context)
    return json.dumps({"tag": tag, "y": prediction.tolist(), "seen": SEEN})

output_fn = functools.partial(_encode, "with")              # partial: bound args do not count
'''

# The same shapes of callable, none of which takes the context.
QUIRKS_WITHOUT_CONTEXT = '''
import functools
import json
import os
import torch

SEEN = {}

pre_model_fn = lambda model_dir: SEEN.__setitem__("pre_model_fn", os.path.basename(model_dir))

def model_fn(*args):                         # *args counts as one: 1 parameter
    SEEN["model_fn"] = len(args)
    return torch.jit.load(os.path.join(args[0], "model.pt"))

class Warmup:
    def __call__(self, model_dir, model):
        SEEN["model_warmup_fn"] = 2

model_warmup_fn = Warmup()

class Decoder:
    def decode(self, input_data, content_type):
        SEEN["input_fn"] = 2
        return torch.tensor(json.loads(input_data), dtype=torch.float32)

input_fn = Decoder().decode

@torch.no_grad()                             # functools.wraps: the wrapped signature counts
def predict_fn(data, *rest):
    SEEN["predict_fn"] = [type(r).__name__ for r in rest]
    return rest[0](data)

def _encode(tag, prediction, accept):
    SEEN["output_fn"] = accept
    return json.dumps({"tag": tag, "y": prediction.tolist(), "seen": SEEN})

output_fn = functools.partial(_encode, "without")
'''


@pytest.mark.parametrize("variant", ["with", "without"])
def test_arity_quirks(tmp_path, worker_factory, variant):
    model = save_scripted(tmp_path)
    write_code(tmp_path, QUIRKS_WITH_CONTEXT if variant == "with" else QUIRKS_WITHOUT_CONTEXT)
    w = worker_factory()
    loaded = w.load(tmp_path)
    assert loaded["ok"], loaded
    assert loaded["handlers"] == [
        "input_fn", "model_fn", "model_warmup_fn", "output_fn", "pre_model_fn", "predict_fn",
    ]
    out = jbody(w.one("[[1,2,3,4]]", accept="application/json"))
    assert out["tag"] == variant
    np.testing.assert_allclose(out["y"], expect(model, [[1, 2, 3, 4]]), rtol=1e-6)
    if variant == "with":
        assert out["seen"] == {
            "pre_model_fn": ["ctx"],  # *rest caught the context
            "model_fn": "ctx",  # the defaulted parameter got the context
            "model_warmup_fn": "ctx",  # lambda
            "input_fn": "ctx",  # bound method
            "predict_fn": "ctx",  # callable object
            "output_fn": "ctx",  # functools.partial
        }
    else:
        assert out["seen"] == {
            "pre_model_fn": tmp_path.name,  # lambda, model_dir only
            "model_fn": 1,  # *args: model_dir alone
            "model_warmup_fn": 2,  # callable object
            "input_fn": 2,  # bound method
            "predict_fn": ["RecursiveScriptModule"],  # *rest: the model, no context
            "output_fn": "application/json",  # partial
        }


# ================================================================ LOAD failures (one worker, LOAD retried)

ARITY_FAILURES = [
    # (name, source, program, error type, [substrings of the message])
    (
        "predict_fn_4_required",
        "def predict_fn(data, model, context, extra):\n    pass\n",
        "inference.py",
        "TypeError",
        ["predict_fn in code/inference.py takes 4 parameters (data, model, context, extra)",
         "but 2 (data, model) or 3 (data, model, context) are expected"],
    ),
    (
        "predict_fn_1",
        "def predict_fn(data):\n    pass\n",
        "inference.py",
        "TypeError",
        ["predict_fn in code/inference.py takes 1 parameter (data) but 2 (data, model) or 3 (data, model, context)"],
    ),
    (
        "predict_fn_star_args_only",  # *args is ONE parameter: too few for predict_fn
        "def predict_fn(*args):\n    pass\n",
        "inference.py",
        "TypeError",
        ["predict_fn in code/inference.py takes 1 parameter (*args) but 2 (data, model)"],
    ),
    (
        "model_fn_0_in_serve_py",  # SAGEMAKER_PROGRAM: the message names that file
        "def model_fn():\n    pass\n",
        "serve.py",
        "TypeError",
        ["model_fn in code/serve.py takes 0 parameters () but 1 (model_dir) or 2 (model_dir, context)"],
    ),
    (
        "transform_fn_3",
        "def transform_fn(model, data, content_type):\n    pass\n",
        "inference.py",
        "TypeError",
        ["transform_fn in code/inference.py takes 3 parameters (model, data, content_type)",
         "4 (model, input_data, content_type, accept) or 5 (model, input_data, content_type, accept, context)"],
    ),
    (
        "output_fn_lambda_0",
        "output_fn = lambda: b''\n",
        "inference.py",
        "TypeError",
        ["output_fn in code/inference.py takes 0 parameters () but 2 (prediction, accept) or 3 (prediction, accept, context)"],
    ),
    (
        "input_fn_bound_method_1",
        "class C:\n    def f(self, data):\n        pass\ninput_fn = C().f\n",
        "inference.py",
        "TypeError",
        ["input_fn in code/inference.py takes 1 parameter (data) but 2 (input_data, content_type)"],
    ),
    (
        "input_fn_partial_4",
        "import functools\ndef f(a, b, c, d, e):\n    pass\ninput_fn = functools.partial(f, 1)\n",
        "inference.py",
        "TypeError",
        ["input_fn in code/inference.py takes 4 parameters (b, c, d, e)"],
    ),
    (
        "model_warmup_fn_callable_object_0",
        "class W:\n    def __call__(self):\n        pass\nmodel_warmup_fn = W()\n",
        "inference.py",
        "TypeError",
        ["model_warmup_fn in code/inference.py takes 0 parameters () but 2 (model_dir, model) or 3 (model_dir, model, context)"],
    ),
    (
        "predict_fn_defaults_make_4",  # defaults count too: 4 is too many
        "def predict_fn(data, model, context=None, extra=None):\n    pass\n",
        "inference.py",
        "TypeError",
        ["predict_fn in code/inference.py takes 4 parameters (data, model, context=None, extra=None)"],
    ),
    (
        "predict_fn_keyword_only_context",  # right count, but the context is passed by position
        "def predict_fn(data, model, *, context=None):\n    pass\n",
        "inference.py",
        "TypeError",
        ["predict_fn in code/inference.py has 3 parameters (data, model, *, context=None)",
         "called as predict_fn(data, model, context)", "cannot take those arguments by position"],
    ),
    (
        "output_fn_kwargs",
        "def output_fn(prediction, accept, **kw):\n    pass\n",
        "inference.py",
        "TypeError",
        ["output_fn in code/inference.py has 3 parameters (prediction, accept, **kw)"],
    ),
    (
        "predict_fn_not_callable",
        "predict_fn = 3\n",
        "inference.py",
        "TypeError",
        ["predict_fn in code/inference.py is not callable (int)"],
    ),
    (
        "transform_fn_with_input_fn",
        "def transform_fn(m, d, c, a):\n    pass\ndef input_fn(d, c):\n    pass\n",
        "inference.py",
        "ValueError",
        ["Cannot use transform_fn implementation in code/inference.py together with input_fn"],
    ),
    (
        "transform_fn_with_predict_and_output_fn",
        "def transform_fn(m, d, c, a, ctx):\n    pass\ndef predict_fn(d, m):\n    pass\ndef output_fn(p, a):\n    pass\n",
        "serve.py",
        "ValueError",
        ["Cannot use transform_fn implementation in code/serve.py together with predict_fn, output_fn"],
    ),
    (
        "transform_fn_with_predict_batch_fn",
        "def transform_fn(m, d, c, a):\n    pass\ndef predict_batch_fn(i, m):\n    pass\n",
        "inference.py",
        "ValueError",
        ["Cannot use transform_fn together with predict_batch_fn in code/inference.py"],
    ),
]


def test_arity_and_conflict_failures_are_load_errors(tmp_path, worker_factory):
    w = worker_factory()
    for name, source, program, etype, needles in ARITY_FAILURES:
        model_dir = tmp_path / name
        save_scripted(model_dir)  # the default model_fn would load: the handler is the problem
        write_code(model_dir, source, name=program)
        loaded = w.load(model_dir, program=program)
        assert loaded["ok"] is False, (name, loaded)
        assert loaded["error"]["type"] == etype, (name, loaded["error"])
        for needle in needles:
            assert needle in loaded["error"]["message"], (name, needle, loaded["error"]["message"])
        assert loaded["error"]["traceback"].startswith("Traceback"), name
        assert "Warning:" not in loaded["error"]["message"], name  # the program was found
    # The worker is still usable: a right signature loads.
    good = tmp_path / "good"
    save_scripted(good)
    write_code(good, "def predict_fn(data, model, context=None):\n    return model(data) * 0 + context.system_properties['batch_size']\n")
    loaded = w.load(good, batch_size=5)
    assert loaded["ok"], loaded
    assert jbody(w.one("[[1,2,3,4]]")) == [[5.0, 5.0, 5.0]]


# ================================================================ load errors carry the load's warnings


def test_load_error_includes_missing_program_warning(tmp_path, worker_factory):
    w = worker_factory()
    # No code/ at all and no model file: the default model_fn fails, and the
    # message says why the default ran.
    empty = tmp_path / "empty"
    empty.mkdir()
    loaded = w.load(empty)
    assert loaded["ok"] is False
    err = loaded["error"]
    assert err["type"] == "ModelLoadError"  # the type is kept
    msg = err["message"]
    assert "found 0 (none)" in msg and "provide model_fn in code/inference.py" in msg
    assert "\nWarning: no user module: %s does not exist" % (empty / "code" / "inference.py") in msg
    assert msg.index("found 0 (none)") < msg.index("Warning:")  # the error first
    # With SAGEMAKER_PROGRAM=serve.py both parts name code/serve.py.
    loaded = w.load(empty, program="serve.py")
    msg = loaded["error"]["message"]
    assert "provide model_fn in code/serve.py" in msg and "code/serve.py does not exist" in msg
    assert "inference.py" not in msg
    # A torch.save'd model: the default model_fn's explanation names the program too.
    saved = tmp_path / "saved"
    saved.mkdir()
    torch.save(make_mlp(torch).state_dict(), str(saved / "model.pt"))
    loaded = w.load(saved, program="serve")  # ".py" is implied
    msg = loaded["error"]["message"]
    assert loaded["error"]["type"] == "ModelLoadError"
    assert "saved with torch.save, not TorchScript" in msg and "provide model_fn in code/serve.py" in msg
    assert "Warning: no user module:" in msg and "code/serve.py does not exist" in msg


BOTH_BATCH_FNS = '''
from sagemaker_inference import errors

def predict_fn(data, model):
    return data

def predict_batch_fn(inputs, model):
    return inputs

def model_fn(model_dir):
    kind = open(model_dir + "/kind").read()
    if kind == "toolkit":
        raise errors.GenericInferenceToolkitError(500, "toolkit error from model_fn")
    if kind == "key":
        raise KeyError("weights")
    raise ValueError("plain error from model_fn")
'''


@pytest.mark.parametrize("kind", ["plain", "toolkit", "key"])
def test_load_error_includes_warnings_from_the_user_module(tmp_path, worker_factory, kind):
    # predict_batch_fn + predict_fn is a warning; model_fn then fails.
    write_code(tmp_path, BOTH_BATCH_FNS)
    (tmp_path / "kind").write_text(kind)
    w = worker_factory()
    loaded = w.load(tmp_path)
    assert loaded["ok"] is False
    err = loaded["error"]
    warning = "Warning: code/inference.py defines both predict_batch_fn and predict_fn"
    if kind == "plain":
        assert err["type"] == "ValueError"
        assert err["message"].startswith("plain error from model_fn\n" + warning), err
    elif kind == "toolkit":
        assert err["type"] == "GenericInferenceToolkitError"
        assert err["message"].startswith("toolkit error from model_fn\n" + warning), err
    else:
        assert err["type"] == "KeyError"
        assert err["message"].startswith("'weights'\n" + warning), err


# ================================================================ default handlers name the configured program

MODEL_FN_ONLY = '''
import os
import torch

def model_fn(model_dir):
    return torch.jit.load(os.path.join(model_dir, "model.pt"))
'''

PREDICT_FN_ONLY = '''
import torch

def predict_fn(data, model):
    with torch.no_grad():
        return model(data)
'''


@pytest.mark.parametrize("source", [MODEL_FN_ONLY, PREDICT_FN_ONLY], ids=["batched-defaults", "per-request-defaults"])
def test_default_handler_messages_name_the_program(tmp_path, worker_factory, source):
    model = save_scripted(tmp_path)
    write_code(tmp_path, source, name="serve.py")
    w = worker_factory()
    loaded = w.load(tmp_path, program="serve.py")  # SAGEMAKER_PROGRAM=serve.py
    assert loaded["ok"], loaded
    assert loaded["mode"] == ("default-batched" if source is MODEL_FN_ONLY else "per-request")
    _, res = w.infer([
        req(1, "hello", content_type="text/plain"),
        req(2, b"\x00", content_type=""),
        req(3, "[[1,2,3,4]]", accept="image/png"),
        req(4, "[[1,2,3,4]]"),
    ])
    assert [r.status for r in res] == [415, 415, 406, 200]
    assert "Implement input_fn in code/serve.py to deserialize this type" in res[0].error_message
    assert "implement input_fn in code/serve.py" in res[1].error_message
    assert "implement output_fn in code/serve.py" in res[2].error_message
    for r in res[:3]:
        assert "inference.py" not in r.error_message
    np.testing.assert_allclose(jbody(res[3]), expect(model, [[1, 2, 3, 4]]), rtol=1e-6)
