// Hostile templates: each must end with a clean one-line error (no crash, no hang, bounded
// memory) under the default RenderOptions.
#include <gtest/gtest.h>

#include <string>

#include "chat_template/chat_template.h"

namespace llmserve {
namespace {

Status outcome(const std::string& src, const RenderOptions& opts = {}) {
  auto t = ChatTemplate::parse(src);
  if (!t.ok()) return t.status();
  auto r = t->render(nlohmann::ordered_json::object(), opts);
  if (r.ok()) return Status::Ok();
  return r.status();
}

void expect_error(const std::string& src, const std::string& fragment, const RenderOptions& opts = {}) {
  const Status st = outcome(src, opts);
  ASSERT_FALSE(st.ok()) << src.substr(0, 80);
  EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << "multi-line error: " << st.message();
}

TEST(Hostile, InfiniteMacroRecursion) {
  expect_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "recursion");
  expect_error("{% macro f(n) %}{{ f(n + 1) ~ f(n + 2) }}{% endmacro %}{{ f(0) }}", "recursion");
}

TEST(Hostile, ExponentialMacroFanOutHitsStepLimit) {
  // Depth 40, two calls per level: 2^40 calls without the step limit.
  expect_error("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
               "step limit");
}

TEST(Hostile, HugeRanges) {
  expect_error("{% for i in range(10**9) %}x{% endfor %}", "Range too big");
  expect_error("{{ range(10**9)|length }}", "Range too big");
  expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "loop iteration limit");
}

TEST(Hostile, RangeNearInt64LimitsDoesNotOverflow) {
  // Python: range(0, 2**63 - 1, 2**62) == [0, 2**62]; stepping past INT64_MAX must not wrap.
  auto tpl = ChatTemplate::parse("{{ range(0, 9223372036854775807, 4611686018427387904)|list }}");
  ASSERT_TRUE(tpl.ok());
  auto out = tpl->render(nlohmann::json::object());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "[0, 4611686018427387904]");
  auto loop = ChatTemplate::parse(
      "{% for i in range(9223372036854775800, 9223372036854775807, 3) %}{{ i }},{% endfor %}");
  ASSERT_TRUE(loop.ok());
  out = loop->render(nlohmann::json::object());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "9223372036854775800,9223372036854775803,9223372036854775806,");
}

TEST(Hostile, PercentFormatWidthIsBoundedAndNeverTruncated) {
  expect_error("{{ '%1000000000d' % 1 }}", "too large");
  expect_error("{{ '%.1000000000f' % 1.5 }}", "too large");
  expect_error("{{ '%d' % 1e300 }}", "64-bit");
  auto tpl = ChatTemplate::parse("{{ '%600d' % 5 }}");
  ASSERT_TRUE(tpl.ok());
  auto out = tpl->render(nlohmann::json::object());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, std::string(599, ' ') + "5");  // Python: 599 spaces then "5"
}

TEST(Hostile, HugeStrings) {
  expect_error("{{ 'x' * 10**12 }}", "string too large");
  expect_error("{{ 'abc' * 100000000 }}", "string too large");
  expect_error("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
               "string too large");
  expect_error("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
               "string too large");
  expect_error("{{ ('a' * 1000000)|replace('a', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa') }}", "string too large");
  expect_error("{{ [1] * 10**10 }}", "list too large");
  expect_error("{{ 2 ** 100000 }}", "integer overflow");
}

TEST(Hostile, OutputLimit) {
  expect_error("{% for i in range(100000) %}{% for j in range(9) %}{{ 'y' * 1000 }}{% endfor %}{% endfor %}",
               "rendered output exceeds");
  RenderOptions small;
  small.max_output_bytes = 1000;
  expect_error("{% for i in range(2000) %}x{% endfor %}", "rendered output exceeds", small);
}

TEST(Hostile, DeeplyNestedExpressionsAndBlocks) {
  expect_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}", "nested too deeply");
  expect_error("{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}", "nested too deeply");
  std::string nots;
  for (int i = 0; i < 100000; ++i) nots += "not ";
  expect_error("{{ " + nots + "x }}", "nested too deeply");
  std::string minus(100000, '-');
  expect_error("{{ " + minus + "1 }}", "nested too deeply");
  std::string sum = "1";
  for (int i = 0; i < 100000; ++i) sum += "+1";
  expect_error("{{ " + sum + " }}", "nested too deeply");
  std::string chain = "x";
  for (int i = 0; i < 100000; ++i) chain += ".a";
  expect_error("{{ " + chain + " }}", "nested too deeply");
  std::string filters = "x";
  for (int i = 0; i < 100000; ++i) filters += "|trim";
  expect_error("{{ " + filters + " }}", "nested too deeply");
  std::string ifs;
  for (int i = 0; i < 100000; ++i) ifs += "{% if true %}";
  expect_error(ifs, "nested too deeply");
}

TEST(Hostile, GarbageInputNeverCrashes) {
  // Truncations of a real-looking template at every position: parse errors or renders, no crash.
  const std::string src =
      "{%- set ns = namespace(a=[1, {'k': (2, 3)}]) -%}{% for k, v in {'a': 1}.items() if v %}"
      "{{ k ~ v|string|upper }}{% else %}{{ raise_exception('x') }}{% endfor %}{# c #}{% raw %}r{% endraw %}"
      "{% macro m(a, b=2) %}{{ caller() if caller is defined }}{% endmacro %}{{ 'a'[1:2:3] }}";
  for (size_t n = 0; n <= src.size(); ++n) (void)outcome(src.substr(0, n));
  (void)outcome("{{ \"\\x");
  (void)outcome("{{ '\\u12' }}");
  (void)outcome("{% for %}");
  (void)outcome("{% set %}");
  (void)outcome("{{ }}");
  (void)outcome("{% macro %}{% endmacro %}");
  (void)outcome("{% call %}{% endcall %}");
  (void)outcome(std::string("{{ '\xff\xfe' }}\x80"));
  SUCCEED();
}

}  // namespace
}  // namespace llmserve
