"""Default handlers: what runs when the user's program (``code/inference.py``
unless ``SAGEMAKER_PROGRAM`` says otherwise) does not define a function.

They reproduce the SageMaker PyTorch inference toolkit's defaults, including
its dtypes, with these deliberate differences (each one turns a 500 or a
wrong answer into a clear, correct one):

Decoding (``input_fn``)

* ``application/json`` -> ``json.loads`` -> ``numpy.array`` -> float32 tensor.
  A body that is not JSON, or not a rectangular (nested) list of numbers,
  is a 400 (toolkit: 500 or an object array).
* ``text/csv`` -> float32 tensor, shaped as ``numpy.genfromtxt(delimiter=",")``
  would (1-D for a single row). Decoding is strict: every cell must be a
  number by Python's ``float()`` (``nan``/``inf`` allowed); an empty or
  non-numeric cell (``1,x``, ``1,,3``, a header row), ragged rows or an empty
  body is a 400 naming the line, column and cell. (The toolkit called
  ``genfromtxt(dtype=None)``, which gives a structured array for ``1,x`` and
  then fails with a 500.)
* ``application/x-npy`` -> ``numpy.load(allow_pickle=False)``, dtype preserved
  (float64 stays float64, exactly like the toolkit). Pickled / object arrays
  are refused with a 400 (the toolkit unpickled whatever it was sent).
* ``application/x-npz`` (toolkit: always failed) -> ``numpy.load`` of the
  archive with ``allow_pickle=False``, dtype preserved, by this rule:
  1. an archive written by ``scipy.sparse.save_npz`` (what the SageMaker SDK's
     ``SparseMatrixSerializer`` sends; keys ``format``/``shape``/...) in
     ``csr``, ``csc`` or ``coo`` format is densified;
  2. otherwise an archive holding exactly one array gives that array;
  3. anything else is a 400 naming the arrays found (implement input_fn).
* Types compare case-insensitively with parameters ignored. Any other type,
  or no Content-Type, is a 415 telling the user to implement ``input_fn``.

Prediction (``predict_fn``): under ``torch.no_grad()``, the model is moved to
the worker's device and put in eval mode once (the toolkit did both on every
request), the input is moved to the device, ``model(data)``. The device is
``cuda:<gpu_id>`` of this worker (the toolkit always used ``cuda``, i.e. GPU 0).

Encoding (``output_fn``): a tensor becomes ``tensor.tolist()`` like in the
toolkit, then

* ``application/json``: ``json.dumps`` (anything with ``.tolist()`` is
  converted);
* ``text/csv``: ``numpy.savetxt(delimiter=",", fmt="%s")``;
* ``application/x-npy``: ``numpy.save(allow_pickle=False)``. A tensor is saved
  with the dtype its ``tolist()`` would give (float64 / int64 / bool), exactly
  what the toolkit produced; a numpy array keeps its dtype. Object outputs are
  a clear 500 instead of a pickle.

Accept is negotiated per :mod:`sagebox_runtime.content_types` (q-values,
wildcards); nothing acceptable is a 406 (toolkit: 500). The default
``output_fn`` returns ``(body, content_type)`` with the concrete type chosen,
never the raw Accept header.
"""

from __future__ import annotations

import glob
import io
import json
import os
import zipfile

import numpy as np
import torch

from . import content_types as ct
from .errors import BadInput, ModelLoadError, OutputError, UnsupportedAccept, UnsupportedContentType

# Densifying a sparse NPZ may not allocate more than this many elements.
MAX_DENSE_ELEMENTS = 1 << 28

_TORCH_OK_KINDS = "biufc"
_UNSUPPORTED_UINTS = (np.dtype("uint16"), np.dtype("uint32"), np.dtype("uint64"))


# ------------------------------------------------------------------ device


