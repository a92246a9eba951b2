"""encode(array_like, content_type), as in sagemaker_inference.encoder.

JSON and CSV are returned as str, NPY as bytes (the toolkit's types).
"""

from sagebox_runtime import content_types as _ct
from sagebox_runtime import defaults as _d
from sagebox_runtime.errors import UnsupportedAcceptFormatError


def array_to_json(array_like):
    return _d.encode_json(array_like).decode("utf-8")


def array_to_csv(array_like):
    return _d.encode_csv(array_like).decode("utf-8")


def array_to_npy(array_like):
    return _d.encode_npy(array_like)


_ENCODERS = {_ct.JSON: array_to_json, _ct.CSV: array_to_csv, _ct.NPY: array_to_npy}


def encode(array_like, content_type):
    fn = _ENCODERS.get(_ct.media_type(content_type))
    if fn is None:
        raise UnsupportedAcceptFormatError(content_type)
    return fn(array_like)
