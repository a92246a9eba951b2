#!/usr/bin/env bash
# The main job: start a sagebox server (unless one is already listening),
# train the bundled digits classifier as a SageMaker training job through it,
# deploy the trained model to an endpoint, invoke it with the held-out digits,
# print the accuracy, and delete the endpoint, its config and the model.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/sagebox}
ADDR=${SAGEBOX_ADDR:-127.0.0.1:7070}
export SAGEBOX_ENDPOINT=${SAGEBOX_ENDPOINT:-http://$ADDR}
DATA_DIR=${SAGEBOX_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/sagebox}
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if ! curl -fsS "$SAGEBOX_ENDPOINT/_sagebox/health" >/dev/null 2>&1; then
  echo "Starting sagebox server on $ADDR (data in $DATA_DIR, log in $work/server.log)"
  "$BIN" server --addr "$ADDR" --data-dir "$DATA_DIR" >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    curl -fsS "$SAGEBOX_ENDPOINT/_sagebox/health" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log"; exit 1; }
    sleep 0.1
  done
fi

job=digits-$(date +%Y%m%d-%H%M%S)
/usr/bin/python3 examples/digits/prepare_data.py "$work/data"
"$BIN" train examples/digits/train.py --name "$job" --data training="$work/data" \
  -p epochs=15 -p lr=0.05 --metric 'test:accuracy=test_accuracy=([0-9.]+)'

# Deploy the job's model, invoke it with the held-out rows, print the
# accuracy, delete the endpoint, its config and the model.
/usr/bin/python3 examples/digits/deploy_and_invoke.py --job "$job" --name "$job" \
  --test-csv "$work/data/test.csv" --endpoint-url "$SAGEBOX_ENDPOINT" --min-accuracy 0.9
