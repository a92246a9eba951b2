#!/usr/bin/env bash
# Training-job benchmark: job overhead, channel staging and model packing,
# side by side with python, cp -r and tar czf. Expects bin/sagebox.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x bin/sagebox ] || go build -o bin/sagebox ./cmd/sagebox
exec go run ./bench/training "$@"
