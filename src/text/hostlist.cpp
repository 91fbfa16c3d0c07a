// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/hostlist.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <compare>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace cohort::hostlist {
namespace {

// Numbers are kept to 18 digits so that every value, and every range size,
// fits in a uint64_t. Compress leaves longer digit runs as plain text.
constexpr std::size_t kMaxDigits = 18;

// Error messages quote the hostlist; a very long one is cut to this length.
constexpr std::size_t kMaxQuoted = 64;

constexpr std::uint64_t kSaturated = std::numeric_limits<std::uint64_t>::max();

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Characters with a meaning in the syntax; they cannot be part of a name.
constexpr auto kSyntax = [] {
  std::array<bool, 256> table{};
  for (const char c : std::string_view(",[] \t\n\r\f\v"))
    table[static_cast<unsigned char>(c)] = true;
  return table;
}();

bool IsSyntax(char c) { return kSyntax[static_cast<unsigned char>(c)]; }

// A number written with a leading zero ("007") fixes its width; "0" does not.
bool IsPadded(std::string_view digits) { return digits.size() > 1 && digits.front() == '0'; }

std::uint64_t SaturatingAdd(std::uint64_t a, std::uint64_t b) {
  return a > kSaturated - b ? kSaturated : a + b;
}

std::uint64_t SaturatingMultiply(std::uint64_t a, std::uint64_t b) {
  return b != 0 && a > kSaturated / b ? kSaturated : a * b;
}

// Appends `value` in decimal, zero-padded on the left to `width` digits.
void AppendPadded(std::string& out, std::uint64_t value, std::size_t width) {
  char digits[24];
  const auto [end, ec] = std::to_chars(std::begin(digits), std::end(digits), value);
  const auto length = static_cast<std::size_t>(end - std::begin(digits));
  if (length < width) out.append(width - length, '0');
  out.append(std::begin(digits), length);
}

// Whether a number of `length` digits was written with a leading zero.
bool HasLeadingZero(std::uint64_t value, std::size_t length) {
  static constexpr auto kPowersOfTen = [] {
    std::array<std::uint64_t, kMaxDigits> powers{};
    std::uint64_t power = 1;
    for (std::uint64_t& p : powers) {
      p = power;
      power *= 10;
    }
    return powers;
  }();
  return length > 1 && value < kPowersOfTen[length - 1];
}

std::string Padded(std::uint64_t value, std::size_t width) {
  std::string out;
  AppendPadded(out, value, width);
  return out;
}

// --- Expand ------------------------------------------------------------------

// The numbers lo..hi, each zero-padded to `width` digits.
struct Range {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::size_t width = 0;
};

// A piece of one name: literal text, or a bracket (when `ranges` is not empty).
struct Part {
  std::string_view text;
  std::vector<Range> ranges;
};

// One comma-separated entry of the hostlist.
struct Element {
  std::vector<Part> parts;
  std::uint64_t count = 1;  // names it expands to
};

// Parses a hostlist into elements, counting names without producing them, so
// that an oversized expansion is refused before anything is allocated for it.
class Parser {
 public:
  Parser(std::string_view hostlist, std::size_t max_names)
      : hostlist_(hostlist), max_names_(max_names) {}

  absl::StatusOr<std::vector<Element>> Parse() {
    std::size_t begin = 0;
    end_ = hostlist_.size();
    while (begin < end_ && IsSpace(hostlist_[begin])) ++begin;
    while (end_ > begin && IsSpace(hostlist_[end_ - 1])) --end_;
    if (begin == end_) {
      return Error(0, "hostlist is empty; give at least one name, as gpu[001-004]");
    }
    std::vector<Element> elements;
    std::uint64_t total = 0;
    pos_ = begin;
    while (true) {
      const std::size_t start = pos_;
      if (pos_ == end_) return Error(pos_, "empty name after the last ','; remove the ','");
      if (hostlist_[pos_] == ',') return Error(pos_, "empty name; remove the extra ','");
      Element element;
      if (absl::Status status = ParseElement(element); !status.ok()) return status;
      total = SaturatingAdd(total, element.count);
      if (total > max_names_) {
        return Error(start,
                     fmt::format("the expansion exceeds the limit of {} names; ask for fewer "
                                 "names or split the hostlist",
                                 max_names_));
      }
      elements.push_back(std::move(element));
      if (pos_ == end_) break;
      ++pos_;  // the ',' between elements
    }
    return elements;
  }

