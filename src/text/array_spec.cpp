// SPDX-License-Identifier: Apache-2.0
#include "cohort/text/array_spec.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include <fmt/format.h>

#include "absl/status/status.h"

namespace cohort {
namespace {

// A whole non-negative decimal number, or nothing.
bool ParseNumber(std::string_view text, std::int64_t& out) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

absl::Status BadArray(std::string_view part, std::string_view problem) {
  return absl::InvalidArgumentError(fmt::format("array: \"{}\": {}", part, problem));
}

// One comma-separated item: `a`, `a-b` or `a-b:s`.
struct Item {
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::int64_t step = 1;
  bool is_range = false;
};

absl::StatusOr<Item> ParseItem(std::string_view part, int max_size) {
  Item item;
  const std::size_t dash = part.find('-');
  const std::size_t colon = part.find(':');
  if (dash == std::string_view::npos) {
    if (colon != std::string_view::npos) {
      return BadArray(part, "a step belongs to a range, as 1-9:2");
    }
    if (!ParseNumber(part, item.first)) {
      return BadArray(part, "not a task id; use ids such as 7, ranges such as 0-9 or 1-9:2");
    }
    item.last = item.first;
  } else {
    item.is_range = true;
    const std::string_view first = part.substr(0, dash);
    const std::string_view rest = part.substr(dash + 1);
    const std::size_t rest_colon = rest.find(':');
    const std::string_view last = rest.substr(0, rest_colon);
    if (!ParseNumber(first, item.first) || !ParseNumber(last, item.last)) {
      return BadArray(part, "a range is FIRST-LAST with non-negative ids, as 0-9");
    }
    if (rest_colon != std::string_view::npos) {
      const std::string_view step = rest.substr(rest_colon + 1);
      std::int64_t value = 0;
      if (!ParseNumber(step, value)) {
        return BadArray(part, "the step after ':' must be a whole number, as 1-9:2");
      }
      if (value < 1) return BadArray(part, "the step must be 1 or more");
      item.step = value;
    }
    if (item.last < item.first) {
      return BadArray(part, fmt::format("a range must go up, as {}-{}", item.last, item.first));
    }
  }
  if (item.last >= max_size) {
    return BadArray(part,
               fmt::format("task ids go from 0 to {} (MaxArraySize={})", max_size - 1, max_size));
  }
  return item;
}

// Ascending, each once; ids already so (the usual case) are left as they are.
void SortUnique(std::vector<int>& ids) {
  const auto not_ascending = [](int a, int b) { return a >= b; };
  if (std::adjacent_find(ids.begin(), ids.end(), not_ascending) == ids.end()) return;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

}  // namespace

absl::StatusOr<ArraySpec> ParseArraySpec(std::string_view text, int max_size) {
  if (max_size < 1) {
    return absl::InvalidArgumentError(
        fmt::format("array: MaxArraySize={} allows no tasks; set it to 1 or more", max_size));
  }
  if (text.empty()) {
    return absl::InvalidArgumentError("array: empty; give task ids such as 0-9, 1,5,7 or 0-99%8");
  }
  ArraySpec spec;
  std::string_view ids = text;
  if (const std::size_t percent = text.find('%'); percent != std::string_view::npos) {
    ids = text.substr(0, percent);
    const std::string_view limit = text.substr(percent + 1);
    std::int64_t value = 0;
    if (!ParseNumber(limit, value) || value < 1 || value > max_size) {
      return BadArray(text, fmt::format("after '%' comes how many tasks may run at once, from 1 to {}, "
                                   "as 0-99%8",
                                   max_size));
    }
    spec.max_running = static_cast<int>(value);
  }
  if (ids.empty()) return BadArray(text, "no task ids before '%'; write them as 0-99%8");

  std::vector<Item> items;
  std::int64_t count = 0;  // with repeats: bounds the work before duplicates go
  for (std::size_t start = 0;;) {
    const std::size_t comma = ids.find(',', start);
    const std::string_view part =
        ids.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (part.empty()) {
      return BadArray(text, "an empty item between commas; remove the extra ','");
    }
    absl::StatusOr<Item> item = ParseItem(part, max_size);
    if (!item.ok()) return item.status();
    count += (item->last - item->first) / item->step + 1;
    if (count > max_size) {
      return BadArray(text, fmt::format("more than {} tasks (MaxArraySize), counting repeats; "
                                   "ask for fewer",
                                   max_size));
    }
    items.push_back(*item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }

  spec.tasks.reserve(static_cast<std::size_t>(count));
  for (const Item& item : items) {
    for (std::int64_t id = item.first; id <= item.last; id += item.step) {
      spec.tasks.push_back(static_cast<int>(id));
    }
  }
  SortUnique(spec.tasks);
  if (items.size() == 1 && items.front().is_range) spec.step = static_cast<int>(items.front().step);
  return spec;
}

std::string FormatArrayTasks(const std::vector<int>& tasks, int max_running) {
  std::vector<int> ids = tasks;
  SortUnique(ids);
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", ids[i]) : fmt::format("{}-{}", ids[i], ids[j]);
    i = j + 1;
  }
  if (max_running > 0) out += fmt::format("%{}", max_running);
  return out;
}

}  // namespace cohort
