// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "cohort/engine/engine_types.h"
#include "cohort/engine/job.h"

namespace cohort::engine {

/// Operators' reservations (scontrol create reservation): the windows in
/// which nodes belong to some users and accounts, or to maintenance. Checks
/// what a reservation may be on its own and beside the others; the jobs it
/// would displace are the facade's to check. Pure: the caller passes `now`.
class ReservationBook {
 public:
  /// Adds `r` (its nodes sorted and distinct), or replaces the one of its
  /// name when `replace`. InvalidArgument, AlreadyExists, NotFound or
  /// FailedPrecondition (another reservation's nodes and time) name the
  /// field and the fix; nothing changes then.
  absl::Status Put(AdvanceReservation r, bool replace, Millis now);
  absl::Status Remove(std::string_view name);
  /// Notes that the nodes of the reservation named were checked for the
  /// window starting at `start` (AdvanceReservation::placed_for).
  void MarkPlaced(std::string_view name, Millis start);

  [[nodiscard]] const AdvanceReservation* Find(std::string_view name) const;
  [[nodiscard]] const std::vector<AdvanceReservation>& All() const { return all_; }
  [[nodiscard]] bool Empty() const { return all_.empty(); }
  void Restore(std::vector<AdvanceReservation> kept) { all_ = std::move(kept); }

  /// Whether the user or the account is one the reservation names.
  [[nodiscard]] static bool Permits(const AdvanceReservation& r, std::string_view user,
                                    std::string_view account);

  /// Appends to `out` the nodes of every reservation that the job is not in
  /// and whose window meets [from, to): the job keeps off them. Returns the
  /// first such reservation to start (none: nothing blocks the job).
  const AdvanceReservation* Blocked(const Job& job, Millis from, Millis to,
                                    std::vector<NodeId>& out) const;

  /// Repeating reservations that ended come again (DAILY, WEEKLY); others
  /// that ended go. Whether anything changed.
  bool Roll(Millis now);
  /// The next start or end after `now`, when a pass has something new to
  /// weigh; none when no reservation is left.
  [[nodiscard]] std::optional<Millis> NextChange(Millis now) const;

 private:
  std::vector<AdvanceReservation> all_;
};

}  // namespace cohort::engine
