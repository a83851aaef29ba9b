#include "bench/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <fstream>

#include <fmt/format.h>

namespace llmserve::bench {

namespace {

// Layout, in SVG user units (pixels).
constexpr double kLeft = 80, kRight = 20, kTop = 44;
constexpr double kPlotWidth = 1200;   // target width of the step columns
constexpr double kPlotHeight = 520;   // target height of the request rows
constexpr double kStripHeight = 56;   // each per-step strip
constexpr double kGap = 26;           // between blocks
constexpr double kTitleLine = 15;     // height of one title line
constexpr double kMapHeight = 260;    // target height of the block map rows
constexpr double kNoteHeight = 18;    // the block map's place when it is not drawn
const char* const kHitFill = "#17becf";     // prefill cell of an admission with a cache hit
const char* const kCachedFill = "#76b7b2";  // cached (evictable) blocks

const char* fill_of(CellState s) {
  switch (s) {
    case CellState::kWaiting: return "#d9d9d9";
    case CellState::kStalled: return "#c9b3e6";
    case CellState::kPrefill: return "#f28e2b";
    case CellState::kDecode: return "#4e79a7";
    case CellState::kPreempted: return "#e15759";
    case CellState::kBlank: break;
  }
  return "none";
}

const char* name_of(CellState s) {
  switch (s) {
    case CellState::kWaiting: return "waiting";
    case CellState::kStalled: return "admitted, not scheduled";
    case CellState::kPrefill: return "prefill";
    case CellState::kDecode: return "decode";
    case CellState::kPreempted: return "preempted";
    case CellState::kBlank: break;
  }
  return "";
}

bool valid_id(int64_t id, int64_t n) { return id >= 0 && id < n; }

/// Marks the cells a step mentions; returns nothing, fills grid and first_seen.
void mark_step(const StepRecord& step, int64_t s, TimelineGrid& g, std::vector<int64_t>& first) {
  auto set = [&](int64_t r, CellState st, int32_t tokens) {
    if (!valid_id(r, g.num_requests)) return;
    const size_t i = static_cast<size_t>(r * g.num_steps + s);
    g.cells[i] = st;
    g.tokens[i] = tokens;
    if (first[static_cast<size_t>(r)] < 0) first[static_cast<size_t>(r)] = s;
  };
  for (int64_t r : step.waiting) set(r, CellState::kWaiting, 0);
  for (int64_t r : step.preempted) set(r, CellState::kPreempted, 0);
  for (const StepRecord::Entry& e : step.scheduled)
    set(e.request_id, e.is_prefill ? CellState::kPrefill : CellState::kDecode,
        e.num_scheduled_tokens);
}

}  // namespace

TimelineGrid build_timeline_grid(const RunResult& run, const std::vector<AdmissionHit>* hits) {
  TimelineGrid g;
  g.num_requests = static_cast<int64_t>(run.requests.size());
  g.num_steps = static_cast<int64_t>(run.steps.size());
  g.cells.assign(static_cast<size_t>(g.num_requests * g.num_steps), CellState::kBlank);
  g.tokens.assign(g.cells.size(), 0);
  g.hit_tokens.assign(g.cells.size(), 0);
  std::vector<int64_t> first(static_cast<size_t>(g.num_requests), -1);
  for (int64_t s = 0; s < g.num_steps; ++s) mark_step(run.steps[static_cast<size_t>(s)], s, g, first);
  if (hits) {
    for (const AdmissionHit& h : *hits)
      if (valid_id(h.request_id, g.num_requests) && h.step >= 0 && h.step < g.num_steps)
        g.hit_tokens[static_cast<size_t>(h.request_id * g.num_steps + h.step)] = h.tokens;
  } else {
    // The first admission's hit: the request's first scheduled cell.
    for (int64_t r = 0; r < g.num_requests; ++r) {
      const int32_t cached = run.requests[static_cast<size_t>(r)].cached_tokens;
      if (cached <= 0) continue;
      for (int64_t s = 0; s < g.num_steps; ++s) {
        const CellState c = g.at(r, s);
        if (c != CellState::kPrefill && c != CellState::kDecode) continue;
        g.hit_tokens[static_cast<size_t>(r * g.num_steps + s)] = cached;
        break;
      }
    }
  }
  for (int64_t r = 0; r < g.num_requests; ++r) {
    const int64_t from = first[static_cast<size_t>(r)];
    if (from < 0) continue;
    int64_t to = g.num_steps - 1;
    if (static_cast<size_t>(r) < run.finish_step.size() && run.finish_step[static_cast<size_t>(r)] >= 0)
      to = std::min(to, run.finish_step[static_cast<size_t>(r)]);
    for (int64_t s = from; s <= to; ++s) {
      CellState& c = g.cells[static_cast<size_t>(r * g.num_steps + s)];
      if (c == CellState::kBlank) c = CellState::kStalled;
    }
  }
  return g;
}

namespace {

/// Geometry shared by the drawing helpers.
struct Layout {
  double cell_w = 1, row_h = 1, map_row_h = 1;
  double grid_h = 0, strip1_y = 0, strip2_y = 0, strip3_y = 0, map_y = 0, map_h = 0;
  double axis_y = 0, legend_y = 0;
  double width = 0, height = 0;
};

Layout make_layout(int64_t num_requests, int64_t num_steps, const BlockMap& map) {
  Layout l;
  l.cell_w = std::clamp(kPlotWidth / std::max<int64_t>(num_steps, 1), 0.2, 16.0);
  l.row_h = std::clamp(kPlotHeight / std::max<int64_t>(num_requests, 1), 1.0, 16.0);
  l.grid_h = l.row_h * static_cast<double>(num_requests);
  l.strip1_y = kTop + l.grid_h + kGap;
  l.strip2_y = l.strip1_y + kStripHeight + kGap;
  l.strip3_y = l.strip2_y + kStripHeight + kGap;
  l.map_y = l.strip3_y + kStripHeight + kGap;
  if (map.available && map.num_rows > 0) {
    l.map_row_h = std::clamp(kMapHeight / map.num_rows, 1.0, 8.0);
    l.map_h = l.map_row_h * map.num_rows;
  } else {
    l.map_h = kNoteHeight;
  }
  l.axis_y = l.map_y + l.map_h;
  l.legend_y = l.axis_y + 40;
  l.width = kLeft + l.cell_w * static_cast<double>(num_steps) + kRight + 160;
  l.width = std::max(l.width, 900.0);
  l.height = l.legend_y + 40 + 30;
  return l;
}

/// One rect per run of equal cells in a row (prefill chunks and preemptions stay separate).
void draw_row(std::string& out, const TimelineGrid& g, int64_t r, const Layout& l) {
  const double y = kTop + l.row_h * static_cast<double>(r);
  const double h = std::max(l.row_h - (l.row_h >= 4 ? 1.0 : 0.0), 0.5);
  int64_t s = 0;
  while (s < g.num_steps) {
    const CellState st = g.at(r, s);
    int64_t e = s + 1;
    const bool mergeable =
        st != CellState::kPrefill && st != CellState::kPreempted && g.hit_tokens_at(r, s) == 0;
    while (mergeable && e < g.num_steps && g.at(r, e) == st && g.hit_tokens_at(r, e) == 0) ++e;
    if (st != CellState::kBlank) {
      std::string title = fmt::format("request {}: {} at step {}", r, name_of(st), s);
      const int32_t hit = g.hit_tokens_at(r, s);
      if (st == CellState::kPrefill) title += fmt::format(" ({} tokens)", g.tokens_at(r, s));
      else if (e - s > 1) title = fmt::format("request {}: {} steps {}-{}", r, name_of(st), s, e - 1);
      if (hit > 0) title += fmt::format("; {} prompt tokens from the prefix cache", hit);
      const bool edge = st == CellState::kPrefill && l.cell_w >= 3;
      // A hit is drawn at least 2 px wide, so narrow columns still show it.
      const double w = hit > 0 ? std::max(l.cell_w, 2.0) : l.cell_w * static_cast<double>(e - s);
      out += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"{}{}>"
          "<title>{}</title></rect>\n",
          kLeft + l.cell_w * static_cast<double>(s), y, w, h, hit > 0 ? kHitFill : fill_of(st),
          edge ? " stroke=\"#ffffff\" stroke-width=\"0.5\"" : "",
          hit > 0 ? " class=\"cache-hit\"" : "", title);
    }
    s = e;
  }
}

void draw_row_labels(std::string& out, int64_t n, const Layout& l) {
  const int64_t every = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(10.0 / l.row_h)));
  for (int64_t r = 0; r < n; r += every)
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.2f}\" font-size=\"9\" text-anchor=\"end\">"
                       "req {}</text>\n",
                       kLeft - 4, kTop + l.row_h * (static_cast<double>(r) + 0.5) + 3, r);
}

