#!/usr/bin/env bash
# make demo: compile every example model and show what one training step
# costs; then tokenize English text (Debian's fortunes) with GPT-2's BPE
# into Megatron's indexed dataset, train gpt-tiny (GPT-2's vocabulary) on
# it on the CPU, the loss falling as it learns and the validation loss
# with it, save a checkpoint and stop halfway; and resume from the
# checkpoint as an interleaved pipeline of two stages, its schedule drawn.
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
echo
echo "== Debian's fortunes, a document each, tokenized by GPT-2's BPE"
python3 examples/fortunes_jsonl.py fortunes literature riddles > "$work/fortunes.jsonl"
"$bin/strata-data" preprocess --input "$work/fortunes.jsonl" \
  --output-prefix "$work/fortunes" --tokenizer-type GPT2BPETokenizer \
  --append-eod --workers 2
data="$work/fortunes_text_document"
schedule=(--train-iters 120 --log-interval 20 --lr 3e-3 --min-lr 3e-4
          --lr-warmup-iters 10 --lr-decay-style cosine --data-path "$data"
          --eval-interval 60 --eval-iters 5)

echo
echo "== training gpt-tiny on them, one device; a checkpoint at iteration 60, and stop"
"$bin/strata-compile" examples/gpt-tiny.model --set vocab=50257 \
  -o "$work/step.plan" --micro-batch-size 8 --global-batch-size 16
"$bin/strata-run" "$work/step.plan" "${schedule[@]}" \
  --save "$work/checkpoints" --exit-interval 60 --report-memory

echo
echo "== resumed from it as a pipeline: 2 stages, 2 chunks each (interleaved 1F1B)"
"$bin/strata-compile" examples/gpt-tiny.model --set vocab=50257 \
  -o "$work/pipe.plan" --micro-batch-size 4 --global-batch-size 16 \
  --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 \
  | grep memory
"$bin/strata-inspect" "$work/pipe.plan" --schedule-text
"$bin/strata-run" "$work/pipe.plan" "${schedule[@]}" --load "$work/checkpoints"
