#!/usr/bin/env python3
"""Independent perplexity reference for `qloom eval --task ppl` (demo model).

Computes the perplexity of models/stories260K-hf-bf16 on the bundled
data/datasets/tinystories/TinyStories-valid-first1000.txt with HuggingFace
transformers (AutoModelForCausalLM in float32 on the CPU, ids from HF
`tokenizers` on tokenizer.json), using the same windows as qloom:

  quark    : tokenizer(text) once (BOS added by the tokenizer), windows of
             seq_len = min(2048, max_position_embeddings) = 512 tokens,
             non-overlapping, last partial window dropped; every position but
             the first of a window is predicted (amd/Quark llm_eval ppl_eval).
  llamacpp : n_ctx 512, window i = tokens[i*512:(i+1)*512] with its first token
             replaced by BOS; only logits[256:511] against tokens[257:512]
             are scored (llama.cpp tools/perplexity/perplexity.cpp).

The NLL of each predicted token is -log_softmax(logits)[target], summed in
float64; ppl = exp(mean NLL); stderr = ppl * sqrt((E[x^2] - E[x]^2) / (N-1))
as llama-perplexity prints it. Results for the first `limit` windows (the
test runs qloom with the same --limit) and for all windows go to
tests/data/eval/demo_ppl_reference.json.

"wikitext2" adds the bundled data/datasets/wikitext-2-raw/wiki.test.raw read
as Quark does, "\n\n".join(load_dataset("wikitext", "wikitext-2-raw-v1",
split="test")["text"]): the rows are the file's lines with their "\n",
whitespace-only lines as "" (what the datasets builder yields), quark
windows, the first WIKI_LIMIT of them. "ppl" takes its ids from the HF
`tokenizers` library on the demo model's tokenizer.json as written (what
transformers 4.x's LlamaTokenizerFast runs); transformers 5's AutoTokenizer
rebuilds the Llama pipeline from the vocabulary and drops tokenizer.json's
normalizer (Strip + " {2,}" -> " "), so its ids differ: "autotokenizer_ppl".
qloom follows AutoTokenizer where a model ships tokenizer.model (as the demo
does), so tests/eval/eval_cli_test.cpp checks "autotokenizer_ppl".
scripts/goldens/wikitext_ids.py writes the sha256 of AutoTokenizer's ids.
The TinyStories windows below take tokenizer.json's ids too; over the first
8 windows (the ones the tests score) they equal AutoTokenizer's (the two
first part at token 192133).

Run: /tmp/heavy/bin/python scripts/goldens/ppl_reference.py   (torch CPU, 2 threads;
transformers 5.24 + tokenizers 0.23 here; 4.57 gave the same TinyStories numbers)
"""
import json
import math
import pathlib
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "stories260K-hf-bf16"
DATA = ROOT / "data" / "datasets" / "tinystories" / "TinyStories-valid-first1000.txt"
OUT = ROOT / "tests" / "data" / "eval" / "demo_ppl_reference.json"
WIKI = ROOT / "data" / "datasets" / "wikitext-2-raw" / "wiki.test.raw"
LIMITS = (8,)
WIKI_LIMIT = 40


def wikitext_joined(path):
    """The HF rows of wiki.test.raw joined by "\n\n" (see the docstring)."""
    with open(path, encoding="utf-8") as f:
        rows = [line if line.strip() else "" for line in f]
    return "\n\n".join(rows)


def stats(nlls):
    n = len(nlls)
    s = math.fsum(nlls)
    s2 = math.fsum(x * x for x in nlls)
    mean = s / n
    var = s2 / n - mean * mean
    ppl = math.exp(mean)
    return {"tokens_scored": n, "ppl": ppl,
            "ppl_stderr": ppl * math.sqrt(var / (n - 1)) if var > 0 and n > 1 else 0.0}


@torch.no_grad()
def window_nlls(model, tokens, begin, length, first_target, bos):
    ids = tokens[begin:begin + length].clone()
    if bos is not None:
        ids[0] = bos
    logits = model(ids.unsqueeze(0)).logits[0].double()
    logp = torch.log_softmax(logits, dim=-1)
    targets = tokens[begin + first_target:begin + length]
    rows = logp[first_target - 1:length - 1]
    return (-rows.gather(1, targets.unsqueeze(1)).squeeze(1)).tolist()


def wikitext_entry(model, auto_tok):
    from tokenizers import Tokenizer
    text = wikitext_joined(WIKI)
    fast = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    entry = {"dataset": "data/datasets/wikitext-2-raw/wiki.test.raw (HF rows joined by \\n\\n)",
             "tokenizer": "tokenizers " + __import__("tokenizers").__version__ + " on tokenizer.json",
             "seq_len": 512, "limit": WIKI_LIMIT}
    for key, ids in (("ppl", fast.encode(text).ids), ("autotokenizer_ppl", auto_tok(text)["input_ids"])):
        tokens = torch.tensor(ids, dtype=torch.long)
        nlls = []
        for i in range(WIKI_LIMIT):
            nlls += window_nlls(model, tokens, i * 512, 512, 1, None)
        st = stats(nlls)
        if key == "ppl":
            entry.update(n_tokens=len(ids), tokens_scored=st["tokens_scored"], ppl=st["ppl"],
                         ppl_stderr=st["ppl_stderr"])
        else:
            entry[key] = st["ppl"]
            entry["autotokenizer_n_tokens"] = len(ids)
    print("wikitext2", json.dumps(entry), file=sys.stderr)
    return entry


def main():
    torch.set_num_threads(2)
    tok = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float32).eval()
    text = DATA.read_text(encoding="utf-8")
    # tokenizer.json through HF tokenizers (= transformers 4.x's fast tokenizer;
    # transformers 5's AutoTokenizer drops this tokenizer.json's normalizer).
    from tokenizers import Tokenizer
    fast = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    tokens = torch.tensor(fast.encode(text).ids, dtype=torch.long)
    n_tokens = tokens.numel()
    max_pos = model.config.max_position_embeddings
    result = {
        "how": "scripts/goldens/ppl_reference.py: HF transformers "
               f"{transformers.__version__} AutoModelForCausalLM float32 CPU, torch {torch.__version__}, "
               "HF tokenizers on tokenizer.json; see the script docstring for the windows",
        "model": "models/stories260K-hf-bf16",
        "dataset": "data/datasets/tinystories/TinyStories-valid-first1000.txt",
        "n_tokens": n_tokens,
        "bos_id": tok.bos_token_id,
        "first_tokens": tokens[:16].tolist(),
        "protocols": {},
    }
    result["wikitext2"] = wikitext_entry(model, tok)
    for proto in ("quark", "llamacpp"):
        seq_len = min(2048, max_pos) if proto == "quark" else min(512, max_pos)
        n_win = n_tokens // seq_len
        first_target = 1 if proto == "quark" else seq_len // 2 + 1
        bos = None if proto == "quark" else tok.bos_token_id
        nlls = []
        per_limit = {}
        for i in range(n_win):
            nlls += window_nlls(model, tokens, i * seq_len, seq_len, first_target, bos)
            if i + 1 in LIMITS:
                per_limit[str(i + 1)] = stats(nlls)
        entry = {"seq_len": seq_len, "windows": n_win, "limit": per_limit, "all": stats(nlls)}
        result["protocols"][proto] = entry
        print(proto, json.dumps(entry), file=sys.stderr)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
