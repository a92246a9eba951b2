"""The ``context`` object handed to handlers that ask for it.

It mirrors TorchServe's ``ts.context.Context`` (what the SageMaker PyTorch
toolkit passes), so handlers written for SageMaker keep working:

* ``context.system_properties``: ``model_dir``, ``gpu_id`` (int, ``None`` on
  CPU), ``batch_size``, ``server_name``, ``server_version``,
  ``limit_max_image_pixels``; plus ``context.model_name``, ``manifest``,
  ``model_yaml_config`` and a no-op ``metrics`` object;
* ``context.request_ids``: ``{idx: request id}``;
* ``get_request_header(idx, key)``, ``get_all_request_header(idx)``;
* ``context.original_request`` (``get_original_request(idx=0)`` for batch
  index ``idx``): the request the model server received, with ``.body``
  (bytes), ``.content_type`` and ``.accept`` (the raw header values, ``None``
  when absent). In a serial inference pipeline every stage sees the client's
  request there, while its own request is the previous stage's answer; a
  single model (or a pipeline's first stage) sees its own request. A sagebox
  extension: SageMaker passes only the previous stage's answer on.
* ``set_response_status(code, phrase="", idx=0)``,
  ``set_response_content_type(idx, value)``,
  ``set_response_header(idx, key, value)`` (this is how a handler returns
  ``X-Amzn-SageMaker-Custom-Attributes``), and the matching getters.

Differences from TorchServe, all in the user's favour:

* Header lookups are case-insensitive (HTTP header names are).
* A per-request handler (``input_fn``/``predict_fn``/``output_fn``/
  ``transform_fn``) receives a view of the batch that contains only its own
  request, at index 0. Handlers written for the toolkit hard-code ``idx=0``;
  with a batch size above 1 they now read and write *their* request instead of
  the batch's first one.
* ``predict_batch_fn`` receives a view whose index ``j`` is the request that
  produced ``inputs[j]``.

Attributes set on the context in ``model_fn`` (a common trick) stay readable
from every later view.
"""

from __future__ import annotations


class Headers(dict):
    """A dict of header name -> value whose lookups ignore case.

    Iteration yields the names as they arrived. Repeated names are joined with
    ", " (HTTP list semantics).
    """

    __slots__ = ("_lower",)

    def __init__(self, pairs=()):
        super().__init__()
        self._lower = {}
        for name, value in pairs:
            self[name] = value

    def __setitem__(self, name, value):
        low = name.lower()
        orig = self._lower.get(low)
        if orig is not None:
            dict.__delitem__(self, orig)
        self._lower[low] = name
        dict.__setitem__(self, name, value)

    def add(self, name, value):
        orig = self._lower.get(name.lower())
        if orig is None:
            self[name] = value
        else:
            dict.__setitem__(self, orig, dict.__getitem__(self, orig) + ", " + value)

    def __getitem__(self, name):
        orig = self._lower.get(name.lower()) if isinstance(name, str) else None
        if orig is None:
            raise KeyError(name)
        return dict.__getitem__(self, orig)

    def get(self, name, default=None):
        orig = self._lower.get(name.lower()) if isinstance(name, str) else None
        if orig is None:
            return default
        return dict.__getitem__(self, orig)

    def __contains__(self, name):
        return isinstance(name, str) and name.lower() in self._lower

    def __delitem__(self, name):
        orig = self._lower.pop(name.lower(), None) if isinstance(name, str) else None
        if orig is None:
            raise KeyError(name)
        dict.__delitem__(self, orig)

    def pop(self, name, *default):
        try:
            v = self[name]
        except KeyError:
            if default:
                return default[0]
            raise
        del self[name]
        return v

    def copy(self):
        h = Headers()
        for k, v in self.items():
            h[k] = v
        return h


def headers_from_pairs(pairs) -> Headers:
    h = Headers()
    for name, value in pairs:
        h.add(name, value)
    return h


class Response:
    """What handlers set for one request through the context."""

    __slots__ = ("status", "phrase", "content_type", "headers")

    def __init__(self):
        self.status = None
        self.phrase = ""
        self.content_type = None
        self.headers = None  # Headers, created on first set


class OriginalRequest:
    """The request the model server received (``context.original_request``)."""

    __slots__ = ("body", "content_type", "accept")

    def __init__(self, body, content_type, accept):
        self.body = body  # bytes, as sent
        self.content_type = content_type or None  # raw Content-Type, None when absent
        self.accept = accept or None  # raw Accept, None when absent

    def __repr__(self):
        return "OriginalRequest(content_type=%r, accept=%r, %d bytes)" % (
            self.content_type,
            self.accept,
            len(self.body),
        )


def original_of(req) -> OriginalRequest:
    """The original request of a wire request: carried along in a pipeline's
    later stages, the request itself otherwise."""
    o = req.original
    if o is None:
        return OriginalRequest(req.body, req.content_type, req.accept)
    return OriginalRequest(o[2], o[0], o[1])


