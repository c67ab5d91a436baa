#!/usr/bin/env python3
"""Writes the seeds of fuzz/corpus_config/: every config.json of tests/data
(each supported architecture, transformers 4.x and 5.x forms, Quark
checkpoints) and one bad variant of the llama test config per class that
model/config_check.h rejects. Run from the repository root."""
import json
import pathlib
import shutil

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fuzz" / "corpus_config"

BAD = {
    "heads_zero": {"num_attention_heads": 0},
    "hidden_string": {"hidden_size": "64"},
    "hidden_fraction": {"hidden_size": 64.5},
    "hidden_float": {"hidden_size": 64.0},
    "theta_negative": {"rope_theta": -1},
    "theta_huge": {"rope_theta": 1e308},
    "eps_zero": {"rms_norm_eps": 0},
    "vocab_huge": {"vocab_size": 2 ** 24 + 1},
    "layers_huge": {"num_hidden_layers": 2 ** 31 - 1},
    "layers_u64": {"num_hidden_layers": 2 ** 64 - 1},
    "kv_not_dividing": {"num_key_value_heads": 3},
    "heads_not_dividing": {"num_attention_heads": 5, "num_key_value_heads": 1, "head_dim": None},
    "tie_string": {"tie_word_embeddings": "yes"},
    "rope_list": {"rope_scaling": [1, 2]},
    "rope_linear_negative": {"rope_scaling": {"rope_type": "linear", "factor": -2}},
    "rope_llama3_bad": {"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4,
                                         "high_freq_factor": 1, "original_max_position_embeddings": 0.5}},
    "rope_per_type": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": -5}}},
    "text_config_bad": {"text_config": {"model_type": "llama", "hidden_size": "big"}},
    "experts_per_tok": {"model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 4},
}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    data = ROOT / "tests" / "data"
    sources = [p for p in data.rglob("*.json") if p.name == "config.json" and "real" not in p.parts]
    sources += sorted((data / "engine" / "config_forms").rglob("*.json"))
    for p in sorted(set(sources)):
        shutil.copyfile(p, OUT / "_".join(p.relative_to(data).parts))
    base = json.loads((data / "engine" / "llama" / "config.json").read_text())
    for name, patch in BAD.items():
        cfg = dict(base)
        cfg.update(patch)
        (OUT / f"bad_{name}.json").write_text(json.dumps(cfg, indent=1) + "\n")


if __name__ == "__main__":
    main()
