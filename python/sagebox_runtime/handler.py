"""User module resolution and the per-batch inference pipeline.

Resolution (SageMaker PyTorch toolkit contract)
-----------------------------------------------
The user module is ``<code_dir>/<program>`` (``SAGEMAKER_PROGRAM``,
default ``inference.py``; ``code_dir`` is ``<model_dir>/code`` unless LOAD
names another, for a local ``SAGEMAKER_SUBMIT_DIRECTORY``), imported from
that file with ``code_dir`` first on ``sys.path``. When the file does not
exist every function falls back to its default, as in the toolkit, but a
warning naming the missing file is
logged and returned in LOADED. When loading fails, the worker appends the
warnings gathered so far to the error's message (one ``Warning: ...`` line
each), so the front end shows e.g. the missing file next to the default
model_fn's error. Messages that tell the user to implement a handler name
the program actually configured (``code/<SAGEMAKER_PROGRAM>``).

Functions looked up (all optional)::

    model_fn(model_dir[, context])                          -> model
    input_fn(input_data, content_type[, context])            -> data
    predict_fn(data, model[, context])                       -> prediction
    output_fn(prediction, accept[, context])                 -> body | (body, content_type)
    transform_fn(model, input_data, content_type, accept[, context])
                                                             -> body | (body, content_type)
    pre_model_fn(model_dir[, context])                       (before model_fn)
    model_warmup_fn(model_dir, model[, context])             (after model_fn)
    predict_batch_fn(inputs, model[, context])               -> list   (sagebox extension)

``context`` is passed when, and only when, the function has one parameter
more than the table lists; the toolkit's rule is reproduced exactly
(``len(inspect.signature(f).parameters)``: a parameter with a default, a
keyword-only parameter, ``*args`` and ``**kwargs`` count as one each; bound
methods, ``functools.partial`` objects and callable objects count what
``inspect.signature`` shows, i.e. without ``self`` or the bound arguments).
The arguments, context included, are always passed positionally, as the
toolkit does. Other counts are a ``TypeError`` at load time (the toolkit
raised it on the first request), and so is a signature with the right count
that cannot take the arguments positionally (e.g. ``predict_fn(data, model,
*, context)``, which the toolkit would fail on every request). Either message
names the function, the file, its signature and the expected parameters.
``transform_fn`` together with ``input_fn``, ``predict_fn`` or
``output_fn`` is an error at load time, as in the toolkit.

``input_data`` is the body as ``bytes``; for ``application/json`` and
``text/csv`` (any case, any parameters) it is decoded to ``str`` using the
charset parameter (UTF-8 by default). ``content_type`` is the request's
Content-Type exactly as sent (``None`` when absent). ``accept`` is the
request's Accept, or the endpoint's default accept when it is missing or
``*/*``.

Response Content-Type, first that applies: the second element of a
``(body, content_type)`` return; ``context.set_response_content_type``; the
type the default ``output_fn`` chose; the best concrete type of the Accept.
A body may be bytes-like or str (UTF-8). ``None`` is an empty body; any other
value is JSON-encoded (as TorchServe does) with Content-Type
``application/json``, and a value that cannot be is a 500.

Batches
-------
The worker receives a batch of up to ``batch_size`` requests and always
answers one result per request, each with its own status:

* Default ``input_fn``/``predict_fn``/``output_fn`` (any ``model_fn``):
  every request is decoded on its own (a bad one fails alone with its
  400/406/415). Decoded tensors with the same dtype and the same shape after
  the first dimension are concatenated along dim 0 (a 1-D input counts as one
  row and is squeezed back), the model runs ONCE on the concatenation, and
  the output (a tensor, or a tuple/list/dict of tensors, whose first
  dimension is the total number of rows) is split back per request and
  encoded with each request's own Accept. Requests with other shapes form
  their own groups. A lone request is passed to the model unchanged. If the
  batched call raises or its output cannot be split, the group is re-run one
  request at a time so that only a bad request fails.

* ``predict_batch_fn(inputs, model[, context]) -> list`` (opt-in): every
  request goes through ``input_fn`` (user or default) on its own; requests
  whose input_fn failed are answered with their error and left out;
  ``predict_batch_fn`` is called ONCE with the list of the others' inputs, in
  batch order, and must return a list of the same length whose element ``i``
  is the prediction for ``inputs[i]`` (an element that is an exception
  instance fails that request alone with that exception's status). Each
  prediction then goes through ``output_fn`` (user or default) with its own
  request's Accept. Its ``context`` holds exactly the requests in ``inputs``:
  ``context.get_request_header(i, ...)`` is the request of ``inputs[i]``. If
  it raises, or returns something that is not a list of the right length,
  every request in the call fails with that error. It cannot be combined
  with ``transform_fn``; when present, ``predict_fn`` is not used.

* Otherwise each request runs the whole chain on its own, with a context
  whose index 0 is that request; one failure fails only its request.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os
import sys
import traceback

import torch

from . import content_types as ct
from .context import Context, ContextView
from .defaults import Defaults, decode_tensor, encode, encode_json, select_device, unsupported_accept
from .errors import (
    BadInput,
    OutputError,
    message_of,
    status_of,
)
from .wire import Result

log = logging.getLogger("sagebox.worker")

# name -> (parameter names without context)
SIGNATURES = {
    "model_fn": ("model_dir",),
    "input_fn": ("input_data", "content_type"),
    "predict_fn": ("data", "model"),
    "output_fn": ("prediction", "accept"),
    "transform_fn": ("model", "input_data", "content_type", "accept"),
    "pre_model_fn": ("model_dir",),
    "model_warmup_fn": ("model_dir", "model"),
    "predict_batch_fn": ("inputs", "model"),
}

MODE_STACK = "default-batched"
MODE_BATCH_FN = "predict_batch_fn"
MODE_TRANSFORM = "transform_fn"
MODE_PER_REQUEST = "per-request"


class LoadConfig:
    """The LOAD message's fields."""

    def __init__(
        self,
        model_dir,
        program="inference.py",
        gpu_id=-1,
        batch_size=1,
        worker_id=0,
        server_name="sagebox",
        server_version="",
        default_accept=ct.JSON,
        code_dir="",
        original_request=False,
        **extra,
    ):
        self.model_dir = model_dir
        self.program = program or "inference.py"
        self.gpu_id = -1 if gpu_id is None else int(gpu_id)
        self.batch_size = max(1, int(batch_size or 1))
        self.worker_id = int(worker_id or 0)
        self.server_name = server_name or "sagebox"
        self.server_version = server_version or ""
        self.default_accept = default_accept or ct.JSON
        # The user code's directory: <model_dir>/code unless LOAD names one
        # (SAGEMAKER_SUBMIT_DIRECTORY pointing at a local directory).
        self.code_dir = code_dir or os.path.join(model_dir, "code")
        # INFER elements carry the original request (a pipeline's later stage).
        self.original_request = bool(original_request)
        self.extra = extra


