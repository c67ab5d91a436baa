#!/usr/bin/env bash
# Renders a `qloom perf` session's reports/report.html in headless Chromium
# (Debian's `chromium` package) and saves a screenshot, to check that the
# page opens offline and its plots draw (issue 13's acceptance point).
#
#   scripts/render_report.sh SESSION_DIR OUT.png [WIDTHxHEIGHT]   (default 1280x2400)
#
# Exits 0 with a message and no screenshot when chromium is not installed
# (apt-get install chromium). Network access is switched off for the page,
# so anything it tried to fetch would be missing from the screenshot.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 SESSION_DIR OUT.png [WIDTHxHEIGHT]" >&2
  exit 2
fi
session=$1
out=$2
size=${3:-1280x2400}
html="$session/reports/report.html"
if [ ! -f "$html" ]; then
  echo "render_report: no $html (run the session to its FINAL stage, or 'qloom perf report --session $session')" >&2
  exit 2
fi
browser=""
for b in chromium chromium-browser; do
  if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
  echo "render_report: skipped, chromium is not installed (apt-get install chromium)"
  exit 0
fi
abs_html=$(cd "$(dirname "$html")" && pwd)/report.html
abs_out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# A private profile; no network (a proxy that does not exist), no GPU.
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$profile" --proxy-server="127.0.0.1:9" --proxy-bypass-list="<-loopback>" \
  --window-size="${size/x/,}" --screenshot="$abs_out" "file://$abs_html" >"$profile/log" 2>&1 || {
  cat "$profile/log" >&2
  echo "render_report: chromium failed" >&2
  exit 1
}
if [ ! -s "$abs_out" ]; then
  cat "$profile/log" >&2
  echo "render_report: chromium wrote no screenshot" >&2
  exit 1
fi
echo "render_report: $abs_out ($size) from $abs_html"