def select_device(gpu_id) -> torch.device:
    """``cuda:<gpu_id>`` when a GPU is assigned and CUDA works, else CPU."""
    if gpu_id is not None and gpu_id >= 0 and torch.cuda.is_available():
        n = torch.cuda.device_count()
        return torch.device("cuda", gpu_id % n if n else 0)
    return torch.device("cpu")


# ------------------------------------------------------------------ model_fn


def _looks_like_torchscript(path) -> bool:
    """True if ``path`` is a zip archive with TorchScript's constants/code."""
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False
    return any(n.endswith("/constants.pkl") for n in names) or any(
        "/code/" in n for n in names
    )


# ``where`` below is the user's program as the messages name it,
# "code/<SAGEMAKER_PROGRAM>" (the Handler passes its own); the default is the
# program's default name.
DEFAULT_WHERE = "code/inference.py"


def find_model_file(model_dir: str, where: str = DEFAULT_WHERE) -> str:
    path = os.path.join(model_dir, "model.pt")
    if os.path.isfile(path):
        return path
    found = sorted(
        p
        for p in glob.glob(os.path.join(glob.escape(model_dir), "*.pt"))
        + glob.glob(os.path.join(glob.escape(model_dir), "*.pth"))
        if os.path.isfile(p)
    )
    if len(found) != 1:
        names = ", ".join(os.path.basename(p) for p in found) or "none"
        raise ModelLoadError(
            "the default model_fn needs model.pt, or exactly one .pt or .pth file, "
            "in %s; found %d (%s). Rename the model to model.pt or provide model_fn "
            "in %s." % (model_dir, len(found), names, where)
        )
    return found[0]


def load_torchscript(path: str, device, where: str = DEFAULT_WHERE) -> torch.nn.Module:
    try:
        model = torch.jit.load(path, map_location=device)
    except Exception as e:  # RuntimeError from the archive reader, mostly
        if _looks_like_torchscript(path):
            raise ModelLoadError(
                "failed to load TorchScript model %s: %s" % (path, e)
            ) from e
        raise ModelLoadError(
            "%s is not a TorchScript model: it looks like it was saved with "
            "torch.save, not TorchScript. The default model_fn only loads "
            "TorchScript (torch.jit.script(model) or torch.jit.trace(model, x), "
            "then .save(path)); otherwise provide model_fn in %s "
            "that builds the model and loads the weights. (torch said: %s)"
            % (path, where, str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
        ) from e
    return model.to(device)


# ------------------------------------------------------------------ decoding


def body_text(data, content_type) -> str:
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode(ct.charset(content_type))
    except LookupError:
        raise BadInput("unknown charset in Content-Type %r" % content_type) from None
    except UnicodeDecodeError as e:
        raise BadInput("request body is not valid %s text: %s" % (ct.charset(content_type), e)) from None


def _numeric(arr: np.ndarray, what: str) -> np.ndarray:
    if arr.dtype.kind not in "biuf":
        raise BadInput(
            "%s must be a rectangular (nested) list of numbers; got an array of %s"
            % (what, "objects" if arr.dtype.kind == "O" else arr.dtype)
        )
    return arr


def decode_json(data) -> np.ndarray:
    text = body_text(data, ct.JSON)
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise BadInput("request body is not valid JSON: %s" % e) from None
    except RecursionError:
        raise BadInput("request body is JSON nested too deeply to be a tensor") from None
    try:
        arr = np.array(obj)
    except ValueError as e:
        raise BadInput(
            "JSON body must be a rectangular (nested) list of numbers: %s" % e
        ) from None
    return _numeric(arr, "JSON body")


_CELL_SHOWN = 40  # characters of a bad CSV cell quoted back in a 400


def _shown(cell: str) -> str:
    cell = cell.strip()
    if len(cell) > _CELL_SHOWN:
        cell = cell[:_CELL_SHOWN] + "..."
    return repr(cell)


def decode_csv(data) -> np.ndarray:
    """Strict numeric CSV -> float64 array, shaped like ``numpy.genfromtxt``.

    Every cell must parse with Python's ``float()`` (so ``nan``/``inf`` and
    surrounding blanks are fine); an empty or non-numeric cell, or rows of
    different lengths, is a 400 naming the row/column (1-based) and the cell.
    Blank lines and ``#`` comments are skipped, as genfromtxt did. The result
    is squeezed like genfromtxt's: one row (or one column) gives a 1-D array,
    a single value a 0-d one.
    """
    text = body_text(data, ct.CSV)
    rows = []
    width = None
    first_line = None
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0]
        if not line.strip():
            continue
        cells = line.split(",")
        if width is None:
            width, first_line = len(cells), lineno
        elif len(cells) != width:
            raise BadInput(
                "malformed CSV body: row at line %d has %d column%s, but the row at "
                "line %d has %d; all rows must have the same number of columns"
                % (lineno, len(cells), "" if len(cells) == 1 else "s", first_line, width)
            )
        row = []
        for col, cell in enumerate(cells, 1):
            try:
                row.append(float(cell))
            except ValueError:
                what = "is empty" if not cell.strip() else "is not a number: %s" % _shown(cell)
                raise BadInput(
                    "malformed CSV body: cell at line %d, column %d %s "
                    "(the default input_fn accepts numeric CSV only; implement "
                    "input_fn for anything else)" % (lineno, col, what)
                ) from None
        rows.append(row)
    if not rows:
        raise BadInput("empty CSV body")
    return np.array(rows, dtype=np.float64).squeeze()


