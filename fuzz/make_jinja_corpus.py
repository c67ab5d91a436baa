#!/usr/bin/env python3
"""Writes fuzz/corpus_jinja/: the seed corpus of the Jinja render fuzz target.

Seeds: every real chat template in tests/data/chat_templates (SmolLM2, Qwen2.5,
Qwen3, Llama 3.1 / 3.2, Gemma 2, Phi-3.5, Mistral Nemo), small templates for
each feature of the engine, and the hostile templates of issue 30 (overflow,
self-containing namespaces, long postfix / filter / unary chains, nested loops,
recursive macros, doubling strings and lists). Inputs the fuzzer found are
committed as finding-<what> and kept. Run from the repository root:

  python3 fuzz/make_jinja_corpus.py
"""
import hashlib
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "fuzz" / "corpus_jinja"

FEATURES = [
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
    "{{ messages[0]['content'] | trim | upper }}{{ messages|length }}",
    "{% set ns = namespace(sys='') %}{% for m in messages if m.role == 'system' %}{% set ns.sys = m.content %}{% endfor %}{{ ns.sys }}",
    "{{ tools | tojson(indent=2) }}{{ messages[2].tool_calls[0].function.arguments | tojson }}",
    "{% macro render(m) %}<{{ m.role }}>{{ caller() if caller is defined }}{% endmacro %}{% call render(messages[0]) %}x{% endcall %}",
    "{{ 'a,b'.split(',') }}{{ ' x '.strip() }}{{ 'abc'[1:] }}{{ 'abc'[::-1] }}{{ 'x'.startswith(('x','y')) }}",
    "{{ 7 // 2 }}{{ -7 % 3 }}{{ 2 ** 10 }}{{ 1 / 4 }}{{ 'a' ~ 1 }}{{ [1] + [2] }}{{ 'ab' * 2 }}",
    "{% for x in range(3) %}{{ loop.index }}{{ loop.cycle('a', 'b') }}{% if loop.last %}!{% endif %}{% endfor %}",
    "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(', ') }}",
    "{{ messages[4].content.split('</think>')[-1].lstrip('\\n') }}{{ strftime_now('%d %b %Y') }}",
    "{% if messages[0].role != 'system' %}{{ raise_exception('no system') }}{% endif %}",
    "{{ dict(a=1, b=[1, 2]) | items | list }}{{ {'k': none} | tojson(sort_keys=true) }}{{ [3, 1] | sort | unique | list }}",
    "{%- for m in messages -%}\n  {{- m.content | default('', true) -}}\n{%- endfor %}{% raw %}{{ x }}{% endraw %}{# c #}",
    "{% generation %}{{ eos_token }}{% endgeneration %}{{ bos_token if add_generation_prompt else '' }}",
]

HOSTILE = [
    "{{ (-9223372036854775807 - 1) // -1 }}",
    "{{ (-9223372036854775807 - 1) % -1 }}{{ 9223372036854775807 + 1 }}",
    "{{ 2 ** 63 }}{{ 1 ** 9223372036854775807 }}{{ 1e300 | int }}",
    "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}{{ ns == ns }}{{ [ns] < [ns] }}",
    "{% set ns = namespace(l=[]) %}{% set ns.l = [ns, ns.l] %}{{ ns.l }}{{ ns | tojson }}",
    "{{ messages" + "[0]" * 3000 + " }}",
    "{{ messages" + "|upper" * 3000 + " }}",
    "{{ " + "not " * 3000 + "x }}",
    "{{ " + "- " * 3000 + "1 }}",
    "{{ " + "(" * 300 + "1" + ")" * 300 + " }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% macro f(n) %}{{ f(n - 1) }}{{ f(n - 1) }}{% endmacro %}{{ f(60) }}",
    "{% macro f() %}{% call f() %}x{% endcall %}{% endmacro %}{{ f() }}",
    "{{ 'a' * 10**8 }}",
    "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "{% set ns = namespace(s='aa') %}{% for i in range(64) %}{% set ns.s = ns.s.replace('a', 'aa') %}{% endfor %}",
    "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
    "{{ (['x' * 100] * 1000) | join }}{{ 'x' | indent(10**12) }}",
    "{{ range(-9223372036854775807 - 1, 9223372036854775807) }}",
    "{% set ns = namespace(h=none) %}{% for i in range(1000) %}{% set ns.h = namespace(n=ns.h) %}{% endfor %}{{ ns }}",
    "{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}",
]


def write(name: str, text: str) -> None:
    (OUT / name).write_bytes(text.encode("utf-8"))


def main() -> None:
    # Inputs the fuzzer found (finding-*) are kept; the rest is rewritten.
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        if not old.name.startswith("finding-"):
            old.unlink()
    for path in sorted((ROOT / "tests" / "data" / "chat_templates").glob("*.jinja")):
        write("real-" + path.stem, path.read_text(encoding="utf-8"))
    for i, text in enumerate(FEATURES):
        write(f"feature-{i:02d}", text)
    for i, text in enumerate(HOSTILE):
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        write(f"hostile-{i:02d}-{digest}", text)


if __name__ == "__main__":
    main()
