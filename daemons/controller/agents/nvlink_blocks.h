// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/status/statusor.h"
#include "controller_state.h"

namespace cohort::controller {

/// TopologyBlocks=auto: keeps StateDir/nvlink-blocks.conf equal to the
/// blocks the nodes' reported NVLink domains give (NvlinkDomains::BlockLines)
/// and, once no report has changed them for `quiet`, restarts the
/// controller in place (as `cohort reconfigure` does) so that it places
/// with them. Registrations arriving together (a cluster coming up, agents
/// reconnecting after a restart) are looked at once, `gather` after the
/// first. Does nothing under TopologyBlocks=file. State thread only.
class NvlinkBlocks {
 public:
  using Reconfigurer = std::function<absl::StatusOr<std::string>()>;
  NvlinkBlocks(boost::asio::io_context& io, const ControllerState& state, Reconfigurer reconfigure,
               std::chrono::milliseconds quiet = std::chrono::seconds(5),
               std::chrono::milliseconds gather = std::chrono::milliseconds(200))
      : state_(state),
        reconfigure_(std::move(reconfigure)),
        quiet_(quiet),
        gather_(gather),
        gather_timer_(io),
        apply_timer_(io) {}

  /// A node registered and its domain was recorded in state.nvlink_domains.
  void Reported();

 private:
  void Write();
  void Apply();

  const ControllerState& state_;
  Reconfigurer reconfigure_;
  std::chrono::milliseconds quiet_;
  std::chrono::milliseconds gather_;
  bool gathering_ = false;
  boost::asio::steady_timer gather_timer_;
  boost::asio::steady_timer apply_timer_;
};

}  // namespace cohort::controller