def decode_npy(data) -> np.ndarray:
    if isinstance(data, str):
        raise BadInput("NPY body must be binary")
    if not data:
        raise BadInput("empty NPY body")
    try:
        obj = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as e:
        if "pickle" in str(e):
            raise BadInput(
                "pickled NPY is refused: the body holds Python objects "
                "(an object array or a pickle); send a numeric array "
                "(numpy.save of a numeric array, allow_pickle=False)"
            ) from None
        raise BadInput("request body is not a valid NPY file: %s" % e) from None
    except Exception as e:  # OSError, EOFError, BadZipFile, ... on garbage
        raise BadInput("request body is not a valid NPY file: %s" % e) from None
    if isinstance(obj, np.lib.npyio.NpzFile):
        obj.close()
        raise BadInput(
            "request body is an NPZ archive; send it as application/x-npz"
        )
    return obj


def _densify(z, keys) -> np.ndarray:
    fmt = z["format"]
    fmt = fmt.item() if fmt.shape == () else fmt
    if isinstance(fmt, bytes):
        fmt = fmt.decode("ascii", "replace")
    fmt = str(fmt)
    shape = tuple(int(v) for v in z["shape"])
    if len(shape) != 2:
        raise BadInput("sparse NPZ shape must be 2-D, got %r" % (shape,))
    if shape[0] * shape[1] > MAX_DENSE_ELEMENTS:
        raise BadInput(
            "sparse NPZ of shape %r is too large to densify; implement input_fn" % (shape,)
        )
    data = z["data"]
    out = np.zeros(shape, dtype=data.dtype)
    try:
        if fmt in ("csr", "csc"):
            indices = z["indices"]
            indptr = z["indptr"]
            major = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
            if fmt == "csr":
                np.add.at(out, (major, indices), data)
            else:
                np.add.at(out, (indices, major), data)
        elif fmt == "coo":
            np.add.at(out, (z["row"], z["col"]), data)
        else:
            raise BadInput(
                "sparse NPZ format %r is not supported (csr, csc, coo are); "
                "implement input_fn" % fmt
            )
    except (IndexError, ValueError, KeyError) as e:
        raise BadInput("malformed sparse NPZ (%s): %s" % (fmt, e)) from None
    return out


