"""Exceptions, as in sagemaker_inference.errors (they carry HTTP statuses)."""

from sagebox_runtime.errors import (  # noqa: F401
    BaseInferenceToolkitError,
    GenericInferenceToolkitError,
    UnsupportedFormatError,
)