def _shown_signature(sig, limit=200):
    """``sig`` as the user wrote it, without annotations: ``a, *args, b=None``."""
    try:
        plain = sig.replace(
            parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
            return_annotation=sig.empty,
        )
        text = str(plain)[1:-1]
    except Exception:  # a default whose repr fails, say
        text = ", ".join(sig.parameters)
    return text if len(text) <= limit else text[:limit] + "..."


def _wants_context(name, fn, where):
    """True if fn takes a context (the toolkit's rule), False if not.

    Raises TypeError naming the function, ``where`` (the user's file) and
    the expected parameters when it takes neither, or when its signature
    cannot take the arguments by position (they are passed that way).
    """
    expected = SIGNATURES[name]
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise TypeError(
            "%s in %s: cannot read its signature (%s)" % (name, where, e)
        ) from None
    n = len(sig.parameters)
    if n == len(expected):
        wants = False
    elif n == len(expected) + 1:
        wants = True
    else:
        raise TypeError(
            "%s in %s takes %d parameter%s (%s) but %d (%s) or %d (%s, context) are expected"
            % (
                name,
                where,
                n,
                "" if n == 1 else "s",
                _shown_signature(sig),
                len(expected),
                ", ".join(expected),
                len(expected) + 1,
                ", ".join(expected),
            )
        )
    args = expected + ("context",) if wants else expected
    try:
        sig.bind(*args)
    except TypeError as e:
        raise TypeError(
            "%s in %s has %d parameter%s (%s), so it is called as %s(%s), but it "
            "cannot take those arguments by position (%s); make every parameter "
            "positional: %s(%s) or %s(%s, context)"
            % (
                name,
                where,
                n,
                "" if n == 1 else "s",
                _shown_signature(sig),
                name,
                ", ".join(args),
                e,
                name,
                ", ".join(expected),
                name,
                ", ".join(expected),
            )
        ) from None
    return wants