def decode_npz(data) -> np.ndarray:
    if isinstance(data, str):
        raise BadInput("NPZ body must be binary")
    if not data:
        raise BadInput("empty NPZ body")
    try:
        z = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as e:
        if "pickle" in str(e):
            raise BadInput("request body is not an NPZ archive (pickled data is refused)") from None
        raise BadInput("request body is not a valid NPZ archive: %s" % e) from None
    except Exception as e:  # OSError, EOFError, BadZipFile, ... on garbage
        raise BadInput("request body is not a valid NPZ archive: %s" % e) from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise BadInput("request body is an NPY file, not an NPZ archive; send it as application/x-npy")
    try:
        keys = list(z.keys())
        if "format" in keys and "shape" in keys and "data" in keys:
            try:
                return _densify(z, keys)
            except BadInput:
                raise
            except Exception as e:
                raise BadInput("malformed sparse NPZ: %s" % e) from None
        if len(keys) != 1:
            raise BadInput(
                "NPZ archive holds %d arrays (%s); the default input_fn takes "
                "exactly one (or a scipy.sparse matrix). Implement input_fn to "
                "combine them." % (len(keys), ", ".join(keys) or "none")
            )
        try:
            return z[keys[0]]
        except ValueError as e:
            if "pickle" in str(e):
                raise BadInput("pickled arrays inside NPZ are refused; send numeric arrays") from None
            raise BadInput("malformed array %r in NPZ: %s" % (keys[0], e)) from None
        except Exception as e:
            raise BadInput("malformed array %r in NPZ: %s" % (keys[0], e)) from None
    finally:
        z.close()


def _from_numpy(arr: np.ndarray) -> torch.Tensor:
    dt = arr.dtype
    if dt.kind not in _TORCH_OK_KINDS or dt in _UNSUPPORTED_UINTS:
        raise BadInput(
            "array dtype %s cannot become a torch tensor; send bool, int8/16/32/64, "
            "uint8, float16/32/64 or complex data" % dt
        )
    if not dt.isnative:
        arr = arr.astype(dt.newbyteorder("="))
    if not arr.flags.writeable:
        arr = arr.copy()
    return torch.from_numpy(arr)


def decode_tensor(data, content_type, where: str = DEFAULT_WHERE) -> torch.Tensor:
    """The default decoder: body (bytes or str) -> CPU tensor.

    Raises BadInput (400) for malformed bodies and UnsupportedContentType
    (415) for types it has no decoder for; its message tells the user to
    implement input_fn in ``where``.
    """
    mtype = ct.media_type(content_type)
    if mtype == ct.JSON:
        return torch.from_numpy(decode_json(data).astype(np.float32))
    if mtype == ct.CSV:
        return torch.from_numpy(np.asarray(decode_csv(data), dtype=np.float32))
    if mtype == ct.NPY:
        return _from_numpy(decode_npy(data))
    if mtype == ct.NPZ:
        return _from_numpy(decode_npz(data))
    if not mtype:
        raise UnsupportedContentType(
            "the request has no Content-Type; the default input_fn decodes %s. "
            "Send one of those or implement input_fn in %s"
            % (", ".join(ct.DECODABLE), where)
        )
    raise UnsupportedContentType(
        "Content-Type %s is not supported by the default input_fn (it decodes %s). "
        "Implement input_fn in %s to deserialize this type."
        % (content_type, ", ".join(ct.DECODABLE), where)
    )


# ------------------------------------------------------------------ encoding


def _json_default(obj):
    tolist = getattr(obj, "tolist", None)
    if tolist is not None:
        return tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError("Object of type %s is not JSON serializable" % type(obj).__name__)


def encode_json(prediction) -> bytes:
    if isinstance(prediction, (torch.Tensor, np.ndarray)):
        prediction = prediction.tolist()
    try:
        return json.dumps(prediction, default=_json_default).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise OutputError(
            "prediction of type %s cannot be encoded as JSON (%s); return lists, "
            "numbers, arrays or tensors, or implement output_fn"
            % (type(prediction).__name__, e)
        ) from None


