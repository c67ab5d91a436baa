#!/usr/bin/env python3
"""Driver of bench/llmcompressor_side_by_side.sh (run with the llm-compressor
venv's python; see that script for how to create it). Two commands:

  quantize --algo gptq|awq --model DIR --calib FILE --output DIR [--threads N] [--group 64]
      llm-compressor's oneshot on CPU with W4A16 (int4 symmetric, per group of
      --group input channels, lm_head excluded), calibrated on the token ids of
      FILE (calib_ids' JSON lines: {"input_ids": [...]}), one sample per
      batch, in file order, no padding. gptq: GPTQModifier without act-order
      (--actorder none: actorder=None; static: act-order with the groups'
      scales fixed up front, what qloom's / Quark's desc_act + static_groups
      do), block 128, dampening 0.01. awq: AWQModifier (its defaults: duo_scaling True, n_grid 20;
      llm-compressor has no clip search) then QuantizationModifier (RTN with
      the same scheme). Writes compressed-tensors (pack-quantized).

  kld --source DIR --quantized DIR [--seq_len 512] [--limit 40] [--threads N] --wikitext FILE
      KL(source || quantized) of the next-token distributions at every
      position of the first --limit non-overlapping --seq_len windows of
      wikitext-2 test ("\\n\\n".join of the HF wikitext rows of FILE, tokenized
      by the source's tokenizer without special tokens), both models run by
      transformers in float32. A quantized dir is read whatever wrote it:
      Quark hf_format int4 (qloom) or compressed-tensors pack-quantized int4
      (llm-compressor): its int4 codes times scales are computed in float32
      here and loaded into the source model's architecture, so both exports
      are evaluated the same way. Prints one JSON line.
"""
import argparse
import json
import os
import sys
import time


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def cpu_only_patches():
    """llm-compressor 0.14's AWQ pins its cached activations
    (IntermediatesCache.pin_memory -> torch.Tensor.pin_memory), which raises
    on a machine without an accelerator. Pinning only speeds up host-to-device
    copies, so on CPU it is made a no-op."""
    import torch
    from llmcompressor.pipelines import cache as llmc_cache

    if not torch.cuda.is_available():
        llmc_cache.IntermediatesCache.pin_memory = lambda self, *a, **k: None


def quantize(a):
    import torch

    torch.set_num_threads(a.threads)
    cpu_only_patches()
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.gptq import GPTQModifier
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from llmcompressor.modifiers.transform.awq import AWQModifier
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rows = [json.loads(line) for line in open(a.calib) if line.strip()]
    ids = [r["input_ids"] for r in rows]
    ds = Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids]})
    scheme = QuantizationScheme(
        targets=["Linear"],
        weights=QuantizationArgs(num_bits=4, type="int", symmetric=True, strategy="group", group_size=a.group),
    )
    if a.algo == "gptq":
        recipe = [GPTQModifier(config_groups={"group_0": scheme}, ignore=["lm_head"],
                               actorder=None if a.actorder == "none" else a.actorder,
                               block_size=128, dampening_frac=0.01)]
    else:
        recipe = [AWQModifier(), QuantizationModifier(config_groups={"group_0": scheme}, ignore=["lm_head"])]
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype="auto")
    tok = AutoTokenizer.from_pretrained(a.model)
    t0 = time.time()
    oneshot(model=model, dataset=ds, recipe=recipe, num_calibration_samples=len(ids),
            max_seq_length=max(len(x) for x in ids), shuffle_calibration_samples=False, batch_size=1)
    log(f"llmcompressor {a.algo}: oneshot {time.time() - t0:.1f} s on {len(ids)} samples, "
        f"{sum(len(x) for x in ids)} tokens, {a.threads} thread(s)")
    model.save_pretrained(a.output, save_compressed=True)
    tok.save_pretrained(a.output)


def wikitext_join(path):
    # The HF wikitext builder: one row per line (keeping its "\n"), "" for a
    # whitespace-only line; the eval text is "\n\n".join(rows).
    with open(path, encoding="utf-8", newline=None) as f:
        lines = f.read().splitlines(keepends=True)
    return "\n\n".join(line if line.strip() else "" for line in lines)


def unpack_quark_int4(packed, order):
    # Quark hf_format int4: 8 codes per int32 word along the last dim,
    # nibble j = element order[j]; signed two's-complement nibbles.
    import torch

    words = packed.to(torch.int64) & 0xFFFFFFFF
    nib = torch.stack([(words >> (4 * j)) & 0xF for j in range(8)], dim=-1)  # [..., words, 8]
    nib = torch.where(nib >= 8, nib - 16, nib)
    out = torch.empty_like(nib)
    for j, e in enumerate(order):
        out[..., e] = nib[..., j]
    return out.reshape(*packed.shape[:-1], packed.shape[-1] * 8)


