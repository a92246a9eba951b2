#!/usr/bin/env bash
# 2-host torchrun job on sagebox against the same two torchrun commands
# started by hand (issue 13; goal ≤ 2 s added). Expects bin/sagebox.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x bin/sagebox ] || go build -o bin/sagebox ./cmd/sagebox
exec go run ./bench/torchrun2host "$@"
