// Unit tests of the Jinja engine (engine/jinja): each feature against the
// output jinja2 3.1.6 gives under transformers' environment (trim_blocks,
// lstrip_blocks, its tojson / strftime_now / namespace; the expected strings
// were produced by that environment), and every error path with its kind,
// template name, line:column and message.
#include <gtest/gtest.h>

#include "qloom/text/jinja/template.h"
#include "support/expect_error.h"

namespace qloom::text::jinja {
namespace {

struct Case {
  const char* name;
  const char* source;
  const char* context;  // JSON object
  const char* expected;
};

// Expected outputs: jinja2 3.1.6 through transformers 5.24's compiled
// environment, strftime_now at 2025-03-07 14:30 local time.
const Case kCases[] = {
    {"ws_trim_lstrip", R"J(a
  {% if true %}
  x
  {% endif %}
b)J", R"J({})J", R"J(a
  x
b)J"},
    {"ws_minus", R"J(a  {{- 'b' -}}  c
{%- if true -%}
  d  {%- endif %} e)J", R"J({})J", R"J(abcd e)J"},
    {"ws_plus", R"J(a
  {%+ if true +%}
b{% endif %})J", R"J({})J", R"J(a
  
b)J"},
    {"ws_comment", R"J(x
  {# note #}
y {#- tight -#} z)J", R"J({})J", R"J(x
yz)J"},
    {"trailing_newline", R"J(end
)J", R"J({})J", R"J(end)J"},
    {"raw", R"J({% raw %}{{ not }}{% endraw %}!)J", R"J({})J", R"J({{ not }}!)J"},
    {"literals", R"J({{ 1 }} {{ 1.5 }} {{ 'a' "b" }} {{ [1, 'x', none, true] }} {{ {'k': (1, 2)} }} {{ (3,) }})J", R"J({})J", R"J(1 1.5 ab [1, 'x', None, True] {'k': (1, 2)} (3,))J"},
    {"arith", R"J({{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2.5 }} {{ 3 - 5 }} {{ -(2) }} {{ +3 }})J", R"J({})J", R"J(3 -4 2 3.5 1024 3.5 -2 -2 3)J"},
    {"floats", R"J({{ 1e16 }} {{ 1e15 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 0.0001 }} {{ 2.0 }})J", R"J({})J", R"J(1e+16 1000000000000000.0 0.30000000000000004 1e-05 0.0001 2.0)J"},
    {"concat", R"J({{ 'a' ~ 1 ~ none ~ true ~ x }} {{ 'ab' * 3 }} {{ [1] + [2] }})J", R"J({})J", R"J(a1NoneTrue ababab [1, 2])J"},
    {"compare", R"J({{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 2 >= 3 }} {{ [1,2] == [1,2] }} {{ {'a':1} == {'a':1} }})J", R"J({})J", R"J(True True True False True True)J"},
    {"logic", R"J({{ 0 or 'x' }} {{ 1 and 'y' }} {{ not none }} {{ none or '' }}|{{ 'a' in 'cat' }} {{ 2 not in [1] }} {{ 'k' in {'k': 1} }})J", R"J({})J", R"J(x y True |True True True)J"},
    {"ternary", R"J({{ 'y' if 1 else 'n' }}{{ 'y' if 0 else 'n' }}[{{ 'y' if 0 }}])J", R"J({})J", R"J(yn[])J"},
    {"slices", R"J({{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1,2,3,4][-2:] }} {{ [1,2,3,4][::2] }} {{ 'héllo'[1] }} {{ 'abc'[-1] }})J", R"J({})J", R"J(el olleh [3, 4] [1, 3] é c)J"},
    {"attr_item", R"J({{ d.a }} {{ d['a'] }} {{ d.l[1] }} {{ d.l.0 }} [{{ d.missing }}] {{ d.items()|list }})J", R"J({"d": {"a": 1, "l": [5, 6]}})J", R"J(1 1 6 5 [] [('a', 1), ('l', [5, 6])])J"},
    {"for_loop", R"J({% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('a','b') }};{% endfor %})J", R"J({"xs": [7, 8]})J", R"J(1021TrueFalse2a;2110FalseTrue2b;)J"},
    {"for_prev_next", R"J({% for x in xs %}{{ loop.previtem is defined }}{{ loop.nextitem|default('-') }},{% endfor %})J", R"J({"xs": [1, 2, 3]})J", R"J(False2,True3,True-,)J"},
    {"for_else_filter", R"J({% for x in xs if x > 5 %}{{ x }}{% else %}none{% endfor %}|{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% endfor %})J", R"J({"xs": [1, 2, 3]})J", R"J(none|2232)J"},
    {"for_dict", R"J({% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for k, v in d|items %}{{ v }}{% endfor %})J", R"J({"d": {"b": 1, "a": 2}})J", R"J(b=1,a=2,ba12)J"},
    {"break_continue", R"J({% for x in range(10) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %})J", R"J({})J", R"J(023)J"},
    {"scoping", R"J({% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }})J", R"J({})J", R"J(231)J"},
    {"namespace", R"J({% set ns = namespace(n=0, s='') %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }})J", R"J({})J", R"J(6)J"},
    {"set_tuple_block", R"J({% set a, b = [1, 2] %}{{ b }}{{ a }}{% set t = 1, 2 %}{{ t }}{% set blk %}[{{ a }}]{% endset %}{{ blk }})J", R"J({})J", R"J(21(1, 2)[1])J"},
    {"if_elif", R"J({% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %} {% endfor %})J", R"J({})J", R"J(one two many )J"},
    {"macro", R"J({% macro greet(name, punct='!') %}hi {{ name }}{{ punct }}{% endmacro %}{{ greet('bo') }} {{ greet('al', punct='?') }})J", R"J({})J", R"J(hi bo! hi al?)J"},
    {"call_block", R"J({% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}in{% endcall %})J", R"J({})J", R"J(<in>)J"},
    {"generation", R"J({% generation %}gen{% endgeneration %})J", R"J({})J", R"J(gen)J"},
    {"dict_global", R"J({{ dict(a=1, b='x') }} {{ dict({'z': 0}, y=2) | tojson }})J", R"J({})J", R"J({'a': 1, 'b': 'x'} {"z": 0, "y": 2})J"},
    {"f_strings", R"J({{ '  pad  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'Ab'|upper }}{{ 'Ab'|lower }}|{{ 'hello world-wide'|title }}|{{ 'hELLO'|capitalize }}|{{ 'aaa'|replace('a', 'b', 2) }})J", R"J({})J", R"J(pad|a|ABab|Hello World-Wide|Hello|bba)J"},
    {"f_length_list", R"J({{ 'héllo'|length }} {{ [1,2]|count }} {{ {'a':1}|length }} {{ u|length }} {{ 'ab'|list }} {{ [3,1,2]|sort }} {{ [3,1,2]|sort(reverse=true) }} {{ ['b','A','a']|sort }} {{ [1,2]|reverse|list }} {{ 'abc'|reverse }})J", R"J({})J", R"J(5 2 1 0 ['a', 'b'] [1, 2, 3] [3, 2, 1] ['A', 'a', 'b'] [2, 1] cba)J"},
    {"f_join_first_last", R"J({{ [1, 2, 3]|join('-') }} {{ users|join(', ', attribute='name') }} {{ [4, 5]|first }} {{ [4, 5]|last }} {{ 'xyz'|first }})J", R"J({"users": [{"name": "a"}, {"name": "b"}]})J", R"J(1-2-3 a, b 4 5 x)J"},
    {"f_default", R"J({{ u|default('d') }} {{ none|default('d') }} {{ ''|d('e', true) }} {{ 0|default(5) }})J", R"J({})J", R"J(d None e 0)J"},
    {"f_numbers", R"J({{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 'x'|float }} {{ -3|abs }} {{ 1|string ~ 'x' }})J", R"J({})J", R"J(42 4 7 3 2.5 0.0 3 1x)J"},
    {"f_select", R"J({{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|list }} {{ ms|rejectattr('role', 'eq', 'user')|list|length }} {{ [1, 0, 2]|select|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ ms|selectattr('c')|list|length }} {{ ['a', 'B']|map('upper')|join }})J", R"J({"ms": [{"role": "user", "c": "x"}, {"role": "assistant", "c": ""}]})J", R"J(['x'] 1 [1, 2] [2, 4] 1 AB)J"},
    {"f_unique_indent_wc", R"J({{ [1, 2, 1, 'A', 'a']|unique|list }}|{{ 'a
b

c'|indent(2) }}|{{ 'a
b'|indent(2, true) }}|{{ 'a

b'|indent(1, blank=true) }}|{{ 'one two, three'|wordcount }}|{{ 'x'|safe }})J", R"J({})J", R"J([1, 2, 'A']|a
  b

  c|  a
  b|a
 
 b|3|x)J"},
    {"f_tojson", R"J({{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ {'b': 1, 'a': [1, 2.5, none, true]}|tojson(sort_keys=true) }}|{{ 'é"\n'|tojson }}|{{ []|tojson(indent=2) }}|{{ 'é'|tojson(ensure_ascii=true) }})J", R"J({"d": {"z": "ü", "a": {"n": [1, {}]}}})J", R"J({"z": "ü", "a": {"n": [1, {}]}}|{
  "z": "ü",
  "a": {
    "n": [
      1,
      {}
    ]
  }
}|{"a": [1, 2.5, null, true], "b": 1}|"é\"\n"|[]|"\u00e9")J"},
    {"tests", R"J({{ u is defined }}{{ u is undefined }}{{ none is none }}{{ 's' is string }}{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ {} is mapping }}{{ [] is iterable }}{{ 's' is sequence }}{{ true is true }}{{ 0 is false }}{{ 2 is in [1, 2] }}{{ 'a' is equalto 'a' }}{{ 3 is eq(3) }}{{ 3 is not eq 4 }}{{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ range is callable }}{{ 2 is gt 1 }}{{ 'ab' is lower }}{{ u is iterable }}{{ ns is mapping }})J", R"J({"ns": null})J", R"J(FalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalse)J"},
    {"str_methods", R"J({{ ' a b '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'a-b'.replace('-', '+') }}|{{ "it's".title() }}|{{ 'hello'.find('l') }}{{ 'hello'.count('l') }}|{{ '-'.join(['a', 'b']) }}|{{ 'ab'.capitalize() }})J", R"J({})J", R"J(a b|axx|xxa|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|TrueTrue|ABab|a+b|It'S|22|a-b|Ab)J"},
    {"dict_methods", R"J({{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 3) }})J", R"J({"d": {"a": 1, "items": 9}})J", R"J(['a', 'items'] [1, 9] 1 None 3)J"},
    {"undefined", R"J([{{ u }}][{{ u|trim }}][{{ u|length }}][{% for x in u %}x{% endfor %}][{{ u == u }}][{{ u ~ 'a' }}][{{ u is none }}][{{ 'a' in u }}][{{ not u }}])J", R"J({})J", R"J([][][0][][True][a][False][False][True])J"},
    {"strftime", R"J({{ strftime_now('%d %b %Y %H:%M') }})J", R"J({})J", R"J(07 Mar 2025 14:30)J"},
    {"repr", R"J({{ ['it\'s', 'a"b', 'both\'"', '\n\t', 1.0, -0.0] }})J", R"J({})J", R"J(["it's", 'a"b', 'both\'"', '\n\t', 1.0, -0.0])J"},
};

