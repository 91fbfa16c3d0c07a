// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "store/store.h"
#include "worker.h"

namespace cohort::controller {

/// Point reads of the state database off the state thread: one reading
/// connection, used on a thread of its own, whose answers continue on the
/// state thread. Reads run one at a time in the order asked, and their
/// continuations run on the state thread in that order too. Reads see what
/// is durable.
class StoreReader {
 public:
  /// `reader` is used on this reader's thread only.
  StoreReader(boost::asio::io_context& state_io, std::unique_ptr<Store> reader)
      : state_io_(state_io), reader_(std::move(reader)) {}
  ~StoreReader() { Stop(); }
  StoreReader(const StoreReader&) = delete;
  StoreReader& operator=(const StoreReader&) = delete;

  /// Runs `read(Store&)` on the reader's thread, then `then(result)` on
  /// the state thread. Any thread may call.
  template <typename ReadFn, typename ThenFn>
  void Read(ReadFn read, ThenFn then) {
    boost::asio::post(thread_.io(), [this, read = std::move(read),
                                     then = std::move(then)]() mutable {
      auto result = read(*reader_);
      boost::asio::post(state_io_, [then = std::move(then), result = std::move(result)]() mutable {
        then(std::move(result));
      });
    });
  }

  /// Finishes the reads asked for (their continuations stay queued on the
  /// state thread) and joins the thread. Idempotent.
  void Stop() { thread_.Stop(); }

 private:
  boost::asio::io_context& state_io_;
  std::unique_ptr<Store> reader_;
  Worker thread_;  ///< after reader_: joined before the connection closes
};

}  // namespace cohort::controller
