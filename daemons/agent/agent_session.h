// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <grpcpp/support/status.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "cohort/v1/cohort.grpc.pb.h"
#include "controller_links.h"
#include "controller_stream.h"
#include "launch_runner.h"

/// One node's link to the controller: its AgentGateway.Connect stream,
/// kept open across failures.
namespace cohort::agent {

/// Keeps one node registered with the controller. Connects, sends Register
/// (built fresh each time, so it lists the ranks alive now), then heartbeats
/// every interval the controller asks for. Events (Send) go out in order once
/// the controller has answered Register; they wait in a queue while the
/// stream is down and are kept until their write succeeds. A failed stream
/// is reopened after a backoff of 100 ms doubling to 5 s, jittered, reset by
/// each successful registration; a refusal (PERMISSION_DENIED,
/// FAILED_PRECONDITION) is logged with the controller's reason and retried
/// the same way. With several controllers, a stream that failed goes to the
/// next one, or straight to the active one a standby named (after 100 ms).
/// The controller answers every heartbeat; once no controller has been
/// heard from for the NodeTimeout the last one gave (it has declared the
/// node down and requeued or ended its jobs), the node's ranks are stopped
/// (Hooks::on_fence), once per silence. A connection refused (a controller
/// being restarted) starts the silence anew: no controller is counting it.
/// Lives on, and is used only from, the agent's loop thread.
class AgentSession final : public NodeLink {
 public:
  AgentSession(boost::asio::io_context& loop, ControllerLinks& links, std::string node,
               Hooks hooks);

  /// Opens the first stream.
  void Start() override;

  /// Queues an event (RanksStarted, RankExited, LaunchFailed, JobReleased)
  /// for the controller.
  void Send(v1::AgentMessage event) override;

  /// Ends the stream and stops reconnecting; calls `on_stopped` on the loop
  /// once gRPC is done with the stream. Unsent events are dropped.
  void Stop(std::function<void()> on_stopped) override;

  [[nodiscard]] std::size_t QueuedEvents() const { return events_.size(); }

 private:
  enum class State { kWaiting, kConnecting, kRegistered, kClosing, kStopped };
  enum class Writing { kNothing, kRegister, kEvent, kHeartbeat };

  void Connect();
  void Pump();
  void OnMessage(v1::ControllerMessage message);
  void OnRegistered(const v1::RegisterReply& reply);
  void OnWriteDone(bool ok);
  void OnReadFailed();
  void OnDone(const grpc::Status& status);
  void ScheduleHeartbeat();
  /// Heard from the controller now: the silence restarts.
  void Heard();
  void ArmFence();
  void BeginClose(CloseMode mode);

  boost::asio::io_context& loop_;
  ControllerLinks& links_;
  std::size_t link_ = 0;  // which controller the stream goes to
  const std::string node_;
  Hooks hooks_;

  State state_ = State::kWaiting;
  std::shared_ptr<ControllerStream> stream_;
  std::uint64_t generation_ = 0;  // which stream a timer was armed for
  Writing writing_ = Writing::kNothing;
  bool register_due_ = false;
  bool heartbeat_due_ = false;
  std::deque<v1::AgentMessage> events_;

  boost::asio::steady_timer retry_timer_;
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer fence_timer_;
  std::chrono::steady_clock::time_point last_heard_{};
  std::int64_t node_timeout_ms_ = 0;  // the controller's NodeTimeout; 0: never fence
  bool fence_armed_ = false;
  bool fenced_ = false;  // this silence's fence is done
  std::int64_t heartbeat_interval_ms_ = 0;
  std::int64_t backoff_ms_;
  std::string last_failure_;  // code and reason, since the last registration
  std::minstd_rand jitter_;
  std::function<void()> on_stopped_;
};

}  // namespace cohort::agent
