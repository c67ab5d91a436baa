#!/usr/bin/env bash
# Bounded load test of `qloom serve` on loopback: N clients each run R
# streaming chat completions back to back (all N at once), while a second
# loop mixes in malformed and oversized requests (bad JSON, bad parameters,
# a prompt over the context, a body over --max-body-bytes, an unknown model,
# a wrong method). Prints requests answered by status, p50/p95 latency and
# time to first byte of the chats, generated tokens/s, and whether the
# server stayed up and stopped cleanly on SIGTERM.
#
#   bench/serve_load.sh [MODEL_DIR] [-n N] [-r ROUNDS] [-t MAX_TOKENS] [--qloom PATH] [--threads T]
# Default MODEL_DIR build/real/smollm2-bf16 (SmolLM2-135M-Instruct, chat template), N 8, R 2, 64 tokens.
set -euo pipefail
cd "$(dirname "$0")/.."
model=build/real/smollm2-bf16 n=8 rounds=2 max_tokens=64 threads=0 qloom=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) n=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    -t) max_tokens=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --qloom) qloom=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) model=$1; shift ;;
  esac
done
if [[ -z "$qloom" ]]; then
  for c in build/qloom build-serve/qloom; do [[ -x $c ]] && qloom=$c && break; done
fi
[[ -x "$qloom" ]] || { echo "serve_load: no qloom binary (pass --qloom PATH)" >&2; exit 2; }
for tool in curl jq; do command -v $tool > /dev/null || { echo "serve_load: needs $tool" >&2; exit 2; }; done

work=$(mktemp -d "${TMPDIR:-/tmp}/serve-load-XXXXXX")
trap 'kill "$server_pid" 2> /dev/null || true; rm -rf "$work"' EXIT
"$qloom" serve "$model" --port 0 --max-concurrency "$n" --threads "$threads" --max-body-bytes 1048576 \
  2> "$work/server.log" &
server_pid=$!
port=""
for _ in $(seq 600); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/server.log" | grep -o '[0-9]*$' || true)
  [[ -n "$port" ]] && break
  kill -0 "$server_pid" 2> /dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.1
done
[[ -n "$port" ]] || { echo "serve_load: server did not start" >&2; exit 1; }
base=http://127.0.0.1:$port
echo "serve_load: $(grep -o 'listening.*' "$work/server.log")"

topics=(a dragon "the sea" robots "a small town" winter "a lost key" music "the moon" bread "a river" chess)
chat_client() {  # $1 client index
  local i=$1 r body out
  for r in $(seq "$rounds"); do
    body=$(jq -cn --arg t "${topics[$(((i + r) % ${#topics[@]}))]}" --argjson m "$max_tokens" --argjson s "$((i * 100 + r))" \
      '{messages: [{role: "user", content: ("Write a short story about " + $t + ".")}], max_tokens: $m,
        temperature: 0.7, seed: $s, stream: true, stream_options: {include_usage: true}}')
    out="$work/chat-$i-$r"
    curl -sS -N --max-time 600 -o "$out.body" -w '%{http_code} %{time_total} %{time_starttransfer}\n' \
      -H 'Content-Type: application/json' -d "$body" "$base/v1/chat/completions" > "$out.meta" 2> "$out.err" ||
      echo "000 0 0" > "$out.meta"
  done
}
bad_client() {
  local long k=0
  long=$(head -c 60000 /dev/zero | tr '\0' 'a' | sed 's/aaaa/aa b /g')  # ~10k words: over an 8k context
  jq -cn --arg c "$long" '{messages: [{role: "user", content: $c}], max_tokens: 8}' > "$work/long.json"
  head -c 1200000 /dev/zero | tr '\0' ' ' > "$work/huge.json"
  while [[ ! -e "$work/chats.done" && $k -lt 400 ]]; do
    k=$((k + 1))
    case $((k % 6)) in
      0) echo -n 'bad-json:'; curl -s -o /dev/null -w '%{http_code}\n' -d '{"messages": [' "$base/v1/chat/completions" ;;
      1) echo -n 'bad-param:'; curl -s -o /dev/null -w '%{http_code}\n' -d '{"prompt": "x", "temperature": 9}' "$base/v1/completions" ;;
      2) echo -n 'over-context:'; curl -s -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' --data-binary @"$work/long.json" "$base/v1/chat/completions" ;;
      3) echo -n 'over-body:'; curl -s -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' --data-binary @"$work/huge.json" "$base/v1/completions" ;;
      4) echo -n 'unknown-model:'; curl -s -o /dev/null -w '%{http_code}\n' -d '{"model": "nope", "prompt": "x"}' "$base/v1/completions" ;;
      5) echo -n 'wrong-method:'; curl -s -o /dev/null -w '%{http_code}\n' "$base/v1/chat/completions" ;;
    esac >> "$work/bad.codes"
    sleep 0.05
  done
}

bad_client &
bad_pid=$!
t0=$(date +%s.%N)
pids=()
for i in $(seq 0 $((n - 1))); do chat_client "$i" & pids+=($!); done
wait "${pids[@]}"
t1=$(date +%s.%N)
touch "$work/chats.done"
wait "$bad_pid"

health=$(curl -s -o /dev/null -w '%{http_code}' "$base/health")
kill -TERM "$server_pid"
server_rc=0
wait "$server_pid" || server_rc=$?

total=$((n * rounds))
ok=0 done_ok=0 tokens=0
: > "$work/lat" ; : > "$work/ttfb"
for m in "$work"/chat-*.meta; do
  read -r code t ttfb < "$m"
  echo "$code" >> "$work/chat.codes"
  [[ "$code" == 200 ]] || continue
  ok=$((ok + 1))
  b=${m%.meta}.body
  grep -q '^data: \[DONE\]' "$b" && done_ok=$((done_ok + 1))
  u=$(grep '"usage"' "$b" | sed 's/^data: //' | jq -r '.usage.completion_tokens' | tail -1)
  tokens=$((tokens + ${u:-0}))
  echo "$t" >> "$work/lat"; echo "$ttfb" >> "$work/ttfb"
done
pct() { sort -n "$1" | awk -v p="$2" '{v[NR]=$1} END {if (NR == 0) {print "n/a"; exit} i = int(p * NR + 0.999999); if (i < 1) i = 1; printf "%.3f", v[i]}'; }
wall=$(echo "$t1 - $t0" | bc -l)
echo "chats:        $total sent, $ok answered 200, $done_ok ended with [DONE] (N=$n concurrent x $rounds rounds, max_tokens $max_tokens)"
echo "chat status:  $(sort "$work/chat.codes" | uniq -c | awk '{printf "%s x%s  ", $2, $1}')"
echo "bad requests: $(wc -l < "$work/bad.codes") sent; by status: $(sort "$work/bad.codes" | uniq -c | awk '{printf "%s x%s  ", $2, $1}')"
echo "latency:      p50 $(pct "$work/lat" 0.5) s, p95 $(pct "$work/lat" 0.95) s (whole stream); first byte (role chunk) p50 $(pct "$work/ttfb" 0.5) s, p95 $(pct "$work/ttfb" 0.95) s"
printf 'throughput:   %d completion tokens in %.1f s = %.1f tokens/s (all clients)\n' "$tokens" "$wall" "$(echo "$tokens / $wall" | bc -l)"
echo "server:       /health $health after the run; SIGTERM exit $server_rc; $(grep -c . "$work/server.log") log lines"
[[ $ok -eq $total && $done_ok -eq $total && "$health" == 200 && $server_rc -eq 0 ]]