 private:
  absl::Status Error(std::size_t index, std::string_view what) const {
    std::string_view quoted = hostlist_.substr(0, kMaxQuoted);
    const char* ellipsis = hostlist_.size() > kMaxQuoted ? "..." : "";
    return absl::InvalidArgumentError(
        fmt::format("hostlist \"{}{}\": position {}: {}", quoted, ellipsis, index + 1, what));
  }

  // Describes the character at `index` for a message: 'x', or a code for a
  // control character.
  std::string Found(std::size_t index) const {
    const auto c = static_cast<unsigned char>(hostlist_[index]);
    if (c < 0x20 || c >= 0x7f) return fmt::format("byte 0x{:02x}", c);
    return fmt::format("'{}'", hostlist_[index]);
  }

  absl::Status WhitespaceError(std::size_t index) const {
    return Error(index,
                 "whitespace inside a hostlist; remove it, names are separated by ',' alone");
  }

  absl::Status ParseElement(Element& element) {
    while (pos_ < end_ && hostlist_[pos_] != ',') {
      const char c = hostlist_[pos_];
      if (c == '[') {
        Part bracket;
        if (absl::Status status = ParseBracket(bracket.ranges); !status.ok()) return status;
        std::uint64_t size = 0;
        for (const Range& range : bracket.ranges)
          size = SaturatingAdd(size, range.hi - range.lo + 1);
        element.count = SaturatingMultiply(element.count, size);
        element.parts.push_back(std::move(bracket));
      } else if (c == ']') {
        return Error(pos_, "']' has no matching '['; remove it or add the '['");
      } else if (IsSpace(c)) {
        return WhitespaceError(pos_);
      } else {
        const std::size_t start = pos_;
        while (pos_ < end_ && !IsSyntax(hostlist_[pos_])) ++pos_;
        element.parts.push_back(Part{.text = hostlist_.substr(start, pos_ - start), .ranges = {}});
      }
    }
    return absl::OkStatus();
  }

  // Parses `[item,item,...]` where an item is `n` or `lo-hi`; pos_ is at '['.
  absl::Status ParseBracket(std::vector<Range>& ranges) {
    const std::size_t open = pos_++;
    if (pos_ < end_ && hostlist_[pos_] == ']') {
      return Error(pos_, "empty brackets; put numbers or ranges inside, as [1-4]");
    }
    while (true) {
      const std::size_t lo_start = pos_;
      std::string_view lo_digits;
      if (absl::Status status = ParseNumber(open, "", lo_digits); !status.ok()) return status;
      std::string_view hi_digits = lo_digits;
      std::size_t hi_start = lo_start;
      if (pos_ < end_ && hostlist_[pos_] == '-') {
        ++pos_;
        hi_start = pos_;
        if (absl::Status status = ParseNumber(open, lo_digits, hi_digits); !status.ok()) {
          return status;
        }
      }
      Range range{.lo = ToValue(lo_digits), .hi = ToValue(hi_digits), .width = lo_digits.size()};
      if (range.hi < range.lo) {
        // Swapping the ends must give a valid range: a padded end keeps its width.
        const std::string new_lo =
            IsPadded(lo_digits) ? Padded(range.hi, lo_digits.size()) : std::string(hi_digits);
        return Error(lo_start, fmt::format("range {}-{} runs backwards; write it as {}-{}",
                                           lo_digits, hi_digits, new_lo, lo_digits));
      }
      if (IsPadded(hi_digits) && hi_digits.size() != lo_digits.size()) {
        const std::size_t width = std::max(lo_digits.size(), hi_digits.size());
        return Error(hi_start, fmt::format("range {}-{} pads its ends to different widths; write "
                                           "both with {} digits, as {}-{}",
                                           lo_digits, hi_digits, width, Padded(range.lo, width),
                                           Padded(range.hi, width)));
      }
      ranges.push_back(range);
      if (pos_ == end_) {
        return Error(pos_,
                     fmt::format("bracket opened at position {} is not closed; add ']'", open + 1));
      }
      const char c = hostlist_[pos_];
      if (c == ']' || c == ',') {
        ++pos_;
        if (c == ']') return absl::OkStatus();
        continue;
      }
      if (IsSpace(c)) return WhitespaceError(pos_);
      if (hi_start == lo_start) {
        return Error(pos_, fmt::format("expected ',', '-' or ']' after {}, found {}; brackets hold "
                                       "only numbers and ranges, as [1,3-5]",
                                       lo_digits, Found(pos_)));
      }
      return Error(pos_,
                   fmt::format("expected ',' or ']' after {}-{}, found {}; brackets hold only "
                               "numbers and ranges, as [1,3-5]",
                               lo_digits, hi_digits, Found(pos_)));
    }
  }

