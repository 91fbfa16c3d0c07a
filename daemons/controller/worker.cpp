// SPDX-License-Identifier: Apache-2.0
#include "worker.h"

namespace cohort::controller {

Worker::Worker() : guard_(io_.get_executor()), thread_([this] { io_.run(); }) {}

Worker::~Worker() { Stop(); }

void Worker::Stop() {
  guard_.reset();
  if (thread_.joinable()) thread_.join();
}

}  // namespace cohort::controller
