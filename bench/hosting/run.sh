#!/usr/bin/env bash
# Endpoints against the model server they run (issue 12's goals), side by
# side in one run. Flags go to bench/hosting (-d per throughput cell, -n
# requests per latency cell).
set -euo pipefail
cd "$(dirname "$0")/../.."
go build -o bin/sagebox ./cmd/sagebox
exec go run ./bench/hosting -bin bin/sagebox "$@"
