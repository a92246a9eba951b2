#!/usr/bin/env bash
# Runs the benchmarks: every bench/<name>/run.sh, in name order, or only the
# names given as arguments (scripts/bench.sh modelserver). Each prints its own
# table. A benchmark is added by giving it a run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in bench/*/run.sh; do
    [ -e "$f" ] || continue
    names+=("$(basename "$(dirname "$f")")")
  done
fi
status=0
for name in "${names[@]}"; do
  run="bench/$name/run.sh"
  if [ ! -x "$run" ]; then
    echo "scripts/bench.sh: no $run" >&2
    status=1
    continue
  fi
  echo "=== bench/$name"
  "$run" || { echo "bench/$name failed" >&2; status=1; }
done
exit $status
