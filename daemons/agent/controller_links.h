// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "cohort/v1/cohort.grpc.pb.h"

namespace cohort::agent {

/// The controllers an agent may talk to, in the order ControllerAddr (or
/// --controller) lists them: one gRPC channel and stub each. One is active
/// at a time; the others are standbys that redirect to it, or are down.
class ControllerLinks {
 public:
  /// One channel per target, made with `credentials` (TLS or none) and
  /// `arguments`.
  ControllerLinks(const std::vector<std::string>& targets,
                  const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                  const grpc::ChannelArguments& arguments);

  [[nodiscard]] std::size_t Size() const { return links_.size(); }
  [[nodiscard]] v1::AgentGateway::Stub& Stub(std::size_t index) { return *links_[index].stub; }
  [[nodiscard]] const std::string& Target(std::size_t index) const { return links_[index].target; }
  /// Where a stream that ended with `message` should go next from `index`:
  /// the active controller a standby named, when it is one of these; else
  /// the next one in order (the first after the last).
  [[nodiscard]] std::size_t Next(std::size_t index, std::string_view message) const;

 private:
  struct Link {
    std::string target;
    std::unique_ptr<v1::AgentGateway::Stub> stub;
  };
  std::vector<Link> links_;
};

}  // namespace cohort::agent
