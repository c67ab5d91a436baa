"""Library errors as qloom.QloomError subclasses; callbacks that raise."""
import os
import threading
import time

import pytest

import qloom


def test_missing_model_is_not_found(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(qloom.NotFoundError) as ei:
        qloom.inspect(missing)
    e = ei.value
    assert isinstance(e, qloom.QloomError)
    assert e.kind == "not_found"
    assert e.file and "no-such-model" in e.file
    assert "no-such-model" in str(e)


def test_unknown_scheme_names_the_option(tmp_path, demo_model):
    with pytest.raises(qloom.QloomError) as ei:
        qloom.quantize(model_dir=demo_model, output_dir=tmp_path / "out", quant_scheme="int3_magic")
    e = ei.value
    assert e.kind in ("usage", "unsupported", "invalid_input")
    assert type(e) is {"usage": qloom.UsageError, "unsupported": qloom.UnsupportedError,
                       "invalid_input": qloom.InvalidInputError}[e.kind]
    assert "int3_magic" in str(e)
    assert not (tmp_path / "out").exists()


def test_bad_config_is_invalid_input_with_file(tmp_path, demo_model):
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in os.listdir(demo_model):
        (bad / name).write_bytes((open(os.path.join(demo_model, name), "rb")).read())
    (bad / "config.json").write_text("{ not json")
    with pytest.raises(qloom.InvalidInputError) as ei:
        qloom.inspect(bad)
    assert ei.value.kind == "invalid_input"
    assert ei.value.file.endswith("config.json")


def test_unknown_eval_task_is_usage(demo_model):
    with pytest.raises(qloom.QloomError) as ei:
        qloom.evaluate(demo_model, task="no_such_task")
    assert ei.value.kind == "usage"


def test_exception_in_callback_propagates_and_leaves_no_output(tmp_path, demo_model):
    calls = []

    def progress(event):
        calls.append(event)
        if len(calls) == 3:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        qloom.quantize(model_dir=demo_model, output_dir=tmp_path / "out", quant_scheme="ptpc_fp8",
                       progress=progress, threads=1)
    assert len(calls) == 3  # no callback after the one that raised
    assert not (tmp_path / "out").exists()
    assert [p for p in os.listdir(tmp_path) if p != "out"] == []  # no staging dir left
    # The process is intact: the same call works afterwards.
    qloom.quantize(model_dir=demo_model, output_dir=tmp_path / "out", quant_scheme="ptpc_fp8", threads=1)
    assert (tmp_path / "out" / "config.json").is_file()


def test_keyboard_interrupt_in_callback(tmp_path, demo_model):
    def progress(event):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        qloom.quantize(model_dir=demo_model, output_dir=tmp_path / "out", quant_scheme="ptpc_fp8",
                       progress=progress, threads=1)
    assert not (tmp_path / "out").exists()


def test_gil_released_during_work(tmp_path, demo_model):
    """A Python thread keeps running while the library computes."""
    stamps = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            stamps.append(time.monotonic())
            time.sleep(0.002)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        t0 = time.monotonic()
        qloom.evaluate(demo_model, task="ppl", dataset="tinystories", limit=40, threads=1)
        t1 = time.monotonic()
    finally:
        stop.set()
        t.join()
    assert t1 - t0 > 0.2, f"the call took {t1 - t0:.3f}s: too short to tell"
    # With the GIL held throughout, the ticker could only run within one
    # switch interval (5 ms) of the call's start or end.
    inside = [s for s in stamps if t0 + 0.05 < s < t1 - 0.05]
    assert len(inside) >= 10, f"{len(inside)} ticks during {t1 - t0:.3f}s of library work"