  // Parses the digits at pos_ into `digits`. `range_lo` is empty for the first
  // number of an item, and the item's first number when this is its upper end.
  absl::Status ParseNumber(std::size_t open, std::string_view range_lo, std::string_view& digits) {
    const bool upper = !range_lo.empty();
    if (pos_ == end_) {
      if (upper) {
        return Error(pos_, fmt::format("range {}- has no upper end; finish it and close the "
                                       "bracket, as [{}-N]",
                                       range_lo, range_lo));
      }
      return Error(pos_, fmt::format("bracket opened at position {} is not closed; add numbers "
                                     "and ']', as [1-4]",
                                     open + 1));
    }
    const char c = hostlist_[pos_];
    if (!IsDigit(c)) {
      if (upper && (c == ']' || c == ',')) {
        return Error(
            pos_, fmt::format("range {}- has no upper end; write it as {}-N", range_lo, range_lo));
      }
      if (c == ']' || c == ',') return Error(pos_, "empty item in brackets; remove the extra ','");
      if (c == '[') {
        return Error(pos_, "'[' inside brackets; brackets do not nest, list numbers as [1,3-5]");
      }
      if (IsSpace(c)) return WhitespaceError(pos_);
      return Error(pos_, fmt::format("expected a number, found {}; brackets hold only numbers and "
                                     "ranges, as [1,3-5]",
                                     Found(pos_)));
    }
    const std::size_t start = pos_;
    while (pos_ < end_ && IsDigit(hostlist_[pos_])) ++pos_;
    if (pos_ - start > kMaxDigits) {
      return Error(start,
                   fmt::format("number has {} digits; use at most {}", pos_ - start, kMaxDigits));
    }
    digits = hostlist_.substr(start, pos_ - start);
    return absl::OkStatus();
  }

  static std::uint64_t ToValue(std::string_view digits) {
    std::uint64_t value = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return value;
  }

  std::string_view hostlist_;
  std::size_t max_names_;
  std::size_t end_ = 0;  // one past the last character that is not trailing whitespace
  std::size_t pos_ = 0;
};

void ExpandElement(const Element& element, std::vector<std::string>& names) {
  // An odometer over the brackets: the rightmost one turns fastest.
  struct Dial {
    const std::vector<Range>* ranges;
    std::size_t range = 0;
    std::uint64_t value = 0;
  };
  std::vector<Dial> dials;
  for (const Part& part : element.parts) {
    if (!part.ranges.empty()) dials.push_back({&part.ranges, 0, part.ranges.front().lo});
  }
  std::size_t length = 0;  // of the previous name, a close guess for the next
  for (std::uint64_t n = 0; n < element.count; ++n) {
    std::string& name = names.emplace_back();
    name.reserve(length);
    std::size_t dial = 0;
    for (const Part& part : element.parts) {
      if (part.ranges.empty()) {
        name.append(part.text);
      } else {
        const Dial& d = dials[dial++];
        AppendPadded(name, d.value, (*d.ranges)[d.range].width);
      }
    }
    length = name.size();
    for (auto d = dials.rbegin(); d != dials.rend(); ++d) {
      const std::vector<Range>& ranges = *d->ranges;
      if (d->value < ranges[d->range].hi) {
        ++d->value;
        break;
      }
      if (++d->range < ranges.size()) {
        d->value = ranges[d->range].lo;
        break;
      }
      d->range = 0;
      d->value = ranges.front().lo;
    }
  }
}

// --- Compress ----------------------------------------------------------------

// Natural order: digit runs compare by value, then by written width (a1 < a01
// < a2); everything else compares byte by byte.
bool NaturalLess(std::string_view a, std::string_view b) {
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (!IsDigit(a[i]) || !IsDigit(b[j])) {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
      continue;
    }
    std::size_t a_end = i;
    std::size_t b_end = j;
    while (a_end < a.size() && IsDigit(a[a_end])) ++a_end;
    while (b_end < b.size() && IsDigit(b[b_end])) ++b_end;
    // Compare values without converting, so runs of any length work.
    std::size_t a_first = i;
    std::size_t b_first = j;
    while (a_first + 1 < a_end && a[a_first] == '0') ++a_first;
    while (b_first + 1 < b_end && b[b_first] == '0') ++b_first;
    const std::size_t a_length = a_end - a_first;
    const std::size_t b_length = b_end - b_first;
    if (a_length != b_length) return a_length < b_length;
    if (const int c = a.substr(a_first, a_length).compare(b.substr(b_first, b_length)); c != 0) {
      return c < 0;
    }
    if (a_end - i != b_end - j) return a_end - i < b_end - j;
    i = a_end;
    j = b_end;
  }
  return i == a.size() && j < b.size();
}

