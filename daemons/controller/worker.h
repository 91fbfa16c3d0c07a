// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "absl/status/statusor.h"

namespace cohort::controller {

/// How the controller answers a call: once, with the result or the error.
template <typename T>
using Reply = std::function<void(absl::StatusOr<T>)>;

/// One thread running its own io_context until stopped.
class Worker {
 public:
  Worker();
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  boost::asio::io_context& io() { return io_; }
  /// Lets queued work finish, then joins the thread. Idempotent.
  void Stop();

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

}  // namespace cohort::controller
