#!/usr/bin/env bash
# qloom's GGUF export run by llama.cpp (a benchmark, not a test): SmolLM2
# quantized by qloom (int4_wo_32 RTN and GPTQ -> Q4_0, uint4_wo_32 -> Q4_1,
# int8 -> Q8_0, codes carried exactly; optionally a Q4_K re-fit of the GPTQ
# codes) against llama-quantize's own Q4_0 / Q8_0 of the same F16 GGUF.
# llama-perplexity on wikitext-2 (wiki.test.raw) with --kl-divergence against
# the F16 GGUF's logits; prints PPL, mean KLD and top-1 agreement per file.
#
#   bench/gguf_export_llamacpp.sh [BUILD_DIR] [WORK_DIR]
# Environment: SRC (HF bf16 SmolLM2; default build/real/smollm2-bf16),
# LLAMA_BIN (default /tmp/llama.cpp/build/bin), TEXT (default
# /work/shared/data/wikitext-2-raw/wiki.test.raw, else data/ in the repo),
# CHUNKS (512-token chunks scored, default 40), THREADS (default 2),
# CALIB (GPTQ calibration samples, default 128), TABLE_ONLY=1 (reprint the
# table from the logs of an earlier run in WORK_DIR).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
work=${2:-$(mktemp -d /tmp/qloom-gguf-bench.XXXXXX)}
src=${SRC:-$here/build/real/smollm2-bf16}
bin=${LLAMA_BIN:-/tmp/llama.cpp/build/bin}
chunks=${CHUNKS:-40}
threads=${THREADS:-2}
calib=${CALIB:-128}
text=${TEXT:-/work/shared/data/wikitext-2-raw/wiki.test.raw}
[ -f "$text" ] || text=$(find "$here/data" -name 'wiki.test.raw' | head -1)
qloom=$build/qloom
tool=$build/tests/interop/gguf_export_tool
for f in "$qloom" "$tool" "$bin/llama-perplexity" "$bin/llama-quantize" "$text" "$src/config.json"; do
  [ -e "$f" ] || { echo "missing: $f" >&2; exit 2; }
done
mkdir -p "$work"
echo "work dir: $work; text: $text; chunks: $chunks x 512 tokens" >&2

quant() {  # name scheme [algo]
  local out=$work/$1
  [ -d "$out" ] && return 0
  local extra=()
  [ -n "${3:-}" ] && extra=(--quant_algo "$3" --num_calib_data "$calib" --seq_len 512)
  "$qloom" quantize --model_dir "$src" --output_dir "$out" --quant_scheme "$2" "${extra[@]}" \
    --progress off >&2
}
export_gguf() {  # quark_dir out.gguf [flags...]
  local dir=$1 out=$2
  shift 2
  "$tool" export "$dir" "$out" --overwrite "$@" > "$out.summary.json"
}

quant int4_rtn int4_wo_32
quant int4_gptq int4_wo_32 gptq
quant uint4_rtn uint4_wo_32
quant int8_rtn int8
export_gguf "$src" "$work/f16.gguf"
# The tied embedding as llama-quantize writes it for Q4_0 / Q4_1 / Q8_0 of
# this model (Q6_K does not fit 576 columns; its fallback is Q8_0), so only
# the linears differ between qloom's files and llama-quantize's.
export_gguf "$work/int4_rtn" "$work/qloom-int4-rtn-q4_0.gguf" --float_type Q8_0
export_gguf "$work/int4_gptq" "$work/qloom-int4-gptq-q4_0.gguf" --float_type Q8_0
export_gguf "$work/int4_gptq" "$work/qloom-int4-gptq-q4_k.gguf" --float_type Q8_0 --refit Q4_K
export_gguf "$work/uint4_rtn" "$work/qloom-uint4-rtn-q4_1.gguf" --float_type Q8_0
export_gguf "$work/int8_rtn" "$work/qloom-int8-rtn-q8_0.gguf" --float_type Q8_0
# llama-quantize's own quantization of the same F16 GGUF.
"$bin/llama-quantize" "$work/f16.gguf" "$work/llamacpp-q4_0.gguf" Q4_0 "$threads" > "$work/lq4.log" 2>&1
"$bin/llama-quantize" "$work/f16.gguf" "$work/llamacpp-q8_0.gguf" Q8_0 "$threads" > "$work/lq8.log" 2>&1
"$bin/llama-quantize" "$work/f16.gguf" "$work/llamacpp-q4_1.gguf" Q4_1 "$threads" > "$work/lq41.log" 2>&1

ppl() {  # gguf log [extra...]
  local m=$1 log=$2
  shift 2
  [ -n "${TABLE_ONLY:-}" ] && [ -s "$log" ] && return 0
  "$bin/llama-perplexity" -m "$m" -f "$text" -c 512 --chunks "$chunks" -t "$threads" -b 512 "$@" > "$log" 2>&1
}
ppl "$work/f16.gguf" "$work/f16.log" --kl-divergence-base "$work/f16.kld"
base_ppl=$(grep -aoE 'Final estimate: PPL = [0-9.]+' "$work/f16.log" | awk '{print $NF}')

printf '%-30s %-30s %10s %10s %12s %10s\n' file "tensor types" PPL "vs F16" "mean KLD" "top-1 %"
printf '%-30s %-30s %10s %10s %12s %10s\n' f16.gguf "f32:61,f16:211" "$base_ppl" "-" 0 100
for g in qloom-int4-rtn-q4_0 qloom-int4-gptq-q4_0 llamacpp-q4_0 qloom-int4-gptq-q4_k qloom-uint4-rtn-q4_1 \
         llamacpp-q4_1 qloom-int8-rtn-q8_0 llamacpp-q8_0; do
  ppl "$work/$g.gguf" "$work/$g.log" --kl-divergence-base "$work/f16.kld" --kl-divergence
  p=$(grep -aE '^Mean PPL\(Q\) ' "$work/$g.log" | awk '{print $4}')
  k=$(grep -aE 'Mean +KLD:' "$work/$g.log" | awk '{print $3}')
  t=$(grep -aE 'Same top p:' "$work/$g.log" | awk '{print $4}')
  r=$(awk -v a="$p" -v b="$base_ppl" 'BEGIN{printf "%+.2f%%", (a/b-1)*100}')
  types=$(grep -aoE 'type +[A-Za-z0-9_]+: +[0-9]+ tensors' "$work/$g.log" |
          awk '{sub(":", "", $2); printf "%s%s:%s", (NR>1?",":""), $2, $3}')
  printf '%-30s %-30s %10s %10s %12s %10s\n' "$g.gguf" "$types" "$p" "$r" "$k" "$t"
done
echo "logs, summaries and files in $work" >&2
