"""qloom: post-training quantization of LLMs, native (C++) from end to end.

The entry point of seed 000::

    import qloom
    assessment = qloom.quantize_via_prompt(
        "quantize the bundled model to fp8 with fp8 kv cache, accept a 10% perplexity gap",
        workspace="ws")
    print(assessment["verdict"], assessment["model"]["quantized_dir"])

and thin calls over the library: :func:`quantize` (``qloom quantize``, Quark's
option names), :func:`validate`, :func:`evaluate`, :func:`inspect`. Each runs
without holding the GIL; library errors raise :class:`QloomError` subclasses
(``qloom.errors``). Progress goes to stderr as in the CLI; :func:`quantize`
and :func:`run` also call ``progress(event_dict)`` when given (Ctrl-C or an
exception in the callback stops the work cleanly and is re-raised).
"""

import json as _json
import os as _os

from . import _core
from .errors import (
    InternalError,
    InvalidInputError,
    NotFoundError,
    OutcomeError,
    QloomError,
    QloomIOError,
    UnsupportedError,
    UsageError,
)

__all__ = [
    "quantize_via_prompt",
    "run",
    "quantize",
    "validate",
    "evaluate",
    "inspect",
    "demo_model",
    "QloomError",
    "InvalidInputError",
    "NotFoundError",
    "UnsupportedError",
    "UsageError",
    "QloomIOError",
    "InternalError",
    "OutcomeError",
]

# The bundled data sets and demo model travel inside the package
# (qloom/share/qloom/{data,models}); the library is told where they are,
# since the executable (the Python interpreter) says nothing about them.
_SHARE = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "share", "qloom")
if _os.path.isdir(_SHARE):
    _core.set_bundle_base(_SHARE)

# Seed 000's sentinel for "no caller threshold" (SKILL.md §2).
_GAP_SENTINEL = "see SKILL.md"


def _interactive_name(interactive):
    if interactive is None:
        return "auto"
    if interactive is True:
        return "on"
    if interactive is False:
        return "off"
    if isinstance(interactive, str) and interactive in ("auto", "on", "off"):
        return interactive
    raise UsageError(
        f"interactive must be None (auto), True (on), False (off) or 'auto'/'on'/'off', not {interactive!r}",
        field="interactive", remedy="pass None, True or False")


def _gap(acceptable_eval_gap):
    if acceptable_eval_gap is None or acceptable_eval_gap == _GAP_SENTINEL:
        return None
    if isinstance(acceptable_eval_gap, bool) or not isinstance(acceptable_eval_gap, (int, float)):
        raise UsageError(f"acceptable_eval_gap must be a number, not {acceptable_eval_gap!r}",
                         field="acceptable_eval_gap", remedy="e.g. 0.05 for a 5% gap")
    return float(acceptable_eval_gap)


def _path_or_none(p):
    return None if p is None else _os.fspath(p)


def run(prompt, *, workspace, quark_root=None, interactive=None, acceptable_eval_gap=None,
        max_requantize_attempts=1, model_root=None, threads=0, progress=None):
    """quantize_via_prompt with qloom's extra options.

    ``model_root``: a directory whose subdirectories are models a prompt may
    name by their directory name. ``threads``: compute threads (0: all
    cores). ``progress``: called as ``progress({"event": "phase", "phase",
    "attempt", "workspace", "quantized_dir"})`` at the start of every phase.
    """
    if not isinstance(prompt, str):
        raise UsageError(f"prompt must be a string, not {type(prompt).__name__}", field="prompt")
    if isinstance(max_requantize_attempts, bool) or not isinstance(max_requantize_attempts, int):
        raise UsageError("max_requantize_attempts must be an integer", field="max_requantize_attempts")
    text, outcome_id, verdict, exit_code, summary = _core.quantize_via_prompt(
        prompt, _os.fspath(workspace), _path_or_none(quark_root), _interactive_name(interactive),
        _gap(acceptable_eval_gap), max_requantize_attempts, _path_or_none(model_root), threads, progress)
    if not text:
        # Nothing could be recorded (the workspace is unusable, or the runtime
        # pre-flight failed): the seed's runner surfaces it as an auto-fail.
        raise OutcomeError(f"qloom run stopped with {outcome_id}: {summary.strip()}", outcome_id=outcome_id,
                           verdict=verdict, exit_code=exit_code, summary=summary)
    return _json.loads(text)


def quantize_via_prompt(prompt, *, workspace, quark_root=None, interactive=None, acceptable_eval_gap=None,
                        max_requantize_attempts=1):
    """Seed 000's entry point: a quantized model and its assessment from a sentence.

    Runs the phases pre -> intake -> plan -> manifest -> exec -> export ->
    validate -> eval in ``workspace`` (the seed's workspace files), with
    retries up to ``max_requantize_attempts`` re-quantizations, and returns
    the assessment (what ``<workspace>/assessment.json`` holds) as a dict:
    ``verdict`` is ``success``, ``success_unverified``, ``failed`` or
    ``aborted``; ``outcome["id"]`` the seed's outcome id (None on success).

    ``interactive``: None = auto (checkpoints wait for y/n on stdin when it
    is a terminal), True = always relay them, False = accept defaults (CI).
    ``acceptable_eval_gap``: the caller's threshold (wins over the prompt's;
    default 0.03). ``quark_root``: seed 000's Quark checkout; qloom is its
    own backend and neither reads nor writes it, but records it in the
    assessment. Raises :class:`OutcomeError` when no assessment could be
    written, :class:`UsageError` for bad arguments (among them an empty or
    whitespace-only prompt, or one holding a control character such as NUL).
    """
    return run(prompt, workspace=workspace, quark_root=quark_root, interactive=interactive,
               acceptable_eval_gap=acceptable_eval_gap, max_requantize_attempts=max_requantize_attempts)