def _bind(name, fn, where):
    """fn as a callable taking (*args, ctx) whatever its own arity."""
    if _wants_context(name, fn, where):
        return fn
    k = len(SIGNATURES[name])
    if k == 1:
        return lambda a, ctx: fn(a)
    if k == 2:
        return lambda a, b, ctx: fn(a, b)
    if k == 4:
        return lambda a, b, c, d, ctx: fn(a, b, c, d)
    return lambda *args: fn(*args[:-1])


def _drop_ctx(fn, k):
    if k == 1:
        return lambda a, ctx: fn(a)
    return lambda a, b, ctx: fn(a, b)


class _Group:
    __slots__ = ("key", "members", "rows")

    def __init__(self, key=None):
        self.key = key  # (dtype, per-row shape) the members are stacked on
        self.members = []  # (i, tensor, media, rows, squeeze)
        self.rows = 0


def _short_exc(e, limit=300):
    msg = str(e).strip().replace("\n", " ")
    if len(msg) > limit:
        msg = msg[:limit] + "..."
    return "%s: %s" % (type(e).__name__, msg) if msg else type(e).__name__


def _split(out, rows, squeeze, total):
    """Per-request pieces of a batched output, or None if it cannot be split."""
    if isinstance(out, torch.Tensor):
        if out.dim() == 0 or out.shape[0] != total:
            return None
        out = out.detach()
        if out.device.type != "cpu":
            out = out.cpu()
        pieces = []
        off = 0
        for r, sq in zip(rows, squeeze):
            pieces.append(out[off] if sq else out[off : off + r])
            off += r
        return pieces
    if isinstance(out, (tuple, list)) and out:
        cols = [_split(o, rows, squeeze, total) for o in out]
        if any(c is None for c in cols):
            return None
        kind = tuple if isinstance(out, tuple) else list
        return [kind(c[k] for c in cols) for k in range(len(rows))]
    if isinstance(out, dict) and out:
        cols = {key: _split(o, rows, squeeze, total) for key, o in out.items()}
        if any(c is None for c in cols.values()):
            return None
        return [{key: c[k] for key, c in cols.items()} for k in range(len(rows))]
    return None


