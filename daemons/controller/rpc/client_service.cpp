// SPDX-License-Identifier: Apache-2.0
#include "rpc/client_service.h"

#include <deque>
#include <mutex>

namespace cohort::controller {
namespace {

// The uid of callers the transport does not vouch for.
constexpr std::uint32_t kNobody = 65534;

std::string Metadata(const grpc::CallbackServerContext& context, const std::string& key) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(key);
  if (it == metadata.end()) return {};
  return std::string(it->second.data(), it->second.size());
}

// Finishes a unary call with what the state thread answers, and counts
// how long the call took as `method`.
template <typename Response>
Reply<Response> Finisher(grpc::ServerUnaryReactor* reactor, Response* response,
                         Controller& controller, std::string_view method,
                         std::chrono::steady_clock::time_point started) {
  return [reactor, response, &controller, method, started](absl::StatusOr<Response> result) {
    controller.ObserveRpc(method, std::chrono::steady_clock::now() - started);
    if (!result.ok()) {
      reactor->Finish(ToGrpc(result.status()));
      return;
    }
    *response = *std::move(result);
    reactor->Finish(grpc::Status::OK);
  };
}

// WatchJob's stream: events queue here and go out one write at a time.
class WatchReactor final : public grpc::ServerWriteReactor<v1::JobEvent>, public JobWatcher {
 public:
  WatchReactor(Controller& controller, std::int64_t job, Identity who) : controller_(controller) {
    controller_.Watch(job, std::move(who), this, [this](absl::StatusOr<bool> found) {
      if (!found.ok()) FinishOnce(ToGrpc(found.status()));
    });
  }

  void Push(v1::JobEvent event, Last last) override {
    const std::lock_guard lock(mutex_);
    if (finished_) return;
    queue_.push_back(std::move(event));
    last_ = last == Last::kYes;
    if (!writing_) WriteNext();
  }

  void OnWriteDone(bool ok) override {
    const std::lock_guard lock(mutex_);
    writing_ = false;
    queue_.pop_front();
    if (!ok) {
      FinishLocked(grpc::Status::CANCELLED);
      return;
    }
    if (!queue_.empty()) {
      WriteNext();
    } else if (last_) {
      FinishLocked(grpc::Status::OK);
    }
  }

  void OnDone() override {
    controller_.Unwatch(this, [this] { delete this; });
  }

  void OnCancel() override {
    const std::lock_guard lock(mutex_);
    FinishLocked(grpc::Status::CANCELLED);
  }

 private:
  void WriteNext() {
    writing_ = true;
    StartWrite(&queue_.front());
  }
  void FinishOnce(const grpc::Status& status) {
    const std::lock_guard lock(mutex_);
    FinishLocked(status);
  }
  void FinishLocked(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  Controller& controller_;
  std::mutex mutex_;  ///< guards this stream's write queue, not scheduler state
  std::deque<v1::JobEvent> queue_;
  bool writing_ = false;
  bool last_ = false;
  bool finished_ = false;
};

}  // namespace

ClientService::ClientService(Controller& controller, const PeerBook& peers,
                             const Authenticator& authenticator)
    : controller_(controller), peers_(peers), authenticator_(authenticator) {}

Identity ClientService::Identify(const grpc::CallbackServerContext& context) const {
  if (const std::optional<Peer> peer = peers_.Find(context.peer());
      peer && peer->kind == Peer::Kind::kLocal) {
    return authenticator_.Local(peer->uid);
  }
  return authenticator_.OverTcp(Metadata(context, "cohort-munge"));
}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* ClientService::Serve(grpc::CallbackServerContext* context,
                                               const Request& request, Response* response,
                                               std::string_view name, CallerIdentity caller,
                                               void (Controller::*method)(Request, Identity,
                                                                          Reply<Response>)) {
  const auto started = std::chrono::steady_clock::now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Identity who;
  if (caller == CallerIdentity::kNeeded) {
    who = Identify(*context);
  } else {
    who.uid = kNobody;  // the call does not look; nobody, should it ever
  }
  // gRPC passes the request as const, but it is the call's own, in the
  // holder the context keeps, and gRPC reads it no more once the handler
  // has it: it is moved out rather than copied (copied should a gRPC ever
  // keep it elsewhere).
  auto* holder =
      static_cast<grpc::MessageHolder<Request, Response>*>(context->GetRpcAllocatorState());
  Request taken =
      holder != nullptr && holder->request() == &request ? std::move(*holder->request()) : request;
  (controller_.*method)(std::move(taken), std::move(who),
                        Finisher(reactor, response, controller_, name, started));
  return reactor;
}

#define COHORT_CLIENT_SERVICE_DEFINE_RPC(Method, Request, Response, Area, Caller)                 \
  grpc::ServerUnaryReactor* ClientService::Method(                                                \
      grpc::CallbackServerContext* context, const v1::Request* request, v1::Response* response) { \
    return Serve(context, *request, response, #Method, CallerIdentity::Caller,                    \
                 &Controller::Method);                                                            \
  }
COHORT_CONTROLLER_RPCS(COHORT_CLIENT_SERVICE_DEFINE_RPC)
#undef COHORT_CLIENT_SERVICE_DEFINE_RPC

grpc::ServerWriteReactor<v1::JobEvent>* ClientService::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) {
  return new WatchReactor(controller_, request->job_id(), Identify(*context));
}

}  // namespace cohort::controller