class _NoopMetrics:
    """Accepts TorchServe metrics calls (add_metric, add_time, ...) and drops them."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._noop

    @staticmethod
    def _noop(*args, **kwargs):
        return None


class Context:
    """The worker's context: one per worker, its requests replaced per batch.

    Handlers get a :class:`ContextView` of it (see the module docstring).
    """

    def __init__(
        self,
        model_dir: str,
        gpu_id,
        batch_size: int,
        server_name: str = "sagebox",
        server_version: str = "",
        model_name: str = "model",
    ):
        self.model_name = model_name
        self.manifest = {"model": {"modelName": model_name, "modelVersion": "1.0"}}
        self.model_yaml_config = {}
        self.metrics = _NoopMetrics()
        self.system_properties = {
            "model_dir": model_dir,
            "gpu_id": gpu_id,
            "batch_size": batch_size,
            "server_name": server_name,
            "server_version": server_version,
            "limit_max_image_pixels": True,
        }
        # Per batch (set by the worker); headers and responses are built on
        # first use so a batch whose handlers never touch them costs nothing.
        self.ids = []  # request id per batch index
        self._requests = []  # the batch's requests (their headers decode on first use)
        self._headers = {}  # batch index -> Headers
        self.responses = {}  # batch index -> Response

    def begin_batch(self, requests):
        self.ids = [r.id for r in requests]
        self._requests = requests
        self._headers = {}
        self.responses = {}

    def headers(self, i) -> Headers:
        h = self._headers.get(i)
        if h is None:
            h = self._headers[i] = headers_from_pairs(self._requests[i].headers)
        return h

    def response(self, i) -> Response:
        r = self.responses.get(i)
        if r is None:
            r = self.responses[i] = Response()
        return r

    def view(self, indices):
        return ContextView(self, indices)


_object_setattr = object.__setattr__


class ContextView:
    """A context restricted to some requests of the current batch.

    Local index ``j`` is batch index ``indices[j]``.
    """

    __slots__ = ("_base", "_idx")

    def __init__(self, base: Context, indices):
        # Straight to the slots: one view is made per request and handler.
        _object_setattr(self, "_base", base)
        _object_setattr(self, "_idx", indices)

    # Unknown attributes (model_name, system_properties, metrics, anything a
    # user stored on the context in model_fn) come from the worker context.
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._base, name)

    # ...and attributes a handler sets land there too, so they persist the way
    # they do on TorchServe's single context object.
    def __setattr__(self, name, value):
        if name in ("_base", "_idx"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._base, name, value)

    def _b(self, idx) -> int:
        try:
            if idx < 0:
                raise IndexError
            return self._idx[idx]
        except (IndexError, TypeError):
            raise IndexError(
                "request index %r out of range: this context holds %d request(s), "
                "indexed from 0" % (idx, len(self._idx))
            ) from None

    @property
    def system_properties(self):
        return self._base.system_properties

    @property
    def request_ids(self):
        ids = self._base.ids
        return {j: ids[i] for j, i in enumerate(self._idx)}

    @property
    def request_processor(self):
        # TorchServe exposes a list of RequestProcessor; only its length and
        # headers are of use to handlers.
        return [_RequestProcessor(self, j) for j in range(len(self._idx))]

    def get_request_id(self, idx=0):
        return self._base.ids[self._b(idx)]

    def get_request_header(self, idx, key):
        return self._base.headers(self._b(idx)).get(key)

    def get_original_request(self, idx=0):
        """The request the model server received for request ``idx``
        (:class:`OriginalRequest`); see the module docstring."""
        return original_of(self._base._requests[self._b(idx)])

    @property
    def original_request(self):
        """``get_original_request(0)``: the handler's own request's original."""
        return self.get_original_request(0)

    def get_all_request_header(self, idx):
        return self._base.headers(self._b(idx))

    def set_response_status(self, code=200, phrase="", idx=0):
        r = self._base.response(self._b(idx))
        r.status = int(code)
        r.phrase = phrase or ""

    def get_response_status(self, idx=0):
        r = self._base.response(self._b(idx))
        return r.status, r.phrase

    def set_response_content_type(self, idx, value):
        self._base.response(self._b(idx)).content_type = value

    def get_response_content_type(self, idx):
        return self._base.response(self._b(idx)).content_type

    def set_response_header(self, idx, key, value):
        r = self._base.response(self._b(idx))
        if key.lower() == "content-type":
            r.content_type = value
            return
        if r.headers is None:
            r.headers = Headers()
        r.headers[key] = value

    def get_response_headers(self, idx):
        h = self._base.response(self._b(idx)).headers
        return h if h is not None else {}


class _RequestProcessor:
    def __init__(self, ctx, idx):
        self._ctx = ctx
        self._i = idx

    def get_request_property(self, key):
        return self._ctx.get_request_header(self._i, key)

    def get_request_properties(self):
        return self._ctx.get_all_request_header(self._i)

    def report_status(self, code, reason=None):
        self._ctx.set_response_status(code, reason or "", self._i)

    def add_response_property(self, key, value):
        self._ctx.set_response_header(self._i, key, value)
