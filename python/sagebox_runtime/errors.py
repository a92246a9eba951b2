"""Exceptions that carry an HTTP status.

Anything raised by a handler becomes a failed response for its request only.
The status comes from the exception:

* ``status_code`` attribute (the SageMaker inference toolkit's convention,
  e.g. ``BaseInferenceToolkitError``), used when it is an int in 400..599;
* ``error_code`` attribute (TorchServe's ``PredictionException`` convention),
  same rule;
* ``MemoryError`` and CUDA out-of-memory errors: 507 (as TorchServe does);
* anything else: 500.

The message is ``str(e)`` (or the toolkit error's ``message``); the traceback is
captured and sent to the front end, which decides whether to show it.

User code written for the toolkit can keep raising
``BaseInferenceToolkitError(status_code, message, phrase)`` or
``GenericInferenceToolkitError(status_code, message=None, phrase=None)``; both
are importable from here and from the bundled ``sagemaker_inference.errors``
compatibility module.
"""

from __future__ import annotations

import http


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Error"


class InferenceError(Exception):
    """Base class: an error with an HTTP status (default 500)."""

    status_code = 500

    def __init__(self, message: str = "", status_code: int | None = None, phrase: str | None = None):
        if status_code is not None:
            self.status_code = status_code
        self.message = message or _reason(self.status_code)
        self.phrase = phrase or self.message
        super().__init__(self.message)

    def __str__(self):
        return self.message


class BadInput(InferenceError):
    """The request body cannot be decoded (HTTP 400)."""

    status_code = 400


class UnsupportedContentType(InferenceError):
    """No decoder for the request's Content-Type (HTTP 415)."""

    status_code = 415


class UnsupportedAccept(InferenceError):
    """No encoder for anything the request's Accept allows (HTTP 406)."""

    status_code = 406


class OutputError(InferenceError):
    """A handler returned something that cannot become a response body (500)."""

    status_code = 500


class ModelLoadError(Exception):
    """The model could not be loaded (reported in LOADED, not per request)."""


# ---- compatibility names (sagemaker_inference.errors)


class BaseInferenceToolkitError(InferenceError):
    """Toolkit-compatible: ``BaseInferenceToolkitError(status_code, message, phrase)``."""

    def __init__(self, status_code, message, phrase):
        InferenceError.__init__(self, message, int(status_code), phrase)


class GenericInferenceToolkitError(BaseInferenceToolkitError):
    """Toolkit-compatible: ``GenericInferenceToolkitError(status_code, message=None, phrase=None)``."""

    def __init__(self, status_code, message=None, phrase=None):
        BaseInferenceToolkitError.__init__(self, status_code, message, phrase)


class UnsupportedFormatError(UnsupportedContentType):
    """Toolkit name for an unsupported content type.

    The toolkit made this a plain 500; here it is a 415 (an unsupported Accept
    raised by the encoders is :class:`UnsupportedAcceptFormatError`, 406).
    """

    def __init__(self, content_type, **kwargs):
        self.content_type = content_type
        msg = kwargs.get(
            "message",
            "Content type %s is not supported by this inference endpoint. Please "
            "implement input_fn to deserialize the request data or an output_fn "
            "to serialize the response." % (content_type,),
        )
        UnsupportedContentType.__init__(self, msg)


class UnsupportedAcceptFormatError(UnsupportedFormatError):
    status_code = 406


def status_of(exc: BaseException) -> int:
    """HTTP status for an exception raised by handler code."""
    for attr in ("status_code", "error_code"):
        code = getattr(exc, attr, None)
        if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
            return code
    if isinstance(exc, MemoryError):
        return 507
    name = type(exc).__name__
    if name == "OutOfMemoryError" or (
        isinstance(exc, RuntimeError) and "CUDA out of memory" in str(exc)
    ):
        return 507
    return 500


def message_of(exc: BaseException) -> str:
    msg = getattr(exc, "message", None)
    if isinstance(msg, str) and msg:
        return msg
    s = str(exc)
    return s if s else type(exc).__name__