std::tm fixed_time() {
  std::tm tm{};
  tm.tm_year = 125;
  tm.tm_mon = 2;
  tm.tm_mday = 7;
  tm.tm_hour = 14;
  tm.tm_min = 30;
  tm.tm_wday = 5;
  return tm;
}

std::string render(const std::string& source, const std::string& context_json = "{}") {
  RenderOptions options;
  options.clock = fixed_time;
  Value ctx = Value::from_json(nlohmann::ordered_json::parse(context_json));
  return Template::parse(source, "test.jinja").render(ctx, options);
}

Error render_error(const std::string& source, const std::string& context_json = "{}") {
  return test::catch_error([&] { render(source, context_json); });
}

TEST(Jinja, MatchesJinja2) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    try {
      EXPECT_EQ(render(c.source, c.context), c.expected);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what() << " at " << e.item();
    }
  }
}

TEST(Jinja, FloatAndStringRepr) {
  EXPECT_EQ(format_float(1.0), "1.0");
  EXPECT_EQ(format_float(1e16), "1e+16");
  EXPECT_EQ(format_float(1.5e-7), "1.5e-07");
  EXPECT_EQ(format_float(123456.789), "123456.789");
  EXPECT_EQ(format_float(-0.0), "-0.0");
  EXPECT_EQ(repr_string("a'b"), "\"a'b\"");
  EXPECT_EQ(repr_string("\x01"), "'\\x01'");
}

