#!/usr/bin/env bash
# real_model_table: the real-model table of the closing notes — every first-wave
# scheme x {RTN, GPTQ, AWQ, SmoothQuant where it applies} on SmolLM2-135M
# (the bf16 dir the `real` test tier converts: BUILD/real/smollm2-bf16).
# For each row: qloom quantize (wall, peak RSS from /usr/bin/time -v), then
# wikitext-2 ppl (Quark protocol, first 8 windows of 2048 = 16,376 tokens
# scored; the source's transformers figure is in tests/data/real/smollm2_goldens.json)
# and KLD / top-1 against the source (wikitext-2, 4 windows of 512).
# Calibration: 64 samples x 256 tokens of the bundled c4 sample.
#
#   real_model_table.sh BUILD_DIR SCRATCH_DIR [THREADS] [ROW_FILTER_REGEX]
# Prints a markdown table on stdout; per-row logs stay in SCRATCH_DIR.
set -euo pipefail
build=$1 scratch=$2 threads=${3:-2} filter=${4:-.}
qloom="$build/qloom"
src="$build/real/smollm2-bf16"
[ -f "$src/config.json" ] || { echo "real_model_table: $src missing: run ctest -L real -R real.convert first" >&2; exit 1; }
mkdir -p "$scratch"

rows=()
for s in fp8 fp8+kv ptpc_fp8 int8 int4_wo_32 int4_wo_64 int4_wo_128 int4_wo_per_channel \
         uint4_wo_32 uint4_wo_64 uint4_wo_128 uint4_wo_per_channel mxfp4 mxfp4_weight_only; do
  rows+=("$s:rtn")
  case $s in
    int4_*|uint4_*) rows+=("$s:gptq" "$s:awq") ;;
    int8|fp8) rows+=("$s:smoothquant" "$s:gptq") ;;
  esac
done

field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

src_ppl="$scratch/source_ppl.json"
if [ ! -f "$src_ppl" ]; then
  "$qloom" eval "$src" --task ppl --dataset wikitext2 --limit 8 --threads "$threads" --json "$src_ppl" >/dev/null 2>&1
fi
echo "source: $src, ppl (8 windows) $(field "$src_ppl" ppl)"
echo
echo "| scheme | algo | ppl | KLD mean | top-1 % | quantize wall s | peak RSS MiB |"
echo "|---|---|---:|---:|---:|---:|---:|"
for row in "${rows[@]}"; do
  [[ "$row" =~ $filter ]] || continue
  entry=${row%%:*} algo=${row##*:}
  scheme=${entry%+kv}
  tag=${entry//+/_}_$algo
  out="$scratch/$tag"
  args=(--model_dir "$src" --output_dir "$out" --quant_scheme "$scheme" --threads "$threads"
        --num_calib_data 64 --seq_len 256 --progress off --overwrite)
  [ "$entry" != "$scheme" ] && args+=(--kv_cache_dtype fp8)
  [ "$algo" != rtn ] && args+=(--quant_algo "$algo")
  [[ "$scheme" == *_128 ]] && args+=(--exclude_unsupported)
  if ! /usr/bin/time -v "$qloom" quantize "${args[@]}" > "$scratch/$tag.quantize.log" 2>&1; then
    echo "| $scheme${entry#$scheme} | $algo | failed: see $scratch/$tag.quantize.log | | | | |"
    continue
  fi
  wall=$(grep 'Elapsed (wall clock)' "$scratch/$tag.quantize.log" | awk '{print $NF}')
  rss=$(grep 'Maximum resident' "$scratch/$tag.quantize.log" | awk '{printf "%.0f", $NF/1024}')
  "$qloom" eval "$out" --task ppl --dataset wikitext2 --limit 8 --threads "$threads" \
    --json "$scratch/$tag.ppl.json" > /dev/null 2>&1
  "$qloom" eval "$out" --source "$src" --task kld --dataset wikitext2 --seq_len 512 --limit 4 \
    --threads "$threads" --json "$scratch/$tag.kld.json" > /dev/null 2>&1
  printf '| %s | %s | %.4f | %.6f | %.2f | %s | %s |\n' "$entry" "$algo" \
    "$(field "$scratch/$tag.ppl.json" ppl)" "$(field "$scratch/$tag.kld.json" kld_mean)" \
    "$(python3 -c "print(100*$(field "$scratch/$tag.kld.json" top1_agreement))")" "$wall" "$rss"
  rm -rf "$out"
done
