// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/launch/io_frame.h"
#include "launch_file.h"
#include "rank_spawner.h"
#include "step_events.h"
#include "tls_session.h"

/// cohort-stepd's side of a step's I/O stream (cohort/io_frame.h): the
/// ranks' stdout and stderr go over the network to the `cohort run` that
/// started the step, and its stdin comes back to the rank that reads it, so
/// that nothing of a step's output needs a shared filesystem.
namespace cohort::step {

class StepIoForwarder {
 public:
  /// Dials the launch's io.address (waiting up to 10 s), secures the
  /// stream with TLS keyed by the step's key (tls::TlsSession::StartPsk),
  /// says Hello, and makes each rank's pipes. Unavailable, naming the
  /// address and what to do, when `cohort run` cannot be reached or fails
  /// the handshake; the errno's status when pipes cannot be made.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<StepIoForwarder>> Open(
      const LaunchFile& file);
  ~StepIoForwarder();
  StepIoForwarder(const StepIoForwarder&) = delete;
  StepIoForwarder& operator=(const StepIoForwarder&) = delete;

  /// The child's ends of each rank's pipes, in the launch's rank order, for
  /// SpawnRanks.
  [[nodiscard]] const std::vector<RankStdio>& ChildEnds() const { return child_ends_; }
  /// Closes the child's ends in the stepd once the ranks have them, so that
  /// their output reaches its end when they exit.
  void CloseChildEnds();

  /// Forwards output and stdin while reaping the ranks of `live` (pid →
  /// rank): each exit goes to `on_exit` as it is reaped. Returns once every
  /// rank is reaped and its output sent, or 2 s after the last one was
  /// reaped when something they started still holds their output open;
  /// then runs `before_done` (when given: what the step does once its ranks
  /// are gone, which may Queue output of its own) and says Done. A `cohort
  /// run` gone away is not waited for: output is then read and dropped, so
  /// the ranks never block on it.
  void Run(std::map<pid_t, int> live, const std::function<void(const RankExitEvent&)>& on_exit,
           const std::function<void()>& before_done = nullptr);

  /// Sends `frame` from Run's thread; any thread may call it (the PMIx
  /// server's, with a fence's part or a rank's abort message).
  void Queue(io::Frame frame);
  /// The address of this node that reached `cohort run` ("HOST"), which
  /// the step's other nodes reach too.
  [[nodiscard]] std::string Host() const;
  /// What Run does with each kFenceDone from `cohort run`: the fence's number
  /// and every node's part, or why the fence failed. Set before Run.
  void OnFenceDone(std::function<void(int, absl::StatusOr<std::string>)> handler) {
    on_fence_done_ = std::move(handler);
  }

 private:
  StepIoForwarder() = default;
  struct Pipe;
  void Send(int kind, int rank, std::string_view data);
  void SendQueued();

  int socket_ = -1;
  std::unique_ptr<tls::TlsSession> tls_;  ///< the stream's TLS, keyed by the step's key
  bool connected_ = false;
  std::vector<RankStdio> child_ends_;
  std::vector<std::unique_ptr<Pipe>> pipes_;  ///< the stepd's ends: output, then stdin
  int stdin_rank_ = -1;
  int pty_master_ = -1;  ///< --pty: the terminal's master (owned by its pipes)
  std::mutex queue_mutex_;
  std::vector<io::Frame> queued_;  ///< Queue's frames, for Run to send
  int queue_wake_[2] = {-1, -1};   ///< Queue writes a byte to wake Run's poll
  std::function<void(int, absl::StatusOr<std::string>)> on_fence_done_;
};

}  // namespace cohort::step