TEST(Jinja, KeepsOptionsAndCrLf) {
  LexOptions keep;
  keep.keep_trailing_newline = true;
  keep.trim_blocks = false;
  keep.lstrip_blocks = false;
  Value ctx = Value::dict();
  EXPECT_EQ(Template::parse("a\n  {% if true %}\nb{% endif %}\n", "t", keep).render(ctx), "a\n  \nb\n");
  EXPECT_EQ(Template::parse("a\r\n{% if true %}\r\nb{% endif %}\r\n", "t").render(ctx), "a\nb");
}

TEST(Jinja, SyntaxErrorsNameTemplateAndPosition) {
  struct Bad {
    const char* source;
    const char* item;
    const char* message_part;
  };
  const Bad kBad[] = {
      {"x\n{% if a %}", "2:4", "'if' is never closed"},
      {"{% for x in y %}{% if x %}{% endfor %}", "1:30", "unexpected 'endfor'"},
      {"{{ x", "1:1", "tag is not closed with '}}'"},
      {"{% if x", "1:1", "tag is not closed with '%}'"},
      {"{# x", "1:1", "missing end of comment"},
      {"{{ x|bar }}", "1:6", "No filter named 'bar'."},
      {"{{ x is foo }}", "1:9", "No test named 'foo'."},
      {"{% foo %}", "1:4", "unknown tag 'foo'"},
      {"{% endif %}", "1:4", "unexpected 'endif'"},
      {"{{ 1 + }}", "1:8", "unexpected end of print statement"},
      {"{{ 'abc }}", "1:4", "unterminated string literal"},
      {"{{ 1 ; 2 }}", "1:6", "unexpected character ';'"},
      {"{{ f(a=1, 2) }}", "1:11", "positional argument follows keyword argument"},
      {"{% set %}", "1:8", "expected a name"},
      {"{% for x y %}", "1:10", "expected 'in'"},
      {"{{ [1, 2 }}", "1:1", "tag is not closed"},
      {"{% if x %}{% else %}{% elif y %}{% endif %}", "1:24", "unexpected 'elif'"},
      {"{% raw %}abc", "1:10", "missing '{% endraw %}'"},
      {"{{ 99999999999999999999 }}", "1:4", "out of range"},
      {"{{ x }", "1:1", "tag is not closed"},
  };
  for (const Bad& b : kBad) {
    SCOPED_TRACE(b.source);
    Error e = test::catch_error([&] { Template::parse(b.source, "bad.jinja"); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(e.file(), "bad.jinja");
    EXPECT_EQ(e.item(), b.item);
    EXPECT_NE(e.message().find(b.message_part), std::string::npos) << e.message();
  }
}

TEST(Jinja, UnsupportedTagsAreKUnsupported) {
  for (const char* s : {"{% include 'x' %}", "{% extends 'x' %}", "{% block b %}{% endblock %}",
                        "{% filter upper %}x{% endfilter %}", "{% for x in y recursive %}{% endfor %}"}) {
    SCOPED_TRACE(s);
    EXPECT_EQ(test::catch_error([&] { Template::parse(s, "t"); }).kind(), ErrorKind::kUnsupported);
  }
  EXPECT_EQ(render_error("{{ {1: 2} }}").kind(), ErrorKind::kUnsupported);
}

TEST(Jinja, RaiseExceptionCarriesTheTemplatesMessage) {
  Error e = render_error("ok\n  {{ raise_exception('Roles must alternate!') }}");
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.message(), "Roles must alternate!");
  EXPECT_EQ(e.file(), "test.jinja");
  EXPECT_EQ(e.item(), "2:21");
}

TEST(Jinja, RenderErrorsAreLocatedAndWorded) {
  struct Bad {
    const char* source;
    const char* context;
    const char* item;
    const char* message;
  };
  const Bad kBad[] = {
      {"{{ x.y }}", "{}", "1:5", "'x' is undefined"},
      {"\n  {{ d.a + 1 }}", R"({"d": {}})", "2:10", "'dict object' has no attribute 'a'"},
      {"{{ 'a' + 1 }}", "{}", "1:8", "can only concatenate str (not \"int\") to str"},
      {"{{ 1 - 'a' }}", "{}", "1:6", "unsupported operand type(s) for -: 'int' and 'str'"},
      {"{{ 1 / 0 }}", "{}", "1:6", "division by zero"},
      {"{{ 1 // 0 }}", "{}", "1:6", "integer division or modulo by zero"},
      {"{{ none|length }}", "{}", "1:8", "object of type 'NoneType' has no len()"},
      {"{{ s() }}", R"({"s": "x"})", "1:5", "'str' object is not callable"},
      {"{{ u() }}", "{}", "1:5", "'u' is undefined"},
      {"{% set s.a = 1 %}", R"({"s": "x"})", "1:4", "cannot assign attribute on non-namespace object"},
      {"{% for a, b in [[1]] %}{% endfor %}", "{}", "1:4", "not enough values to unpack (expected 2, got 1)"},
      {"{% set a, b = [1, 2, 3] %}", "{}", "1:4", "too many values to unpack (expected 2)"},
      {"{{ u|tojson }}", "{}", "1:5", "Object of type Undefined is not JSON serializable"},
      {"{{ 5|items }}", "{}", "1:5", "items filter: can only get item pairs from a mapping, not int"},
      {"{% for x in 5 %}{% endfor %}", "{}", "1:4", "'int' object is not iterable"},
      {"{{ 1 < 'a' }}", "{}", "1:4", "'<' not supported between instances of 'int' and 'str'"},
      {"{{ 1 in 'a' }}", "{}", "1:4", "'in <string>' requires string as left operand, not int"},
      {"{{ 1 in 2 }}", "{}", "1:4", "argument of type 'int' is not iterable"},
      {"{{ -'a' }}", "{}", "1:4", "bad operand type for unary -: 'str'"},
      {"{{ 'a'[1:2:0] }}", "{}", "1:7", "slice step cannot be zero"},
      {"{{ 'a'.split('') }}", "{}", "1:13", "empty separator"},
      {"{{ [1]|map('nope')|list }}", "{}", "1:7", "No filter named 'nope'."},
      {"{{ [1]|select('nope')|list }}", "{}", "1:7", "No test named 'nope'."},
      {"{{ u.a }}", "{}", "1:5", "'u' is undefined"},
      {"{{ x[0] }}", "{}", "1:5", "'x' is undefined"},
      {"{{ [] | first + 1 }}", "{}", "1:15", "No first item, sequence was empty."},
      {"{{ range(1, 2, 0) }}", "{}", "1:9", "range() arg 3 must not be zero"},
      {"{{ 'x' if false }}{{ ('x' if false) + 1 }}", "{}", "1:37", "no else section was defined"},
  };
  for (const Bad& b : kBad) {
    SCOPED_TRACE(b.source);
    Error e = render_error(b.source, b.context);
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_EQ(e.file(), "test.jinja");
    EXPECT_EQ(e.item(), b.item);
    EXPECT_NE(e.message().find(b.message), std::string::npos) << e.message();
  }
}

TEST(Jinja, LoopControlOutsideALoopAndBadContext) {
  EXPECT_EQ(render_error("{% break %}").kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(test::catch_error([] { Template::parse("x", "t").render(Value(1)); }).kind(), ErrorKind::kUsage);
}

TEST(Jinja, NamespaceIsSharedAcrossScopesAndMacrosSeeTopLevel) {
  EXPECT_EQ(render("{% set ns = namespace(items=[]) %}{% macro m() %}{{ top }}{% endmacro %}"
                   "{% set top = 'T' %}{% for i in [1] %}{% set ns.x = i %}{% endfor %}{{ ns.x }}{{ m() }}"),
            "1T");
  EXPECT_EQ(render("{% macro m(a, b) %}{{ a }}{{ b }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, z=4) }}"),
            "12|[3]|{'z': 4}");
}

// A template from a model directory is untrusted input: endless macro
// recursion and absurd nesting are errors, not a stack overflow.
TEST(Jinja, RecursionAndNestingAreBounded) {
  const Error loop = test::catch_error([] { render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"); });
  EXPECT_EQ(loop.kind(), ErrorKind::kInvalidInput) << loop.what();
  EXPECT_NE(std::string(loop.what()).find("nested more than 100"), std::string::npos) << loop.what();
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{{ n }}{% endmacro %}{{ f(50) }}").size(),
            92u);  // 50 levels are fine: "0" .. "50", 10 + 41 * 2 characters
  for (const std::string deep : {std::string(5000, '(') + "1" + std::string(5000, ')'), std::string(5000, '-') + "1",
                                 [] { std::string s; for (int i = 0; i < 5000; ++i) s += "not "; return s + "x"; }()}) {
    const Error e = test::catch_error([&] { Template::parse("{{ " + deep + " }}", "deep.jinja"); });
    EXPECT_NE(std::string(e.what()).find("nested more than 256"), std::string::npos) << e.what();
  }
  std::string blocks;
  for (int i = 0; i < 300; ++i) blocks += "{% if true %}";
  for (int i = 0; i < 300; ++i) blocks += "{% endif %}";
  EXPECT_THROW(Template::parse(blocks, "blocks.jinja"), Error);
}

}  // namespace
}  // namespace qloom::text::jinja
