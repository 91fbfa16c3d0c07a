// SPDX-License-Identifier: Apache-2.0
#include "store/reservation_records.h"

#include <fmt/format.h>

#include "cohort/text/hostlist.h"
#include "rpc/authenticator.h"

namespace cohort::controller {

void ReservationToWire(const AdvanceReservation& r, const topology::Topology& topology, Millis now,
                       v1::Reservation& out) {
  out.set_name(r.name);
  out.set_start_ms(r.start.count());
  out.set_end_ms(r.end.count());
  std::vector<std::string> names;
  names.reserve(r.nodes.size());
  for (const NodeId n : r.nodes) names.push_back(topology.NodeName(n));
  out.set_nodes(hostlist::Compress(names));
  out.set_node_count(static_cast<int>(r.nodes.size()));
  for (const std::string& user : r.users) out.add_users(user);
  for (const std::string& account : r.accounts) out.add_accounts(account);
  out.set_partition(r.partition);
  out.set_flags(r.flags == 0 ? std::string() : ReservationFlagNames(r.flags));
  out.set_uid(r.uid);
  out.set_user(UserNameOf(r.uid));
  out.set_created_ms(r.created.count());
  out.set_active(r.start <= now && now < r.end);
  out.set_by_count(r.by_count);
  out.set_switches(r.switches);
}

absl::StatusOr<AdvanceReservation> ReservationFromWire(const v1::Reservation& r,
                                                       const topology::Topology& topology) {
  AdvanceReservation out;
  out.name = r.name();
  out.start = Millis(r.start_ms());
  out.end = Millis(r.end_ms());
  absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(r.nodes());
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    const std::optional<NodeId> node = topology.FindNode(name);
    if (!node) {
      return absl::InvalidArgumentError(
          fmt::format("reservation {}: node {} is no longer in the topology", r.name(), name));
    }
    out.nodes.push_back(*node);
  }
  out.users.assign(r.users().begin(), r.users().end());
  out.accounts.assign(r.accounts().begin(), r.accounts().end());
  out.partition = r.partition();
  absl::StatusOr<std::uint32_t> flags = ParseReservationFlags(r.flags());
  if (!flags.ok()) return flags.status();
  out.flags = *flags;
  out.uid = r.uid();
  out.created = Millis(r.created_ms());
  out.by_count = r.by_count();
  // A shape this topology cannot have is dropped: the nodes stand.
  if (r.switches() > 0 && r.switches() <= static_cast<int>(topology.Switches().size())) {
    out.switches = r.switches();
  }
  return out;
}

}  // namespace cohort::controller
