// SPDX-License-Identifier: Apache-2.0
#include "agents/agent_gateway.h"

#include <deque>
#include <mutex>

#include "controller_log.h"
#include "rpc/request_bounds.h"

namespace cohort::controller {
namespace {

class AgentSession final : public grpc::ServerBidiReactor<v1::AgentMessage, v1::ControllerMessage>,
                           public AgentLink {
 public:
  AgentSession(Controller& controller, const Authenticator& authenticator, std::string peer_host,
               std::vector<std::string> certificate_names)
      : controller_(controller),
        authenticator_(authenticator),
        peer_host_(std::move(peer_host)),
        certificate_names_(std::move(certificate_names)) {
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Close(absl::OkStatus());
      return;
    }
    if (absl::Status bounded = CheckRequestBounds(incoming_); !bounded.ok()) {
      Log("controller")
          ->warn("agent_message_refused peer={} reason={:?}", peer_host_,
                 std::string(bounded.message()));
      Close(std::move(bounded));
      return;
    }
    if (incoming_.has_register_()) {
      if (absl::Status refused =
              authenticator_.VerifyAgent(incoming_.register_(), certificate_names_);
          !refused.ok()) {
        Log("controller")
            ->warn("agent_refused node={} peer={} reason={:?}", incoming_.register_().node_name(),
                   peer_host_, std::string(refused.message()));
        Close(std::move(refused));
        return;
      }
    }
    controller_.OnAgentMessage(this, std::move(incoming_));
    incoming_.Clear();
    StartRead(&incoming_);
  }

  void Send(v1::ControllerMessage message) override {
    const std::lock_guard lock(mutex_);
    if (finishing_) return;
    queue_.push_back(std::move(message));
    if (!writing_) WriteNext();
  }

  void Close(absl::Status status) override {
    const std::lock_guard lock(mutex_);
    if (finishing_) return;
    finishing_ = true;
    final_status_ = ToGrpc(status);
    if (!writing_) Finish(final_status_);
  }

  void OnWriteDone(bool ok) override {
    const std::lock_guard lock(mutex_);
    writing_ = false;
    queue_.pop_front();
    if (!ok) {
      queue_.clear();
      if (!finishing_) {
        finishing_ = true;
        final_status_ = grpc::Status::CANCELLED;
      }
    }
    if (!queue_.empty() && !finishing_) {
      WriteNext();
    } else if (finishing_) {
      Finish(final_status_);
    }
  }

  void OnDone() override {
    controller_.OnAgentGone(this, [this] { delete this; });
  }

  const std::string& PeerHost() const override { return peer_host_; }

 private:
  void WriteNext() {
    writing_ = true;
    StartWrite(&queue_.front());
  }

  Controller& controller_;
  const Authenticator& authenticator_;
  const std::string peer_host_;
  const std::vector<std::string> certificate_names_;  ///< of a verified client certificate
  v1::AgentMessage incoming_;
  std::mutex mutex_;  ///< guards this stream's write queue, not scheduler state
  std::deque<v1::ControllerMessage> queue_;
  bool writing_ = false;
  bool finishing_ = false;
  grpc::Status final_status_;
};

}  // namespace

std::string PeerHostOf(const std::string& peer) {
  constexpr std::string_view kIpv4 = "ipv4:";
  constexpr std::string_view kIpv6 = "ipv6:";
  if (peer.starts_with(kIpv4)) {
    const std::string rest = peer.substr(kIpv4.size());
    return rest.substr(0, rest.rfind(':'));
  }
  if (peer.starts_with(kIpv6)) {
    std::string rest = peer.substr(kIpv6.size());
    rest = rest.substr(0, rest.rfind(':'));
    if (rest.size() >= 2 && rest.front() == '[' && rest.back() == ']') {
      rest = rest.substr(1, rest.size() - 2);
    }
    return rest;
  }
  return "127.0.0.1";
}

grpc::ServerBidiReactor<v1::AgentMessage, v1::ControllerMessage>* AgentGatewayService::Connect(
    grpc::CallbackServerContext* context) {
  // A client certificate the TLS handshake verified against TLSCAFile: its
  // DNS names are the nodes its agent may register. The guard in front of
  // the TCP port made the handshake (PeerBook); a channel of gRPC's own
  // TLS would say it in the call's auth context.
  std::vector<std::string> names;
  std::string host = PeerHostOf(context->peer());
  if (const std::optional<Peer> peer = peers_.Find(context->peer());
      peer && peer->kind == Peer::Kind::kTcp) {
    names = peer->certificate_names;
    host = peer->host;
  } else if (const std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
             auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const grpc::string_ref& name : auth->FindPropertyValues(GRPC_X509_SAN_PROPERTY_NAME)) {
      names.emplace_back(name.data(), name.size());
    }
  }
  return new AgentSession(controller_, authenticator_, std::move(host), std::move(names));
}

}  // namespace cohort::controller