def dequantized_state(qdir):
    """{name: float32 tensor} of a quantized export, int4 weights dequantized."""
    import torch
    from safetensors.torch import load_file

    cfg = json.load(open(os.path.join(qdir, "config.json")))
    qc = cfg.get("quantization_config", {})
    tensors = {}
    for f in sorted(os.listdir(qdir)):
        if f.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(qdir, f)))
    out = {}
    method = qc.get("quant_method")
    if method == "quark":
        order = [0, 2, 4, 6, 1, 3, 5, 7] if qc.get("export", {}).get("pack_method", "reorder") == "reorder" \
            else list(range(8))
        for name, t in tensors.items():
            if name.endswith((".weight_scale", ".weight_zero_point")):
                continue
            mod = name[: -len(".weight")] if name.endswith(".weight") else None
            if mod and t.dtype == torch.int32 and mod + ".weight_scale" in tensors:
                s = tensors[mod + ".weight_scale"].float()
                q = unpack_quark_int4(t, order).float()  # per_group: [in, out], scale [in/g, out]
                if s.dim() == 2:
                    g = q.shape[0] // s.shape[0]
                    w = (q * s.repeat_interleave(g, dim=0)).t().contiguous()
                else:
                    w = q * s.view(-1, 1)
                zp = tensors.get(mod + ".weight_zero_point")
                if zp is not None and int(zp.abs().sum()) != 0:
                    raise SystemExit(f"{name}: asymmetric int4 is not handled by this driver")
                out[name] = w
            else:
                out[name] = t.float()
    elif method == "compressed-tensors":
        from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32

        for name, t in tensors.items():
            if name.endswith((".weight_scale", ".weight_shape", ".weight_zero_point", ".weight_g_idx")):
                continue
            if name.endswith(".weight_packed"):
                mod = name[: -len(".weight_packed")]
                shape = torch.Size(tensors[mod + ".weight_shape"].tolist())
                q = unpack_from_int32(t, 4, shape).float()  # [out, in]
                s = tensors[mod + ".weight_scale"].float()  # [out, in/g]
                g = q.shape[1] // s.shape[1]
                out[mod + ".weight"] = q * s.repeat_interleave(g, dim=1)
            else:
                out[name] = t.float()
    else:
        raise SystemExit(f"{qdir}: quantization_config.quant_method {method!r} is not handled")
    return out


def kld(a):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(a.threads)
    tok = AutoTokenizer.from_pretrained(a.source)
    ids = tok(wikitext_join(a.wikitext), add_special_tokens=False)["input_ids"]
    n = min(a.limit, len(ids) // a.seq_len)
    src = AutoModelForCausalLM.from_pretrained(a.source, dtype=torch.float32).eval()
    qm = AutoModelForCausalLM.from_pretrained(a.source, dtype=torch.float32).eval()
    state = dequantized_state(a.quantized)
    missing, unexpected = qm.load_state_dict(state, strict=False)
    missing = [m for m in missing if not (m == "lm_head.weight" and qm.config.tie_word_embeddings)]
    if missing or unexpected:
        raise SystemExit(f"{a.quantized}: tensors missing {missing[:4]} / unexpected {unexpected[:4]}")
    if qm.config.tie_word_embeddings:
        qm.tie_weights()
    total, count, same = 0.0, 0, 0
    with torch.no_grad():
        for w in range(n):
            x = torch.tensor([ids[w * a.seq_len:(w + 1) * a.seq_len]])
            lp = torch.log_softmax(src(x).logits[0].double(), dim=-1)
            lq = torch.log_softmax(qm(x).logits[0].double(), dim=-1)
            total += float((lp.exp() * (lp - lq)).sum())
            count += lp.shape[0]
            same += int((lp.argmax(-1) == lq.argmax(-1)).sum())
    print(json.dumps({"quantized": a.quantized, "windows": n, "seq_len": a.seq_len, "tokens": count,
                      "kld_mean": total / count, "top1_agreement": same / count}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("quantize")
    q.add_argument("--algo", choices=["gptq", "awq"], required=True)
    q.add_argument("--model", required=True)
    q.add_argument("--calib", required=True)
    q.add_argument("--output", required=True)
    q.add_argument("--threads", type=int, default=1)
    q.add_argument("--group", type=int, default=64)
    q.add_argument("--actorder", choices=["none", "static"], default="none",
                   help="GPTQ column order: none, or static (act-order with groups fixed up front)")
    k = sub.add_parser("kld")
    k.add_argument("--source", required=True)
    k.add_argument("--quantized", required=True)
    k.add_argument("--wikitext", required=True)
    k.add_argument("--seq_len", type=int, default=512)
    k.add_argument("--limit", type=int, default=40)
    k.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    quantize(a) if a.cmd == "quantize" else kld(a)


if __name__ == "__main__":
    main()
