// SPDX-License-Identifier: Apache-2.0
#include "format/job_sort.h"

#include <algorithm>
#include <compare>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "format/job_format.h"

namespace cohort::cli {
namespace {

constexpr std::string_view kLetters = "iAFPtTpQujaqMlDSVeN";

// A running job's time used so far; a finished one's whole run; 0 before
// it starts.
std::int64_t TimeUsedMs(const v1::Job& job, std::int64_t now_ms) {
  if (job.start_time_ms() <= 0) return 0;
  const std::int64_t end = job.end_time_ms() > 0 ? job.end_time_ms() : now_ms;
  return std::max<std::int64_t>(end - job.start_time_ms(), 0);
}

std::strong_ordering Compare(char letter, const v1::Job& a, const v1::Job& b, std::int64_t now_ms) {
  switch (letter) {
    case 'i':
    case 'A':
    case 'F':
      // By id as listings order jobs: an array's tasks by task.
      return DisplayOrder(a, b)   ? std::strong_ordering::less
             : DisplayOrder(b, a) ? std::strong_ordering::greater
                                  : std::strong_ordering::equal;
    case 'P':
      return a.spec().partition() <=> b.spec().partition();
    case 't':
    case 'T':
      return JobStateName(a) <=> JobStateName(b);
    case 'p':
    case 'Q':
      return a.priority() <=> b.priority();
    case 'u':
      return a.spec().user_name() <=> b.spec().user_name();
    case 'j':
      return a.spec().name() <=> b.spec().name();
    case 'a':
      return a.spec().account() <=> b.spec().account();
    case 'q':
      return a.qos() <=> b.qos();
    case 'M':
      return TimeUsedMs(a, now_ms) <=> TimeUsedMs(b, now_ms);
    case 'l':
      return a.time_limit_s() <=> b.time_limit_s();
    case 'D':
      return a.spec().nodes() <=> b.spec().nodes();
    case 'S':
      return a.start_time_ms() <=> b.start_time_ms();
    case 'V':
      return a.submit_time_ms() <=> b.submit_time_ms();
    case 'e':
      return a.end_time_ms() <=> b.end_time_ms();
    case 'N':
      return a.nodes() <=> b.nodes();
    default:
      return std::strong_ordering::equal;
  }
}

}  // namespace

absl::StatusOr<std::vector<SortKey>> ParseSortKeys(std::string_view text) {
  std::vector<SortKey> keys;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::string_view word = text.substr(start, comma - start);
    start = comma + 1;
    if (word.empty()) continue;
    SortKey key;
    if (word.front() == '-' || word.front() == '+') {
      key.descending = word.front() == '-';
      word.remove_prefix(1);
    }
    if (word.size() != 1 || kLetters.find(word.front()) == std::string_view::npos) {
      return absl::InvalidArgumentError(fmt::format(
          "-S/--sort: {:?} is not a field letter that sorts; give letters of {} (squeue's "
          "format letters), comma separated, each after - to sort it descending, as -S -p,i",
          word, kLetters));
    }
    key.letter = word.front();
    keys.push_back(key);
  }
  return keys;
}

void SortJobs(std::vector<v1::Job>& jobs, const std::vector<SortKey>& keys, std::int64_t now_ms) {
  std::stable_sort(jobs.begin(), jobs.end(), [&](const v1::Job& a, const v1::Job& b) {
    for (const SortKey& key : keys) {
      const std::strong_ordering order = Compare(key.letter, a, b, now_ms);
      if (order != std::strong_ordering::equal) {
        return key.descending ? order == std::strong_ordering::greater
                              : order == std::strong_ordering::less;
      }
    }
    return false;
  });
}

}  // namespace cohort::cli
