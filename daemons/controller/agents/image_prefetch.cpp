// SPDX-License-Identifier: Apache-2.0
#include "image_prefetch.h"

#include <fmt/format.h>

#include "controller_log.h"

namespace cohort::controller {

std::string ImageStatusLine(int ready, int planned,
                            const std::vector<std::pair<std::string, std::string>>& failed) {
  if (!failed.empty()) {
    return fmt::format(
        "image pull ahead failed on {}{}: {}; it is tried again, and at the start ({} of {} "
        "planned nodes ready)",
        failed.front().first,
        failed.size() > 1 ? fmt::format(" and {} more", failed.size() - 1) : "",
        failed.front().second, ready, planned);
  }
  if (ready < planned) return fmt::format("pulling image: {} of {} nodes ready", ready, planned);
  return fmt::format("image ready on its {} planned node{}", planned, planned == 1 ? "" : "s");
}

void ImagePrefetch::Changed(const std::vector<JobId>& jobs) {
  if (state_.config.container_pull_ahead.count() == 0) return;
  for (const JobId id : jobs) {
    if (jobs_.contains(id)) continue;
    const auto spec = state_.specs.find(id);
    if (spec == state_.specs.end() || spec->second.container().image().empty()) continue;
    const Job* job = state_.engine.FindJob(id);
    if (job == nullptr || job->state != JobState::kPending) continue;
    jobs_.emplace(
        id,
        Wanted{.image = spec->second.container().image(), .uid = job->request.uid, .nodes = {}});
  }
}

void ImagePrefetch::Ask(JobId id, Wanted& job, NodeId node, Millis now) {
  v1::ControllerMessage message;
  v1::PrepareImage& prepare = *message.mutable_prepare_image();
  prepare.set_job_id(id);
  prepare.set_uid(job.uid);
  prepare.set_image(job.image);
  NodeAnswer& answer = job.nodes[node];
  if (!send_(node, std::move(message))) {
    // Asked again at the next review: its agent may be back by then.
    job.nodes.erase(node);
    return;
  }
  Log("launch")->debug("image_ahead_asked job={} node={} image={:?}", id,
                       state_.topology->NodeName(node), job.image);
  answer = NodeAnswer{.state = Asked::kWaiting, .at = now, .error = {}};
}

void ImagePrefetch::Review(Millis now) {
  const Millis ahead = state_.config.container_pull_ahead;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const Job* job = state_.engine.FindJob(it->first);
    if (job == nullptr || job->state != JobState::kPending) {
      state_.image_status.erase(it->first);
      it = jobs_.erase(it);
      continue;
    }
    Wanted& followed = it->second;
    const bool due =
        !job->cache.planned_nodes.empty() &&
        (job->cache.expected_start.count() == 0 || job->cache.expected_start - now <= ahead);
    if (!due) {
      state_.image_status.erase(it->first);
      ++it;
      continue;
    }
    int ready = 0;
    std::vector<std::pair<std::string, std::string>> failed;
    for (const NodeId node : job->cache.planned_nodes) {
      const auto asked = followed.nodes.find(node);
      if (asked == followed.nodes.end() ||
          (asked->second.state == Asked::kFailed && now - asked->second.at >= kRetryAfter) ||
          (asked->second.state == Asked::kWaiting && now - asked->second.at >= kAskAgainAfter)) {
        Ask(it->first, followed, node, now);
      }
      const auto answer = followed.nodes.find(node);
      if (answer == followed.nodes.end()) continue;
      if (answer->second.state == Asked::kReady) ++ready;
      if (answer->second.state == Asked::kFailed) {
        failed.emplace_back(state_.topology->NodeName(node), answer->second.error);
      }
    }
    state_.image_status[it->first] =
        ImageStatusLine(ready, static_cast<int>(job->cache.planned_nodes.size()), failed);
    ++it;
  }
}

void ImagePrefetch::OnPrepared(NodeId node, const v1::ImagePrepared& prepared, Millis now) {
  const auto it = jobs_.find(prepared.job_id());
  if (it == jobs_.end() || it->second.image != prepared.image()) return;
  const auto asked = it->second.nodes.find(node);
  if (asked == it->second.nodes.end()) return;  // not asked of this node
  NodeAnswer& answer = asked->second;
  answer.at = now;
  if (prepared.ok()) {
    answer.state = Asked::kReady;
    answer.error.clear();
    Log("launch")->info("image_ahead_ready job={} node={} digest={} bytes={}", prepared.job_id(),
                        state_.topology->NodeName(node), prepared.digest().substr(0, 80),
                        prepared.bytes());
  } else {
    answer.state = Asked::kFailed;
    answer.error = prepared.error().substr(0, kMaxErrorBytes);
    Log("launch")->warn("image_ahead_failed job={} node={} reason={:?}", prepared.job_id(),
                        state_.topology->NodeName(node), answer.error);
  }
}

}  // namespace cohort::controller