/// A per-step strip: a grey background per step, filled to value/limit in `color`.
struct StripSegment {
  double value;
  const char* color;
};

void draw_strip(std::string& out, const RunResult& run, const Layout& l, double y,
                const std::string& label, double limit,
                const std::function<std::vector<StripSegment>(const StepRecord&)>& segments,
                const std::function<std::string(const StepRecord&)>& title) {
  const double w = l.cell_w * static_cast<double>(run.steps.size());
  out += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" "
                     "fill=\"#eeeeee\"/>\n", kLeft, y, w, kStripHeight);
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.2f}\" font-size=\"11\">{}</text>\n", kLeft,
                     y - 5, label);
  for (size_t s = 0; s < run.steps.size(); ++s) {
    double base = y + kStripHeight;
    const std::string t = title(run.steps[s]);
    for (const StripSegment& seg : segments(run.steps[s])) {
      const double h = kStripHeight * std::clamp(seg.value / std::max(limit, 1.0), 0.0, 1.0);
      if (h <= 0) continue;
      base -= h;
      out += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" "
                         "fill=\"{}\"><title>step {}: {}</title></rect>\n",
                         kLeft + l.cell_w * static_cast<double>(s), base, l.cell_w, h, seg.color,
                         s, t);
    }
  }
}

