#!/usr/bin/env bash
# ListTrainingJobs at saturation (R14): this build against a baseline build
# of an earlier commit (default: the one before fair read admission), side
# by side. Needs wrk (make deps).
set -euo pipefail
cd "$(dirname "$0")/../.."
base_rev=${LISTFAIR_BASELINE:-4489049}
go build -o bin/sagebox ./cmd/sagebox
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add --detach -q "$tmp/src" "$base_rev"
(cd "$tmp/src" && go build -o "$tmp/sagebox-baseline" ./cmd/sagebox)
exec go run ./bench/listfair -baseline "$tmp/sagebox-baseline" -bin bin/sagebox "$@"
