#!/usr/bin/env python3
"""hellaswag_lmeval: reference HellaSwag acc / acc_norm from EleutherAI's
lm-evaluation-harness (lm-eval 0.4.x, HFLM, float32 on CPU) over LOCAL docs,
with every doc's per-choice log-likelihoods, for checking qloom's own
multiple-choice evaluation doc by doc. Not run by ctest; lm-eval, transformers
and torch are not project dependencies (run it with a venv that has them).

    hellaswag_lmeval.py --variant llamacpp_text --data hellaswag_val_full.txt \
        --model /path/to/hf-model --limit 400 --out /tmp/hs_lmeval_400.json
    hellaswag_lmeval.py --variant hf_jsonl --data hellaswag_val.jsonl ...

Variants (both zero-shot multiple_choice tasks built in memory and handed to
lm_eval.simple_evaluate; lm-eval's code is called, not copied):
  llamacpp_text  llama.cpp's 6-lines-per-task text file (line 1 = context,
                 line 2 = gold 0-3, lines 3-6 = endings). doc_to_text = line 1
                 as is, choices = lines 3-6 as is, target = line 2.
  hf_jsonl       rowanz/HF-style jsonl (ctx_a, ctx_b, activity_label, endings,
                 label); docs go through lm-eval's own hellaswag process_docs
                 (lm_eval/tasks/hellaswag/utils.py: query = preprocess(
                 activity_label + ": " + ctx_a + " " + ctx_b.capitalize()),
                 choices = preprocess(ending)), exactly like the stock
                 `hellaswag` task minus the hub download.
Both: target_delimiter " ", metrics acc and acc_norm. lm-eval scores choice j
as the summed log-likelihood of " " + ending_j given the context (context and
context+continuation tokenized, continuation = the extra tokens; no BOS for
HFLM by default); acc = argmax of the sums, acc_norm = argmax of sum / len(
ending_j in characters). The first N docs in file order (--limit N).

Output JSON: lm_eval_version, transformers_version, variant, n, acc,
acc_stderr, acc_norm, acc_norm_stderr, docs: [{index, gold, lls[4], is_greedy
[4], context (the string lm-eval conditioned on)}], plus one summary line
on stdout.
"""
import argparse
import json
import os
import sys
import tempfile
import time


def read_llamacpp_text(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) % 6:
        sys.exit(f"hellaswag_lmeval: {path}: {len(lines)} lines, not a multiple of 6")
    docs = []
    for i in range(0, len(lines), 6):
        docs.append({"query": lines[i], "gold": int(lines[i + 1]), "choices": lines[i + 2:i + 6]})
    return docs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", choices=["llamacpp_text", "hf_jsonl"], required=True)
    ap.add_argument("--data", required=True, help="llama.cpp text file or rowanz/HF jsonl")
    ap.add_argument("--model", default="/tmp/smollm2-hf-v4", help="HF model dir (pretrained=)")
    ap.add_argument("--limit", type=int, required=True, help="first N docs, in order")
    ap.add_argument("--out", required=True, help="output JSON path")
    ap.add_argument("--batch_size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args()

    # Offline, and the thread count set before torch starts its pools.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = str(args.threads)

    import torch
    torch.set_num_threads(args.threads)
    import transformers
    import lm_eval
    from lm_eval.tasks import TaskManager

    tmp = tempfile.mkdtemp(prefix="hellaswag_lmeval.")
    task = {
        "task": f"hellaswag_local_{args.variant}",
        "dataset_path": "json",
        "validation_split": "validation",
        "output_type": "multiple_choice",
        "target_delimiter": " ",
        "num_fewshot": 0,
        "metric_list": [
            {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
            {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
        ],
        "metadata": {"version": 1.0},
    }
    if args.variant == "llamacpp_text":
        docs = read_llamacpp_text(args.data)
        jpath = os.path.join(tmp, "docs.jsonl")
        with open(jpath, "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
        # Feature names: lm-eval returns doc[name] as is, no template rendering.
        task.update({"doc_to_text": "query", "doc_to_choice": "choices", "doc_to_target": "gold"})
    else:
        from lm_eval.tasks.hellaswag import utils as hs_utils
        jpath = os.path.abspath(args.data)
        # Same fields as lm-eval's hellaswag.yaml.
        task.update({"process_docs": hs_utils.process_docs, "doc_to_text": "{{query}}",
                     "doc_to_choice": "choices", "doc_to_target": "{{label}}"})
    task["dataset_kwargs"] = {"data_files": {"validation": jpath},
                              "cache_dir": os.path.join(tmp, "hf_datasets")}

    t0 = time.time()
    res = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={args.model},dtype={args.dtype}",
        tasks=[task],
        task_manager=TaskManager(),
        num_fewshot=0,
        batch_size=args.batch_size,
        device="cpu",
        limit=args.limit,
        log_samples=True,
    )
    wall = time.time() - t0
    name = task["task"]
    r = res["results"][name]
    samples = sorted(res["samples"][name], key=lambda s: s["doc_id"])
    out_docs = []
    for s in samples:
        resps = [x[0] if isinstance(x, (list, tuple)) and len(x) == 1 else x for x in s["resps"]]
        arg0 = s["arguments"][0]
        arg0 = arg0 if isinstance(arg0, (list, tuple)) else list(arg0.values())
        out_docs.append({
            "index": int(s["doc_id"]),
            "gold": int(s["target"]),
            "context": arg0[0],
            "lls": [float(x[0]) for x in resps],
            "is_greedy": [bool(x[1]) for x in resps],
        })
    out = {
        "lm_eval_version": getattr(lm_eval, "__version__", None) or __import__("importlib.metadata").metadata.version("lm_eval"),
        "transformers_version": transformers.__version__,
        "variant": args.variant,
        "n": len(out_docs),
        "acc": r["acc,none"],
        "acc_stderr": r["acc_stderr,none"],
        "acc_norm": r["acc_norm,none"],
        "acc_norm_stderr": r["acc_norm_stderr,none"],
        "model": args.model,
        "data": os.path.abspath(args.data),
        "dtype": args.dtype,
        "batch_size": args.batch_size,
        "threads": args.threads,
        "wall_s": round(wall, 1),
        "docs": out_docs,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    print(f"hellaswag_lmeval: {args.variant} n {out['n']} acc {out['acc']:.4f} +/- {out['acc_stderr']:.4f} "
          f"acc_norm {out['acc_norm']:.4f} +/- {out['acc_norm_stderr']:.4f} wall {wall:.1f} s "
          f"threads {args.threads} batch {args.batch_size} {args.dtype} lm_eval {out['lm_eval_version']} "
          f"transformers {out['transformers_version']} -> {args.out}")


if __name__ == "__main__":
    main()
