// SPDX-License-Identifier: Apache-2.0
#include "rpc/call_rate.h"

#include <algorithm>

#include <fmt/format.h>

namespace cohort::controller {

absl::Status CallRate::Admit(std::optional<std::uint32_t> uid,
                             std::chrono::steady_clock::time_point now) {
  if (uid == 0U) return absl::OkStatus();
  const std::lock_guard lock(mutex_);
  const double rate = uid ? options_.per_second : options_.anonymous_per_second;
  const double burst = uid ? options_.burst : 2 * options_.anonymous_per_second;
  Bucket* bucket = &anonymous_;
  bool fresh = !uid && !anonymous_started_;
  anonymous_started_ = true;
  if (uid) {
    if (users_.size() >= options_.users && !users_.contains(*uid)) {
      // Buckets filled up again are no different from new ones.
      std::erase_if(users_, [&](const auto& entry) {
        return entry.second.tokens +
                   rate * std::chrono::duration<double>(now - entry.second.filled).count() >=
               burst;
      });
    }
    const auto [it, added] = users_.try_emplace(*uid);
    bucket = &it->second;
    fresh = added;
  }
  if (fresh) {
    bucket->tokens = burst;
  } else {
    bucket->tokens = std::min(
        burst, bucket->tokens + rate * std::chrono::duration<double>(now - bucket->filled).count());
  }
  bucket->filled = now;
  if (bucket->tokens >= 1) {
    bucket->tokens -= 1;
    return absl::OkStatus();
  }
  ++refused_;
  return absl::ResourceExhaustedError(fmt::format(
      "{} made more than {:.0f} calls a second; try again in a moment (docs/operations.md, "
      "\"Resource bounds\")",
      uid ? fmt::format("uid {}", *uid) : std::string("anonymous callers"), rate));
}

std::uint64_t CallRate::Refused() const {
  const std::lock_guard lock(mutex_);
  return refused_;
}

}  // namespace cohort::controller