def encode_csv(prediction) -> bytes:
    if isinstance(prediction, torch.Tensor):
        prediction = prediction.tolist()
    try:
        arr = np.asarray(prediction)
    except ValueError as e:
        raise OutputError("prediction cannot be encoded as CSV: %s" % e) from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim > 2:
        raise OutputError(
            "CSV output needs a 1-D or 2-D prediction, got shape %s; choose "
            "application/json or application/x-npy, or implement output_fn"
            % (tuple(arr.shape),)
        )
    buf = io.StringIO()
    np.savetxt(buf, arr, delimiter=",", fmt="%s")
    return buf.getvalue().encode("utf-8")


def _tolist_dtype(t: torch.Tensor) -> np.ndarray:
    # numpy.array(t.tolist()) without the round trip through Python objects.
    t = t.detach().cpu()
    if t.is_floating_point():
        t = t.to(torch.float64)
    elif t.is_complex():
        t = t.to(torch.complex128)
    elif t.dtype != torch.bool:
        t = t.to(torch.int64)
    return t.numpy()


def encode_npy(prediction) -> bytes:
    if isinstance(prediction, torch.Tensor):
        arr = _tolist_dtype(prediction)
    else:
        try:
            arr = np.asarray(prediction)
        except ValueError as e:
            raise OutputError("prediction cannot be saved as NPY: %s" % e) from None
    if arr.dtype.kind == "O":
        raise OutputError(
            "prediction of type %s is not a numeric array and would need pickling "
            "to be saved as NPY (refused); return a tensor or numeric array, choose "
            "application/json, or implement output_fn" % type(prediction).__name__
        )
    buf = io.BytesIO()
    try:
        np.save(buf, arr, allow_pickle=False)
    except ValueError as e:
        raise OutputError("prediction cannot be saved as NPY: %s" % e) from None
    return buf.getvalue()


_ENCODERS = {ct.JSON: encode_json, ct.CSV: encode_csv, ct.NPY: encode_npy}


def encode(prediction, media_type: str) -> bytes:
    """Encode for a concrete, supported media type (see content_types.negotiate)."""
    return _ENCODERS[media_type](prediction)


def unsupported_accept(accept, where: str = DEFAULT_WHERE) -> UnsupportedAccept:
    return UnsupportedAccept(
        "Accept %s is not supported by the default output_fn (it encodes %s). "
        "Ask for one of those or implement output_fn in %s."
        % (accept, ", ".join(ct.ENCODABLE), where)
    )


# ------------------------------------------------------------------ handlers


class Defaults:
    """The default model_fn/input_fn/predict_fn/output_fn for one worker.

    ``where`` is the user's program as error messages name it
    (``code/<SAGEMAKER_PROGRAM>``).
    """

    def __init__(self, device, default_accept=ct.JSON, where=DEFAULT_WHERE):
        self.device = torch.device(device)
        self.default_accept = default_accept
        self.where = where
        self._prepared = None  # the model last moved to the device and put in eval

    def model_fn(self, model_dir):
        return load_torchscript(find_model_file(model_dir, self.where), self.device, self.where)

    def input_fn(self, input_data, content_type):
        t = decode_tensor(input_data, content_type, self.where)
        return t.to(self.device)

    def prepare(self, model):
        if model is not self._prepared:
            if isinstance(model, torch.nn.Module):
                model = model.to(self.device)
                model.eval()
            self._prepared = model
        return self._prepared

    def predict_fn(self, data, model):
        with torch.no_grad():
            model = self.prepare(model)
            if isinstance(data, torch.Tensor):
                data = data.to(self.device)
            return model(data)

    def output_fn(self, prediction, accept):
        mtype = ct.negotiate(ct.effective_accept(accept, self.default_accept), ct.ENCODABLE, self.default_accept)
        if mtype is None:
            raise unsupported_accept(accept, self.where)
        return encode(prediction, mtype), mtype
