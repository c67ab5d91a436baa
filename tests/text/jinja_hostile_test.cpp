// The Jinja engine against hostile chat templates (issue 30): a template comes
// with the model or with a request, so every input must end in a typed error
// (qloom::Error kInvalidInput naming the template line), never in a crash, a
// hang or gigabytes of memory, and within a second of CPU time.
#include <gtest/gtest.h>

#include <ctime>
#include <string>

#include "qloom/text/jinja/template.h"
#include "support/expect_error.h"

namespace qloom::text::jinja {
namespace {

std::string render_with(const std::string& source, const std::string& context_json = "{}",
                   const RenderLimits& limits = {}) {
  RenderOptions options;
  options.limits = limits;
  return Template::parse(source, "hostile.jinja").render(Value::from_json(nlohmann::ordered_json::parse(context_json)),
                                                         options);
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// CPU seconds since `start` (std::clock: robust to a loaded machine, unlike
// wall time; the engine is single-threaded).
double cpu_seconds_since(std::clock_t start) { return double(std::clock() - start) / CLOCKS_PER_SEC; }

// Runs `source`, which must fail with kInvalidInput from hostile.jinja at
// `item` (line:column; empty: any) with `message_part` in the message, within a
// second of CPU time; returns the error.
Error expect_refused(const std::string& source, const std::string& item, const std::string& message_part,
                     const RenderLimits& limits = {}, const std::string& context = "{}") {
  const std::clock_t start = std::clock();
  const Error e = test::catch_error([&] { render_with(source, context, limits); });
  const double seconds = cpu_seconds_since(start);
  EXPECT_LT(seconds, 1.0) << source.substr(0, 80) << ": " << seconds << " s";
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
  EXPECT_EQ(e.file(), "hostile.jinja");
  if (!item.empty()) {
    EXPECT_EQ(e.item(), item) << e.what();
  }
  EXPECT_NE(e.message().find(message_part), std::string::npos) << e.message();
  return e;
}

TEST(JinjaHostile, IntegerArithmeticIsOverflowChecked) {
  const char* kMin = "(-9223372036854775807 - 1)";
  struct Bad {
    std::string source;
    const char* item;
  };
  const Bad kOverflow[] = {
      {std::string("{{ ") + kMin + " // -1 }}", "1:31"},
      {"{{ 9223372036854775807 + 1 }}", "1:24"},
      {std::string("{{ ") + kMin + " - 1 }}", "1:31"},
      {"{{ 3037000500 * 3037000500 }}", "1:15"},
      {"{{ 2 ** 63 }}", "1:6"},
      {"{{ (-3) ** 41 }}", "1:9"},
      {std::string("{{ -") + kMin + " }}", "1:4"},
      {std::string("{{ ") + kMin + "|abs }}", "1:30"},
      {"{{ 1e300|int }}", "1:9"},
      {"{{ '99999999999999999999'|int }}", "1:26"},
  };
  for (const Bad& b : kOverflow) {
    SCOPED_TRACE(b.source);
    expect_refused(b.source, b.item, "integer overflow");
  }
  expect_refused("{{ 1 % 0 }}", "1:6", "integer division or modulo by zero");
  expect_refused("{{ 0 ** -1 }}", "1:6", "0.0 cannot be raised to a negative power");
  EXPECT_EQ(render_with(std::string("{{ ") + kMin + " is divisibleby(-1) }}"), "True");
  expect_refused(std::string("{{ 7 // (") + kMin + " - " + kMin + ") }}", "1:6", "by zero");
  // Python's results where they fit in 64 bits, and fast.
  EXPECT_EQ(render_with(std::string("{{ ") + kMin +
                        " % -1 }} {{ 7 // -1 }} {{ -7 % -1 }} {{ 2 ** 62 }} {{ (-2) ** 63 }}"),
            "0 -7 0 4611686018427387904 -9223372036854775808");
  EXPECT_EQ(render_with("{{ 1 ** 9223372036854775807 }} {{ (-1) ** 9223372036854775807 }} {{ 0 ** 0 }} "
                        "{{ 'nan'|int }}"),
            "1 -1 1 0");
}

TEST(JinjaHostile, SelfContainingValuesPrintAsPythonDoesAndCompareByIdentity) {
  // jinja2 3.1.6: Python's repr guard prints a container it is inside as {...} / [...].
  EXPECT_EQ(render_with("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}|{{ ns == ns }}|{{ [ns] == [ns] }}|"
                   "{{ ns.me.me.a }}|{{ namespace(x=1) == namespace(x=1) }}"),
            "<Namespace {'a': 1, 'me': <Namespace {...}>}>|True|True|1|False");
  EXPECT_EQ(render_with("{% set ns = namespace(a=1) %}{% set ns.l = [ns, 2] %}{{ ns }}|{{ ns.l }}"),
            "<Namespace {'a': 1, 'l': [<Namespace {...}>, 2]}>|[<Namespace {'a': 1, 'l': [...]}>, 2]");
  expect_refused("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns|tojson }}", "1:52",
                 "Object of type Namespace is not JSON serializable");
  // Python: equal namespaces are the same one, so [ns] < [ns] compares lengths.
  EXPECT_EQ(render_with("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ [ns] < [ns] }}{{ [ns, 1] < [ns, 2] }}"),
            "FalseTrue");
  expect_refused("{% set ns = namespace() %}{{ [ns] < [namespace()] }}", "1:30",
                 "'<' not supported between instances of 'Namespace' and 'Namespace'");
  // A chain of namespaces deeper than any walk goes: an error, not a stack overflow.
  expect_refused("{% set ns = namespace(head=none) %}{% for i in range(100000) %}"
                 "{% set ns.head = namespace(next=ns.head) %}{% endfor %}{{ ns }}",
                 "1:119", "nested more than 128 deep");
}

TEST(JinjaHostile, DeepValuesAreRefusedWhenMade) {
  expect_refused("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}",
                 "1:73", "value nested more than 128 deep");
  expect_refused("{% set ns = namespace(d={}) %}{% for i in range(100000) %}{% set ns.d = {'k': ns.d} %}{% endfor %}",
                 "1:73", "value nested more than 128 deep");
  const std::string deep_json = repeat("[", 200) + repeat("]", 200);
  const Error e = test::catch_error([&] { render_with("{{ x }}", R"({"x": )" + deep_json + "}"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.message().find("nested more than 128 deep"), std::string::npos) << e.message();
}

TEST(JinjaHostile, LongChainsAreRefusedByTheParser) {
  const std::string kChains[] = {
      "messages" + repeat("[0]", 30000),
      "messages" + repeat("|upper", 100000),
      "messages" + repeat(".x", 30000),
      "messages" + repeat("()", 30000),
      "1" + repeat(" + 1", 30000),
      "'a'" + repeat(" ~ 'a'", 30000),
      "1" + repeat(" ** 1", 30000),
      "x" + repeat(" or x", 30000),
      "x" + repeat(" and x", 30000),
      repeat("not ", 30000) + "x",
      repeat("- ", 30000) + "1",
      repeat("(", 30000) + "1" + repeat(")", 30000),
      repeat("[", 30000) + repeat("]", 30000),
      "x" + repeat("[0", 30000) + repeat("]", 30000),
  };
  for (const std::string& chain : kChains) {
    SCOPED_TRACE(chain.substr(0, 40));
    const std::clock_t start = std::clock();
    const Error e = test::catch_error([&] { Template::parse("{{ " + chain + " }}", "hostile.jinja"); });
    EXPECT_LT(cpu_seconds_since(start), 1.0);
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_NE(e.message().find("more than 256"), std::string::npos) << e.message();
  }
  // Chains of real-template length are fine.
  EXPECT_EQ(render_with("{{ messages" + repeat("[0]", 1) + ".role" + repeat("|upper", 100) + " ~ 'x'" +
                   repeat(" ~ 'x'", 100) + " }}",
                   R"({"messages": [{"role": "user"}]})"),
            "USER" + repeat("x", 101));
}

TEST(JinjaHostile, RecursionAtRenderTimeIsBounded) {
  // 100 macro levels, each 200 blocks deep: bounded by the renderer's depth.
  const std::string body = repeat("{% if true %}", 200) + "{{ f(n + 1) }}" + repeat("{% endif %}", 200);
  const Error e = expect_refused("{% macro f(n) %}" + body + "{% endmacro %}{{ f(0) }}", "",
                                 "template recursion deeper than");
  RenderLimits limits;
  limits.max_macro_depth = 5;
  expect_refused("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(0) }}", "1:21", "macro calls nested more than 5 deep",
                 limits);
  expect_refused("{% macro f() %}{% call f() %}x{% endcall %}{% endmacro %}{{ f() }}", "",
                 "nested more than 100 deep");
}

TEST(JinjaHostile, WorkIsBudgeted) {
  expect_refused("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "1:32",
                 "more than 5000000 evaluation steps");
  expect_refused("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}", "",
                 "more than 5000000 evaluation steps");
  // Work inside builtins counts: a 1 MiB string scanned 100k times.
  expect_refused("{% set s = 'a' * 1000000 %}{% for i in range(100000) %}{% if 'b' in s %}{% endif %}{% endfor %}",
                 "", "evaluation steps");
  expect_refused("{% set l = range(100000)|list %}{{ l|unique|list|length }}", "", "evaluation steps");
  // The limit is the caller's to set.
  RenderLimits small;
  small.max_steps = 10000;
  expect_refused("{% for i in range(1000) %}{{ i }}{% endfor %}", "", "more than 10000 evaluation steps", small);
  EXPECT_EQ(render_with("{% for i in range(100) %}{{ i % 10 }}{% endfor %}", "{}", small).size(), 100u);
}

TEST(JinjaHostile, ValueSizesAreBudgeted) {
  const char* kBig[] = {
      "{{ 'a' * 10**8 }}",
      "{{ ['a'] * 10**8 }}",
      "{{ 'a' * 9223372036854775807 }}",
      "{% set ns = namespace(s='a') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
      "{% set ns = namespace(s='a') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
      "{% set ns = namespace(s='a' * 1000) %}{% for i in range(40) %}"
      "{% set ns.s = ns.s|replace('a', ns.s[:100]) %}{% endfor %}",
      "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
      "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = [ns.s, ns.s]|join(ns.s) %}{% endfor %}",
      "{{ (['x' * 1000] * 100000)|join }}",
      "{% set ns = namespace(l=['a' * 100000]) %}{% for i in range(20) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"
      "{{ ns.l|tojson }}",
      "{{ 'x'|indent(10**12) }}",
      "{{ [[1]]|tojson(indent=10**12) }}",
      "{{ ('a' * 10**7)|list }}",
      "{{ strftime_now('%c' * 10**7) }}",
      "{{ (',' * 10**6).split(',')|length }}",
  };
  for (const char* source : kBig) {
    SCOPED_TRACE(source);
    expect_refused(source, "", "RenderLimits::max_value_bytes");
  }
  // Growth by many small pieces runs out of steps first.
  const char* kGrowth[] = {
      "{% set ns = namespace(s='aa') %}{% for i in range(40) %}{% set ns.s = ns.s.replace('a', 'aa') %}{% endfor %}",
      "{% set ns = namespace(s='aa') %}{% for i in range(40) %}{% set ns.s = ns.s|replace('a', 'aa') %}{% endfor %}",
      "{% set ns = namespace(s='aa') %}{% for i in range(40) %}{% set ns.s = ns.s|replace('', 'a') %}{% endfor %}",
  };
  for (const char* source : kGrowth) {
    SCOPED_TRACE(source);
    expect_refused(source, "", "template budget exceeded");
  }
  expect_refused("{{ range(-9223372036854775807 - 1, 9223372036854775807) }}", "1:9", "range too big");
  expect_refused("{{ range(0, 9223372036854775807, 4611686018427387904) }}|{{ range(10**6) }}", "1:66",
                 "range too big");
  EXPECT_EQ(render_with("{{ range(0, 9223372036854775807, 4611686018427387904)|list }}"),
            "[0, 4611686018427387904]");
  EXPECT_EQ(render_with("{{ range(9223372036854775807, 9223372036854775806 - 2, -1)|list }}"),
            "[9223372036854775807, 9223372036854775806, 9223372036854775805]");
}

TEST(JinjaHostile, OutputIsBudgeted) {
  expect_refused("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "1:29",
                 "output over 16777216 bytes");
  RenderLimits small;
  small.max_output_bytes = 10;
  expect_refused("{% set x %}{{ 'y' * 11 }}{% endset %}", "", "output over 10 bytes", small);
  EXPECT_EQ(render_with("{{ 'y' * 10 }}", "{}", small), "yyyyyyyyyy");
}

// Found by qloom_fuzz_jinja_render: a backslash before a NUL byte read past a
// table, and a \\x / \\u escape without hex digits threw std::invalid_argument.
TEST(JinjaHostile, StringEscapesAreChecked) {
  EXPECT_EQ(render_with(std::string("{{ '\\\0' }}", 10)), std::string("\\\0", 2));
  EXPECT_EQ(render_with(std::string("a{\0b{{ 1 }}", 11)), std::string("a{\0b1", 5));  // '{' + NUL is text
  const Error nul = test::catch_error([] { Template::parse(std::string("{{ 1 \0 }}", 9), "t"); });
  EXPECT_NE(nul.message().find("unexpected character"), std::string::npos) << nul.message();
  EXPECT_EQ(render_with("{{ '\\x41\\u00e9\\U0001F600' }}"), "A\u00e9\U0001F600");
  for (const char* bad : {"{{ '\\xZZ' }}", "{{ '\\u+12a' }}", "{{ '\\U00110000' }}", "{{ '\\ud800' }}"}) {
    SCOPED_TRACE(bad);
    const Error e = test::catch_error([&] { Template::parse(bad, "hostile.jinja"); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(e.item(), "1:6");
  }
}

// Found by qloom_fuzz_jinja_render: namespace()|items called a null function
// (jinja2: a TypeError once its generator runs; a Namespace is no Mapping).
TEST(JinjaHostile, ItemsOfANamespaceIsATypeError) {
  expect_refused("{{ namespace(a=1)|items }}", "1:18", "can only get item pairs from a mapping, not Namespace");
}

TEST(JinjaHostile, MissingKeysAreUndefinedAsInJinja2) {
  // jinja2 3.1.6 (ImmutableSandboxedEnvironment, default Undefined):
  // '[]FalseTrue0', 'None||None', 'n', 'x', '|None'.
  const char* ctx = R"({"m": {"role": "u", "c": null}})";
  EXPECT_EQ(render_with("[{{ m.content }}]{{ m.content is defined }}{{ not m.content }}{{ m.content|length }}", ctx),
            "[]FalseTrue0");
  EXPECT_EQ(render_with("{{ none }}|{{ m.x }}|{{ m.c }}", ctx), "None||None");
  EXPECT_EQ(render_with("{% if m.content %}y{% else %}n{% endif %}{{ (m.content or '') ~ 'x' }}", ctx), "nx");
  EXPECT_EQ(render_with("{{ m['content'] }}|{{ m.get('content') }}", ctx), "|None");
  expect_refused("{{ m.content.x }}", "1:13", "'dict object' has no attribute 'content'", {}, ctx);  // 1:13
}

}  // namespace
}  // namespace qloom::text::jinja
