"""Default decoders, encoders and model_fn, in-process (fast corner cases).

The same behaviour is exercised end to end through a worker in test_worker.py.
"""

import io
import json
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import make_mlp  # noqa: E402
from sagebox_runtime import content_types as ct  # noqa: E402
from sagebox_runtime import defaults as d  # noqa: E402
from sagebox_runtime.errors import (  # noqa: E402
    BadInput,
    ModelLoadError,
    OutputError,
    UnsupportedAccept,
    UnsupportedContentType,
    status_of,
)


def npy(arr, **kw):
    buf = io.BytesIO()
    np.save(buf, arr, **kw)
    return buf.getvalue()


def npz(**arrays):
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


# ---------------------------------------------------------------- decoding


def test_json_is_float32():
    t = d.decode_tensor(b"[[1, 2], [3, 4]]", "application/json")
    assert t.dtype == torch.float32 and t.shape == (2, 2)
    assert d.decode_tensor("[1.5]", "Application/JSON; charset=utf-8").tolist() == [1.5]
    assert d.decode_tensor(b"7", ct.JSON).shape == ()


@pytest.mark.parametrize("body", [b"[1, 2", b"[[1, 2], [3]]", b'{"a": 1}', b'["x"]', b"[null]", "[1]".encode("utf-16")])
def test_json_malformed_is_400(body):
    with pytest.raises(BadInput) as e:
        d.decode_tensor(body, ct.JSON)
    assert status_of(e.value) == 400


def test_csv_is_float32_and_1d_for_one_row():
    t = d.decode_tensor(b"1,2,3\n4,5,6\n", "text/csv")
    assert t.dtype == torch.float32 and t.shape == (2, 3)
    one = d.decode_tensor("1,2,3", "text/csv")
    assert one.shape == (3,)
    # shaped like numpy.genfromtxt: one column -> 1-D, one value -> 0-d,
    # blank lines / '#' comments / blanks around cells / CRLF are fine
    assert d.decode_tensor(b"1\n2\n3\n", ct.CSV).shape == (3,)
    assert d.decode_tensor(b"5", ct.CSV).shape == ()
    t = d.decode_tensor(b"# c\r\n 1 , 2 \r\n\r\n3,4 # x\r\n", ct.CSV)
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_csv_nan_and_inf_literals_still_decode():
    t = d.decode_tensor(b"nan,inf,-inf,1e3", ct.CSV)
    assert t.dtype == torch.float32 and t.shape == (4,)
    v = t.numpy()
    assert np.isnan(v[0]) and v[1] == np.inf and v[2] == -np.inf and v[3] == 1000.0


@pytest.mark.parametrize("body", [b"", b"  \n", b"1,2\n3\n"])
def test_csv_malformed_is_400(body):
    with pytest.raises(BadInput) as e:
        d.decode_tensor(body, ct.CSV)
    assert status_of(e.value) == 400


# Strict: these used to decode to NaN (genfromtxt) and run the model on it.
# The SageMaker toolkit does not match that either: it calls
# genfromtxt(dtype=None), which gives a structured array for "1,x" and then
# fails with a 500. sagebox answers 400 naming the problem.
@pytest.mark.parametrize(
    "body, needles",
    [
        (b"1,x", ["line 1", "column 2", "'x'"]),
        (b"1,,3", ["line 1", "column 2", "empty"]),
        (b"a,b\n1,2", ["line 1", "column 1", "'a'"]),
        (b"1,2\n3", ["line 2", "1 column", "line 1 has 2"]),
        (b"1,2\n3,4,5\n", ["line 2", "3 columns"]),
        (b"1,2,", ["column 3", "empty"]),
        (b"1;2", ["column 1", "'1;2'"]),
    ],
)
def test_csv_non_numeric_or_ragged_is_400_naming_the_problem(body, needles):
    with pytest.raises(BadInput) as e:
        d.decode_tensor(body, ct.CSV)
    assert status_of(e.value) == 400
    msg = str(e.value)
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_csv_bad_cell_is_truncated_in_the_message():
    with pytest.raises(BadInput) as e:
        d.decode_tensor(b"1," + b"y" * 5000, ct.CSV)
    msg = str(e.value)
    assert "yyyy..." in msg and len(msg) < 400


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "uint8", "bool", "float16"])
def test_npy_keeps_dtype(dtype):
    arr = np.arange(6).reshape(2, 3).astype(dtype)
    t = d.decode_tensor(npy(arr), "application/x-npy")
    assert t.numpy().dtype == np.dtype(dtype)
    np.testing.assert_array_equal(t.numpy(), arr)


def test_npy_big_endian_is_converted():
    arr = np.arange(4, dtype=">f8")
    t = d.decode_tensor(npy(arr), ct.NPY)
    assert t.dtype == torch.float64 and t.tolist() == [0, 1, 2, 3]