def _pairs(value, name):
    """A dict or a list of 2-item pairs as a list of (str, str)."""
    if value is None:
        return None
    items = value.items() if isinstance(value, dict) else value
    out = []
    for item in items:
        if isinstance(item, str) or len(item) != 2:
            raise UsageError(f"{name} takes (pattern, value) pairs, got {item!r}", field=name)
        out.append((str(item[0]), _os.fspath(item[1]) if isinstance(item[1], _os.PathLike) else str(item[1])))
    return out


def _str_list(value):
    if value is None:
        return None
    return [value] if isinstance(value, str) else [str(v) for v in value]


def quantize(*, model_dir, output_dir, quant_scheme, kv_cache_dtype=None, layer_quant_scheme=None,
             exclude_layers=None, quant_algo=None, algo_configs=None, quant_algo_config_file=None, dataset=None,
             num_calib_data=None, seq_len=None, batch_size=None, device=None, min_kv_scale=None, pack_method=None,
             model_export=None, skip_evaluation=None, overwrite=None, exclude_unsupported=None,
             max_shard_bytes=None, threads=None, progress=None):
    """``qloom quantize`` (quark-cli torch-llm-ptq's option names): returns the summary dict.

    None leaves an option at the library's default. ``layer_quant_scheme``
    and ``quant_algo_config_file``: dict or (pattern/algo, value) pairs;
    ``quant_algo``: a name, "a,b" or a list; ``algo_configs``: {algo: dict or
    JSON text}. ``progress`` gets ``{"event": "tensor", ...}`` per tensor and
    ``{"event": "calibration", "done", "total", "seconds"}``.
    """
    if isinstance(quant_algo, (list, tuple)):
        quant_algo = ",".join(quant_algo)
    if algo_configs is not None:
        algo_configs = {k: v if isinstance(v, str) else _json.dumps(v) for k, v in algo_configs.items()}
    kwargs = dict(kv_cache_dtype=kv_cache_dtype, layer_quant_scheme=_pairs(layer_quant_scheme, "layer_quant_scheme"),
                  exclude_layers=_str_list(exclude_layers), quant_algo=quant_algo, algo_configs=algo_configs,
                  algo_config_files=_pairs(quant_algo_config_file, "quant_algo_config_file"), dataset=dataset,
                  num_calib_data=num_calib_data, seq_len=seq_len, batch_size=batch_size, device=device,
                  min_kv_scale=min_kv_scale, pack_method=pack_method, model_export=_str_list(model_export),
                  skip_evaluation=skip_evaluation, overwrite=overwrite, exclude_unsupported=exclude_unsupported,
                  max_shard_bytes=max_shard_bytes, threads=threads)
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    text = _core.quantize(_os.fspath(model_dir), _os.fspath(output_dir), quant_scheme, progress=progress, **kwargs)
    return _json.loads(text)


def validate(source, quantized, *, numeric=True, threads=0, report_dir=None, target="none"):
    """``qloom validate``: Quark's checks 4, 1, 3, 2, qloom's numeric step 5 and vLLM's loader rules (step 6).

    Returns validation_report.json's dict plus ``passed``; ``report_dir``
    also writes validation_report.md / .json there. Steps 1-5 decide
    ``passed``; step 6 is reported under ``deployable`` and fails the verdict
    only with ``target="vllm"`` (as ``qloom validate --target vllm``).
    """
    text = _core.validate(_os.fspath(source), _os.fspath(quantized), numeric=numeric, threads=threads,
                          report_dir=_path_or_none(report_dir), target=target)
    return _json.loads(text)


def evaluate(model_dir, *, task, source=None, dataset=None, protocol=None, seq_len=None, limit=None,
             time_budget=None, max_gen_toks=None, num_fewshot=None, fewshot_dataset=None, server=None,
             source_server=None, api_key=None, model=None, concurrency=None, max_retries=None, threads=None,
             json_path=None):
    """``qloom eval``: ppl, kld (with ``source``), gsm8k or a multiple-choice task; the result dict."""
    kwargs = dict(source=_path_or_none(source), dataset=_path_or_none(dataset), protocol=protocol, seq_len=seq_len,
                  limit=limit, time_budget=time_budget, max_gen_toks=max_gen_toks, num_fewshot=num_fewshot,
                  fewshot_dataset=_path_or_none(fewshot_dataset), server=server, source_server=source_server,
                  api_key=api_key, model=model, concurrency=concurrency, max_retries=max_retries, threads=threads,
                  json_path=_path_or_none(json_path))
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    return _json.loads(_core.evaluate(_os.fspath(model_dir), task, **kwargs))


def inspect(model):
    """``qloom inspect --json``: a model directory, a .gguf file or a hub id, as a dict."""
    return _json.loads(_core.inspect(_os.fspath(model)))


def demo_model():
    """The bundled demo model's directory (stories260K-hf-bf16), or None."""
    return _core.bundled_demo_model() or None
