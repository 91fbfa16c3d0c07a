// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cohort/engine/engine.h"
#include "cohort/v1/cohort.pb.h"
#include "controller_state.h"

namespace cohort::controller {

/// What a pending job's image pull ahead says, for `cohort show job` and
/// `cohort why`: "pulling image: 3 of 8 nodes ready", "image ready on its
/// 8 planned nodes", or the first failure. `failed` holds a node's name and
/// what its pull said. Pure.
[[nodiscard]] std::string ImageStatusLine(
    int ready, int planned, const std::vector<std::pair<std::string, std::string>>& failed);

/// Pulls pending jobs' container images ahead of their start
/// (docs/containers.md): a job with an image whose start the engine has
/// planned (a backfill reservation, or a preemption's victims' nodes)
/// within ContainerPullAhead= gets a PrepareImage sent to each planned node
/// once, and the nodes' answers make its status (ControllerState's
/// image_status, which `cohort show job` and `cohort why` show). A failed pull is
/// asked again after kRetryAfter, an unanswered one after kAskAgainAfter (a
/// message lost with a stream); a job that starts, ends or leaves the queue
/// is forgotten (its stepds pull at the start in any case). State thread
/// only.
class ImagePrefetch {
 public:
  /// Sends to a node's agent now; false when it has no stream.
  using Send = std::function<bool(NodeId, v1::ControllerMessage)>;
  static constexpr Millis kRetryAfter = std::chrono::minutes(1);
  static constexpr Millis kAskAgainAfter = std::chrono::minutes(10);
  /// How much of a failed pull's words is kept (agents' reports are bounded).
  static constexpr std::size_t kMaxErrorBytes = 512;

  ImagePrefetch(ControllerState& state, Send send) : state_(state), send_(std::move(send)) {}

  /// Jobs that changed: new pending ones with an image are followed.
  void Changed(const std::vector<JobId>& jobs);
  /// Asks the planned nodes of the jobs followed for what is due, and
  /// remakes their status; forgets jobs no longer pending. Every tick.
  void Review(Millis now);
  /// A node's answer to PrepareImage.
  void OnPrepared(NodeId node, const v1::ImagePrepared& prepared, Millis now);
  [[nodiscard]] std::size_t Followed() const { return jobs_.size(); }

 private:
  enum class Asked { kWaiting, kReady, kFailed };
  struct NodeAnswer {
    Asked state = Asked::kWaiting;
    Millis at{0};  ///< asked (kWaiting) or answered
    std::string error;
  };
  struct Wanted {
    std::string image;
    std::uint32_t uid = 0;
    std::map<NodeId, NodeAnswer> nodes;
  };
  void Ask(JobId id, Wanted& job, NodeId node, Millis now);

  ControllerState& state_;
  Send send_;
  std::unordered_map<JobId, Wanted> jobs_;
};

}  // namespace cohort::controller
