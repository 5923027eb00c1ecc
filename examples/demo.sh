#!/usr/bin/env bash
# make demo: compile every example model and show what one training step
# costs; then compile gpt-tiny and train it on English text (Debian's
# fortunes) on the CPU, the loss falling as it learns.
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
cd "$(dirname "$0")/.."
for model in examples/gpt-tiny.model examples/llama-tiny.model \
             examples/gpt2-124m.model examples/gpt-1t.model; do
  echo "== $model"
  "$bin/strata-compile" "$model" | head -3
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fortunes=/usr/share/games/fortunes
cat "$fortunes/fortunes" "$fortunes/literature" "$fortunes/riddles" > "$work/text"
echo
echo "== training gpt-tiny on $(wc -c < "$work/text") bytes of fortunes"
"$bin/strata-compile" examples/gpt-tiny.model -o "$work/step.plan" \
  --micro-batch-size 8 --global-batch-size 16
"$bin/strata-run" "$work/step.plan" --train-iters 300 --log-interval 20 \
  --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 30 --lr-decay-style cosine \
  --data-path "$work/text" --report-memory
