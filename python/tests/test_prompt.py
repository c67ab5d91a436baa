"""Seed 000's call: qloom.quantize_via_prompt(prompt, *, workspace, ...)."""
import inspect
import json
import os

import pytest

import qloom

DEMO_PROMPT = ("quantize the bundled model to fp8 with fp8 kv cache, calibrate on 16 samples, "
               "measure perplexity on 8 samples, accept a 10% perplexity gap")


def test_signature_is_the_seeds():
    sig = inspect.signature(qloom.quantize_via_prompt)
    assert str(sig) == ("(prompt, *, workspace, quark_root=None, interactive=None, "
                        "acceptable_eval_gap=None, max_requantize_attempts=1)")


def test_seed_call_on_the_bundled_model(tmp_path):
    ws = tmp_path / "ws"
    quark_root = tmp_path / "quark-checkout"  # recorded, never read or written
    a = qloom.quantize_via_prompt(DEMO_PROMPT, workspace=ws, quark_root=quark_root, interactive=False)
    assert a["verdict"] == "success", json.dumps(a["outcome"])
    assert a["outcome"]["id"] is None and a["outcome"]["class"] == "success"
    assert a["interactive"] == "off"
    assert a["quark_root"] == str(quark_root)
    assert not quark_root.exists()
    assert a["user_prompt"] == DEMO_PROMPT
    assert a["model"]["quant_scheme"] == "fp8" and a["model"]["kv_cache_dtype"] == "fp8"
    assert os.path.isfile(os.path.join(a["model"]["quantized_dir"], "config.json"))
    assert a["validation"]["passed"] is True
    assert a["eval"] is not None
    # The dict is assessment.json.
    with open(ws / "assessment.json") as f:
        assert json.load(f) == a
    for name in ("session_context.json", "model_analysis.json", "quant_plan.json", "run_manifest.yaml",
                 "validation_report.md", "eval_report.json", "last_phase.txt"):
        assert (ws / name).is_file(), name


def test_failure_returns_an_assessment(tmp_path):
    a = qloom.quantize_via_prompt(f"quantize {tmp_path / 'no-such-model'} to fp8", workspace=tmp_path / "ws",
                                  interactive=False)
    assert a["verdict"] == "failed"
    assert a["outcome"]["id"] == "model_path_unreachable"
    assert a["outcome"]["class"] == "auto_fail"
    assert "quark_root" not in a
    assert (tmp_path / "ws" / "blocked.md").read_text().startswith("outcome_id: model_path_unreachable")


def test_unwritable_workspace_raises_outcome_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(qloom.OutcomeError) as ei:
        qloom.quantize_via_prompt("quantize the bundled model to fp8", workspace=blocker / "ws", interactive=False)
    assert ei.value.outcome_id == "workspace_unwritable"
    assert ei.value.verdict == "failed"


def test_bad_arguments_are_usage_errors(tmp_path):
    with pytest.raises(qloom.UsageError) as ei:
        qloom.quantize_via_prompt("quantize the bundled model to fp8", workspace=tmp_path / "ws",
                                  max_requantize_attempts=-1)
    assert ei.value.kind == "usage" and ei.value.field == "max_requantize_attempts"
    with pytest.raises(qloom.UsageError):
        qloom.quantize_via_prompt("x", workspace=tmp_path / "ws", interactive="sometimes")
    with pytest.raises(qloom.UsageError):
        qloom.quantize_via_prompt("x", workspace=tmp_path / "ws", acceptable_eval_gap=-0.1)


@pytest.mark.parametrize("prompt, message", [
    ("", "is empty"),
    ("  \t\n ", "holds only whitespace"),
    ("quantize the bundled model\x00 to fp8", "control character 0x00 at byte 26"),
    ("quantize the bundled model to fp8\x1b[2J", "control character 0x1B"),
    ("quantize the bundled model to fp8\x7f", "control character 0x7F"),
])
def test_empty_or_control_character_prompts_are_usage_errors(tmp_path, prompt, message):
    # Issue 30 item 9: "" returned verdict aborted and a NUL byte ran the whole pipeline.
    ws = tmp_path / "ws"
    with pytest.raises(qloom.UsageError) as ei:
        qloom.quantize_via_prompt(prompt, workspace=ws, interactive=False)
    assert isinstance(ei.value, ValueError)
    assert ei.value.field == "prompt" and message in ei.value.message
    assert not (ws / "assessment.json").exists()


def test_phase_progress_callback(tmp_path):
    events = []
    a = qloom.run(f"quantize {tmp_path / 'missing'} to fp8", workspace=tmp_path / "ws", interactive=False,
                  progress=events.append)
    assert a["outcome"]["id"] == "model_path_unreachable"
    assert [e["phase"] for e in events] == ["pre", "intake"]
    assert all(e["event"] == "phase" and e["attempt"] == 1 for e in events)


def test_exception_in_phase_callback_propagates(tmp_path):
    def progress(event):
        if event["phase"] == "intake":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        qloom.run("quantize the bundled model to fp8", workspace=tmp_path / "ws", interactive=False,
                  progress=progress)
    assert (tmp_path / "ws" / "last_phase.txt").read_text() == "intake\n"
