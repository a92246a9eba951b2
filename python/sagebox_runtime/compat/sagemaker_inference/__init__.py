"""sagebox's stand-in for the ``sagemaker_inference`` package (see ../README.md)."""
