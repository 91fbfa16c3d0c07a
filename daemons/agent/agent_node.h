// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "agent_metrics.h"
#include "agent_options.h"
#include "agent_session.h"
#include "child_reaper.h"
#include "cohort/launch/binding.h"
#include "cohort/config/cluster_config.h"
#include "cohort/v1/cohort.grpc.pb.h"
#include "fake_runner.h"
#include "health_check.h"
#include "job_scripts.h"
#include "launch_file.h"
#include "launch_tracker.h"
#include "step_events.h"
#include "step_launcher.h"

/// One node the agent speaks for, real or emulated.
namespace cohort::agent {

/// What every node of one agent shares.
struct NodeEnvironment {
  /// How the node proves itself when it registers: a fresh MUNGE credential
  /// (kMunge) or the cluster key (kNone).
  config::AuthType auth_type = config::AuthType::kMunge;
  std::string munge_socket;  ///< AuthInfo=socket=; empty: libmunge's default
  std::string auth_key;      ///< AuthType=none
  std::string cluster_name;  ///< used when a Launch names none
  /// Bind ranks to their CPUs and NUMA memory. Off for emulated nodes, whose
  /// layouts are not this host's: their plans are computed and reported only.
  bool apply_binding = true;
  /// Run no process: launches are played by a FakeRunner (--fake-exec).
  bool fake_exec = false;
  /// HealthCheckProgram and HealthCheckInterval (health_check.h); empty or
  /// 0: no check.
  std::string health_program;
  std::chrono::seconds health_interval{0};
  /// Prolog=, Epilog= and PrologEpilogTimeout (job_scripts.h); empty: none.
  std::string prolog;
  std::string epilog;
  std::chrono::seconds script_timeout{300};
};

/// One node: its stream to the controller (an AgentSession) and its
/// launches. Each Launch becomes a spool folder and a cohort-stepd that
/// starts and reaps the ranks and appends what happens to the folder's event
/// file; the node turns those events into RanksStarted, RankExited,
/// LaunchFailed and JobReleased, and Signal and Terminate into signals to
/// the ranks' process group. Validates what the controller sends: a bad
/// message is logged and answered, never fatal. Lives on, and is used only
/// from, the agent's loop thread; the reaper, launcher and stub must outlive
/// it.
///
/// A launch's events are read when its stepd pokes the agent's socket
/// (OnStepNotice), on Poll (every second), and when the stepd exits. A stepd
/// the agent started is watched by the reaper; one it adopted from an
/// earlier agent (Start scans the node's spool folder) by Poll, through
/// /proc (its pid and start time). A stepd gone before `done` takes its
/// ranks with it: they are killed and reported killed. Finished launches
/// stay in the spool, and in Register's `finished`, for kFinishedRetention.
///
/// With NodeEnvironment::fake_exec, Launch, Signal and Terminate go to a
/// FakeRunner instead: no stepd, no spool folder, no process.
class AgentNode {
 public:
  /// How long a finished launch is kept and reported in Register.
  static constexpr std::chrono::minutes kFinishedRetention{10};

  AgentNode(boost::asio::io_context& loop, ControllerLinks& links,
            const NodeEnvironment& environment, NodeSetup setup, ChildReaper& reaper,
            const StepLauncher& launcher);
  AgentNode(const AgentNode&) = delete;
  AgentNode& operator=(const AgentNode&) = delete;

  /// Adopts the launches an earlier agent left in the spool, then connects
  /// to the controller.
  void Start();
  /// Closes the stream; ranks keep running. Calls `on_stopped` on the loop.
  void Stop(std::function<void()> on_stopped);

  /// A stepd says its launch has news.
  void OnStepNotice(step::LaunchId id);
  /// Reads every unfinished launch's events, notices adopted stepds that
  /// ended, and forgets finished launches past kFinishedRetention.
  void Poll();

  [[nodiscard]] const std::string& Name() const { return setup_.name; }
  [[nodiscard]] std::size_t LiveRanks() const;
  /// This node's metrics now (agent_metrics.h).
  [[nodiscard]] NodeMetrics Metrics() const;

 private:
  enum class StepdWatch {
    kReaper,  ///< this agent's child: the reaper reports its exit
    kPoll,    ///< none yet, or an earlier agent's: Poll checks /proc
  };
  struct Launch {
    explicit Launch(LaunchTracker launch_tracker) : tracker(std::move(launch_tracker)) {}
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
    bool batch = false;  ///< the job's batch script (signals to "every rank" pass it by)
    std::vector<int> cpus;  ///< the PUs it holds (binding::GrantCpus); empty: none
    std::uint64_t gpus = 0;  ///< mask of the GPUs it holds
  };