// One numeric field of a box: a single number, or a set of numbers (an index
// into the set table), all written with the same width.
struct Field {
  std::uint64_t payload = 0;
  std::uint32_t width = 0;
  std::uint32_t is_set = 0;

  friend bool operator==(const Field&, const Field&) = default;
  friend auto operator<=>(const Field&, const Field&) = default;  // NOLINT(modernize-use-nullptr)
};

// A box is a cartesian product: one Field per numeric field of its pattern.
// Boxes of a pattern are stored flat, field_count Fields each.
struct Boxes {
  std::vector<Field> fields;
  std::vector<std::uint32_t>
      first;  // per box, natural-order index of its first name in the pattern
};

// Names sharing the same text between their numbers: `gpu001` and `gpu17`
// share the pattern "gpu" + number + "".
struct Pattern {
  std::vector<std::string> pieces;  // field_count + 1 texts around the fields
  std::size_t field_count = 0;
  std::vector<std::uint64_t> values;  // field_count per name
  std::vector<std::uint8_t> lengths;  // digits as written, field_count per name
};

struct VectorHash {
  std::size_t operator()(const std::vector<std::uint64_t>& v) const noexcept {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const std::uint64_t x : v) h = (h ^ x) * 0x100000001b3ULL;
    return static_cast<std::size_t>(h);
  }
};

// Distinct sets of numbers, each sorted, identified by index.
class SetTable {
 public:
  std::uint64_t Intern(std::vector<std::uint64_t>&& values) {
    const auto [it, inserted] = ids_.try_emplace(std::move(values), sets_.size());
    if (inserted) sets_.push_back(&it->first);
    return it->second;
  }
  const std::vector<std::uint64_t>& Values(std::uint64_t id) const { return *sets_[id]; }

 private:
  std::unordered_map<std::vector<std::uint64_t>, std::uint64_t, VectorHash> ids_;
  std::vector<const std::vector<std::uint64_t>*> sets_;  // keys of ids_, which never move
};

// Splits a name into its pattern key and numbers. The key is the name with
// each foldable digit run replaced by "0"; since runs are maximal, a single
// "0" in a key always marks a field and the key identifies the pattern.
void SplitName(std::string_view name, std::string& key,
               std::vector<std::pair<std::uint64_t, std::uint8_t>>& numbers) {
  key.clear();
  numbers.clear();
  std::size_t i = 0;
  while (i < name.size()) {
    const std::size_t start = i;
    if (!IsDigit(name[i])) {
      for (; i < name.size() && !IsDigit(name[i]); ++i) {
        if (IsSyntax(name[i])) {
          key.assign(name);  // cannot be written in a hostlist: kept whole, never folded
          numbers.clear();
          return;
        }
      }
      key.append(name.substr(start, i - start));
      continue;
    }
    std::uint64_t value = 0;  // wraps for long runs, which are kept as text anyway
    for (; i < name.size() && IsDigit(name[i]); ++i) {
      value = value * 10 + static_cast<std::uint64_t>(name[i] - '0');
    }
    if (i - start > kMaxDigits) {
      key.append(name.substr(start, i - start));
    } else {
      numbers.emplace_back(value, static_cast<std::uint8_t>(i - start));
      key.push_back('0');
    }
  }
}

