#!/usr/bin/env bash
# make demo: compile every example model and show what one training step costs.
set -euo pipefail
bin=${1:-build/bin}
cd "$(dirname "$0")/.."
for model in examples/gpt-tiny.model examples/llama-tiny.model \
             examples/gpt2-124m.model examples/gpt-1t.model; do
  echo "== $model"
  "$bin/strata-compile" "$model" --emit=summary
done
