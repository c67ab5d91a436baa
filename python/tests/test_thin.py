"""The thin calls: inspect, quantize, validate, evaluate on the demo model."""
import json
import math
import os

import qloom


def test_inspect_demo_model(demo_model):
    info = qloom.inspect(demo_model)
    assert info["model_type"] == "llama"
    assert info["num_hidden_layers"] >= 1
    assert isinstance(info["parameters"], int) and info["parameters"] > 0
    assert sum(info["parameters_by_dtype"].values()) == info["parameters"]
    assert info["tensors"] > 0 and info["weights_bytes"] > 0
    assert "model.safetensors" in info["shards"]


def test_quantize_writes_a_quark_checkpoint(quantized_demo, demo_model):
    out, summary = quantized_demo
    assert summary["layers_quantized"] > 0
    assert summary["tensors_out"] >= summary["tensors_in"]
    assert 0 < summary["bytes_after"] < summary["bytes_before"]
    assert 4.0 < summary["bits_per_weight"] < 5.0  # int4 codes + one bf16 scale per 64
    assert [e["format"] for e in summary["exports"]] == ["hf_format"]
    with open(out / "config.json") as f:
        qc = json.load(f)["quantization_config"]
    assert qc["quant_method"] == "quark"
    info = qloom.inspect(out)
    assert info["quant_method"] == "quark"


def test_quantize_reports_progress_per_tensor(tmp_path, demo_model):
    events = []
    summary = qloom.quantize(model_dir=demo_model, output_dir=tmp_path / "fp8", quant_scheme="ptpc_fp8",
                             progress=events.append, threads=1)
    tensors = [e for e in events if e["event"] == "tensor"]
    assert [e["index"] for e in tensors] == list(range(1, len(tensors) + 1))
    assert all(e["total"] == len(tensors) for e in tensors)
    assert len(tensors) == summary["tensors_in"]
    assert {e["to"] for e in tensors} >= {"copy"}


def test_quantize_calibration_progress(tmp_path, demo_model):
    events = []
    summary = qloom.quantize(model_dir=demo_model, output_dir=tmp_path / "kv", quant_scheme="fp8",
                             kv_cache_dtype="fp8", num_calib_data=8, seq_len=64, progress=events.append, threads=1)
    calib = [e for e in events if e["event"] == "calibration"]
    assert summary["calibrated"] and summary["static_scales"] > 0
    assert calib and calib[-1]["done"] == calib[-1]["total"]


def test_validate_passes_on_an_rtn_checkpoint(quantized_demo, demo_model, tmp_path):
    out, _ = quantized_demo
    report = qloom.validate(demo_model, out, report_dir=tmp_path / "report")
    assert report["passed"] is True
    # Quark's order 4, 1, 3, 2, then qloom's own steps, every one ok.
    assert [s["step"] for s in report["steps"]][:5] == [4, 1, 3, 2, 5]
    assert {s["status"] for s in report["steps"]} == {"ok"}
    assert (tmp_path / "report" / "validation_report.md").is_file()


def test_validate_fails_on_a_broken_checkpoint(quantized_demo, demo_model, tmp_path):
    out, _ = quantized_demo
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in os.listdir(out):
        if name != "tokenizer.json":
            (broken / name).write_bytes((out / name).read_bytes())
    report = qloom.validate(demo_model, broken, numeric=False)
    assert report["passed"] is False
    step1 = next(s for s in report["steps"] if s["step"] == 1)
    assert step1["status"] == "FAIL"


def test_validate_target_decides_whether_vllm_counts(tmp_path, demo_model):
    out = tmp_path / "int4pc"
    qloom.quantize(model_dir=demo_model, output_dir=out, quant_scheme="int4_wo_per_channel",
                   exclude_unsupported=True, threads=1)
    report = qloom.validate(demo_model, out, numeric=False)
    assert report["passed"] is True
    assert report["target"] == "none"
    assert report["deployable"]["vllm"]["ok"] is False
    assert "group_size" in report["deployable"]["vllm"]["reason"]
    strict = qloom.validate(demo_model, out, numeric=False, target="vllm")
    assert strict["passed"] is False
    assert strict["verdict"] == "FAIL"


def test_evaluate_ppl_and_kld(quantized_demo, demo_model):
    out, _ = quantized_demo
    ppl = qloom.evaluate(demo_model, task="ppl", dataset="tinystories", limit=2, threads=1)
    assert math.isfinite(ppl["ppl"]) and ppl["ppl"] > 1
    kld = qloom.evaluate(out, task="kld", source=demo_model, dataset="tinystories", limit=2, threads=1)
    assert kld["kld_mean"] > 0
    assert 0 < kld["top1_agreement"] <= 1
    # The same call gives the same numbers (deterministic library).
    again = qloom.evaluate(demo_model, task="ppl", dataset="tinystories", limit=2, threads=1)
    assert again["ppl"] == ppl["ppl"]
