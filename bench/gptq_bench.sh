#!/usr/bin/env bash
# gptq_bench: `qloom quantize --quant_algo gptq` (int4_wo_128, layer-by-layer
# calibration) on a synthetic 32-layer bf16 model (qloom-synth --preset
# bench-4gb: hidden 2048, intermediate 8192, vocab 32000, 2.08 B parameters,
# 4.2 GB), with
# a modest calibration set. Reports peak RSS (goal < 1.5 GB, independent of
# depth: one layer + the calibration activations + one stage's Hessians) and
# the wall time per decoder layer. Not run by ctest.
#   gptq_bench.sh BUILD_DIR SCRATCH_DIR [PRESET] [NUM_CALIB_DATA] [SEQ_LEN]
set -euo pipefail
build=$1 scratch=$2 preset=${3:-bench-4gb} ncalib=${4:-16} seqlen=${5:-256}
mkdir -p "$scratch"
model="$scratch/synth-$preset"
if [ ! -f "$model/config.json" ]; then
  "$build/tools/qloom-synth" --preset "$preset" --output_dir "$model" --max_shard_size 1000000000 >/dev/null
fi
weights=$(du -cb "$model"/*.safetensors | tail -1 | cut -f1)
out="$scratch/q-gptq"
/usr/bin/time -v "$build/qloom" quantize --model_dir "$model" --output_dir "$out" --quant_scheme int4_wo_128 \
  --quant_algo gptq --num_calib_data "$ncalib" --seq_len "$seqlen" --overwrite --progress on \
  > "$scratch/gptq.log" 2> "$scratch/gptq.err"
rss_kb=$(grep -E 'Maximum resident' "$scratch/gptq.err" | awk '{print $NF}')
wall=$(grep -E 'Elapsed \(wall clock\)' "$scratch/gptq.err" | awk '{print $NF}' | awk -F: '{ if (NF==2) print $1*60+$2; else print $1*3600+$2*60+$3 }')
# "[calibration i/N]  T s": seconds after each layer -> per-layer times.
per_layer=$(grep -E '^\[calibration ' "$scratch/gptq.err" | awk '{gsub(/\]/,"",$3); t=$3; print t-prev; prev=t}')
layers=$(echo "$per_layer" | wc -l)
printf 'gptq_bench: %s, weights %.2f GB, %s samples x %s tokens (calibration activations %.0f MB fp32)\n' "$preset" \
  "$(echo "$weights / 1000000000" | bc -l)" "$ncalib" "$seqlen" \
  "$(echo "$ncalib * $seqlen * $(python3 -c "import json;print(json.load(open('$model/config.json'))['hidden_size'])") * 4 / 1000000" | bc -l)"
printf '  wall %.1f s, peak RSS %.0f MB (goal < 1500 MB), %d layers: per layer mean %.2f s, min %.2f s, max %.2f s\n' \
  "$wall" "$(echo "$rss_kb * 1024 / 1000000" | bc -l)" "$layers" \
  "$(echo "$per_layer" | awk '{s+=$1} END {print s/NR}')" "$(echo "$per_layer" | sort -g | head -1)" \
  "$(echo "$per_layer" | sort -g | tail -1)"
grep -E 'calibration|bits per weight' "$scratch/gptq.log" | sed 's/^/  /'
rm -rf "$out"
