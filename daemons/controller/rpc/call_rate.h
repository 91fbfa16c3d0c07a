// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "absl/status/status.h"

namespace cohort::controller {

/// How many calls of the Controller service each user may make: a token
/// bucket per uid (docs/operations.md, "Resource bounds"), checked before
/// the call reaches the state thread. Callers the transport does not vouch
/// for (anonymous TCP callers, and calls whose answer is the same for
/// anyone) share one bucket; root is not counted. Any thread.
class CallRate {
 public:
  struct Options {
    double per_second = 1000;            ///< a user's sustained rate
    double burst = 2000;                 ///< what a user may make at once
    double anonymous_per_second = 5000;  ///< the shared bucket's
    std::size_t users = 65536;           ///< buckets kept; idle ones go first past it
  };
  CallRate() : CallRate(Options{}) {}
  explicit CallRate(Options options) : options_(options) {}

  /// Takes one call of `uid` (nullopt: the shared bucket) at `now`; OK, or
  /// RESOURCE_EXHAUSTED saying the rate and when to retry.
  [[nodiscard]] absl::Status Admit(std::optional<std::uint32_t> uid,
                                   std::chrono::steady_clock::time_point now);
  /// Calls refused since the start (cohort_rpc_calls_refused_total).
  [[nodiscard]] std::uint64_t Refused() const;

 private:
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point filled{};
  };

  Options options_;
  mutable std::mutex mutex_;  ///< guards the buckets; held for a few arithmetic steps
  std::unordered_map<std::uint32_t, Bucket> users_;
  Bucket anonymous_;
  bool anonymous_started_ = false;
  std::uint64_t refused_ = 0;
};

}  // namespace cohort::controller
