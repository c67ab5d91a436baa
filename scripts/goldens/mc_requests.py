#!/usr/bin/env python3
"""Goldens for qloom's multiple-choice tasks (src/qloom/eval/mc_tasks.h,
multiple_choice.h): the requests lm-eval itself builds for the fixture
documents in tests/data/mc/, and the token ids its HF backend scores.

For each case, lm-eval's own task YAML (lm_eval/tasks/<task>/...) is included
and only the data source is replaced by the local fixture file, so the prompt
format, few-shot layout, choices and gold labels are lm-eval's. The request
strings come from task.build_all_requests(); the token ids from
HFLM._encode_pair() with the model's tokenizer.

Run (lm-eval + transformers in a venv outside the repo):
  /tmp/heavy/bin/python scripts/goldens/mc_requests.py TOKENIZER_MODEL_DIR
writes tests/data/mc/requests_golden.json.
"""
import json
import os
import sys
import tempfile

import lm_eval
from lm_eval.tasks import TaskManager
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MC = os.path.join(ROOT, "tests", "data", "mc")
TASKS = os.path.join(os.path.dirname(lm_eval.__file__), "tasks")

# case name -> (lm-eval task, its yaml, fixture, num_fewshot, few-shot file)
CASES = [
    ("hellaswag", "hellaswag", "hellaswag/hellaswag.yaml", "hellaswag.jsonl", 0, None),
    ("arc_easy", "arc_easy", "arc/arc_easy.yaml", "arc.jsonl", 0, None),
    ("arc_challenge", "arc_challenge", "arc/arc_challenge.yaml", "arc.jsonl", 0, None),
    ("arc_easy_2shot", "arc_easy", "arc/arc_easy.yaml", "arc.jsonl", 2, "arc_train.jsonl"),
    ("piqa", "piqa", "piqa/piqa.yaml", "piqa.jsonl", 0, None),
    ("winogrande", "winogrande", "winogrande/default.yaml", "winogrande.jsonl", 0, None),
    ("mmlu_anatomy", "mmlu", "mmlu/default/mmlu_anatomy.yaml", "mmlu_anatomy.jsonl", 0, None),
    ("mmlu_geo_2shot", "mmlu", "mmlu/default/mmlu_high_school_geography.yaml", "mmlu_geo.jsonl", 2,
     "mmlu_geo_dev.jsonl"),
]


def write_yaml(tmp, case, yaml_rel, fixture, fewshot_file):
    files = {"eval": os.path.join(MC, fixture)}
    if fewshot_file:
        files["fs"] = os.path.join(MC, fewshot_file)
    lines = [
        f"include: {os.path.join(TASKS, yaml_rel)}",
        f"task: golden_{case}",
        "tag: []",
        "dataset_path: json",
        "dataset_name: null",
        "dataset_kwargs:",
        "  data_files:",
    ] + [f"    {k}: {v}" for k, v in files.items()] + [
        "training_split: null",
        "validation_split: null",
        "test_split: eval",
        f"fewshot_split: {'fs' if fewshot_file else 'null'}",
    ]
    if "mmlu" in yaml_rel:
        lines.append("process_docs: null")
    with open(os.path.join(tmp, f"golden_{case}.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")


def build(case, yaml_rel, fixture, num_fewshot, fewshot_file, tok_model):
    with tempfile.TemporaryDirectory() as tmp:
        write_yaml(tmp, case, yaml_rel, fixture, fewshot_file)
        tm = TaskManager(include_path=tmp, include_defaults=True)
        task = tm.load_task_or_group([f"golden_{case}"])[f"golden_{case}"]
        task.set_config("num_fewshot", num_fewshot)
        if num_fewshot:
            task.set_fewshot_seed(1234)
        task.build_all_requests(rank=0, world_size=1)
        docs = {}
        for inst in sorted(task.instances, key=lambda i: (i.doc_id, i.idx)):
            ctx, cont = inst.args
            d = docs.setdefault(inst.doc_id, {"doc_id": inst.doc_id, "requests": []})
            c_ids, k_ids = tok_model._encode_pair(ctx, cont)
            d["requests"].append({"context": ctx, "continuation": cont,
                                  "context_ids": c_ids, "continuation_ids": k_ids})
        out = []
        for doc_id in sorted(docs):
            doc = task.eval_docs[doc_id]
            gold = task.doc_to_target(doc)
            if task.multiple_input:
                gold = task.doc_to_text(doc)
            if isinstance(gold, str):  # a letter answer: process_results takes its index
                gold = task.doc_to_choice(doc).index(gold)
            docs[doc_id]["gold"] = gold
            out.append(docs[doc_id])
        return out


def main():
    tok_dir = sys.argv[1]
    from lm_eval.models.huggingface import HFLM
    lm = HFLM(pretrained=tok_dir, device="cpu", dtype="float32", batch_size=1)
    golden = {"lm_eval_version": lm_eval.__version__, "transformers_version": transformers.__version__,
              "tokenizer": os.path.basename(os.path.normpath(tok_dir)), "cases": []}
    for case, task, yaml_rel, fixture, k, fs in CASES:
        golden["cases"].append({"case": case, "task": task, "fixture": fixture, "num_fewshot": k,
                                "fewshot_file": fs, "docs": build(case, yaml_rel, fixture, k, fs, lm)})
    path = os.path.join(MC, "requests_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote", path, sum(len(c["docs"]) for c in golden["cases"]), "docs")


if __name__ == "__main__":
    main()