void draw_strips(std::string& out, const RunResult& run, const Layout& l) {
  const double seats = std::max(run.max_num_seqs, 1);
  draw_strip(out, run, l, l.strip1_y,
             fmt::format("seats used: scheduled sequences of max_num_seqs = {} (grey = idle)",
                         run.max_num_seqs),
             seats,
             [](const StepRecord& s) {
               return std::vector<StripSegment>{
                   {static_cast<double>(s.scheduled.size()), "#59a14f"}};
             },
             [&](const StepRecord& s) {
               return fmt::format("{} of {} seats", s.scheduled.size(), run.max_num_seqs);
             });
  draw_strip(out, run, l, l.strip2_y,
             fmt::format("token budget used: prefill + decode tokens of max_num_batched_tokens = {}",
                         run.max_num_batched_tokens),
             std::max(run.max_num_batched_tokens, 1),
             [](const StepRecord& s) {
               return std::vector<StripSegment>{{static_cast<double>(s.num_decode_tokens), "#4e79a7"},
                                                {static_cast<double>(s.num_prefill_tokens), "#f28e2b"}};
             },
             [&](const StepRecord& s) {
               return fmt::format("{} prefill + {} decode tokens of {}", s.num_prefill_tokens,
                                  s.num_decode_tokens, run.max_num_batched_tokens);
             });
  int32_t peak_blocks = 1;
  for (const StepRecord& s : run.steps)
    peak_blocks = std::max(peak_blocks, s.num_used_blocks + s.num_cached_blocks);
  draw_strip(out, run, l, l.strip3_y,
             fmt::format("KV blocks: held by sequences (blue) + cached, evictable (teal); full "
                         "height = {} blocks{}",
                         peak_blocks,
                         run.num_kv_blocks > 0 ? fmt::format(" of a {}-block pool", run.num_kv_blocks)
                                               : std::string()),
             peak_blocks,
             [](const StepRecord& s) {
               return std::vector<StripSegment>{{static_cast<double>(s.num_used_blocks), "#4e79a7"},
                                                {static_cast<double>(s.num_cached_blocks), kCachedFill}};
             },
             [](const StepRecord& s) {
               std::string t = fmt::format("{} blocks held, {} cached", s.num_used_blocks,
                                           s.num_cached_blocks);
               if (s.num_prefix_hit_tokens > 0)
                 t += fmt::format("; {} prompt tokens found cached", s.num_prefix_hit_tokens);
               return t;
             });
}

std::string escape_xml(const std::string& s);

