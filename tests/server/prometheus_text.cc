#include "prometheus_text.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

namespace llmserve::testing {

namespace {

bool is_name_start(char c, bool colon_ok) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_ok && c == ':');
}
bool is_name_char(char c, bool colon_ok) {
  return is_name_start(c, colon_ok) || (c >= '0' && c <= '9');
}

/// Reads a metric (colon_ok) or label name at `*pos`; empty when there is none.
std::string read_name(const std::string& s, size_t* pos, bool colon_ok) {
  const size_t start = *pos;
  if (*pos < s.size() && is_name_start(s[*pos], colon_ok)) {
    ++*pos;
    while (*pos < s.size() && is_name_char(s[*pos], colon_ok)) ++*pos;
  }
  return s.substr(start, *pos - start);
}

std::optional<double> parse_value(const std::string& v) {
  if (v == "+Inf" || v == "Inf") return INFINITY;
  if (v == "-Inf") return -INFINITY;
  if (v == "NaN") return NAN;
  if (v.empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end != v.c_str() + v.size()) return std::nullopt;
  return d;
}

const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary", "untyped"};

struct HistogramSeries {
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative count) in page order
  std::optional<double> count, sum;
};

}  // namespace

double PrometheusPage::value(const std::string& series) const {
  auto it = samples.find(series);
  return it == samples.end() ? std::nan("") : it->second;
}

std::string PrometheusPage::error_text() const {
  std::string out;
  for (const std::string& e : errors) out += e + "\n";
  return out;
}

