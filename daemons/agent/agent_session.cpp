// SPDX-License-Identifier: Apache-2.0
#include "agent_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "agent_log.h"
#include "cohort/config/controller_addrs.h"

namespace cohort::agent {
namespace {

constexpr std::int64_t kInitialBackoffMs = 100;
constexpr std::int64_t kMaxBackoffMs = 5000;
// Bounds on the controller's heartbeat interval: 0 or nonsense must neither
// flood the stream nor silence the node.
constexpr std::int64_t kDefaultHeartbeatMs = 10'000;
constexpr std::int64_t kMinHeartbeatMs = 100;
constexpr std::int64_t kMaxHeartbeatMs = 3'600'000;
// The longest NodeTimeout the fence's timer takes (a week): a larger one
// from the controller would overflow the clock's arithmetic.
constexpr std::int64_t kMaxNodeTimeoutMs = 7LL * 24 * 3'600'000;

std::string CodeName(grpc::StatusCode code) {
  // gRPC's codes are absl's, number for number.
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

}  // namespace

AgentSession::AgentSession(boost::asio::io_context& loop, ControllerLinks& links, std::string node,
                           Hooks hooks)
    : loop_(loop),
      links_(links),
      node_(std::move(node)),
      hooks_(std::move(hooks)),
      retry_timer_(loop),
      heartbeat_timer_(loop),
      fence_timer_(loop),
      backoff_ms_(kInitialBackoffMs),
      // Seeded per node so that nodes of one emulating agent spread apart.
      jitter_(static_cast<std::minstd_rand::result_type>(std::random_device{}() ^
                                                         std::hash<std::string>{}(node_))) {}

void AgentSession::Start() { Connect(); }

void AgentSession::Connect() {
  state_ = State::kConnecting;
  ++generation_;
  writing_ = Writing::kNothing;
  register_due_ = true;
  heartbeat_due_ = false;
  ControllerStream::Callbacks callbacks{
      .on_message = [this](v1::ControllerMessage message) { OnMessage(std::move(message)); },
      .on_write_done = [this](bool ok) { OnWriteDone(ok); },
      .on_read_failed = [this] { OnReadFailed(); },
      .on_done = [this](const grpc::Status& status) { OnDone(status); },
  };
  stream_ = ControllerStream::Open(links_.Stub(link_), loop_, std::move(callbacks));
  AgentLog().debug("agent_connecting node={} controller={}", node_, links_.Target(link_));
  Pump();
}

void AgentSession::Send(v1::AgentMessage event) {
  if (state_ == State::kStopped) return;
  events_.push_back(std::move(event));
  Pump();
}

void AgentSession::Pump() {
  if (!stream_ || writing_ != Writing::kNothing) return;
  if (state_ == State::kConnecting && register_due_) {
    v1::AgentMessage message;
    *message.mutable_register_() = hooks_.make_register();
    writing_ = Writing::kRegister;
    stream_->Write(message);
    return;
  }
  // Events wait for the controller's answer to Register: written before it,
  // a refused registration would swallow them.
  if (state_ != State::kRegistered) return;
  if (!events_.empty()) {
    writing_ = Writing::kEvent;
    stream_->Write(events_.front());
  } else if (heartbeat_due_) {
    v1::AgentMessage message;
    message.mutable_heartbeat();
    writing_ = Writing::kHeartbeat;
    stream_->Write(message);
  }
}

void AgentSession::OnWriteDone(bool ok) {
  const Writing written = std::exchange(writing_, Writing::kNothing);
  if (!ok) {
    // The event stays queued for the next stream; on_done brings the reason.
    BeginClose(CloseMode::kFinished);
    return;
  }
  switch (written) {
    case Writing::kRegister:
      register_due_ = false;
      break;
    case Writing::kEvent:
      // Stop() may have dropped the queue while this write was under way.
      if (!events_.empty()) events_.pop_front();
      break;
    case Writing::kHeartbeat:
      heartbeat_due_ = false;
      break;
    case Writing::kNothing:
      break;
  }
  Pump();
}

void AgentSession::OnMessage(v1::ControllerMessage message) {
  if (state_ != State::kConnecting && state_ != State::kRegistered) return;
  if (message.has_registered()) {
    OnRegistered(message.registered());
    return;
  }
  if (state_ == State::kRegistered) Heard();
  if (message.has_heartbeat_ack()) return;
  hooks_.on_message(message);
}

void AgentSession::OnRegistered(const v1::RegisterReply& reply) {
  std::int64_t interval = reply.heartbeat_interval_ms();
  if (interval <= 0) interval = kDefaultHeartbeatMs;
  heartbeat_interval_ms_ = std::clamp(interval, kMinHeartbeatMs, kMaxHeartbeatMs);
  // Never shorter than three heartbeats: a silence that short is no outage.
  node_timeout_ms_ =
      reply.node_timeout_ms() <= 0
          ? 0
          : std::clamp(reply.node_timeout_ms(), 3 * heartbeat_interval_ms_, kMaxNodeTimeoutMs);
  fenced_ = false;
  Heard();
  if (state_ == State::kConnecting) {
    state_ = State::kRegistered;
    backoff_ms_ = kInitialBackoffMs;
    last_failure_.clear();
    AgentLog().info("agent_connected node={} controller={} heartbeat_ms={} queued_events={}", node_,
                    links_.Target(link_), heartbeat_interval_ms_, events_.size());
  }
  ScheduleHeartbeat();
  Pump();
}

void AgentSession::ScheduleHeartbeat() {
  heartbeat_timer_.expires_after(std::chrono::milliseconds(heartbeat_interval_ms_));
  heartbeat_timer_.async_wait(
      [this, generation = generation_](const boost::system::error_code& error) {
        if (error || generation != generation_ || state_ != State::kRegistered) return;
        heartbeat_due_ = true;
        Pump();
        ScheduleHeartbeat();
      });
}

void AgentSession::Heard() {
  last_heard_ = std::chrono::steady_clock::now();
  ArmFence();
}

void AgentSession::ArmFence() {
  if (node_timeout_ms_ <= 0 || fence_armed_ || fenced_ || state_ == State::kStopped) return;
  fence_armed_ = true;
  // Checked when the silence would reach NodeTimeout; what was heard since
  // moves the check on.
  fence_timer_.expires_at(last_heard_ + std::chrono::milliseconds(node_timeout_ms_));
  fence_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error) return;  // cancelled: the session may be gone
    fence_armed_ = false;
    if (on_stopped_ || state_ == State::kStopped) return;
    const auto silent = std::chrono::steady_clock::now() - last_heard_;
    if (silent < std::chrono::milliseconds(node_timeout_ms_)) {
      ArmFence();
      return;
    }
    fenced_ = true;
    AgentLog().warn(
        "agent_fenced node={} silent_ms={} reason=\"no controller heard for NodeTimeout: it has "
        "declared the node down, so its ranks are stopped\"",
        node_, std::chrono::duration_cast<std::chrono::milliseconds>(silent).count());
    if (hooks_.on_fence) hooks_.on_fence();
  });
}