// The texts around the numbers of `name`, which SplitName found `field_count`
// numbers in.
std::vector<std::string> Pieces(std::string_view name, std::size_t field_count) {
  if (field_count == 0) return {std::string(name)};
  std::vector<std::string> pieces(1);
  std::size_t i = 0;
  while (i < name.size()) {
    if (!IsDigit(name[i])) {
      pieces.back().push_back(name[i++]);
      continue;
    }
    const std::size_t start = i;
    while (i < name.size() && IsDigit(name[i])) ++i;
    if (i - start > kMaxDigits) {
      pieces.back().append(name.substr(start, i - start));
    } else {
      pieces.emplace_back();
    }
  }
  return pieces;
}

void AppendField(std::string& out, const Field& field, const SetTable& sets) {
  if (field.is_set == 0) {
    AppendPadded(out, field.payload, field.width);
    return;
  }
  const std::vector<std::uint64_t>& values = sets.Values(field.payload);
  out.push_back('[');
  for (std::size_t i = 0; i < values.size();) {
    std::size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (i != 0) out.push_back(',');
    AppendPadded(out, values[i], field.width);
    if (j != i) {
      out.push_back('-');
      AppendPadded(out, values[j], field.width);
    }
    i = j + 1;
  }
  out.push_back(']');
}

// The distinct names of `pattern`, as indices in natural order: with the text
// fixed, that is the numbers compared field by field, by value then by width.
std::vector<std::uint32_t> DistinctInOrder(const Pattern& pattern) {
  const std::size_t n = pattern.field_count;
  const auto compare = [&](std::uint32_t a, std::uint32_t b) {
    for (std::size_t x = a * n, y = b * n; x < (a + 1) * n; ++x, ++y) {
      if (const auto c = pattern.values[x] <=> pattern.values[y]; std::is_neq(c)) return c;
      if (const auto c = pattern.lengths[x] <=> pattern.lengths[y]; std::is_neq(c)) return c;
    }
    return std::strong_ordering::equal;
  };
  const auto less = [&](std::uint32_t a, std::uint32_t b) { return std::is_lt(compare(a, b)); };
  std::vector<std::uint32_t> order(pattern.values.size() / n);
  std::iota(order.begin(), order.end(), 0U);
  // Lists often arrive sorted (from Expand, from a node table): check first.
  if (!std::is_sorted(order.begin(), order.end(), less)) {
    std::sort(order.begin(), order.end(), less);
  }
  const auto equal = [&](std::uint32_t a, std::uint32_t b) { return std::is_eq(compare(a, b)); };
  order.erase(std::unique(order.begin(), order.end(), equal), order.end());
  return order;
}

