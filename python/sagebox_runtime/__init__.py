"""sagebox's Python runtime: the model-server worker (and, later, training helpers).

Shipped inside the sagebox binary and run with the user's interpreter. It
depends on the standard library, numpy and torch only; torch and numpy are
imported lazily so ``python -m sagebox_runtime --help`` works without them.
"""

__version__ = "0.1.0"
