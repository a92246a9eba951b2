"""Media type names, as in sagemaker_inference.content_types."""

from sagebox_runtime.content_types import ANY, CSV, JSON, NPY, NPZ, OCTET_STREAM, UTF8_TYPES  # noqa: F401
