// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>

#include <boost/asio/io_context.hpp>

#include "cohort/alloc/topology.h"
#include "cohort/v1/cohort.pb.h"
#include "store/store.h"
#include "store/wire.h"
#include "worker.h"

namespace cohort::controller {

/// The Controller service's history query (sacct), on a thread and a
/// connection of its own (io()): a long query never holds up the state
/// thread, and it sees only what is durable. Errors: the store's.
class HistoryRpcs {
 public:
  /// `reader` is used on this part's thread only; `topology` is read-only.
  HistoryRpcs(const topology::Topology& topology, config::PrivateData hidden,
              std::unique_ptr<Store> reader)
      : topology_(topology), hidden_(hidden), reader_(std::move(reader)) {}
  ~HistoryRpcs() { Stop(); }
  HistoryRpcs(const HistoryRpcs&) = delete;
  HistoryRpcs& operator=(const HistoryRpcs&) = delete;

  /// Where the calls run: the history thread.
  boost::asio::io_context& io() { return thread_.io(); }
  /// Finishes the queries asked for and joins the thread. Idempotent.
  void Stop() { thread_.Stop(); }

  /// Finished jobs: a user's own unless they ask for all or name a user or
  /// job (operators see everyone's); with PrivateData=jobs, only operators
  /// see other users' jobs. Answered at once: it reads only what
  /// is durable.
  void JobHistory(v1::JobHistoryRequest& request, const Identity& who,
                  Reply<v1::JobHistoryResponse> reply);

 private:
  const topology::Topology& topology_;
  const config::PrivateData hidden_;
  std::unique_ptr<Store> reader_;
  Worker thread_;  ///< after reader_: joined before the connection closes
};

}  // namespace cohort::controller
