// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/config/cluster_config.h"

/// Where the controllers of a cluster are, and what a standby answers: the
/// one place that knows the forms of ControllerAddr=, --controller and
/// COHORT_CONTROLLER, and the words of a redirect.
namespace cohort::config {

/// Splits a comma list of controller addresses, in order, each written
/// HOST:PORT, [IPV6]:PORT or unix:/PATH (gRPC's own dns:, ipv4: and ipv6:
/// targets pass through). An entry without a port takes `default_port`;
/// with `default_port` < 1 a port is required. InvalidArgument names the
/// entry and the fix; `source` says where the list came from.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> ParseControllerList(std::string_view text,
                                                                           int default_port,
                                                                           std::string_view source);

/// The entries of a comma list, blanks around them trimmed, empty ones
/// dropped.
[[nodiscard]] std::vector<std::string> SplitEntries(std::string_view text);

/// The addresses clients and agents dial, in order: each entry of
/// ControllerAddr= with ControllerPort= where it names no port.
[[nodiscard]] std::vector<std::string> ControllerTargets(const ClusterConfig& config);

/// The host part of an address (brackets of IPv6 kept); empty for unix:.
[[nodiscard]] std::string_view HostOf(std::string_view target);

/// What a standby controller answers every call with (gRPC UNAVAILABLE):
/// "not the active controller; the active one is HOST:PORT", or, while no
/// controller holds the lease, "...; no controller is active yet, try
/// again in a few seconds".
[[nodiscard]] std::string NotActiveMessage(std::string_view active);
/// Whether a status message is a standby's answer.
[[nodiscard]] bool IsNotActive(std::string_view message);
/// The active controller a standby's answer names; nullopt when it names
/// none (or the message is not a standby's).
[[nodiscard]] std::optional<std::string> ActiveFromMessage(std::string_view message);

}  // namespace cohort::config
