#!/usr/bin/env python3
"""Goldens for qloom's chat-template rendering (tests/text/chat_template_test.cpp).

Renders every tests/data/chat_templates/<name>.jinja over every conversation of
conversations.json, with add_generation_prompt False and True, through
transformers' own rendering function (transformers.utils.chat_template_utils.
render_jinja_template, the one apply_chat_template(tokenize=False) calls), after
the same message normalisation apply_chat_template does (_normalize_chat_messages)
and with the special tokens of special_tokens.json passed as apply_chat_template
passes tokenizer.special_tokens_map. strftime_now sees a fixed local time
(conversations.json "fixed_local_time"). A template that raises is recorded with
its error type and message. Writes goldens.json next to the templates.

Run: /tmp/heavy/bin/python scripts/goldens/chat_templates.py  (transformers + jinja2 installed)
"""
import datetime as real_datetime
import json
import pathlib
import sys

import jinja2
import transformers
from transformers.utils import chat_template_utils as ctu

DATA = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "chat_templates"


def fixed_clock(iso):
    moment = real_datetime.datetime.fromisoformat(iso)

    class FixedDatetime(real_datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return moment

    return FixedDatetime


def special_tokens(entry):
    out = {}
    for key, value in entry.items():
        if isinstance(value, dict):
            value = value["content"]
        if value is not None:
            out[key] = str(value)
    return out


def render(template, conversation, add_generation_prompt, tokens):
    extra = dict(conversation.get("extra", {}))
    tools = extra.pop("tools", None)
    documents = extra.pop("documents", None)
    chat = ctu._normalize_chat_messages(conversation["messages"])
    kwargs = {**tokens, **extra}
    try:
        rendered, _ = ctu.render_jinja_template(
            conversations=[chat], tools=tools, documents=documents, chat_template=template,
            add_generation_prompt=add_generation_prompt, **kwargs)
        return {"output": rendered[0]}
    except jinja2.exceptions.TemplateError as e:
        return {"error_type": type(e).__name__, "error": str(e)}


def main():
    convs = json.loads((DATA / "conversations.json").read_text(encoding="utf-8"))
    tokens_by_model = json.loads((DATA / "special_tokens.json").read_text(encoding="utf-8"))
    ctu.datetime = fixed_clock(convs["fixed_local_time"])
    goldens = []
    for path in sorted(DATA.glob("*.jinja")):
        with open(path, encoding="utf-8", newline="") as f:
            template = f.read()
        tokens = special_tokens(tokens_by_model[path.stem])
        for conv in convs["conversations"]:
            for agp in (False, True):
                case = {"template": path.stem, "conversation": conv["name"], "add_generation_prompt": agp}
                case.update(render(template, conv, agp, tokens))
                goldens.append(case)
    out = {
        "generator": "scripts/goldens/chat_templates.py",
        "transformers": transformers.__version__,
        "jinja2": jinja2.__version__,
        "python": sys.version.split()[0],
        "cases": goldens,
    }
    (DATA / "goldens.json").write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    errors = sum(1 for g in goldens if "error" in g)
    print(f"{len(goldens)} cases ({errors} raise) -> {DATA / 'goldens.json'}")


if __name__ == "__main__":
    main()
