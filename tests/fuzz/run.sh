#!/bin/sh
# tests/fuzz/run.sh BUILD SECONDS: seed corpora from configs/ and tests/fixtures/,
# then run each libFuzzer harness for SECONDS (nice, one core, 10 s per input is a
# hang). Findings land in BUILD/fuzz-artifacts/; the exit status is the harness's.
set -e
build=${1:-build-fuzz}
seconds=${2:-10}
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$build/corpus_yaml" "$build/corpus_cli" "$build/fuzz-artifacts"
find "$src/configs" "$src/tests/fixtures" -name '*.yaml' -o -name '*.json' | while read -r f; do
  cp "$f" "$build/corpus_yaml/$(echo "$f" | cksum | cut -d' ' -f1).yaml"
done
# The CLI harness: first byte = how the rest is used (see fuzz_cli.c).
seed() { kind=$1; f=$2; out="$build/corpus_cli/$kind-$(echo "$f" | cksum | cut -d' ' -f1)"
  { printf "\\$(printf '%03o' "$kind")"; cat "$f"; } > "$out"; }
for f in "$src"/configs/models/*.yaml "$src"/tests/fixtures/tiny/*model.yaml; do seed 0 "$f"; done
for f in "$src"/configs/train_specs/*.yaml "$src"/tests/fixtures/tiny/*train.yaml; do seed 1 "$f"; done
seed 2 "$src/tests/fixtures/tiny/hardware.yaml"
seed 3 "$src/tests/fixtures/tiny/physical.yaml"
for f in "$src"/tests/fixtures/tiny/*logical.yaml; do seed 4 "$f"; done
for f in "$src"/configs/sweep_configs/*.yaml "$src/tests/fixtures/sweep_mb.yaml"; do seed 5 "$f"; done
for f in "$src"/tests/fixtures/bad/*.json; do seed 6 "$f"; done
for f in "$src"/tests/fixtures/bad/route_*.yaml; do seed 7 "$f"; done
for f in "$src"/tests/fixtures/bad/syntax_*.yaml; do seed 8 "$f"; done
printf '\012route\n--experts\n64\n--top-k\n8\n--gpus\n8\n' > "$build/corpus_cli/10-route"
printf '\012search\n--model\nmegatron_gpt_1.7b\n--hardware\nA100_80GB_SXM\n--gpus\n16\n' > "$build/corpus_cli/10-search"
status=0
for h in yaml cli; do
  mkdir -p "$build/corpus_${h}_new"
  nice -n 10 "$build/fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build/fuzz-artifacts/$h-" -print_final_stats=1 \
    "$build/corpus_${h}_new" "$build/corpus_$h" > "$build/fuzz_$h.log" 2>&1 || status=$?
  echo "fuzz_$h: $(grep -E '^stat::number_of_executed_units' "$build/fuzz_$h.log" | tr -s ' ' | cut -d' ' -f2) runs in ${seconds}s, status $status"
  if [ "$status" -ne 0 ]; then tail -40 "$build/fuzz_$h.log"; exit "$status"; fi
done