// Folds the distinct names of one pattern, `order` as from DistinctInOrder,
// into boxes. Starting from one box per name, field j is folded for j from
// last to first: boxes equal in every other field, and in field j's width,
// merge, their field-j numbers forming one set.
//
// Widths: a padded number ("007") has exactly its written width. An unpadded
// number of d digits renders the same under any width up to d; it takes the
// largest width up to d that a padded number of the same field uses (so
// 08,09,10 share width 2), or 1 when there is none. Numbers of different
// widths never share a bracket.
Boxes FoldPattern(const Pattern& pattern, const std::vector<std::uint32_t>& order, SetTable& sets) {
  const std::size_t n = pattern.field_count;
  std::vector<std::uint32_t> padded_widths(n, 1U << 1U);  // bit w: width w in use
  for (const std::uint32_t name : order) {
    for (std::size_t f = 0; f < n; ++f) {
      const std::uint32_t length = pattern.lengths[name * n + f];
      if (HasLeadingZero(pattern.values[name * n + f], length)) padded_widths[f] |= 1U << length;
    }
  }
  Boxes boxes;
  boxes.fields.reserve(order.size() * n);
  boxes.first.reserve(order.size());
  for (std::uint32_t rank = 0; rank < order.size(); ++rank) {
    for (std::size_t f = 0; f < n; ++f) {
      const std::size_t k = order[rank] * n + f;
      const std::uint32_t usable = padded_widths[f] & ((2U << pattern.lengths[k]) - 1U);
      boxes.fields.push_back(Field{.payload = pattern.values[k],
                                   .width = static_cast<std::uint32_t>(std::bit_width(usable)) - 1U,
                                   .is_set = 0});
    }
    boxes.first.push_back(rank);
  }

  // Boxes stay sorted by their fields before j, which are single numbers not
  // yet folded, so boxes that can merge at step j lie in one contiguous block
  // of equal leading fields; only blocks are sorted, never the whole list.
  std::vector<std::uint32_t> block;
  for (std::size_t j = n; j-- > 0;) {
    const auto at = [&](std::uint32_t box, std::size_t field) -> const Field& {
      return boxes.fields[box * n + field];
    };
    const auto same_leading = [&](std::uint32_t a, std::uint32_t b) {
      for (std::size_t f = 0; f < j; ++f) {
        if (at(a, f) != at(b, f)) return false;
      }
      return true;
    };
    const auto compare_rest = [&](std::uint32_t a, std::uint32_t b) {
      for (std::size_t f = j + 1; f < n; ++f) {
        if (const auto c = at(a, f) <=> at(b, f); std::is_neq(c)) return c;
      }
      return at(a, j).width <=> at(b, j).width;
    };
    const auto less = [&](std::uint32_t a, std::uint32_t b) {
      if (const auto c = compare_rest(a, b); std::is_neq(c)) return std::is_lt(c);
      return at(a, j).payload < at(b, j).payload;
    };
    Boxes folded;
    const auto box_count = static_cast<std::uint32_t>(boxes.first.size());
    folded.fields.reserve(boxes.fields.size());
    folded.first.reserve(box_count);
    for (std::uint32_t begin = 0; begin < box_count;) {
      std::uint32_t end = begin + 1;
      while (end < box_count && same_leading(begin, end)) ++end;
      block.resize(end - begin);
      std::iota(block.begin(), block.end(), begin);
      if (!std::is_sorted(block.begin(), block.end(), less)) {
        std::sort(block.begin(), block.end(), less);
      }
      for (std::size_t run = 0; run < block.size();) {
        std::size_t run_end = run + 1;
        while (run_end < block.size() && std::is_eq(compare_rest(block[run], block[run_end]))) {
          ++run_end;
        }
        const std::uint32_t head = block[run];
        const std::span<const Field> head_fields(&boxes.fields[head * n], n);
        folded.fields.insert(folded.fields.end(), head_fields.begin(), head_fields.end());
        std::uint32_t first = boxes.first[head];
        if (run_end - run > 1) {
          std::vector<std::uint64_t> values;
          values.reserve(run_end - run);
          for (std::size_t k = run; k < run_end; ++k) {
            values.push_back(at(block[k], j).payload);
            first = std::min(first, boxes.first[block[k]]);
          }
          Field& field = folded.fields[folded.fields.size() - n + j];
          field.payload = sets.Intern(std::move(values));
          field.is_set = 1;
        }
        folded.first.push_back(first);
        run = run_end;
      }
      begin = end;
    }
    boxes = std::move(folded);
  }
  return boxes;
}

// What AppendBox writes: the box as a hostlist entry, or its first name.
enum class Rendering { kHostlist, kFirstName };

void AppendBox(std::string& out, const Pattern& pattern, const Boxes& boxes, std::size_t box,
               const SetTable& sets, Rendering rendering) {
  const std::size_t n = pattern.field_count;
  out.append(pattern.pieces[0]);
  for (std::size_t f = 0; f < n; ++f) {
    const Field& field = boxes.fields[box * n + f];
    if (rendering == Rendering::kHostlist) {
      AppendField(out, field, sets);
    } else {
      AppendPadded(out, field.is_set != 0 ? sets.Values(field.payload).front() : field.payload,
                   field.width);
    }
    out.append(pattern.pieces[f + 1]);
  }
}

// One comma-separated entry of a compressed hostlist: a box of a pattern.
struct Group {
  std::uint32_t pattern = 0;
  std::uint32_t box = 0;
  std::uint32_t first = 0;  // natural-order index of its first name within the pattern
  std::uint32_t index = 0;  // into the first names, when groups of several patterns are ordered
};

}  // namespace