/// The colour of a block map cell: held by 1 sequence, shared by 2, 3, 4+, cached.
const char* block_fill(int16_t state) {
  if (state < 0) return kCachedFill;
  switch (state) {
    case 0: return "none";
    case 1: return "#a0cbe8";
    case 2: return "#d4a6c8";
    case 3: return "#b07aa1";
    default: return "#7b4173";
  }
}

std::string block_state_text(int16_t state) {
  if (state < 0) return "cached (held by none, K/V kept, evictable)";
  if (state == 1) return "held by 1 sequence";
  return fmt::format("shared by {} sequences", state);
}

void draw_block_map(std::string& out, const BlockMap& map, const RunResult& run,
                    const Layout& l) {
  const double w = l.cell_w * static_cast<double>(run.steps.size());
  if (!map.available || map.num_rows == 0) {
    const std::string why = map.available ? "block map: no block was used" : map.note;
    out += fmt::format("<text class=\"block-map-note\" x=\"{:.1f}\" y=\"{:.2f}\" "
                       "font-size=\"11\">{}</text>\n", kLeft, l.map_y + 12, escape_xml(why));
    return;
  }
  const int32_t per = map.blocks_per_row;
  auto blocks = [&](int32_t row) {
    const int32_t lo = row * per, hi = std::min(lo + per, map.num_touched_blocks) - 1;
    return lo == hi ? fmt::format("block {}", lo) : fmt::format("blocks {}-{}", lo, hi);
  };
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.2f}\" font-size=\"11\">KV block map: {} "
                     "(ids 0-{} of {}), coloured by the sequences holding {} after each step; most "
                     "sharing one block: {}</text>\n",
                     kLeft, l.map_y - 5,
                     per == 1 ? std::string("one row per physical block")
                              : fmt::format("one row per {} physical blocks", per),
                     map.num_touched_blocks - 1, map.num_total_blocks,
                     per == 1 ? "it" : "them (the most of the row)", map.peak_sharing);
  out += fmt::format("<g class=\"block-map\">\n<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" "
                     "height=\"{:.2f}\" fill=\"#f7f7f7\"/>\n", kLeft, l.map_y, w, l.map_h);
  const double h = std::max(l.map_row_h - (l.map_row_h >= 4 ? 1.0 : 0.0), 0.5);
  for (int32_t b = 0; b < map.num_rows; ++b) {
    const double y = l.map_y + l.map_row_h * b;
    int64_t s = 0;
    while (s < map.num_steps) {
      const int16_t st = map.at(s, b);
      int64_t e = s + 1;
      while (e < map.num_steps && map.at(e, b) == st) ++e;
      if (st != 0)
        out += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" "
                           "fill=\"{}\"><title>{}, steps {}-{}: {}</title></rect>\n",
                           kLeft + l.cell_w * static_cast<double>(s), y,
                           l.cell_w * static_cast<double>(e - s), h, block_fill(st), blocks(b), s,
                           e - 1, block_state_text(st));
      s = e;
    }
  }
  out += "</g>\n";
  const int32_t every =
      std::max<int32_t>(1, static_cast<int32_t>(std::ceil(10.0 / l.map_row_h)));
  for (int32_t b = 0; b < map.num_rows; b += every)
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.2f}\" font-size=\"9\" text-anchor=\"end\">"
                       "block {}</text>\n",
                       kLeft - 4, l.map_y + l.map_row_h * (b + 0.5) + 3, b * per);
}

void draw_axis(std::string& out, const RunResult& run, const Layout& l) {
  const int64_t n = static_cast<int64_t>(run.steps.size());
  const int64_t every = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(70.0 / l.cell_w)));
  for (int64_t s = 0; s < n; s += every) {
    const double x = kLeft + l.cell_w * static_cast<double>(s);
    const double t = run.steps[static_cast<size_t>(s)].start_time - run.start_time;
    out += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1:.2f}\" x2=\"{0:.2f}\" y2=\"{2:.2f}\" "
                       "stroke=\"#999999\" stroke-width=\"0.5\"/>\n", x, l.axis_y, l.axis_y + 4);
    out += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"9\">{} ({:.2f} s)</text>\n",
                       x, l.axis_y + 14, s, std::max(t, 0.0));
  }
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.2f}\" font-size=\"10\" text-anchor=\"end\">"
                     "step (time)</text>\n", kLeft - 4, l.axis_y + 14);
}

