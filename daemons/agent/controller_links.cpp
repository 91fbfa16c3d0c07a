// SPDX-License-Identifier: Apache-2.0
#include "controller_links.h"

#include <grpcpp/create_channel.h>

#include "cohort/config/controller_addrs.h"

namespace cohort::agent {

ControllerLinks::ControllerLinks(const std::vector<std::string>& targets,
                                 const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                 const grpc::ChannelArguments& arguments) {
  for (const std::string& target : targets) {
    // A Unix socket never speaks TLS.
    std::shared_ptr<grpc::ChannelCredentials> used =
        target.starts_with("unix:") ? grpc::InsecureChannelCredentials() : credentials;
    links_.push_back(
        {target, v1::AgentGateway::NewStub(grpc::CreateCustomChannel(target, used, arguments))});
  }
}

std::size_t ControllerLinks::Next(std::size_t index, std::string_view message) const {
  if (const std::optional<std::string> active = config::ActiveFromMessage(message)) {
    for (std::size_t i = 0; i < links_.size(); ++i) {
      if (links_[i].target == *active) return i;
    }
  }
  return (index + 1) % links_.size();
}

}  // namespace cohort::agent
