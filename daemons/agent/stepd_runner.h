// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent_metrics.h"
#include "agent_options.h"
#include "child_reaper.h"
#include "cohort/engine/engine_types.h"
#include "cohort/v1/cohort.grpc.pb.h"
#include "gpu_usage.h"
#include "image_prefetcher.h"
#include "job_scripts.h"
#include "launch_file.h"
#include "launch_runner.h"
#include "launch_tracker.h"
#include "step_events.h"
#include "step_launcher.h"

/// A real node's launches: a cohort-stepd each.
namespace cohort::agent {

/// What a real node's launches share: where a launch's prolog and epilog
/// come from, whether ranks are bound, and the name of the cluster.
struct StepdSettings {
  std::string cluster_name;  ///< used when a Launch names none
  /// Bind ranks to their CPUs and NUMA memory. Off for emulated nodes, whose
  /// layouts are not this host's: their plans are computed and reported only.
  bool apply_binding = true;
  /// Prolog=, Epilog= and PrologEpilogTimeout (job_scripts.h); empty: none.
  std::string prolog;
  std::string epilog;
  std::chrono::seconds script_timeout{300};
  /// Where steps' containers come from and live (docs/containers.md): the
  /// image cache, its bound and the registries' CA file (ContainerCacheDir=,
  /// ContainerCacheMaxGB=, ContainerRegistryCAFile=), and the folder that
  /// holds each job's named containers until the job leaves the node.
  step::ImageStore container_images;  ///< and ContainerCredentialsFile=, ContainerRegistryMirrors=
  std::string container_hooks_dir;    ///< ContainerHooksDir=
  std::string container_state_dir;
  /// SwitchType=switch/nvidia_imex: where the IMEX channels' device files
  /// are and their major (-1: from /proc/devices); empty dir: no IMEX.
  std::string imex_channel_dir;
  int imex_dev_major = -1;
  /// JobAcctGatherFrequency: how often what live launches use is sampled
  /// and sent (UsageReport); 0: never. `gpus` reads the node's GPUs (null:
  /// no NVML); it outlives the runner.
  std::chrono::seconds gather_interval{0};
  const GpuUsageReader* gpus = nullptr;
};

/// Runs each Launch as a spool folder and a cohort-stepd that starts and
/// reaps the ranks and appends what happens to the folder's event file;
/// turns those events into RanksStarted, RankExited, LaunchFailed and
/// JobReleased, and Signal and Terminate into signals to the ranks' process
/// group. The job's prolog runs before its first launch here, its epilog
/// before JobReleased.
///
/// A launch's events are read when its stepd pokes the agent's socket
/// (OnStepNotice), on Poll (every second), and when the stepd exits. A stepd
/// this runner started is watched by the reaper; one it adopted from an
/// earlier agent (Start scans the node's spool folder) by Poll, through
/// /proc (its pid and start time). A stepd gone before `done` takes its
/// ranks with it: they are killed and reported killed. Finished launches
/// stay in the spool, and in Register's `finished`, for kFinishedRetention.
/// The reaper and launcher must outlive it.
class StepdRunner final : public LaunchRunner {
 public:
  /// How long a finished launch is kept and reported in Register.
  static constexpr std::chrono::minutes kFinishedRetention = kAgentKeepsFinishedLaunches;

  StepdRunner(boost::asio::io_context& loop, StepdSettings settings, const NodeSetup& setup,
              ChildReaper& reaper, const StepLauncher& launcher, ImagePrefetcher& images,
              SendToController send);
  ~StepdRunner() override { *alive_ = false; }

  void Start() override;
  void Launch(const v1::Launch& launch) override;
  void Signal(const v1::Signal& signal) override;
  void Terminate(const v1::Terminate& terminate) override;
  void PrepareImage(const v1::PrepareImage& prepare) override;
  void AddTo(v1::Register& message) const override;
  void Poll() override;
  void OnStepNotice(step::LaunchId id) override;
  void Stop() override;
  void Fence() override;
  [[nodiscard]] std::size_t LiveRanks() const override;
  void AddMetrics(NodeMetrics& metrics) const override;

