#include "structured_output/matcher.h"

#include <algorithm>

namespace llmserve::structured_output {

CompiledGrammar::CompiledGrammar(Grammar g) : grammar_(std::move(g)) {
  nullable_.assign(grammar_.rules.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < grammar_.rules.size(); ++r) {
      if (nullable_[r]) continue;
      for (const Sequence& seq : grammar_.rules[r].alternatives) {
        if (std::all_of(seq.begin(), seq.end(), [&](const Element& e) {
              return e.kind == Element::Kind::kRule && nullable_[e.index];
            })) {
          nullable_[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
}

Expected<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::compile(Grammar grammar) {
  LLMS_RETURN_IF_ERROR(grammar.validate());
  LLMS_RETURN_IF_ERROR(grammar.prune_unproductive());
  return std::shared_ptr<const CompiledGrammar>(new CompiledGrammar(std::move(grammar)));
}

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  reset();
}

void Matcher::reset() {
  arena_.clear();
  table_.clear();
  table_count_ = 0;
  heads_.clear();
  finished_ = false;
  const Grammar& g = grammar_->grammar();
  begin_step();
  for (uint32_t a = 0; a < g.rules[g.root].alternatives.size(); ++a) {
    visit({g.root, a, 0, -1}, heads_, finished_);
  }
}

void Matcher::begin_step() {
  // A new generation of visited_: a frame is expanded at most once per step.
  if (++stamp_ == 0) {
    std::fill(visited_.begin(), visited_.end(), 0);
    stamp_ = 1;
  }
}

namespace {
uint64_t frame_hash(uint32_t rule, uint32_t alt, uint32_t pos, int32_t parent) {
  uint64_t h = (uint64_t{rule} * 0x9E3779B97F4A7C15ull) ^ (uint64_t{alt} << 40) ^ (uint64_t{pos} * 0xC2B2AE3D27D4EB4Full) ^
               (static_cast<uint64_t>(static_cast<uint32_t>(parent)) * 0x165667B19E3779F9ull);
  return h ^ (h >> 29);
}
}  // namespace

int32_t Matcher::intern(const Frame& f, bool& existed) {
  // Frames are unique by content over the matcher's life (hash-consed), so stacks that reach the
  // same frames in different steps share them and merge. Entries whose id lies past the arena's
  // end are stale (a failed advance or a mask walk truncated it) and are reused.
  if (table_count_ * 2 >= table_.size()) rebuild_table();
  const size_t mask = table_.size() - 1;
  int32_t id = -1;
  for (size_t i = frame_hash(f.rule, f.alt, f.pos, f.parent) & mask;; i = (i + 1) & mask) {
    int32_t e = table_[i];
    if (e < 0 || static_cast<size_t>(e) >= arena_.size()) {
      arena_.push_back(f);
      id = static_cast<int32_t>(arena_.size() - 1);
      if (e < 0) ++table_count_;
      table_[i] = id;
      break;
    }
    const Frame& o = arena_[e];
    if (o.rule == f.rule && o.alt == f.alt && o.pos == f.pos && o.parent == f.parent) {
      id = e;
      break;
    }
  }
  if (visited_.size() < arena_.size()) visited_.resize(arena_.size() * 2 + 16, 0);
  existed = visited_[id] == stamp_;
  visited_[id] = stamp_;
  return id;
}

void Matcher::rebuild_table() {
  size_t n = 64;
  while (n < arena_.size() * 4) n *= 2;
  table_.assign(n, -1);
  table_count_ = 0;
  const size_t mask = n - 1;
  for (size_t id = 0; id < arena_.size(); ++id) {
    const Frame& f = arena_[id];
    size_t i = frame_hash(f.rule, f.alt, f.pos, f.parent) & mask;
    bool dup = false;
    while (table_[i] >= 0) {
      const Frame& o = arena_[table_[i]];
      if (o.rule == f.rule && o.alt == f.alt && o.pos == f.pos && o.parent == f.parent) {
        dup = true;
        break;
      }
      i = (i + 1) & mask;
    }
    if (!dup) {
      table_[i] = static_cast<int32_t>(id);
      ++table_count_;
    }
  }
}

void Matcher::visit(Frame f, std::vector<int32_t>& out_heads, bool& finished) {
  const Grammar& g = grammar_->grammar();
  for (;;) {
    const Sequence& seq = g.rules[f.rule].alternatives[f.alt];
    if (f.pos == seq.size()) {  // end of the alternative: return to the caller
      if (f.parent < 0) {
        if (f.parent == kEscape) {
          escaped_ = true;  // left the frames TokenMasker copied (a cached mask's bottom)
        } else {
          finished = true;
        }
        return;
      }
      const Frame& p = arena_[f.parent];
      f = {p.rule, p.alt, p.pos + 1, p.parent};
      continue;
    }
    bool existed = false;
    int32_t id = intern(f, existed);
    if (existed) return;  // already expanded in this step
    const Element e = seq[f.pos];
    if (e.kind == Element::Kind::kBytes) {
      out_heads.push_back(id);
      return;
    }
    // A reference: in tail position the callee returns straight to our caller.
    int32_t parent = f.pos + 1 == seq.size() ? f.parent : id;
    const auto& alts = g.rules[e.index].alternatives;
    for (uint32_t a = 0; a + 1 < alts.size(); ++a) visit({e.index, a, 0, parent}, out_heads, finished);
    f = {e.index, static_cast<uint32_t>(alts.size() - 1), 0, parent};
  }
}

bool Matcher::step(const std::vector<int32_t>& from, uint8_t b, std::vector<int32_t>& out_heads, bool& finished) {
  const Grammar& g = grammar_->grammar();
  out_heads.clear();
  finished = false;
  escaped_ = false;
  begin_step();
  for (int32_t h : from) {
    const Frame f = arena_[h];
    const Element e = g.rules[f.rule].alternatives[f.alt][f.pos];
    if (g.byte_sets[e.index][b]) visit({f.rule, f.alt, f.pos + 1, f.parent}, out_heads, finished);
  }
  return !out_heads.empty() || finished || escaped_;
}

bool Matcher::advance_byte(uint8_t b) {
  size_t arena_before = arena_.size();
  bool finished = false;
  if (!step(heads_, b, scratch_, finished)) {
    arena_.resize(arena_before);
    return false;
  }
  heads_.swap(scratch_);
  finished_ = finished;
  return true;
}

bool Matcher::advance(std::string_view bytes) {
  // All or nothing: keep a copy of the state to restore on failure.
  size_t arena_before = arena_.size();
  std::vector<int32_t> heads_before = heads_;
  bool finished_before = finished_;
  for (char c : bytes) {
    if (!advance_byte(static_cast<uint8_t>(c))) {
      arena_.resize(arena_before);
      heads_ = std::move(heads_before);
      finished_ = finished_before;
      return false;
    }
  }
  return true;
}

bool Matcher::can_finish() const { return finished_; }

bool Matcher::is_terminated() const { return heads_.empty(); }

ByteSet Matcher::next_bytes() const {
  const Grammar& g = grammar_->grammar();
  ByteSet out;
  for (int32_t h : heads_) {
    const Frame& f = arena_[h];
    out |= g.byte_sets[g.rules[f.rule].alternatives[f.alt][f.pos].index];
  }
  return out;
}

bool grammar_accepts(const std::shared_ptr<const CompiledGrammar>& grammar, std::string_view text) {
  Matcher m(grammar);
  return m.advance(text) && m.can_finish();
}

}  // namespace llmserve::structured_output
