#!/usr/bin/env bash
# llmcompressor_side_by_side: qloom beside llm-compressor on the same model,
# the same calibration token ids, the same thread count, CPU only, W4A16
# (int4 symmetric weights, groups of 64 input channels, lm_head kept):
# GPTQ (no act-order) and AWQ. Prints for each tool and algorithm the wall
# time and peak RSS (/usr/bin/time -v) and the KLD against the bf16 source on
# wikitext-2 test. Not a test; not run by ctest.
#
#   llmcompressor_side_by_side.sh BUILD_DIR SCRATCH_DIR [MODEL_DIR]
#   env: LLMC_PY (default /tmp/llmc/bin/python)  THREADS (1)  NUM_CALIB (64)
#        SEQ_LEN (256)  KLD_SEQ_LEN (512)  KLD_LIMIT (40)  ALGOS ("gptq awq")
#        TOOLS ("qloom llmcompressor")
#
# The llm-compressor venv (outside the repository; it pulls torch,
# transformers and compressed-tensors from PyPI):
#   python3 -m venv /tmp/llmc && /tmp/llmc/bin/pip install llmcompressor
# (measured with llmcompressor 0.14.0.1, compressed-tensors 0.19.0, torch
# 2.14.0, transformers 5.17.0).
#
# Same inputs: BUILD_DIR/bench/calib_ids writes the token ids `qloom
# quantize` calibrates on (its default data set, NUM_CALIB samples of at most
# SEQ_LEN tokens) as JSON lines; the driver (bench/llmcompressor_driver.py)
# feeds exactly those ids to llm-compressor as a pre-tokenized data set, one
# sample per batch, in order (no shuffling, no padding).
# Settings: qloom --quant_scheme int4_wo_64 --quant_algo gptq|awq (GPTQ: damp
# 0.01, block 128; AWQ: its defaults, n_grid 20, duo_scaling off as Quark,
# clip search on). GPTQ order: without act-order on both sides when this
# qloom has --quant_algo_config_file (it is given {"desc_act": false,
# "static_groups": false}); otherwise qloom's default desc_act + static_groups
# and llm-compressor's actorder="static", the same algorithm (the line says
# which). llm-compressor: GPTQModifier (block 128, dampening 0.01) /
# AWQModifier (its defaults:
# duo_scaling on, n_grid 20, no clip search) + QuantizationModifier, scheme
# int4 symmetric group 64, ignore lm_head. Both use THREADS threads (qloom
# --threads, torch.set_num_threads + OMP_NUM_THREADS).
# llm-compressor 0.14's AWQ calls torch pin_memory on its cached
# activations, which fails without an accelerator: the driver replaces
# IntermediatesCache.pin_memory by a no-op when CUDA is unavailable (pinning
# only speeds up host-to-device copies).
# KLD: computed for both exports the same way, by transformers in the
# llm-compressor venv (qloom's Quark export cannot be read by transformers
# without amd-quark, and qloom cannot read compressed-tensors yet): the
# driver dequantizes each export's int4 codes x scales in float32 into the
# source architecture, runs source and quantized model in float32 on the first
# KLD_LIMIT non-overlapping KLD_SEQ_LEN-token windows of wikitext-2 test
# ("\n\n"-joined HF rows, the source tokenizer), and averages
# KL(source || quantized) over every position.
# Measured on SmolLM2-135M (2-core AMD EPYC, 1 thread, 2026-12-01):
#   gptq  qloom 35.6 s / 216 MiB / KLD 0.3274   llm-compressor 81.5 s / 1,611 MiB / KLD 0.4182
#   awq   qloom 287.3 s / 246 MiB / KLD 0.2330  llm-compressor 328.8 s / 1,700 MiB / KLD 0.2947
# (walls: farm-bench medians of alternated runs, 3 pairs for GPTQ, 2 for AWQ:
# wall ratio 0.436 and 0.876. GPTQ at 793452a, one run: 35.6 s / 209 MiB / KLD
# 0.3617 — qloom's own exp moved its activations; GPTQ's KLD spreads 0.33-0.37
# over calibration sample counts 62-66.)
set -euo pipefail
build=$1 scratch=$2 model=${3:-/tmp/smollm2-hf-v4}
py=${LLMC_PY:-/tmp/llmc/bin/python} threads=${THREADS:-1} ncalib=${NUM_CALIB:-64} seqlen=${SEQ_LEN:-256}
kseq=${KLD_SEQ_LEN:-512} klimit=${KLD_LIMIT:-40} algos=${ALGOS:-gptq awq} tools=${TOOLS:-qloom llmcompressor}
here=$(cd "$(dirname "$0")" && pwd)
wiki="$here/../data/datasets/wikitext-2-raw/wiki.test.raw"
[ -x "$py" ] || { echo "no llm-compressor venv at $py (see the header of $0)" >&2; exit 2; }
mkdir -p "$scratch"
"$build/bench/calib_ids" --model "$model" --output "$scratch/calib.jsonl" --num_calib_data "$ncalib" \
  --seq_len "$seqlen"