 private:
  enum class StepdWatch {
    kReaper,  ///< this agent's child: the reaper reports its exit
    kPoll,    ///< none yet, or an earlier agent's: Poll checks /proc
  };
  struct Run {
    explicit Run(LaunchTracker launch_tracker) : tracker(std::move(launch_tracker)) {}
    LaunchTracker tracker;
    StepdWatch watch = StepdWatch::kPoll;
    std::uint64_t serial = 0;  ///< tells this launch from a later one with the same id
    std::string program;       ///< for logs; empty when adopted
    std::chrono::steady_clock::time_point seen;             ///< when this agent took it on
    std::unique_ptr<boost::asio::steady_timer> kill_timer;  ///< armed by Terminate
    /// Signals and Terminate that came before every rank ran: sent once they
    /// do.
    std::vector<int> pending_signals;
    std::vector<int> pending_batch_signals;  ///< the same for global rank 0 alone (--signal=B:)
    std::optional<std::chrono::steady_clock::time_point> pending_kill_at;
    std::chrono::system_clock::time_point ended_at{};  ///< once done
    std::vector<v1::RankBinding> bindings;  ///< the binding plan, reported with RanksStarted
    bool batch = false;      ///< the job's batch script (signals to "every rank" pass it by)
    std::vector<int> cpus;   ///< the PUs it holds (binding::GrantCpus); empty: none
    std::uint64_t gpus = 0;  ///< mask of the GPUs it holds
    /// What the samples saw: each rank's largest resident memory, and its
    /// GPUs' utilization and memory in use (per GPU: each sample's average
    /// added up, and the most of one), reported with each rank's end.
    std::map<int, std::int64_t> peak_rss_kb;
    int gpu_samples = 0;
    std::int64_t gpu_util_sum = 0;
    int gpu_util_max = 0;
    std::int64_t gpu_mem_max_mb = 0;
    std::int64_t gpu_mem_sum_mb = 0;
  };
  using Runs = std::map<step::LaunchId, Run>;

  /// Starts the launch, its job's prolog done (Launch's work).
  void LaunchNow(const v1::Launch& launch);
  /// Tells the controller that Prolog= or Epilog= failed here.
  void SendScriptFailed(std::int64_t job_id, int attempt, std::string_view script,
                        const std::string& reason);
  /// Signals one launch's ranks (or, `only_first`, its first rank alone);
  /// holds the signal until they run. False when nothing was reached.
  bool SignalLaunch(step::LaunchId id, Run& run, int signal, bool only_first);
  /// SIGTERM to one launch's ranks now (or once they run), SIGKILL at
  /// `deadline`.
  void TerminateLaunch(step::LaunchId id, Run& run, std::chrono::steady_clock::time_point deadline,
                       std::int64_t wait_ms);
  /// The PUs a new launch takes: whole cores its job holds here or no other
  /// job does (binding::GrantCpus), logged when the node has too few.
  [[nodiscard]] std::vector<int> GrantCpus(step::LaunchId id, const v1::Launch& launch) const;
  void Adopt();
  /// Plans a new launch and starts its stepd; the status says why not.
  [[nodiscard]] absl::Status StartLaunch(step::LaunchId id, Run& run, const v1::Launch& message);
  void OnStepdExit(step::LaunchId id, std::uint64_t serial, int wait_status);
  /// Reads the launch's new events and acts on them.
  void Refresh(step::LaunchId id, Run& run);
  /// Ends a launch whose stepd is gone (or never came) before `done`.
  void Abandon(step::LaunchId id, Run& run, std::string_view reason);
  void Forward(step::LaunchId id, Run& run, const step::LaunchReport& report);
  /// Once the launch is done: when it ended, from its event file.
  static void NoteEnd(Run& run);
  /// Samples what every live launch uses and sends it (UsageReport).
  void SampleUsage();
  void ArmKill(step::LaunchId id, Run& run, std::chrono::steady_clock::time_point at);
  /// The launches of `job_id` (its own and its steps') whose ranks may
  /// still run.
  [[nodiscard]] std::vector<Runs::value_type*> Unfinished(std::int64_t job_id);
  /// A launch of the job ended: JobReleased once nothing of it is left here,
  /// if its own launch ran here or the controller asked (Terminate).
  void MaybeReleased(std::int64_t job_id, int attempt);
  void SendJobReleased(std::int64_t job_id, int attempt);
  /// JobReleased itself, once the epilog (if any) ran.
  void SendReleasedNow(std::int64_t job_id, int attempt);

  boost::asio::io_context& loop_;
  const StepdSettings settings_;
  const NodeSetup& setup_;
  ChildReaper& reaper_;
  const StepLauncher& launcher_;
  SendToController send_;
  /// The device number of each GPU's file, by index (GpuDevices).
  const std::vector<std::optional<dev_t>> gpu_devices_;
  Runs runs_;
  /// Jobs told to stop here (Terminate without a step), until JobReleased.
  std::set<std::int64_t> terminating_;
  std::uint64_t serials_ = 0;
  std::chrono::steady_clock::time_point next_sample_{};
  std::unique_ptr<JobScripts> scripts_;  ///< set when the cluster has a Prolog or an Epilog
  NodeMetrics counters_;                 ///< launches started and failed, stepd start times
  ImagePrefetcher& images_;
  /// Cleared when this goes: a pull ahead that ends later answers no one.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cohort::agent