/// One legend entry at (x, y); returns the x of the next.
double legend_entry(std::string& out, double x, double y, const char* fill,
                    const std::string& name) {
  out += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                     "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">{}</text>\n",
                     x, y, fill, x + 16, y + 10, name);
  return x + 30 + 7.0 * static_cast<double>(name.size());
}

void draw_legend(std::string& out, const Layout& l) {
  const CellState states[] = {CellState::kPrefill, CellState::kDecode, CellState::kWaiting,
                              CellState::kStalled, CellState::kPreempted};
  double x = kLeft;
  for (CellState st : states) x = legend_entry(out, x, l.legend_y, fill_of(st), name_of(st));
  legend_entry(out, x, l.legend_y, kHitFill, "admitted with a prefix-cache hit");
  const double y = l.legend_y + 20;
  x = kLeft;
  for (int16_t st : {int16_t{1}, int16_t{2}, int16_t{3}, int16_t{4}, int16_t{-1}})
    x = legend_entry(out, x, y, block_fill(st),
                     st == 4 ? std::string("shared by 4+") : st < 0 ? std::string("cached, evictable")
                     : st == 1 ? std::string("block held by 1 sequence")
                               : fmt::format("shared by {}", st));
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">blank = not arrived "
                     "yet / finished (requests), free (blocks); seat strip green = used seat"
                     "</text>\n", kLeft, y + 30);
}

/// Characters of a 12-px title line that fit in `width` pixels.
size_t title_chars(double width) {
  return static_cast<size_t>(std::max(40.0, (width - kLeft - kRight) / 7.0));
}

/// Splits `text` at spaces into lines of at most `max_chars` (longer words stay whole).
std::vector<std::string> wrap_words(const std::string& text, size_t max_chars) {
  std::vector<std::string> lines(1);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(pos, end - pos);
    if (!lines.back().empty() && lines.back().size() + 1 + word.size() > max_chars)
      lines.emplace_back();
    if (!lines.back().empty()) lines.back() += ' ';
    lines.back() += word;
    pos = end + 1;
  }
  return lines;
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

void draw_title(std::string& out, const std::string& title, double width, int64_t num_requests,
                int64_t num_steps) {
  const std::vector<std::string> lines = wrap_words(title, title_chars(width));
  double y = 20;
  for (const std::string& line : lines) {
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" font-weight=\"bold\">"
                       "{}</text>\n", kLeft, y, escape_xml(line));
    y += kTitleLine;
  }
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\">{} requests (rows) x "
                     "{} engine steps (columns)</text>\n", kLeft, y - 1, num_requests, num_steps);
}

}  // namespace

std::string render_timeline_svg(const RunResult& run, const std::string& title) {
  const BlockMap map = replay_block_map(run);
  const TimelineGrid g = build_timeline_grid(run, map.available ? &map.hits : nullptr);
  const Layout l = make_layout(g.num_requests, g.num_steps, map);
  const std::vector<std::string> lines = wrap_words(title, title_chars(l.width));
  const double extra = kTitleLine * static_cast<double>(lines.size() - 1);  // below line 1
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n",
      l.width, l.height + extra);
  draw_title(out, title, l.width, g.num_requests, g.num_steps);
  out += fmt::format("<g transform=\"translate(0 {:.1f})\">\n", extra);
  out += fmt::format("<g class=\"requests\">\n");
  for (int64_t r = 0; r < g.num_requests; ++r) {
    out += fmt::format("<g class=\"row\" id=\"req-{}\">\n", r);
    draw_row(out, g, r, l);
    out += "</g>\n";
  }
  out += "</g>\n";
  draw_row_labels(out, g.num_requests, l);
  draw_strips(out, run, l);
  draw_block_map(out, map, run, l);
  draw_axis(out, run, l);
  draw_legend(out, l);
  out += "</g>\n</svg>\n";
  return out;
}

Status write_timeline_svg(const std::string& path, const RunResult& run, const std::string& title) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return NotFound("cannot write timeline file {}", path);
  f << render_timeline_svg(run, title);
  f.close();
  if (!f) return NotFound("cannot write timeline file {}", path);
  return Status::Ok();
}

}  // namespace llmserve::bench
