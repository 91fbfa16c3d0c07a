// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <boost/asio/io_context.hpp>

#include "cohort/v1/cohort.pb.h"
#include "controller_state.h"
#include "outbox.h"
#include "store/wire.h"
#include "worker.h"

namespace cohort::controller {

/// The Controller service's calls on priority, fair share and the account
/// tree (sprio, sshare, sacctmgr), on the state thread (io()), answered
/// through the outbox. Only UpdateAccounts changes anything. Errors:
/// InvalidArgument (a malformed job reference, a bad setting), NotFound,
/// PermissionDenied.
class PriorityRpcs {
 public:
  PriorityRpcs(boost::asio::io_context& state_io, ControllerState& state, Outbox& outbox,
               EffectSink& sink)
      : io_(state_io), state_(state), outbox_(outbox), sink_(sink) {}

  /// Where the calls run: the state thread.
  boost::asio::io_context& io() { return io_; }

  /// The priority factors of the pending jobs named (all, when none is),
  /// highest first.
  void GetPriorities(v1::PriorityRequest& request, const Identity& who,
                     Reply<v1::PriorityResponse> reply);
  void GetShares(v1::SharesRequest& request, const Identity& who, Reply<v1::SharesResponse> reply);
  /// The tree depth first, each account followed by its users, with limits
  /// and this period's use.
  void ListAccounts(v1::ListAccountsRequest& request, const Identity& who,
                    Reply<v1::ListAccountsResponse> reply);
  /// sacctmgr add|modify|delete: root and Operators= only; committed before
  /// the answer.
  void UpdateAccounts(v1::UpdateAccountsRequest& request, const Identity& who,
                      Reply<v1::UpdateAccountsResponse> reply);
  void ListTransactions(v1::ListTransactionsRequest& request, const Identity& who,
                        Reply<v1::ListTransactionsResponse> reply);

 private:
  void AddPriority(const Job& job, Millis now, v1::PriorityResponse& response) const;

  boost::asio::io_context& io_;
  ControllerState& state_;
  Outbox& outbox_;
  EffectSink& sink_;
};

}  // namespace cohort::controller
