// SPDX-License-Identifier: Apache-2.0
#include "engine/reservations.h"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>

#include "cohort/diagnostics.h"
#include "engine/engine_support.h"

namespace cohort::engine {
namespace {

constexpr std::size_t kMaxName = 64;
constexpr std::size_t kMaxListed = 1'000;  // users or accounts named

bool Meets(const AdvanceReservation& r, Millis from, Millis to) {
  return r.start < to && from < r.end;
}

bool ShareNodes(const AdvanceReservation& a, const AdvanceReservation& b) {
  std::vector<NodeId> both;
  std::set_intersection(a.nodes.begin(), a.nodes.end(), b.nodes.begin(), b.nodes.end(),
                        std::back_inserter(both));
  return !both.empty();
}

constexpr std::array<std::pair<std::uint32_t, std::string_view>, 6> kFlagNames{{
    {kResvMaint, "MAINT"},
    {kResvIgnoreJobs, "IGNORE_JOBS"},
    {kResvFlex, "FLEX"},
    {kResvDaily, "DAILY"},
    {kResvWeekly, "WEEKLY"},
    {kResvOverlap, "OVERLAP"},
}};

Millis Period(const AdvanceReservation& r) {
  if ((r.flags & kResvWeekly) != 0) return std::chrono::hours(24 * 7);
  if ((r.flags & kResvDaily) != 0) return std::chrono::hours(24);
  return Millis(0);
}

}  // namespace

absl::Status ReservationBook::Put(AdvanceReservation r, bool replace, Millis now) {
  const bool named_ok = !r.name.empty() && r.name.size() <= kMaxName &&
                        std::all_of(r.name.begin(), r.name.end(), [](unsigned char c) {
                          return std::isalnum(c) || c == '_' || c == '-' || c == '.';
                        });
  if (!named_ok) {
    return absl::InvalidArgumentError(fmt::format(
        "ReservationName=\"{}\": use 1-{} letters, digits, '_', '-' or '.'", r.name, kMaxName));
  }
  const auto same = std::find_if(all_.begin(), all_.end(),
                                 [&](const AdvanceReservation& a) { return a.name == r.name; });
  if (replace && same == all_.end()) {
    return absl::NotFoundError(
        fmt::format("no reservation {}; scontrol show reservation lists them", r.name));
  }
  if (!replace && same != all_.end()) {
    return absl::AlreadyExistsError(
        fmt::format("reservation {} exists; change it with scontrol update ReservationName={}",
                    r.name, r.name));
  }
  if (!replace && all_.size() >= kMaxReservations) {
    return absl::ResourceExhaustedError(
        fmt::format("{} reservations exist, the most the controller keeps; delete some first",
                    kMaxReservations));
  }
  if (r.end <= r.start) {
    return absl::InvalidArgumentError(
        "the reservation ends before it starts; give EndTime= after StartTime=, or a Duration=");
  }
  if (r.end - r.start > kMaxReservationLength) {
    return absl::InvalidArgumentError(
        fmt::format("a reservation lasts at most {} days; give a shorter Duration=",
                    kMaxReservationLength.count() / 24));
  }
  if (r.end <= now) {
    return absl::InvalidArgumentError(
        "the reservation would end before now; give a later EndTime=");
  }
  if (r.nodes.empty()) {
    return absl::InvalidArgumentError("the reservation holds no node; give Nodes= or NodeCnt=");
  }
  if (r.users.size() > kMaxListed || r.accounts.size() > kMaxListed) {
    return absl::InvalidArgumentError(
        fmt::format("Users= and Accounts= name at most {} each", kMaxListed));
  }
  if (r.users.empty() && r.accounts.empty()) {
    return absl::InvalidArgumentError(
        "name who may use the reservation: Users= or Accounts= (Users=root for maintenance)");
  }
  std::sort(r.nodes.begin(), r.nodes.end());
  r.nodes.erase(std::unique(r.nodes.begin(), r.nodes.end()), r.nodes.end());
  if ((r.flags & kResvOverlap) == 0) {
    for (const AdvanceReservation& other : all_) {
      if (other.name == r.name || (other.flags & kResvOverlap) != 0) continue;
      if (Meets(other, r.start, r.end) && ShareNodes(other, r)) {
        return absl::FailedPreconditionError(fmt::format(
            "reservation {} holds some of these nodes at that time; choose other nodes or "
            "another time, or give Flags=OVERLAP",
            other.name));
      }
    }
  }
  if (same != all_.end()) {
    *same = std::move(r);
  } else {
    all_.push_back(std::move(r));
  }
  return absl::OkStatus();
}

absl::Status ReservationBook::Remove(std::string_view name) {
  const auto it = std::find_if(all_.begin(), all_.end(),
                               [&](const AdvanceReservation& a) { return a.name == name; });
  if (it == all_.end()) {
    return absl::NotFoundError(
        fmt::format("no reservation {}; scontrol show reservation lists them", name));
  }
  all_.erase(it);
  return absl::OkStatus();
}

const AdvanceReservation* ReservationBook::Find(std::string_view name) const {
  const auto it = std::find_if(all_.begin(), all_.end(),
                               [&](const AdvanceReservation& a) { return a.name == name; });
  return it == all_.end() ? nullptr : &*it;
}

bool ReservationBook::Permits(const AdvanceReservation& r, std::string_view user,
                              std::string_view account) {
  return Lists(r.users, user) || Lists(r.accounts, account);
}

const AdvanceReservation* ReservationBook::Blocked(const Job& job, Millis from, Millis to,
                                                   std::vector<NodeId>& out) const {
  const AdvanceReservation* first = nullptr;
  for (const AdvanceReservation& r : all_) {
    if (r.name == job.request.reservation || !Meets(r, from, to)) continue;
    out.insert(out.end(), r.nodes.begin(), r.nodes.end());
    if (first == nullptr || r.start < first->start) first = &r;
  }
  return first;
}

void ReservationBook::MarkPlaced(std::string_view name, Millis start) {
  for (AdvanceReservation& r : all_) {
    if (r.name == name) r.placed_for = start;
  }
}

bool ReservationBook::Roll(Millis now) {
  bool changed = false;
  for (AdvanceReservation& r : all_) {
    const Millis period = Period(r);
    if (period.count() == 0 || r.end > now) continue;
    const std::int64_t skip = (now - r.end) / period + 1;
    r.start += period * skip;
    r.end += period * skip;
    changed = true;
  }
  const std::size_t before = all_.size();
  std::erase_if(all_, [&](const AdvanceReservation& r) { return r.end <= now; });
  return changed || all_.size() != before;
}

std::optional<Millis> ReservationBook::NextChange(Millis now) const {
  std::optional<Millis> next;
  for (const AdvanceReservation& r : all_) {
    for (const Millis at : {r.start, r.end}) {
      if (at > now && (!next || at < *next)) next = at;
    }
  }
  return next;
}

}  // namespace cohort::engine

namespace cohort {

using engine::kFlagNames;

std::string ReservationFlagNames(std::uint32_t flags) {
  std::vector<std::string_view> names;
  for (const auto& [bit, name] : kFlagNames) {
    if ((flags & bit) != 0) names.emplace_back(name);
  }
  return names.empty() ? std::string("(null)") : fmt::format("{}", fmt::join(names, ","));
}

absl::StatusOr<std::uint32_t> ParseReservationFlags(std::string_view names) {
  std::uint32_t flags = 0;
  if (names.empty() || names == "(null)") return flags;
  for (std::size_t start = 0; start <= names.size();) {
    const std::size_t comma = names.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? names.size() : comma;
    const std::string_view name = names.substr(start, end - start);
    start = end + 1;
    bool known = false;
    for (const auto& [bit, flag] : kFlagNames) {
      if (EqualsIgnoreCase(name, flag)) {
        flags |= bit;
        known = true;
      }
    }
    if (!known) {
      return absl::InvalidArgumentError(fmt::format(
          "Flags: \"{}\" is no reservation flag here; give MAINT, IGNORE_JOBS, FLEX, DAILY, "
          "WEEKLY or OVERLAP",
          name));
    }
  }
  return flags;
}

}  // namespace cohort
