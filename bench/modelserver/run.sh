#!/usr/bin/env bash
# The model-server benchmark: sagebox (unbatched and batched) against FastAPI +
# uvicorn and against the handlers called directly, side by side in one run.
# Builds nothing: `make bench-modelserver` builds bin/sagebox first (or pass
# --bin). Extra arguments go to bench.py (--help lists them).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
exec /usr/bin/python3 "$root/bench/modelserver/bench.py" --bin "${BIN:-$root/bin/sagebox}" "$@"
