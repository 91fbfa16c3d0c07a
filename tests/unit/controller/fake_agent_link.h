// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agents/agent_hub.h"

namespace cohort::controller {

/// An agent's stream that keeps what the controller sent it and how it was
/// closed. After Close nothing more is kept, as a real stream drops them.
class FakeAgentLink final : public AgentLink {
 public:
  explicit FakeAgentLink(std::string peer_host = "10.0.0.7") : peer_host_(std::move(peer_host)) {}

  void Send(v1::ControllerMessage message) override {
    if (closed) return;
    if (on_send) on_send(message);
    sent.push_back(std::move(message));
  }
  void Close(absl::Status status) override {
    if (!closed) closed = std::move(status);
  }
  [[nodiscard]] const std::string& PeerHost() const override { return peer_host_; }

  /// The launches among what was sent.
  [[nodiscard]] std::vector<v1::Launch> Launches() const {
    std::vector<v1::Launch> out;
    for (const v1::ControllerMessage& m : sent) {
      if (m.has_launch()) out.push_back(m.launch());
    }
    return out;
  }
  [[nodiscard]] bool Registered() const {
    for (const v1::ControllerMessage& m : sent) {
      if (m.has_registered()) return true;
    }
    return false;
  }

  std::vector<v1::ControllerMessage> sent;
  std::optional<absl::Status> closed;
  /// Called with each message as it is sent, before it is kept.
  std::function<void(const v1::ControllerMessage&)> on_send;

 private:
  std::string peer_host_;
};

}  // namespace cohort::controller
