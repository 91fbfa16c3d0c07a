// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace cohort::controller {

namespace pg {
class Connection;
}

/// Which of the controllers sharing a PostgreSQL database is active: the one
/// holding the lease, the row cohort.leader. Taking it over adds one to its
/// epoch, which every commit of the holder checks (cohort.fence): once a
/// standby took over, nothing the old holder sends can commit, even after a
/// pause of any length. A holder renews the lease four times per
/// ControllerTimeout; a standby takes it over when it expired, or at once
/// when the holder's database session is gone (its process died or
/// stopped). Not thread-safe: a standby polls on one thread; the holder's
/// lease is then renewed on a thread of this object's own.
class Leadership {
 public:
  struct Options {
    std::string conninfo;  ///< StateDatabase=
    std::string holder;    ///< who this controller is, for logs and cohort.leader: host and pid
    std::string address;   ///< HOST:PORT clients are redirected to while this one is active
    std::chrono::milliseconds timeout{10'000};  ///< ControllerTimeout=
  };
  explicit Leadership(Options options);
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  /// Sets the address this controller is known by once it is active.
  void SetAddress(std::string address) { options_.address = std::move(address); }
  /// One try to become active, connecting first if needed: the epoch this
  /// controller now holds, or nullopt while another holds a live lease (see
  /// Active()). Errors are the database's (the caller tries again).
  [[nodiscard]] absl::StatusOr<std::optional<std::int64_t>> TryAcquire();
  /// The active controller's address as last seen by TryAcquire; empty when
  /// none holds a live lease.
  [[nodiscard]] std::string Active() const;

  /// Keeps the lease held, on a thread of its own, until Release() or until
  /// it is lost: taken over (the epoch moved on), or not renewed within the
  /// timeout. Then calls `lost(why)` once, on that thread. Call it as soon
  /// as TryAcquire returned an epoch: the lease runs from then.
  void Keep(std::function<void(const std::string&)> lost);
  /// Gives the lease up so that a standby takes over at once (a clean stop).
  void Release();

  [[nodiscard]] std::int64_t Epoch() const { return epoch_; }

 private:
  void Renew();
  /// Ends the renewing thread; whether it had been ended before.
  bool StopRenewing();

  Options options_;
  std::unique_ptr<pg::Connection> conn_;
  std::int64_t epoch_ = 0;
  std::chrono::steady_clock::time_point acquired_at_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::string active_;  ///< guarded by mutex_
  bool stop_ = false;   ///< guarded by mutex_
  std::function<void(const std::string&)> lost_;
  std::thread renewer_;
};

}  // namespace cohort::controller