absl::StatusOr<std::vector<std::string>> Expand(std::string_view hostlist, std::size_t max_names) {
  Parser parser(hostlist, max_names);
  absl::StatusOr<std::vector<Element>> elements = parser.Parse();
  if (!elements.ok()) return elements.status();
  std::uint64_t total = 0;
  for (const Element& element : *elements) total += element.count;
  std::vector<std::string> names;
  names.reserve(total);
  for (const Element& element : *elements) ExpandElement(element, names);
  return names;
}

std::string Compress(std::span<const std::string> names) {
  std::vector<Pattern> patterns;
  std::unordered_map<std::string, std::size_t> pattern_ids;
  std::string key;
  std::string previous_key;
  std::size_t id = 0;
  std::vector<std::pair<std::uint64_t, std::uint8_t>> numbers;
  for (const std::string& name : names) {
    if (name.empty()) continue;
    SplitName(name, key, numbers);
    // Neighbouring names mostly share a pattern: skip the lookup then.
    if (patterns.empty() || key != previous_key) {
      const auto [it, inserted] = pattern_ids.try_emplace(key, patterns.size());
      if (inserted) {
        patterns.push_back(Pattern{.pieces = Pieces(name, numbers.size()),
                                   .field_count = numbers.size(),
                                   .values = {},
                                   .lengths = {}});
        if (patterns.size() == 1) {
          // Most lists have one pattern: size it for all the names at once.
          patterns[0].values.reserve(names.size() * numbers.size());
          patterns[0].lengths.reserve(names.size() * numbers.size());
        }
      }
      id = it->second;
      previous_key = key;
    }
    for (const auto& [value, length] : numbers) {
      patterns[id].values.push_back(value);
      patterns[id].lengths.push_back(length);
    }
  }

  SetTable sets;
  std::vector<Boxes> folded(patterns.size());
  std::vector<Group> groups;
  for (std::size_t p = 0; p < patterns.size(); ++p) {
    const Pattern& pattern = patterns[p];
    if (pattern.field_count == 0) {
      folded[p].first.push_back(0);  // the one distinct name, kept whole
    } else {
      folded[p] = FoldPattern(pattern, DistinctInOrder(pattern), sets);
    }
    for (std::uint32_t box = 0; box < folded[p].first.size(); ++box) {
      groups.push_back(Group{.pattern = static_cast<std::uint32_t>(p),
                             .box = box,
                             .first = folded[p].first[box],
                             .index = static_cast<std::uint32_t>(groups.size())});
    }
  }
  // Within a pattern the natural-order index orders groups, cheaply; across
  // patterns their first names must be compared.
  std::vector<std::string> first_names;
  if (patterns.size() > 1) {
    first_names.resize(groups.size());
    for (const Group& group : groups) {
      AppendBox(first_names[group.index], patterns[group.pattern], folded[group.pattern], group.box,
                sets, Rendering::kFirstName);
    }
  }
  std::sort(groups.begin(), groups.end(), [&first_names](const Group& a, const Group& b) {
    if (a.pattern == b.pattern) return a.first < b.first;
    return NaturalLess(first_names[a.index], first_names[b.index]);
  });

  std::string out;
  for (const Group& group : groups) {
    if (!out.empty()) out.push_back(',');
    AppendBox(out, patterns[group.pattern], folded[group.pattern], group.box, sets,
              Rendering::kHostlist);
  }
  return out;
}

std::string CompressInOrder(std::span<const std::string> names) {
  const auto keeps_order = [](std::span<const std::string> run, const std::string& folded) {
    const absl::StatusOr<std::vector<std::string>> back = Expand(folded, run.size() + 1);
    return back.ok() && std::equal(back->begin(), back->end(), run.begin(), run.end());
  };
  std::string whole = Compress(names);
  if (keeps_order(names, whole)) return whole;
  // Split where a neighbouring pair would be reordered, then fold each run;
  // a run that still reorders (interleaved patterns) is written name by name.
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t i = 1; i <= names.size(); ++i) {
    if (i < names.size()) {
      const std::span<const std::string> pair = names.subspan(i - 1, 2);
      if (keeps_order(pair, Compress(pair))) continue;
    }
    const std::span<const std::string> run = names.subspan(start, i - start);
    std::string folded = Compress(run);
    if (keeps_order(run, folded)) {
      parts.push_back(std::move(folded));
    } else {
      parts.insert(parts.end(), run.begin(), run.end());
    }
    start = i;
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

}  // namespace cohort::hostlist
