#!/usr/bin/env bash
# make demo: compile every example model and show what one training step
# costs; then compile gpt-tiny and train it on English text (Debian's
# fortunes) on the CPU, the loss falling as it learns; and the same model as
# an interleaved pipeline on two stages, its schedule drawn.
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

echo
echo "== the same model cut into a pipeline: 2 stages, 2 chunks each (interleaved 1F1B)"
"$bin/strata-compile" examples/gpt-tiny.model -o "$work/pipe.plan" \
  --micro-batch-size 4 --global-batch-size 16 \
  --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 \
  | grep memory
"$bin/strata-inspect" "$work/pipe.plan" --schedule-text
"$bin/strata-run" "$work/pipe.plan" --train-iters 20 --log-interval 10 \
  --lr 3e-3 --lr-warmup-iters 30 --data-path "$work/text"