void AgentSession::OnReadFailed() { BeginClose(CloseMode::kFinished); }

void AgentSession::BeginClose(CloseMode mode) {
  if (!stream_ || state_ == State::kClosing) return;
  state_ = State::kClosing;
  heartbeat_timer_.cancel();
  stream_->Close(mode);
}

void AgentSession::OnDone(const grpc::Status& status) {
  stream_.reset();
  writing_ = Writing::kNothing;
  heartbeat_timer_.cancel();
  if (on_stopped_) {
    state_ = State::kStopped;
    AgentLog().debug("agent_stream_closed node={} controller={}", node_, links_.Target(link_));
    boost::asio::post(loop_, std::exchange(on_stopped_, nullptr));
    return;
  }

  const grpc::StatusCode code = status.error_code();
  const std::string& reason = status.error_message();
  if (code == grpc::StatusCode::UNAVAILABLE &&
      reason.find("Connection refused") != std::string::npos) {
    // The controller's host answers but runs no controller (it is being
    // restarted or upgraded): nobody counts this node's silence, and the
    // controller that starts gives every node NodeTimeout from its start to
    // register again. Only a silence nothing answers is counted.
    last_heard_ = std::chrono::steady_clock::now();
  }
  std::uniform_int_distribution<std::int64_t> spread(backoff_ms_ / 2, backoff_ms_);
  std::int64_t retry_in_ms = spread(jitter_);
  backoff_ms_ = std::min(backoff_ms_ * 2, kMaxBackoffMs);
  const std::size_t failed_link = link_;
  if (links_.Size() > 1 && code == grpc::StatusCode::UNAVAILABLE) {
    // Another controller may be the active one: the one a standby named,
    // at once, else the next in order.
    link_ = links_.Next(link_, reason);
    if (config::ActiveFromMessage(reason)) retry_in_ms = kInitialBackoffMs;
  }
  // The first failure since the last registration, or a new reason, is
  // news; repeats while the controller stays away are not.
  std::string failure = fmt::format("{}: {}", CodeName(code), reason);
  const bool news = failure != last_failure_;
  last_failure_ = std::move(failure);
  if (code == grpc::StatusCode::PERMISSION_DENIED ||
      code == grpc::StatusCode::FAILED_PRECONDITION) {
    // An operator must act: a wrong key, a node the controller does not know.
    AgentLog().log(news ? spdlog::level::err : spdlog::level::debug,
                   "agent_refused node={} controller={} code={} reason={:?} retry_in_ms={}", node_,
                   links_.Target(failed_link), CodeName(code), reason, retry_in_ms);
  } else {
    AgentLog().log(news ? spdlog::level::warn : spdlog::level::debug,
                   "agent_disconnected node={} controller={} code={} error={:?} retry_in_ms={} "
                   "queued_events={} next={}",
                   node_, links_.Target(failed_link), CodeName(code), reason, retry_in_ms,
                   events_.size(), links_.Target(link_));
  }
  state_ = State::kWaiting;
  retry_timer_.expires_after(std::chrono::milliseconds(retry_in_ms));
  retry_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error || state_ != State::kWaiting) return;
    Connect();
  });
}

void AgentSession::Stop(std::function<void()> on_stopped) {
  retry_timer_.cancel();
  heartbeat_timer_.cancel();
  fence_timer_.cancel();
  events_.clear();
  if (!stream_) {
    state_ = State::kStopped;
    boost::asio::post(loop_, std::move(on_stopped));
    return;
  }
  on_stopped_ = std::move(on_stopped);
  // When already closing on a failure, on_done is on its way.
  if (state_ != State::kClosing) {
    state_ = State::kClosing;
    stream_->Close(CloseMode::kCancel);
  }
}

}  // namespace cohort::agent
