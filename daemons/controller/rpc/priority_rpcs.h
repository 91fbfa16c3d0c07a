// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <boost/asio/io_context.hpp>

#include "cohort/v1/cohort.pb.h"
#include "controller_state.h"
#include "outbox.h"
#include "store/wire.h"
#include "worker.h"

namespace cohort::controller {

/// The Controller service's calls on priority and fair share (sprio and
/// sshare): read-only, on the state thread (io()), answered through the
/// outbox. Errors: InvalidArgument (a malformed job reference), NotFound.
class PriorityRpcs {
 public:
  PriorityRpcs(boost::asio::io_context& state_io, ControllerState& state, Outbox& outbox)
      : io_(state_io), state_(state), outbox_(outbox) {}

  /// Where the calls run: the state thread.
  boost::asio::io_context& io() { return io_; }

  /// The priority factors of the pending jobs named (all, when none is),
  /// highest first.
  void GetPriorities(v1::PriorityRequest& request, const Identity& who,
                     Reply<v1::PriorityResponse> reply);
  void GetShares(v1::SharesRequest& request, const Identity& who, Reply<v1::SharesResponse> reply);

 private:
  void AddPriority(const Job& job, Millis now, v1::PriorityResponse& response) const;

  boost::asio::io_context& io_;
  ControllerState& state_;
  Outbox& outbox_;
};

}  // namespace cohort::controller
