// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agents/nvlink_domains.h"
#include "agents/usage_book.h"
#include "cohort/engine/engine.h"
#include "cohort/v1/cohort.pb.h"
#include "job_submit_policy.h"
#include "store/wire.h"

namespace cohort::controller {

/// What the controller's parts share on the state thread: the engine and
/// the texts of jobs the engine does not keep. Owned by the Controller;
/// every part holds a reference and uses it on the state thread only.
struct ControllerState {
  ControllerState(config::ClusterConfig cluster_config, std::unique_ptr<topology::Topology> cluster,
                  alloc::NodePool pool)
      : config(std::move(cluster_config)),
        topology(std::move(cluster)),
        engine(config, *topology, std::move(pool)) {}

  /// The wall clock as the engine counts time. Any thread.
  [[nodiscard]] static Millis Now() {
    return std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch());
  }

  config::ClusterConfig config;
  NodeKinds node_kinds{config};  ///< for checking bindings at submission
  std::unique_ptr<topology::Topology> topology;
  Engine engine;
  /// The NVLink domains nodes report at registration (AgentHub records
  /// them; GetTopology tells `cohort config check --live` what disagrees).
  NvlinkDomains nvlink_domains;
  std::unordered_map<JobId, v1::JobSpec> specs;  ///< as submitted, without the environment
  std::unordered_map<JobId, v1::JobSpec> envs;   ///< environments, until the job ends
  /// Where each rank of a running job runs, as its agents reported.
  std::unordered_map<JobId, std::vector<v1::RankBinding>> bindings;
  /// What each running step runs (its command, environment and files) and
  /// where its output goes, by job and step, until the step ends.
  struct StepOrder {
    v1::JobSpec spec;
    v1::StepIo io;
  };
  std::map<std::pair<JobId, int>, StepOrder> step_specs;
  /// The site's submit policy (JobSubmitPlugins=lua), run on the state
  /// thread; null: none.
  std::shared_ptr<policy::JobSubmitPolicy> job_submit;
  /// Pending jobs' container images pulled ahead (ImagePrefetch): what to
  /// tell of each, while there is something.
  std::unordered_map<JobId, std::string> image_status;
  /// What running launches use now, as their agents sampled it.
  UsageBook usage;

  /// The job as the API shows it (store/wire.h's JobToWire, with what only
  /// the controller knows).
  void JobToWire(const Job& job, int queue_position, v1::Job* out) {
    controller::JobToWire(job, specs[job.id], engine, queue_position, out);
    if (const auto it = image_status.find(job.id); it != image_status.end()) {
      out->set_image_status(it->second);
    }
    if (job.state == JobState::kRunning) {
      if (std::optional<v1::LiveUsage> now = usage.Whole(job.id)) *out->mutable_usage() = *now;
    }
  }
};

/// Carries out what the engine decided (records, commands, events, the next
/// pass). Implemented by the Controller; parts that call the engine hand it
/// their effects. State thread only.
class EffectSink {
 public:
  virtual ~EffectSink() = default;
  /// Executes `effects` and leaves it empty.
  virtual void Execute(Effects& effects) = 0;
};

}  // namespace cohort::controller
