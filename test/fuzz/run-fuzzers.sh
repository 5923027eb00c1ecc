#!/bin/bash
# Runs every libFuzzer harness of a STRATA_FUZZ build for SECONDS each:
#   test/fuzz/run-fuzzers.sh BUILD_DIR SECONDS [NAME...]
# First each replays its regression inputs (regressions/NAME: crashes found
# before, now fixed), then fuzzes from corpus/NAME (read only: what it
# finds goes to BUILD_DIR/fuzz/NAME). A crash is saved under
# BUILD_DIR/fuzz/crashes and fails the run; each fuzzer's last line says
# its executions and coverage.
set -uo pipefail
build=$1 seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(json safetensors indexed-dataset checkpoint plan model)
mkdir -p "$build/fuzz/crashes"
# Leaks are not what these look for (a static MLIRContext is kept on purpose).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
status=0
for name in "${names[@]}"; do
  fuzzer=$build/bin/fuzz-$name
  if [ ! -x "$fuzzer" ]; then
    echo "fuzz-$name: not built (configure with -DSTRATA_FUZZ=ON)"
    status=1
    continue
  fi
  work=$build/fuzz/$name
  mkdir -p "$work"
  log=$build/fuzz/$name.log
  regressions=("$here/regressions/$name"/*)
  if [ -e "${regressions[0]}" ]; then
    if ! "$fuzzer" "${regressions[@]}" > "$log.regressions" 2>&1; then
      echo "fuzz-$name: a regression input crashes again (see $log.regressions)"
      status=1
      continue
    fi
  fi
  dict=()
  [ -s "$here/dictionaries/$name.dict" ] && dict=(-dict="$here/dictionaries/$name.dict")
  # -max_len: plans and shards are larger than libFuzzer's default 4 KB.
  "$fuzzer" "$work" "$here/corpus/$name" -max_total_time="$seconds" \
    -max_len=65536 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    "${dict[@]}" \
    -artifact_prefix="$build/fuzz/crashes/$name-" > "$log" 2>&1
  code=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  coverage=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -o 'cov: [0-9]* ft: [0-9]*')
  corpus=$(ls "$work" | wc -l)
  if [ $code -ne 0 ]; then
    echo "fuzz-$name: FOUND A CRASH after ${runs:-?} executions: $(ls -t "$build/fuzz/crashes" | head -1) (log: $log)"
    grep -m3 'ERROR: \|runtime error\|deadly signal' "$log" | sed 's/^/  /'
    status=1
  else
    echo "fuzz-$name: ${seconds} s, ${runs:-?} executions, ${coverage:-no coverage line}, $corpus new inputs, no crash"
  fi
done
exit $status