wall_s() { grep -E 'Elapsed \(wall clock\)' "$1" | awk '{print $NF}' |
  awk -F: '{ if (NF==2) print $1*60+$2; else print $1*3600+$2*60+$3 }'; }
rss_mib() { grep -E 'Maximum resident' "$1" | awk '{printf "%.0f", $NF/1024}'; }
cpu_s() { awk -F: '/User time|System time/ {s+=$2} END {printf "%.1f", s}' "$1"; }

gptq_q=() gptq_l=(--actorder static) order="act-order (static groups)"
if "$build/qloom" quantize --help 2>/dev/null | grep -q quant_algo_config_file; then
  echo '{"desc_act": false, "static_groups": false}' > "$scratch/gptq_no_actorder.json"
  gptq_q=(--quant_algo_config_file gptq "$scratch/gptq_no_actorder.json") gptq_l=(--actorder none)
  order="no act-order"
fi

results=()
for algo in $algos; do
  for tool in $tools; do
    out="$scratch/$tool-$algo" log="$scratch/$tool-$algo.log" tm="$scratch/$tool-$algo.time"
    rm -rf "$out"
    qx=() lx=()
    [ "$algo" = gptq ] && qx=("${gptq_q[@]}") lx=("${gptq_l[@]}")
    if [ "$tool" = qloom ]; then
      /usr/bin/time -v "$build/qloom" quantize --model_dir "$model" --output_dir "$out" --quant_scheme int4_wo_64 \
        --quant_algo "$algo" "${qx[@]}" --num_calib_data "$ncalib" --seq_len "$seqlen" --threads "$threads" \
        --progress off \
        > "$log" 2> "$tm"
    else
      OMP_NUM_THREADS=$threads /usr/bin/time -v "$py" "$here/llmcompressor_driver.py" quantize --algo "$algo" \
        --model "$model" --calib "$scratch/calib.jsonl" --output "$out" --threads "$threads" "${lx[@]}" \
        > "$log" 2> "$tm"
    fi
    kld=$(OMP_NUM_THREADS=$threads "$py" "$here/llmcompressor_driver.py" kld --source "$model" --quantized "$out" \
      --wikitext "$wiki" --seq_len "$kseq" --limit "$klimit" --threads "$threads" 2> "$scratch/$tool-$algo.kld.log")
    k=$(echo "$kld" | "$py" -c 'import json,sys; d=json.load(sys.stdin); print("%.4f %.4f %d" % (d["kld_mean"], d["top1_agreement"], d["tokens"]))')
    line=$(printf '%-6s %-15s wall %7.1f s  cpu %7.1f s  peak RSS %6s MiB  KLD %s  top-1 %s  (%s tokens)' "$algo" \
      "$tool" "$(wall_s "$tm")" "$(cpu_s "$tm")" "$(rss_mib "$tm")" $k)
    echo "$line"
    results+=("$line")
  done
done
echo "llmcompressor_side_by_side: $model, $(wc -l < "$scratch/calib.jsonl") calibration samples, $threads thread(s)," \
  "KLD on $klimit x $kseq wikitext-2 windows, GPTQ $order"
printf '  %s\n' "${results[@]}"
