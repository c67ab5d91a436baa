#!/usr/bin/env bash
# Every qloom scheme on one model: quantize -> validate -> eval kld against the
# source, printed as one markdown table (scheme | size ratio | bits/weight |
# validate | ppl | KLD | top-1 % | quantize wall s | quantize peak RSS MiB).
# A scheme may carry "+kv" (fp8 KV cache), "+attn" (fp8 attention) and
# "@ALGO" (--quant_algo ALGO, e.g. int4_wo_128@rotation,gptq).
# Used for the closing notes of the
# quantize/eval issues; not part of the test suite (minutes of work).
#
#   scripts/scheme_table.sh [--model DIR] [--dataset NAME|PATH] [--seq_len N]
#                           [--limit N] [--qloom PATH] [--work DIR] [SCHEME...]
# Schemes that cannot hold any layer of the model are reported as such.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
model="$root/models/stories260K-hf-bf16"
dataset=tinystories
seq_len=256
limit=0
qloom="$root/build/qloom"
work=$(mktemp -d)
schemes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --dataset) dataset=$2; shift 2 ;;
    --seq_len|--seq-len) seq_len=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --qloom) qloom=$2; shift 2 ;;
    --work) work=$2; mkdir -p "$work"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) schemes+=("$1"); shift ;;
  esac
done
if [ ${#schemes[@]} -eq 0 ]; then
  schemes=(fp8 fp8+kv ptpc_fp8 int8 int4_wo_32 int4_wo_64 int4_wo_128 int4_wo_per_channel
           uint4_wo_32 uint4_wo_64 uint4_wo_128 uint4_wo_per_channel mxfp4 mxfp4_weight_only
           int4_wa_64 mxfp6_e3m2 mxfp6_e2m3 mxfp4_mxfp6_e2m3 mxfp4_fp8 amdfp4 amdfp4_g32 int4_fp8
           nvfp4 amdfp4_global16 amdfp4_global32 fp8+attn)
fi
limit_args=()
[ "$limit" != 0 ] && limit_args=(--limit "$limit")

echo "| scheme | size ratio | bits/weight | layers quantized | validate | ppl (source -> quantized) | KLD mean | KLD p99 | top-1 % | quantize s | peak RSS MiB |"
echo "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
for s in "${schemes[@]}"; do
  scheme=${s%%[+@]*}
  extra=()
  case "$s" in *+kv*) extra+=(--kv_cache_dtype fp8) ;; esac
  case "$s" in *+attn*) extra+=(--attention_dtype fp8) ;; esac
  case "$s" in *@*) extra+=(--quant_algo "${s#*@}") ;; esac
  out="$work/${s//[,@+]/_}"
  rm -rf "$out"
  if ! /usr/bin/time -f "wall %e rss %M" -o "$out.time" \
       "$qloom" quantize --model_dir "$model" --output_dir "$out" --quant_scheme "$scheme" "${extra[@]}" \
       --exclude_unsupported --progress off >"$work/$s.quantize.txt" 2>&1; then
    echo "| $s | - | - | - | not applicable: $(tail -1 "$work/$s.quantize.txt" | cut -c1-120) | | | | |"
    continue
  fi
  wall=$(awk '/^wall/{print $2}' "$out.time")
  rss=$(awk '/^wall/{printf "%.0f", $4 / 1024}' "$out.time")
  ratio=$(awk '/ ratio /{print $2}' "$work/$s.quantize.txt")
  bpw=$(awk '/bits per weight/{print $4}' "$work/$s.quantize.txt")
  layers=$(awk '/layers quantized/{print $3, $4, $5}' "$work/$s.quantize.txt")
  if "$qloom" validate --source "$model" --quantized "$out" --report_dir "$work/$s.report" >"$work/$s.validate.txt" 2>&1; then
    verdict=PASS
  else
    verdict="FAIL (see $work/$s.validate.txt)"
  fi
  "$qloom" eval "$out" --source "$model" --task kld --dataset "$dataset" --seq_len "$seq_len" "${limit_args[@]}" \
    --json "$work/$s.kld.json" >"$work/$s.eval.txt" 2>&1
  python3 - "$work/$s.kld.json" "$s" "$ratio" "$bpw" "$layers" "$verdict" "$wall" "$rss" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
k = j.get("kld", j)
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {sys.argv[5]} | {sys.argv[6]} | "
      f"{k['ppl_source']:.4f} -> {k['ppl_quantized']:.4f} | {k['kld_mean']:.6f} | {k['kld_p99']:.6f} | "
      f"{100 * k['top1_agreement'] if k['top1_agreement'] <= 1 else k['top1_agreement']:.2f} | "
      f"{sys.argv[7]} | {sys.argv[8]} |")
PY
done