def test_npy_pickle_refused():
    body = npy(np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(BadInput, match="pickled NPY is refused"):
        d.decode_tensor(body, ct.NPY)
    import pickle

    with pytest.raises(BadInput, match="pickle"):
        d.decode_tensor(pickle.dumps([1, 2]), ct.NPY)


@pytest.mark.parametrize("body", [b"not npy at all", npy(np.zeros(3))[:-4], npz(a=np.zeros(2))])
def test_npy_malformed_is_400(body):
    with pytest.raises(BadInput):
        d.decode_tensor(body, ct.NPY)


def test_npy_unsupported_dtype_is_400():
    with pytest.raises(BadInput, match="dtype"):
        d.decode_tensor(npy(np.array(["a", "b"])), ct.NPY)


def test_npz_single_array():
    t = d.decode_tensor(npz(x=np.ones((2, 3), dtype=np.int32)), "application/x-npz")
    assert t.dtype == torch.int32 and t.shape == (2, 3)


def test_npz_several_arrays_is_400_naming_them():
    with pytest.raises(BadInput, match="a, b"):
        d.decode_tensor(npz(a=np.ones(1), b=np.ones(1)), ct.NPZ)


def test_npz_scipy_sparse_layout_is_densified():
    # What scipy.sparse.save_npz(csr_matrix([[0, 2, 0], [1, 0, 3]])) writes.
    dense = np.array([[0, 2, 0], [1, 0, 3]], dtype=np.float32)
    body = npz(
        indices=np.array([1, 0, 2], dtype=np.int32),
        indptr=np.array([0, 1, 3], dtype=np.int32),
        format=np.array(b"csr"),
        shape=np.array([2, 3]),
        data=np.array([2, 1, 3], dtype=np.float32),
    )
    np.testing.assert_array_equal(d.decode_tensor(body, ct.NPZ).numpy(), dense)
    coo = npz(row=np.array([0, 1, 1]), col=np.array([1, 0, 2]), format=np.array(b"coo"), shape=np.array([2, 3]), data=np.array([2.0, 1.0, 3.0]))
    np.testing.assert_array_equal(d.decode_tensor(coo, ct.NPZ).numpy(), dense)
    csc = npz(indices=np.array([1, 0, 1]), indptr=np.array([0, 1, 2, 3]), format=np.array(b"csc"), shape=np.array([2, 3]), data=np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(d.decode_tensor(csc, ct.NPZ).numpy(), dense)


def test_npz_malformed_and_pickled():
    with pytest.raises(BadInput):
        d.decode_tensor(b"PK\x03\x04garbage", ct.NPZ)
    with pytest.raises(BadInput, match="NPY"):
        d.decode_tensor(npy(np.zeros(2)), ct.NPZ)
    buf = io.BytesIO()
    np.savez(buf, o=np.array([{"a": 1}], dtype=object))
    with pytest.raises(BadInput, match="pickle"):
        d.decode_tensor(buf.getvalue(), ct.NPZ)


@pytest.mark.parametrize("ctype", ["", "image/png", "application/octet-stream", "text/plain"])
def test_unsupported_content_type_is_415(ctype):
    with pytest.raises(UnsupportedContentType, match="input_fn") as e:
        d.decode_tensor(b"x", ctype)
    assert status_of(e.value) == 415


# ---------------------------------------------------------------- encoding


def test_output_json_csv_npy_like_toolkit():
    out = torch.tensor([[0.1, 2.0], [3.0, 4.5]])
    defaults = d.Defaults("cpu")
    body, ctype = defaults.output_fn(out, "application/json")
    assert ctype == ct.JSON and json.loads(body) == out.tolist()
    assert body == json.dumps(out.tolist()).encode()
    body, ctype = defaults.output_fn(out, "text/csv")
    assert ctype == ct.CSV
    assert body.decode() == "%s,%s\n%s,%s\n" % tuple(str(v) for v in np.asarray(out.tolist()).ravel())
    body, ctype = defaults.output_fn(out, "application/x-npy")
    arr = np.load(io.BytesIO(body), allow_pickle=False)
    assert ctype == ct.NPY and arr.dtype == np.float64  # tensor.tolist() -> float64, as in the toolkit
    np.testing.assert_allclose(arr, out.numpy())
    assert np.load(io.BytesIO(d.encode_npy(torch.tensor([1, 2]))), allow_pickle=False).dtype == np.int64
    assert np.load(io.BytesIO(d.encode_npy(np.ones(2, np.float32))), allow_pickle=False).dtype == np.float32


def test_output_unsupported_accept_is_406():
    with pytest.raises(UnsupportedAccept) as e:
        d.Defaults("cpu").output_fn(torch.zeros(1), "image/png")
    assert status_of(e.value) == 406


def test_output_object_prediction_is_clear_500():
    with pytest.raises(OutputError, match="pickling"):
        d.encode_npy({"a": object()})
    with pytest.raises(OutputError, match="JSON"):
        d.encode_json(object())
    with pytest.raises(OutputError, match="1-D or 2-D"):
        d.encode_csv(torch.zeros(2, 2, 2))
    assert d.encode_csv(torch.tensor(3.0)) == b"3.0\n"
    assert json.loads(d.encode_json({"t": torch.ones(2), "n": np.float32(1.5)})) == {"t": [1.0, 1.0], "n": 1.5}


# ---------------------------------------------------------------- model_fn


def test_model_fn_prefers_model_pt(tmp_path):
    torch.jit.script(make_mlp(torch)).save(str(tmp_path / "model.pt"))
    torch.jit.script(make_mlp(torch, seed=1)).save(str(tmp_path / "other.pth"))
    m = d.Defaults("cpu").model_fn(str(tmp_path))
    assert m(torch.zeros(1, 4)).shape == (1, 3)


def test_model_fn_single_other_file(tmp_path):
    torch.jit.trace(make_mlp(torch), torch.zeros(1, 4)).save(str(tmp_path / "weights.pth"))
    assert d.Defaults("cpu").model_fn(str(tmp_path))(torch.zeros(2, 4)).shape == (2, 3)


@pytest.mark.parametrize("files", [[], ["a.pt", "b.pth"]])
def test_model_fn_needs_exactly_one(tmp_path, files):
    for f in files:
        torch.jit.script(make_mlp(torch)).save(str(tmp_path / f))
    with pytest.raises(ModelLoadError, match="exactly one"):
        d.Defaults("cpu").model_fn(str(tmp_path))


@pytest.mark.parametrize("what", ["state_dict", "module", "legacy"])
def test_model_fn_torch_save_is_explained(tmp_path, what):
    m = make_mlp(torch)
    obj = m.state_dict() if what == "state_dict" else m
    torch.save(obj, str(tmp_path / "model.pt"), _use_new_zipfile_serialization=(what != "legacy"))
    with pytest.raises(ModelLoadError, match="torch.save, not TorchScript.*provide model_fn"):
        d.Defaults("cpu").model_fn(str(tmp_path))


def test_model_fn_corrupt_torchscript(tmp_path):
    torch.jit.script(make_mlp(torch)).save(str(tmp_path / "model.pt"))
    with zipfile.ZipFile(tmp_path / "model.pt") as z:
        names = z.namelist()
    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as z:
        for n in names:
            z.writestr(n, b"garbage")
    (tmp_path / "model.pt").unlink()
    (tmp_path / "bad.zip").rename(tmp_path / "model.pt")
    with pytest.raises(ModelLoadError, match="failed to load TorchScript"):
        d.Defaults("cpu").model_fn(str(tmp_path))


def test_select_device_cpu():
    assert d.select_device(-1).type == "cpu"
    assert d.select_device(None).type == "cpu"
    if not torch.cuda.is_available():
        assert d.select_device(0).type == "cpu"


# ---------------------------------------------------------------- the program the messages name


def test_messages_name_the_configured_program(tmp_path):
    # The Handler passes "code/<SAGEMAKER_PROGRAM>"; every hint to implement
    # a handler names that file, never a hard-coded code/inference.py.
    where = "code/serve.py"
    defaults = d.Defaults("cpu", where=where)
    with pytest.raises(UnsupportedContentType, match="Implement input_fn in code/serve.py to deserialize"):
        defaults.input_fn(b"x", "text/plain")
    with pytest.raises(UnsupportedContentType, match="no Content-Type.*implement input_fn in code/serve.py"):
        d.decode_tensor(b"x", None, where)
    with pytest.raises(UnsupportedAccept, match="implement output_fn in code/serve.py"):
        defaults.output_fn(torch.zeros(1), "image/png")
    assert "code/serve.py" in str(d.unsupported_accept("image/png", where))
    with pytest.raises(ModelLoadError, match=r"found 0 \(none\).*provide model_fn in code/serve.py\.$"):
        defaults.model_fn(str(tmp_path))
    torch.save(make_mlp(torch).state_dict(), str(tmp_path / "model.pt"))
    with pytest.raises(ModelLoadError, match="torch.save, not TorchScript.*provide model_fn in code/serve.py") as e:
        defaults.model_fn(str(tmp_path))
    assert "inference.py" not in str(e.value)


def test_messages_default_to_code_inference_py():
    with pytest.raises(UnsupportedContentType, match="code/inference.py"):
        d.decode_tensor(b"x", "image/png")
    with pytest.raises(UnsupportedAccept, match="code/inference.py"):
        d.Defaults("cpu").output_fn(torch.zeros(1), "image/png")