class Handler:
    """Loads the user module and model, then answers batches."""

    def __init__(self, cfg: LoadConfig):
        self.cfg = cfg
        self.code_dir = cfg.code_dir
        self.device = None
        self.context = None
        self.defaults = None
        self.model = None
        self.module = None
        self.mode = None
        self.warnings = []
        # Set when a handler raised MemoryError: the worker answers the
        # batch, then asks the front end to replace it (worker.py).
        self.out_of_memory = False
        self.user = {}  # names of functions the user defined
        self._unstacked_keys = set()  # group keys whose batched pass fell back (warned once)

    # ------------------------------------------------------------ loading

    def _program_path(self):
        prog = self.cfg.program
        if not prog.endswith(".py"):
            prog += ".py"
        return prog, os.path.join(self.code_dir, prog)

    def import_user_module(self):
        # sagemaker_inference stand-ins for toolkit-style imports; appended so
        # that a real installation, if any, wins.
        compat = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat")
        if compat not in sys.path:
            sys.path.append(compat)
        prog, path = self._program_path()
        modname = prog[:-3].replace("/", ".").replace(os.sep, ".")
        pkg_init = os.path.join(self.code_dir, prog[:-3], "__init__.py")
        if os.path.isdir(self.code_dir) and self.code_dir not in sys.path:
            sys.path.insert(0, self.code_dir)
        if modname in sys.modules:
            # e.g. SAGEMAKER_PROGRAM=code.py or json.py: never replace a module
            # that is already imported (the stdlib's, or ours).
            modname = "_sagebox_user_" + modname.replace(".", "_")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location(modname, path)
        elif os.path.isfile(pkg_init):
            path = pkg_init
            spec = importlib.util.spec_from_file_location(
                modname, pkg_init, submodule_search_locations=[os.path.dirname(pkg_init)]
            )
        else:
            msg = (
                "no user module: %s does not exist, so every handler uses its "
                "default (model_fn loads TorchScript model.pt). Set "
                "SAGEMAKER_PROGRAM or package your script as code/%s in the model "
                "archive." % (path, prog)
            )
            self.warnings.append(msg)
            log.warning("%s", msg)
            return None
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(modname, None)
            raise
        log.info("imported user module %s", path)
        return module

    @property
    def where(self):
        """The user's program as messages name it: ``code/<program>.py``."""
        return "code/" + self._program_path()[0]

    def load(self):
        """Import the user module, check its handlers, run model_fn once.

        Returns the LOADED fields; raises on any failure (``self.warnings``
        then holds the warnings gathered until then).
        """
        cfg = self.cfg
        self.device = select_device(cfg.gpu_id)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        elif cfg.gpu_id >= 0:
            msg = "gpu_id %d assigned but CUDA is not available; running on CPU" % cfg.gpu_id
            self.warnings.append(msg)
            log.warning("%s", msg)
        gpu = self.device.index if self.device.type == "cuda" else None
        self.context = Context(
            cfg.model_dir, gpu, cfg.batch_size, cfg.server_name, cfg.server_version
        )
        where = self.where
        self.defaults = d = Defaults(self.device, cfg.default_accept, where)

        self.module = mod = self.import_user_module()
        fns = {}
        for name in SIGNATURES:
            fn = getattr(mod, name, None) if mod is not None else None
            if fn is None:
                continue
            if not callable(fn):
                raise TypeError("%s in %s is not callable (%s)" % (name, where, type(fn).__name__))
            fns[name] = fn
        self.user = fns
        if "transform_fn" in fns:
            others = [n for n in ("input_fn", "predict_fn", "output_fn") if n in fns]
            if others:
                raise ValueError(
                    "Cannot use transform_fn implementation in %s together with %s: "
                    "transform_fn replaces input_fn, predict_fn and output_fn. Remove "
                    "one or the other." % (where, ", ".join(others))
                )
            if "predict_batch_fn" in fns:
                raise ValueError(
                    "Cannot use transform_fn together with predict_batch_fn in %s" % where
                )
        if "predict_batch_fn" in fns and "predict_fn" in fns:
            msg = "%s defines both predict_batch_fn and predict_fn; predict_batch_fn is used, predict_fn is not" % where
            self.warnings.append(msg)
            log.warning("%s", msg)

        b = {name: _bind(name, fn, where) for name, fn in fns.items()}
        # Handlers that take a context; the others get None instead of a view
        # (views cost a little per request and handler).
        self._ctx_wanted = frozenset(n for n, fn in fns.items() if _wants_context(n, fn, where))
        self._chain_view = bool(self._ctx_wanted & {"input_fn", "predict_fn", "output_fn"})
        self._model_fn = b.get("model_fn") or _drop_ctx(d.model_fn, 1)
        self._input_fn = b.get("input_fn") or _drop_ctx(d.input_fn, 2)
        self._predict_fn = b.get("predict_fn") or _drop_ctx(d.predict_fn, 2)
        self._output_fn = b.get("output_fn")
        self._transform_fn = b.get("transform_fn")
        self._predict_batch_fn = b.get("predict_batch_fn")
        self._default_output = "output_fn" not in fns

        if "transform_fn" in fns:
            self.mode = MODE_TRANSFORM
        elif "predict_batch_fn" in fns:
            self.mode = MODE_BATCH_FN
        elif not ({"input_fn", "predict_fn", "output_fn"} & fns.keys()):
            self.mode = MODE_STACK
        else:
            self.mode = MODE_PER_REQUEST

        ctx0 = ContextView(self.context, ())
        if "pre_model_fn" in b:
            b["pre_model_fn"](cfg.model_dir, ctx0)
        self.model = self._model_fn(cfg.model_dir, ctx0)
        if "model_warmup_fn" in b:
            b["model_warmup_fn"](cfg.model_dir, self.model, ctx0)
        log.info(
            "model loaded on %s (handlers: %s; batching: %s)",
            self.device,
            ", ".join(sorted(fns)) or "all defaults",
            self.mode,
        )
        return {
            "ok": True,
            "batch_aware": self.mode in (MODE_STACK, MODE_BATCH_FN),
            "mode": self.mode,
            "device": str(self.device),
            "handlers": sorted(fns),
            "warnings": list(self.warnings),
        }

    # ------------------------------------------------------------ helpers

    def _accept(self, req):
        return ct.effective_accept(req.accept, self.cfg.default_accept)

    def _media(self, accept):
        """Encoder for the default output_fn, negotiated before any work."""
        m = ct.negotiate(accept, ct.ENCODABLE, self.cfg.default_accept)
        if m is None:
            raise unsupported_accept(accept, self.defaults.where)
        return m

    def _input(self, req):
        data = req.body
        ctype = req.content_type or None
        if ctype is not None and ct.media_type(ctype) in ct.UTF8_TYPES:
            try:
                data = data.decode(ct.charset(ctype))
            except LookupError:
                raise BadInput("unknown charset in Content-Type %r" % ctype) from None
            except UnicodeDecodeError as e:
                raise BadInput("request body is not valid %s text: %s" % (ct.charset(ctype), e)) from None
        return data, ctype

    def _fail(self, i, req, exc, tb=None):
        status = status_of(exc)
        msg = message_of(exc)
        if isinstance(exc, MemoryError):
            # Whatever leaked stays in this process: it is replaced.
            self.out_of_memory = True
            msg += " (the worker ran out of memory; it is being restarted, and later requests go to a fresh worker)"
        if tb is None:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        headers = ()
        resp = self.context.responses.get(i)
        if resp is not None and resp.headers:
            headers = [(str(k), str(v)) for k, v in resp.headers.items()]
        return Result(
            req.id,
            status,
            "",
            headers,
            b"",
            type(exc).__name__,
            msg,
            tb,
        )

    def _finish(self, i, req, out, ctype):
        """Result for a handler's return value ``out``.

        ``ctype`` is the Content-Type to use when the handler did not say.
        """
        explicit = None
        if isinstance(out, tuple):
            if len(out) != 2 or not (out[1] is None or isinstance(out[1], str)):
                raise OutputError(
                    "a handler returned a tuple of %d element(s); return body or "
                    "(body, content_type)" % len(out)
                )
            out, explicit = out
        if isinstance(out, bytes):
            body = out
        elif isinstance(out, str):
            body = out.encode("utf-8")
        elif isinstance(out, (bytearray, memoryview)):
            body = bytes(out)
        elif out is None:
            body = b""
        else:
            try:
                body = encode_json(out)
            except OutputError:
                raise OutputError(
                    "a handler returned %s, which is not bytes or str and cannot be "
                    "encoded as JSON; return bytes, str or (body, content_type)"
                    % type(out).__name__
                ) from None
            ctype = ct.JSON
        status = 200
        headers = ()
        resp = self.context.responses.get(i)
        if resp is not None:
            if resp.content_type:
                ctype = resp.content_type
            if resp.headers:
                headers = [(str(k), str(v)) for k, v in resp.headers.items()]
            if resp.status is not None:
                status = resp.status
                if not 100 <= status <= 599:
                    raise OutputError("context.set_response_status got invalid status %r" % status)
        if explicit:
            ctype = explicit
        if status >= 400:
            text = body.decode("utf-8", "replace") if body else ""
            return Result(
                req.id,
                status,
                str(ctype or ""),
                headers,
                body,
                "ResponseStatus",
                (resp.phrase if resp is not None and resp.phrase else text) or "status %d set by the handler" % status,
                "",
            )
        return Result(req.id, status, str(ctype or ""), headers, body)

    # ------------------------------------------------------------ batches

    def run_batch(self, requests):
        """One Result per request, in order. Never raises."""
        self.context.begin_batch(requests)
        mode = self.mode
        if mode == MODE_STACK:
            return self._run_stacked(requests)
        if mode == MODE_BATCH_FN:
            return self._run_batch_fn(requests)
        one = self._one_transform if mode == MODE_TRANSFORM else self._one_chain
        return [one(i, r) for i, r in enumerate(requests)]

    def _one_chain(self, i, req):
        try:
            view = ContextView(self.context, (i,)) if self._chain_view else None
            accept = self._accept(req)
            if self._default_output:
                media = self._media(accept)
            data, ctype = self._input(req)
            data = self._input_fn(data, ctype, view)
            pred = self._predict_fn(data, self.model, view)
            if self._default_output:
                return self._finish(i, req, encode(pred, media), media)
            out = self._output_fn(pred, accept, view)
            return self._finish(i, req, out, ct.concrete(accept, self.cfg.default_accept))
        except (Exception, SystemExit) as e:
            return self._fail(i, req, e)

    def _one_transform(self, i, req):
        try:
            view = ContextView(self.context, (i,))
            accept = self._accept(req)
            data, ctype = self._input(req)
            out = self._transform_fn(self.model, data, ctype, accept, view)
            return self._finish(i, req, out, ct.concrete(accept, self.cfg.default_accept))
        except (Exception, SystemExit) as e:
            return self._fail(i, req, e)

    def _run_batch_fn(self, requests):
        results = [None] * len(requests)
        idx, inputs, accepts = [], [], []
        context = self.context
        input_view = "input_fn" in self._ctx_wanted
        output_view = "output_fn" in self._ctx_wanted
        default_output = self._default_output
        input_fn = self._input_fn
        for i, req in enumerate(requests):
            try:
                accept = self._accept(req)
                media = self._media(accept) if default_output else accept
                data, ctype = self._input(req)
                inputs.append(input_fn(data, ctype, ContextView(context, (i,)) if input_view else None))
                idx.append(i)
                accepts.append((accept, media))
            except (Exception, SystemExit) as e:
                results[i] = self._fail(i, req, e)
        if idx:
            try:
                preds = self._predict_batch_fn(inputs, self.model, ContextView(self.context, tuple(idx)))
                if not isinstance(preds, (list, tuple)) or len(preds) != len(inputs):
                    raise OutputError(
                        "predict_batch_fn must return a list with one prediction per "
                        "input: got %s for %d input(s)"
                        % (
                            "%d item(s)" % len(preds) if isinstance(preds, (list, tuple)) else type(preds).__name__,
                            len(inputs),
                        )
                    )
            except (Exception, SystemExit) as e:
                tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
                for i in idx:
                    results[i] = self._fail(i, requests[i], e, tb)
                return results
            for i, pred, (accept, media) in zip(idx, preds, accepts):
                req = requests[i]
                if isinstance(pred, BaseException):
                    results[i] = self._fail(i, req, pred)
                    continue
                try:
                    if default_output:
                        results[i] = self._finish(i, req, encode(pred, media), media)
                    else:
                        view = ContextView(context, (i,)) if output_view else None
                        out = self._output_fn(pred, accept, view)
                        results[i] = self._finish(i, req, out, ct.concrete(accept, self.cfg.default_accept))
                except (Exception, SystemExit) as e:
                    results[i] = self._fail(i, req, e)
        return results

    def _predict_one(self, i, req, t, media):
        try:
            pred = self.defaults.predict_fn(t, self.model)
            return self._finish(i, req, encode(pred, media), media)
        except (Exception, SystemExit) as e:
            return self._fail(i, req, e)

    def _warn_unstacked(self, key, n, rows, why):
        """Warn, once per (dtype, row shape), that a batched pass fell back."""
        if key in self._unstacked_keys:
            return
        self._unstacked_keys.add(key)
        dtype, shape = key
        log.warning(
            "batched forward pass over %d requests (%d rows) of dtype %s and row shape %r "
            "failed: %s; requests of that dtype/shape now run one by one for this batch "
            "(later batches still try the batched pass first; this warning is not "
            "repeated for this dtype/shape)",
            n, rows, str(dtype).replace("torch.", ""), shape, why,
        )

    def _run_stacked(self, requests):
        results = [None] * len(requests)
        groups = {}
        order = []

        for i, req in enumerate(requests):
            try:
                media = self._media(self._accept(req))
                t = decode_tensor(req.body, req.content_type, self.defaults.where)
            except (Exception, SystemExit) as e:
                results[i] = self._fail(i, req, e)
                continue
            if t.dim() == 0:
                key = ("scalar", i)
                rows, sq = 1, False
            elif t.dim() == 1:
                key = (t.dtype, tuple(t.shape))
                rows, sq = 1, True
            else:
                key = (t.dtype, tuple(t.shape[1:]))
                rows, sq = t.shape[0], False
            g = groups.get(key)
            if g is None:
                g = groups[key] = _Group(key)
                order.append(g)
            g.members.append((i, t, media, rows, sq))
            g.rows += rows

        for g in order:
            m = g.members
            if len(m) == 1:
                i, t, media, _, _ = m[0]
                results[i] = self._predict_one(i, requests[i], t, media)
                continue
            pieces = None
            why = None
            try:
                x = torch.cat([t.unsqueeze(0) if sq else t for (_, t, _, _, sq) in m])
                out = self.defaults.predict_fn(x, self.model)
                pieces = _split(out, [r for (*_, r, _) in m], [sq for (*_, sq) in m], g.rows)
                if pieces is None:
                    why = "its output could not be split per request (not one row per input row)"
            except (Exception, SystemExit) as e:
                pieces = None
                why = "it raised %s" % _short_exc(e)
            if pieces is None:
                # Batched call failed or its output is not per-row: one by one,
                # so that only a bad request fails.
                self._warn_unstacked(g.key, len(m), g.rows, why)
                for i, t, media, _, _ in m:
                    results[i] = self._predict_one(i, requests[i], t, media)
                continue
            for (i, _, media, _, _), p in zip(m, pieces):
                try:
                    results[i] = self._finish(i, requests[i], encode(p, media), media)
                except (Exception, SystemExit) as e:
                    results[i] = self._fail(i, requests[i], e)
        return results