  [[nodiscard]] v1::Register MakeRegister() const;
  void OnMessage(const v1::ControllerMessage& message);
  void OnLaunch(const v1::Launch& launch);
  /// Starts the launch, its job's prolog done (OnLaunch's work).
  void LaunchNow(const v1::Launch& launch);
  /// Tells the controller that Prolog= or Epilog= failed here.
  void SendScriptFailed(std::int64_t job_id, int attempt, std::string_view script,
                        const std::string& reason);
  void OnSignal(const v1::Signal& signal);
  void OnTerminate(const v1::Terminate& terminate);
  /// Signals one launch's ranks (or, `only_first`, its first rank alone);
  /// holds the signal until they run. False when nothing was reached.
  bool SignalLaunch(step::LaunchId id, Launch& launch, int signal, bool only_first);
  /// SIGTERM to one launch's ranks now (or once they run), SIGKILL at
  /// `deadline`.
  void TerminateLaunch(step::LaunchId id, Launch& launch,
                       std::chrono::steady_clock::time_point deadline, std::int64_t wait_ms);
  [[nodiscard]] step::LaunchPlan MakePlan(const v1::Launch& launch) const;
  /// Each local rank's GPUs, CPUs, NUMA node and NICs on this node's layout,
  /// the CPUs among `cpus` (the launch's grant; empty: the whole node).
  [[nodiscard]] absl::StatusOr<std::vector<binding::RankBinding>> PlanBindings(
      const v1::Launch& launch, std::span<const int> cpus) const;
  /// The PUs a new launch takes: whole cores its job holds here or no other
  /// job does (binding::GrantCpus), logged when the node has too few.
  [[nodiscard]] std::vector<int> GrantCpus(step::LaunchId id, const v1::Launch& launch) const;
  [[nodiscard]] static std::vector<v1::RankBinding> ReportBindings(
      const std::vector<binding::RankBinding>& bindings, const v1::Launch& launch,
      const std::string& node);
  void Adopt();
  /// Plans a new launch and starts its stepd; the status says why not.
  [[nodiscard]] absl::Status StartLaunch(step::LaunchId id, Launch& launch,
                                         const v1::Launch& message);
  void OnStepdExit(step::LaunchId id, std::uint64_t serial, int wait_status);
  /// Reads the launch's new events and acts on them.
  void Refresh(step::LaunchId id, Launch& launch);
  /// Ends a launch whose stepd is gone (or never came) before `done`.
  void Abandon(step::LaunchId id, Launch& launch, std::string_view reason);
  void Forward(step::LaunchId id, Launch& launch, const step::LaunchReport& report);
  /// Once the launch is done: when it ended, from its event file.
  static void NoteEnd(Launch& launch);
  void ArmKill(step::LaunchId id, Launch& launch, std::chrono::steady_clock::time_point at);
  /// The launches of `job_id` (its own and its steps') whose ranks may
  /// still run.
  [[nodiscard]] std::vector<std::pair<const step::LaunchId, Launch>*> Unfinished(
      std::int64_t job_id);
  /// A launch of the job ended: JobReleased once nothing of it is left here,
  /// if its own launch ran here or the controller asked (Terminate).
  void MaybeReleased(std::int64_t job_id, int attempt);
  void SendJobReleased(std::int64_t job_id, int attempt);
  /// JobReleased itself, once the epilog (if any) ran.
  void SendReleasedNow(std::int64_t job_id, int attempt);

  boost::asio::io_context& loop_;
  const NodeEnvironment& environment_;
  const NodeSetup setup_;
  ChildReaper& reaper_;
  const StepLauncher& launcher_;
  /// The device number of each GPU's file, by index (GpuDevices).
  const std::vector<std::optional<dev_t>> gpu_devices_;
  std::map<step::LaunchId, Launch> launches_;
  /// Jobs told to stop here (Terminate without a step), until JobReleased.
  std::set<std::int64_t> terminating_;
  std::uint64_t serials_ = 0;
  AgentSession session_;
  std::unique_ptr<FakeRunner> fake_;  ///< set under fake execution
  std::unique_ptr<HealthCheck> health_;  ///< set when the cluster has a health check
  std::unique_ptr<JobScripts> scripts_;
  NodeMetrics metrics_;  ///< the counters; Metrics() adds what is alive  ///< set when the cluster
                         ///< has a Prolog or an Epilog
};

}  // namespace cohort::agent
