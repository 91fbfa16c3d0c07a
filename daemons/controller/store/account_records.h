// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

#include "cohort/config/cluster_config.h"
#include "cohort/engine/engine_types.h"
#include "cohort/v1/state.pb.h"

/// The account tree on the wire and in the store: one Association per
/// account and per user in an account, as sacctmgr lists them.
namespace cohort::controller {

/// An account's own line: its place, share, limits and origin.
void AccountLine(const config::AccountSpec& spec, v1::Association& out);
/// A user's line in `spec`: its own share and limits, whether sacctmgr added it.
void UserLine(const config::AccountSpec& spec, const std::string& user, v1::Association& out);

/// A QOS on the wire and in the store.
void QosOut(const config::QosSpec& qos, v1::Qos& out);
/// And back. A field that no longer parses is dropped, said in `warnings`.
[[nodiscard]] config::QosSpec QosIn(const v1::Qos& in, std::vector<std::string>& warnings);

/// What a store keeps of sacctmgr's work.
[[nodiscard]] v1::AccountingRecord ToRecord(const AccountingState& state);
/// And back. A line that no longer parses (a limit this build refuses) is
/// taken without it, said in `warnings`.
[[nodiscard]] AccountingState FromRecord(const v1::AccountingRecord& record,
                                         std::vector<std::string>& warnings);

}  // namespace cohort::controller
