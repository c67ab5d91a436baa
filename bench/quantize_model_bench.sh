#!/usr/bin/env bash
# quantize_model_bench: `qloom quantize` (RTN) on a synthetic >= 1 GB bf16 model,
# wall time as a ratio to `cp` of the same weight files, and peak RSS (goal:
# < 2x the largest tensor + 300 MB, independent of model size).
#   quantize_model_bench.sh BUILD_DIR SCRATCH_DIR [PRESET]
set -euo pipefail
build=$1 scratch=$2 preset=${3:-bench-1gb}
mkdir -p "$scratch"
model="$scratch/synth-$preset"
if [ ! -f "$model/config.json" ]; then
  "$build/tools/qloom-synth" --preset "$preset" --output_dir "$model" --max_shard_size 1000000000 >/dev/null
fi
weights=$(du -cb "$model"/*.safetensors | tail -1 | cut -f1)
cat "$model"/*.safetensors > /dev/null  # warm the page cache
peak_rss_kb() { grep -E 'Maximum resident' "$1" | awk '{print $NF}'; }
t0=$(date +%s.%N)
rm -rf "$scratch/cp" && mkdir "$scratch/cp" && cp "$model"/*.safetensors "$scratch/cp/" && sync "$scratch"/cp/*
cp_s=$(echo "$(date +%s.%N) - $t0" | bc)
rm -rf "$scratch/cp"
largest=$(python3 - "$model" <<'PY'
import json, struct, sys, glob
best = 0
for f in glob.glob(sys.argv[1] + "/*.safetensors"):  # the largest tensor of any shard, from the headers
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        for k, v in json.loads(fh.read(n)).items():
            if k != "__metadata__":
                best = max(best, v["data_offsets"][1] - v["data_offsets"][0])
print(best)
PY
)
printf 'quantize_model_bench: %s, weights %.2f GiB, largest tensor %.1f MiB, cp+sync %.2f s\n' \
  "$preset" "$(echo "$weights / 1073741824" | bc -l)" "$(echo "$largest / 1048576" | bc -l)" "$cp_s"
# fp8 (static input scales) and fp8+kv calibrate layer by layer on a small
# calibration set (8 samples x 128 tokens) so the figure stays about I/O.
for entry in ptpc_fp8 fp8 fp8+kv int4_wo_128 uint4_wo_128 mxfp4_weight_only; do
  scheme=${entry%+kv}
  extra=()
  [ "$scheme" = fp8 ] && extra=(--num_calib_data 8 --seq_len 128)
  [ "$entry" != "$scheme" ] && extra+=(--kv_cache_dtype fp8)
  out="$scratch/q-$scheme"
  /usr/bin/time -v "$build/qloom" quantize --model_dir "$model" --output_dir "$out" --quant_scheme "$scheme" \
    "${extra[@]}" --overwrite --progress off > "$scratch/$scheme.log" 2> "$scratch/$scheme.time"
  wall=$(grep -E 'Elapsed \(wall clock\)' "$scratch/$scheme.time" | awk '{print $NF}' | awk -F: '{ if (NF==2) print $1*60+$2; else print $1*3600+$2*60+$3 }')
  rss=$(peak_rss_kb "$scratch/$scheme.time")
  goal=$(echo "(2 * $largest + 300 * 1048576) / 1024" | bc)
  printf '  %-18s wall %6.2f s  ratio to cp %5.2f  peak RSS %7.1f MiB (goal < %.0f MiB)  %s\n' "$entry" "$wall" \
    "$(echo "$cp_s / $wall" | bc -l)" "$(echo "$rss / 1024" | bc -l)" "$(echo "$goal / 1024" | bc -l)" \
    "$(grep -E 'bits per weight' "$scratch/$scheme.log" | tr -s ' ' | cut -d' ' -f2-5)"
  rm -rf "$out"
done
