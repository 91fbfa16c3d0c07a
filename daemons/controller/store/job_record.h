// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

#include "cohort/v1/state.pb.h"

/// A job's durable record across the store's versions.
namespace cohort::controller {

/// Parses a job record as the store holds it, of any version: a record
/// written before version 4 has its groups' fields moved into the groups
/// (JobRunRecord, …), so that every reader sees one shape. False when the
/// bytes are no record.
[[nodiscard]] bool ParseJobRecord(std::string_view bytes, v1::JobRecord& out);

/// Moves the fields a record kept before version 4 into its groups, and
/// clears them. A record of version 4 or later is left as it is.
void UpgradeJobRecord(v1::JobRecord& record);

}  // namespace cohort::controller
