// SPDX-License-Identifier: Apache-2.0
#include "store/pg_leader.h"

#include <fmt/format.h>

#include "cohort/fmt_absl.h"

#include "controller_log.h"
#include "store/pg_conn.h"

namespace cohort::controller {
namespace {

// Takes the lease when it expired, was given up, or its holder's database
// session is gone; two standbys racing serialize on the row, and the
// second sees the first's live lease.
constexpr const char* kTakeOver =
    "UPDATE cohort.leader SET epoch = epoch + 1, holder = $1, address = $2, "
    "backend_pid = pg_backend_pid(), expires_at = now() + $3 * interval '1 millisecond', "
    "since = now() WHERE id = 1 AND (expires_at < now() OR NOT EXISTS (SELECT 1 FROM "
    "pg_stat_activity a WHERE a.pid = cohort.leader.backend_pid)) RETURNING epoch";
constexpr const char* kRenew =
    "UPDATE cohort.leader SET expires_at = now() + $2 * interval '1 millisecond' WHERE id = 1 "
    "AND epoch = $1";
constexpr const char* kRelease =
    "UPDATE cohort.leader SET expires_at = '-infinity' WHERE id = 1 AND epoch = $1";
constexpr const char* kActive =
    "SELECT address FROM cohort.leader WHERE id = 1 AND expires_at >= now()";

}  // namespace

Leadership::Leadership(Options options) : options_(std::move(options)) {}

Leadership::~Leadership() { StopRenewing(); }

bool Leadership::StopRenewing() {
  bool was_stopped = false;
  {
    const std::lock_guard lock(mutex_);
    was_stopped = std::exchange(stop_, true);
  }
  wake_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  return was_stopped;
}

std::string Leadership::Active() const {
  const std::lock_guard lock(mutex_);
  return active_;
}

absl::StatusOr<std::optional<std::int64_t>> Leadership::TryAcquire() {
  if (conn_ == nullptr || PQstatus(conn_->get()) != CONNECTION_OK) {
    conn_.reset();
    absl::StatusOr<std::unique_ptr<pg::Connection>> opened =
        pg::Connection::Open(options_.conninfo, std::chrono::seconds(5));
    if (!opened.ok()) return opened.status();
    conn_ = *std::move(opened);
  }
  const std::chrono::milliseconds within = options_.timeout;
  // The lease runs from the server's now(), which comes after this moment:
  // counted from here, this controller never believes it holds the lease
  // longer than the database says.
  const auto sent = std::chrono::steady_clock::now();
  absl::StatusOr<pg::Result> taken = conn_->ExecWithin(
      kTakeOver,
      {pg::Text(options_.holder), pg::Text(options_.address), pg::Number(within.count())},
      "taking the lease", within);
  if (!taken.ok()) return taken.status();
  if (PQntuples(taken->get()) == 1) {
    epoch_ = pg::IntValue(taken->get(), 0, 0);
    acquired_at_ = sent;
    const std::lock_guard lock(mutex_);
    active_ = options_.address;
    return epoch_;
  }
  absl::StatusOr<pg::Result> active = conn_->ExecWithin(kActive, {}, "reading the lease", within);
  if (!active.ok()) return active.status();
  const std::lock_guard lock(mutex_);
  active_ = PQntuples(active->get()) == 1 ? std::string(pg::Value(active->get(), 0, 0)) : "";
  return std::nullopt;
}

void Leadership::Keep(std::function<void(const std::string&)> lost) {
  lost_ = std::move(lost);
  renewer_ = std::thread([this] { Renew(); });
}

void Leadership::Renew() {
  const auto interval =
      std::max<std::chrono::milliseconds>(options_.timeout / 4, std::chrono::milliseconds(100));
  auto renewed = acquired_at_;
  std::string why;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_for(lock, interval, [this] { return stop_; })) return;
    }
    // The answer must come while the lease still runs: past it a standby
    // may hold the lease already.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        renewed + options_.timeout - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      why = fmt::format("the lease was not renewed within ControllerTimeout ({} ms)",
                        options_.timeout.count());
      break;
    }
    const auto sent = std::chrono::steady_clock::now();  // as in TryAcquire
    absl::StatusOr<pg::Result> result =
        conn_->ExecWithin(kRenew, {pg::Number(epoch_), pg::Number(options_.timeout.count())},
                          "renewing the lease", left);
    if (!result.ok()) {
      // The holder's session is what a standby checks: without it the lease
      // is as good as gone.
      why = fmt::format("renewing the lease failed: {}", result.status().message());
      break;
    }
    if (std::string_view(PQcmdTuples(result->get())) != "1") {
      why = "another controller took over the lease";
      break;
    }
    renewed = sent;
  }
  Log("leader")->critical("leadership_lost epoch={} reason=\"{}\"", epoch_, why);
  lost_(why);
}

void Leadership::Release() {
  if (StopRenewing() || conn_ == nullptr || epoch_ == 0) return;
  absl::StatusOr<pg::Result> released = conn_->ExecWithin(
      kRelease, {pg::Number(epoch_)}, "giving up the lease", std::chrono::seconds(2));
  if (!released.ok()) {
    Log("leader")->warn("lease_release_failed reason=\"{}\"", released.status().message());
    return;
  }
  Log("leader")->info("lease_released epoch={}", epoch_);
}

}  // namespace cohort::controller