PrometheusPage parse_prometheus_text(const std::string& text) {
  PrometheusPage page;
  auto error = [&](size_t line_no, const std::string& what) {
    page.errors.push_back(fmt::format("line {}: {}", line_no, what));
  };
  if (!text.empty() && text.back() != '\n') error(0, "the page does not end with a newline");

  std::set<std::string> helped, done_families, sampled_families;
  std::string current_family;
  std::map<std::string, std::map<std::string, HistogramSeries>> histograms;

  size_t line_no = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.empty()) continue;

    if (line[0] == '#') {
      const bool help = line.rfind("# HELP ", 0) == 0, type = line.rfind("# TYPE ", 0) == 0;
      if (!help && !type) continue;  // a plain comment
      size_t pos = 7;
      const std::string name = read_name(line, &pos, true);
      if (name.empty() || (pos < line.size() && line[pos] != ' '))
        error(line_no, "bad metric name in: " + line);
      if (sampled_families.count(name))
        error(line_no, "HELP/TYPE of " + name + " after its samples");
      if (help) {
        if (!helped.insert(name).second) error(line_no, "second HELP for " + name);
      } else {
        const std::string t = pos < line.size() ? line.substr(pos + 1) : "";
        if (!kTypes.count(t)) error(line_no, "unknown type '" + t + "'");
        if (!page.types.emplace(name, t).second) error(line_no, "second TYPE for " + name);
      }
      continue;
    }

    // A sample: name[{labels}] value [timestamp]
    size_t pos = 0;
    const std::string name = read_name(line, &pos, true);
    if (name.empty()) {
      error(line_no, "bad metric name in: " + line);
      continue;
    }
    std::vector<std::pair<std::string, std::string>> labels;
    bool ok = true;
    if (pos < line.size() && line[pos] == '{') {
      ++pos;
      while (ok && pos < line.size() && line[pos] != '}') {
        const std::string label = read_name(line, &pos, false);
        if (label.empty() || pos + 1 >= line.size() || line[pos] != '=' || line[pos + 1] != '"') {
          ok = false;
          break;
        }
        pos += 2;
        std::string value;
        while (pos < line.size() && line[pos] != '"') {
          if (line[pos] == '\\') {
            if (pos + 1 >= line.size()) {
              ok = false;
              break;
            }
            const char e = line[pos + 1];
            if (e == '\\')
              value += '\\';
            else if (e == '"')
              value += '"';
            else if (e == 'n')
              value += '\n';
            else {
              ok = false;
              break;
            }
            pos += 2;
          } else {
            value += line[pos++];
          }
        }
        if (!ok || pos >= line.size()) {
          ok = false;
          break;
        }
        ++pos;  // closing quote
        for (const auto& [k, v] : labels)
          if (k == label) ok = false;
        labels.emplace_back(label, value);
        if (pos < line.size() && line[pos] == ',') ++pos;
      }
      if (ok && (pos >= line.size() || line[pos] != '}')) ok = false;
      ++pos;
    }
    if (!ok) {
      error(line_no, "bad labels in: " + line);
      continue;
    }
    const std::string series = line.substr(0, pos);
    if (pos >= line.size() || line[pos] != ' ') {
      error(line_no, "no value in: " + line);
      continue;
    }
    std::string value_text = line.substr(pos + 1);
    if (const size_t sp = value_text.find(' '); sp != std::string::npos) {
      const std::string ts = value_text.substr(sp + 1);
      if (ts.empty() || ts.find_first_not_of("-0123456789") != std::string::npos)
        error(line_no, "bad timestamp in: " + line);
      value_text.resize(sp);
    }
    const std::optional<double> value = parse_value(value_text);
    if (!value) {
      error(line_no, "bad value '" + value_text + "'");
      continue;
    }
    if (!page.samples.emplace(series, *value).second) error(line_no, "series twice: " + series);

    // Which family does the sample belong to?
    std::string family, suffix;
    if (page.types.count(name)) {
      family = name;
    } else {
      for (const char* s : {"_bucket", "_sum", "_count"}) {
        const std::string sfx = s;
        if (name.size() > sfx.size() &&
            name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
          const std::string base = name.substr(0, name.size() - sfx.size());
          auto it = page.types.find(base);
          if (it != page.types.end() &&
              (it->second == "histogram" || (it->second == "summary" && sfx != "_bucket"))) {
            family = base;
            suffix = sfx;
          }
        }
      }
    }
    if (family.empty()) {
      error(line_no, "sample of " + name + " without a TYPE line before it");
      continue;
    }
    if (family != current_family) {
      if (!current_family.empty()) done_families.insert(current_family);
      if (done_families.count(family)) error(line_no, "samples of " + family + " not contiguous");
      current_family = family;
    }
    sampled_families.insert(family);
    const std::string& type = page.types[family];
    if (type == "counter" && !(*value >= 0)) error(line_no, "negative counter " + series);
    if (type == "histogram") {
      if (suffix.empty()) {
        error(line_no, "histogram sample without _bucket/_sum/_count: " + series);
        continue;
      }
      std::optional<std::string> le;
      std::string key;
      for (const auto& [k, v] : labels) {
        if (k == "le")
          le = v;
        else
          key += k + "=" + v + ",";
      }
      HistogramSeries& h = histograms[family][key];
      if (suffix == "_bucket") {
        std::optional<double> bound = le ? parse_value(*le) : std::nullopt;
        if (!bound) {
          error(line_no, "bucket without a numeric le: " + series);
          continue;
        }
        if (!h.buckets.empty()) {
          if (!(*bound > h.buckets.back().first)) error(line_no, "le not ascending: " + series);
          if (*value < h.buckets.back().second)
            error(line_no, "bucket counts not cumulative: " + series);
        }
        h.buckets.emplace_back(*bound, *value);
      } else {
        if (le) error(line_no, "le label on " + series);
        (suffix == "_sum" ? h.sum : h.count) = *value;
      }
    }
  }

  for (const auto& [family, series] : histograms) {
    for (const auto& [key, h] : series) {
      const std::string where = family + "{" + key + "}";
      if (h.buckets.empty() || !std::isinf(h.buckets.back().first))
        page.errors.push_back(where + ": no le=\"+Inf\" bucket last");
      if (!h.count) page.errors.push_back(where + ": no _count");
      if (!h.sum) page.errors.push_back(where + ": no _sum");
      if (h.count && !h.buckets.empty() && h.buckets.back().second != *h.count)
        page.errors.push_back(where + ": +Inf bucket != _count");
    }
  }
  return page;
}

}  // namespace llmserve::testing
