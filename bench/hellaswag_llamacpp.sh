#!/usr/bin/env bash
# hellaswag_llamacpp: reference HellaSwag acc_norm from llama.cpp's own
# `llama-perplexity --hellaswag` on a GGUF, for comparing qloom's evaluation
# against an independent implementation. Not run by ctest.
#
#   hellaswag_llamacpp.sh LLAMA_BUILD_DIR GGUF HELLASWAG_TXT TASKS THREADS
#
#   LLAMA_BUILD_DIR  a llama.cpp CMake build dir (with bin/llama-perplexity).
#                    llama.cpp is built OUTSIDE this repository (e.g. in
#                    /tmp/llama.cpp/build, CPU-only Release); none of its code
#                    or build recipe lives here, this script only calls it.
#   GGUF             the model
#   HELLASWAG_TXT    llama.cpp's 6-lines-per-task text file: line 1 = context
#                    (activity_label + ": " + ctx, lm-eval-preprocessed but
#                    ctx_b NOT capitalized), line 2 = gold index 0-3, lines 3-6
#                    = the four endings. The full validation set is 10042 tasks.
#   TASKS            --hellaswag-tasks
#   THREADS          -t
#   LLAMA_EXTRA_ARGS (env, optional) extra llama-perplexity arguments.
#
# What llama.cpp measures (tools/perplexity/perplexity.cpp, hellaswag_score;
# examples/perplexity/ in builds before mid-2025, same algorithm):
#   - each ending j is scored on the token sequence
#     common_tokenize(context + " " + ending_j, add_special=true): one string,
#     tokenized as a whole, with BOS prepended only if the GGUF's vocab says
#     add_bos (SmolLM2: no).
#   - common_prefix = the number of leading tokens identical in all four
#     sequences. The score of ending j is the MEAN log-probability per token
#     over tokens seq_j[common_prefix .. end): sum of log p(token | prefix)
#     divided by the count of those tokens. Tokens of an ending that happen to
#     be shared by all four endings (e.g. all start with " the") fall inside the
#     common prefix and are not scored; a token merged across the context/ending
#     boundary is scored only if it differs between endings.
#   - prediction = argmax of that mean (first index wins ties); "acc_norm" is
#     the fraction of tasks whose prediction equals the gold index. This is
#     token-count normalization, not lm-eval's acc_norm (summed log-likelihood
#     of " " + ending divided by the ending's length in characters), and
#     llama.cpp reports no unnormalized acc.
#
# Which tasks a given TASKS picks: randomize_tasks is hard-coded true, so tasks
# are ALWAYS drawn at random, even when TASKS >= the task count. With
# rng = std::mt19937(1) it repeats TASKS times: idx = uniform_int_distribution
# <size_t>(0, remaining-1)(rng), take the task at position idx among the tasks
# not yet taken, remove it (sampling without replacement). So TASKS=N is a
# fixed pseudo-random N-subset in random order (depends on the C++ standard
# library's uniform_int_distribution, i.e. libstdc++ vs libc++), NOT the
# first N tasks; only TASKS >= 10042 covers exactly the whole set (in a
# shuffled order, which does not change the final score). Compare an in-order
# first-N evaluation against it only at the full set.
#
# Output: the last running line of llama-perplexity ("N<TAB>acc_norm*100",
# newer builds add "%" and a Wilson 95% interval) becomes one summary line:
#   hellaswag_llamacpp: n N acc_norm P +/- SE (binomial stderr
#   sqrt(p(1-p)/(n-1)), lm-eval's convention) wall W s threads T ...
set -euo pipefail
if [ $# -ne 5 ]; then
  sed -n '6p' "$0" | sed 's/^# *//' >&2
  exit 2
fi
build=$1 gguf=$2 data=$3 tasks=$4 threads=$5
bin="$build/bin/llama-perplexity"
[ -x "$bin" ] || { echo "hellaswag_llamacpp: no $bin" >&2; exit 1; }
[ -f "$gguf" ] || { echo "hellaswag_llamacpp: no GGUF $gguf" >&2; exit 1; }
[ -f "$data" ] || { echo "hellaswag_llamacpp: no data file $data" >&2; exit 1; }

log=$(mktemp /tmp/hellaswag_llamacpp.XXXXXX.log)
t0=$(date +%s.%N)
# shellcheck disable=SC2086
if ! "$bin" -m "$gguf" -f "$data" --hellaswag --hellaswag-tasks "$tasks" -t "$threads" \
     ${LLAMA_EXTRA_ARGS:-} >"$log" 2>&1; then
  tail -20 "$log" >&2
  echo "hellaswag_llamacpp: llama-perplexity failed (log $log)" >&2
  exit 1
fi
t1=$(date +%s.%N)

# Running lines: "<task#>\t<acc_norm %>[%\t[lo%, hi%]]"; the last one is final.
last=$(grep -P '^\d+\t[0-9.]+%?(\t|$)' "$log" | tail -1 || true)
if [ -z "$last" ]; then
  tail -20 "$log" >&2
  echo "hellaswag_llamacpp: no score lines in $log" >&2
  exit 1
fi
loaded=$(grep -oP 'loaded \K\d+(?= tasks)' "$log" | head -1 || echo '?')
commit=$(git -C "$build/.." rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
echo "$last" | awk -v wall="$(echo "$t1 - $t0" | bc -l)" -v thr="$threads" -v loaded="$loaded" \
  -v commit="$commit" -v gguf="$(basename "$gguf")" -v logf="$log" '{
  n = $1; v = $2; sub(/%/, "", v); p = v / 100.0;
  se = (n > 1) ? sqrt(p * (1 - p) / (n - 1)) : 0;
  ci = ""; if (NF >= 3) { ci = $3; for (i = 4; i <= NF; i++) ci = ci " " $i; ci = " wilson95 " ci }
  printf "hellaswag_llamacpp: %s n %d (of %s loaded, random subset unless all) acc_norm %.4f +/- %.4f%s wall %.1f s threads %s llama.cpp %s log %s\n",
    gguf, n, loaded, p, se, ci, wall, thr, commit, logf
}'
