// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "cohort/alloc/topology.h"
#include "cohort/engine/engine_types.h"
#include "cohort/v1/cohort.pb.h"

/// Operators' reservations on the wire and in the store (v1::Reservation),
/// their nodes by name.
namespace cohort::controller {

/// `r` as clients see it; `active`: its window holds at `now`.
void ReservationToWire(const AdvanceReservation& r, const topology::Topology& topology, Millis now,
                       v1::Reservation& out);
/// Back, as the store kept it. InvalidArgument when a node is no longer in
/// the topology or the flags are unknown: the caller drops it and says so.
[[nodiscard]] absl::StatusOr<AdvanceReservation> ReservationFromWire(
    const v1::Reservation& r, const topology::Topology& topology);

}  // namespace cohort::controller
