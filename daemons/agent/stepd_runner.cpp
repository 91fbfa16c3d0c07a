// SPDX-License-Identifier: Apache-2.0
#include "stepd_runner.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iterator>
#include <limits>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "agent_log.h"
#include "cohort/fmt_absl.h"
#include "cohort/launch/binding.h"
#include "cohort/launch/node_layout.h"
#include "cohort/text/hostlist.h"
#include "launch_isolation.h"
#include "launch_plans.h"
#include "launch_tasks.h"
#include "process_usage.h"

namespace cohort::agent {
namespace {

// A Terminate's grace period is capped: a nonsense value must not keep a
// gang's resources held forever.
constexpr std::int64_t kMaxKillWaitMs = 24LL * 3600 * 1000;
// How long a stepd may take to write its first line before its launch is
// given up (only for stepds that are not this agent's children).
constexpr std::chrono::seconds kStepdStartTimeout{10};

// Ranks as a hostlist-like range text for logs: 0-3, or 4,6.
std::string RankText(const std::map<int, pid_t>& ranks) {
  std::vector<std::string> names;
  names.reserve(ranks.size());
  for (const auto& [rank, pid] : ranks) names.push_back(fmt::format("r{}", rank));
  std::string text = hostlist::Compress(names);
  // r[0-3] reads better as 0-3.
  if (text.starts_with("r[") && text.ends_with(']')) return text.substr(2, text.size() - 3);
  return text.starts_with('r') ? text.substr(1) : text;
}

std::string WaitStatusText(int wait_status) {
  if (WIFSIGNALED(wait_status)) return fmt::format("signal {}", SignalName(WTERMSIG(wait_status)));
  return fmt::format("exit code {}", WEXITSTATUS(wait_status));
}

}  // namespace

StepdRunner::StepdRunner(boost::asio::io_context& loop, StepdSettings settings,
                         const NodeSetup& setup, ChildReaper& reaper, const StepLauncher& launcher,
                         ImagePrefetcher& images, SendToController send)
    : loop_(loop),
      settings_(std::move(settings)),
      setup_(setup),
      reaper_(reaper),
      launcher_(launcher),
      send_(std::move(send)),
      gpu_devices_(GpuDevices(setup_.gpu_files)),
      images_(images) {}

void StepdRunner::PrepareImage(const v1::PrepareImage& prepare) {
  const std::int64_t job_id = prepare.job_id();
  LaunchLog().info("image_ahead job={} node={} image={:?}", job_id, setup_.name, prepare.image());
  images_.Pull(prepare.uid(), prepare.image(),
               [this, alive = alive_, job_id,
                image = prepare.image()](const ImagePrefetcher::Outcome& outcome) {
                 if (!*alive) return;
                 counters_.CountImageAhead(outcome.ok, outcome.cached, outcome.bytes);
                 v1::AgentMessage message;
                 v1::ImagePrepared& prepared = *message.mutable_image_prepared();
                 prepared.set_job_id(job_id);
                 prepared.set_image(image);
                 prepared.set_ok(outcome.ok);
                 prepared.set_error(outcome.error);
                 prepared.set_digest(outcome.digest);
                 prepared.set_bytes(outcome.cached ? 0 : outcome.bytes);
                 send_(std::move(message));
               });
}

void StepdRunner::Start() {
  Adopt();
  if (!settings_.prolog.empty() || !settings_.epilog.empty()) {
    scripts_ = std::make_unique<JobScripts>(loop_, reaper_, settings_.prolog, settings_.epilog,
                                            settings_.script_timeout, setup_.name,
                                            launcher_.NodeFolder(setup_.name));
  }
}

void StepdRunner::Stop() {
  *alive_ = false;
  if (scripts_) scripts_->Stop();
  // The agent leaves the ranks running, and a pending SIGKILL would keep its
  // loop alive.
  for (auto& [id, run] : runs_) {
    if (run.kill_timer) run.kill_timer->cancel();
  }
}

std::size_t StepdRunner::LiveRanks() const {
  std::size_t count = 0;
  for (const auto& [id, run] : runs_) count += run.tracker.Record().LiveRanks().size();
  return count;
}

void StepdRunner::AddMetrics(NodeMetrics& metrics) const {
  metrics.launches_started += counters_.launches_started;
  metrics.launches_failed += counters_.launches_failed;
  metrics.stepd_start = counters_.stepd_start;
  metrics.image_pulls = counters_.image_pulls;
  metrics.image_pull_bytes = counters_.image_pull_bytes;
  metrics.images_ahead = counters_.images_ahead;
  metrics.image_pull_time = counters_.image_pull_time;
  for (const auto& [id, run] : runs_) {
    if (!run.tracker.Record().LiveRanks().empty()) metrics.gpus_allocated |= run.gpus;
  }
}

void StepdRunner::AddTo(v1::Register& message) const {
  for (const auto& [id, run] : runs_) {
    const step::LaunchRecord& record = run.tracker.Record();
    if (!record.Done()) {
      // Listed even before its ranks run: the controller placed the job here.
      v1::RunningJob* running = message.add_running();
      running->set_job_id(id.job_id);
      running->set_attempt(id.attempt);
      if (id.step != step::kOwnLaunch) running->set_step(id.step);
      for (const auto& [rank, pid] : record.LiveRanks()) running->add_ranks(rank);
      running->set_ranks_ok(record.RanksOk());
      continue;
    }
    v1::FinishedJob* finished = message.add_finished();
    finished->set_job_id(id.job_id);
    finished->set_attempt(id.attempt);
    if (id.step != step::kOwnLaunch) finished->set_step(id.step);
    finished->set_ranks(record.RanksStarted());
    finished->set_ranks_ok(record.RanksOk());
    if (const std::optional<step::RankExitEvent>& failure = record.FirstFailure()) {
      finished->set_failed(true);
      finished->set_exit_code(failure->exit_code);
      finished->set_signal(failure->signal);
    }
    finished->set_launch_error(record.LaunchError());
    finished->set_max_rss_kb(record.MaxRssKb());
    finished->set_cpu_ms(record.CpuMs());
  }
}

std::vector<int> StepdRunner::GrantCpus(step::LaunchId id, const v1::Launch& launch) const {
  std::vector<int> own;
  std::vector<int> held;
  for (const auto& [other_id, other] : runs_) {
    if (other_id == id || other.tracker.Record().Done()) continue;
    std::vector<int>& into = other_id.job_id == id.job_id ? own : held;
    into.insert(into.end(), other.cpus.begin(), other.cpus.end());
  }
  const binding::CpuGrant grant =
      binding::GrantCpus(setup_.layout, own, held, launch.gpus(), launch.cpus());
  if (grant.shared_cores > 0) {
    LaunchLog().warn("cores_shared job={} step={} node={} cores={} reason={:?}", id.job_id,
                     StepText(id), setup_.name, grant.shared_cores,
                     "the node has fewer free whole cores than the launch was granted CPUs");
  }
  return grant.pus;
}

void StepdRunner::Adopt() {
  std::size_t running = 0;
  std::size_t finished = 0;
  for (auto& [id, folder] : launcher_.ListLaunches(setup_.name)) {
    auto [it, inserted] = runs_.try_emplace(id, LaunchTracker(folder, id));
    if (!inserted) continue;
    Run& run = it->second;
    run.serial = ++serials_;
    run.seen = std::chrono::steady_clock::now();
    // A job's own launch with a script is its batch script.
    run.batch = id.step == step::kOwnLaunch && ::access((folder + "/script").c_str(), F_OK) == 0;
    run.tracker.LoadReportedMark();
    run.cpus = AdoptedCpus(folder);
    // What the earlier agent had not passed on yet is queued now, and sent
    // once Register is answered.
    Refresh(id, run);
    const step::LaunchRecord& record = run.tracker.Record();
    if (record.Done()) {
      ++finished;
      continue;
    }
    ++running;
    const StepdState stepd = run.tracker.CheckStepd();
    LaunchLog().info(
        "launch_adopted job={} node={} attempt={} stepd={} "
        "ranks_alive={} ranks_ok={}",
        id.job_id, setup_.name, id.attempt, record.StepdPid(), record.LiveRanks().size(),
        record.RanksOk());
    if (stepd == StepdState::kGone) {
      Abandon(id, run,
              "cohort-stepd ended while the agent was away, without recording "
              "the end");
    }
  }
  if (running + finished > 0) {
    AgentLog().info("spool_adopted node={} running={} finished={}", setup_.name, running, finished);
  }
}

void StepdRunner::Launch(const v1::Launch& message) {
  if (!scripts_) {
    LaunchNow(message);
    return;
  }
  // The job's prolog first, once per attempt; its failure drains the node
  // and requeues the job (the controller does both).
  scripts_->BeforeLaunch(message, [this, message](bool ok, const std::string& reason) {
    if (ok) {
      LaunchNow(message);
    } else if (!message.has_step()) {
      SendScriptFailed(message.job_id(), message.attempt(), "prolog", reason);
    }
  });
}

void StepdRunner::SendScriptFailed(std::int64_t job_id, int attempt, std::string_view script,
                                   const std::string& reason) {
  v1::AgentMessage failed;
  v1::ScriptFailed& e = *failed.mutable_script_failed();
  e.set_job_id(job_id);
  e.set_attempt(attempt);
  e.set_script(std::string(script));
  e.set_reason(reason);
  send_(std::move(failed));
}

void StepdRunner::LaunchNow(const v1::Launch& message) {
  const step::LaunchId id{message.job_id(), message.attempt(),
                          message.has_step() ? message.step() : step::kOwnLaunch};
  for (auto* live : Unfinished(id.job_id)) {
    if (live->first.attempt < id.attempt) {
      // An attempt the controller has moved on from (the job was requeued
      // while this node was cut off, or its agent down): its ranks are
      // killed now, before the new attempt's start. Ignored, the new launch
      // would leave the job running here with no ranks.
      LaunchLog().warn("launch_replaces_attempt job={} step={} node={} attempt={} old_attempt={}",
                       id.job_id, StepText(id), setup_.name, id.attempt, live->first.attempt);
      TerminateLaunch(live->first, live->second, std::chrono::steady_clock::now(), 0);
      continue;
    }
    if (live->first.step != id.step) continue;
    LaunchLog().warn("launch_ignored job={} step={} node={} attempt={} reason={:?}", id.job_id,
                     StepText(id), setup_.name, id.attempt,
                     "the job already has ranks of that step on this node");
    return;
  }
  const std::string folder = launcher_.LaunchFolder(setup_.name, id);
  if (const auto old = runs_.find(id); old != runs_.end()) {
    // The controller launches again what this node already ran and finished
    // (its state was reset): the new launch is the one that counts.
    LaunchLog().info("launch_replaces_finished job={} node={} attempt={}", id.job_id, setup_.name,
                     id.attempt);
    StepLauncher::RemoveLaunch(old->second.tracker.Folder());
    runs_.erase(old);
  }
  absl::Status created = launcher_.CreateLaunchFolder(folder);
  if (absl::IsAlreadyExists(created)) {
    // A leftover this agent does not track (it failed to adopt it).
    StepLauncher::RemoveLaunch(folder);
    created = launcher_.CreateLaunchFolder(folder);
  }
  if (!created.ok()) {
    // Without a folder nothing can be recorded: answer directly.
    const std::string reason = fmt::format("{}: {}", setup_.name, created.message());
    LaunchLog().warn("launch_failed job={} node={} attempt={} reason={:?}", id.job_id, setup_.name,
                     id.attempt, reason);
    v1::AgentMessage failed;
    failed.mutable_launch_failed()->set_job_id(id.job_id);
    failed.mutable_launch_failed()->set_attempt(id.attempt);
    failed.mutable_launch_failed()->set_reason(reason);
    if (id.step != step::kOwnLaunch) failed.mutable_launch_failed()->set_step(id.step);
    send_(std::move(failed));
    ++counters_.launches_failed;
    if (id.step == step::kOwnLaunch) SendJobReleased(id.job_id, id.attempt);
    return;
  }
  Run& run = runs_.try_emplace(id, LaunchTracker(folder, id)).first->second;
  run.serial = ++serials_;
  run.seen = std::chrono::steady_clock::now();
  run.program = message.spec().argv().empty() ? std::string("(script)") : message.spec().argv(0);
  run.batch = message.batch() && !message.has_step();
  run.gpus = message.gpus();
  if (absl::Status started = StartLaunch(id, run, message); !started.ok()) {
    // Recorded like any failed launch, so that Register reports it.
    Abandon(id, run, std::string(started.message()));
  }
}

absl::Status StepdRunner::StartLaunch(step::LaunchId id, Run& run, const v1::Launch& message) {
  step::LaunchPlan plan = MakePlan(message, setup_.name, settings_.cluster_name);
  plan.rocm = std::any_of(setup_.layout.gpus.begin(), setup_.layout.gpus.end(),
                          [](const layout::Gpu& gpu) { return gpu.amd; });
  run.cpus = GrantCpus(id, message);
  if (plan.container.Enabled()) {
    step::ContainerSetup& container = plan.container;
    container.images = settings_.container_images;
    container.hooks_dir = settings_.container_hooks_dir;
    container.state_dir = fmt::format("{}/job-{}", settings_.container_state_dir, id.job_id);
    for (int gpu = 0; gpu < 64 && static_cast<std::size_t>(gpu) < setup_.gpu_files.size(); ++gpu) {
      if (((message.gpus() >> gpu) & 1U) != 0 && !setup_.gpu_files[gpu].empty()) {
        container.devices.push_back(setup_.gpu_files[gpu]);
      }
    }
  }
  // A batch script is no rank: it sees every GPU of the node and is bound to
  // nothing, as Slurm's batch step; its steps' ranks are bound.
  if (!run.batch) {
    absl::StatusOr<std::vector<binding::RankBinding>> bound =
        PlanBindings(setup_.layout, message, run.cpus);
    if (!bound.ok()) {
      return absl::Status(bound.status().code(),
                          fmt::format("{}: {}", setup_.name, bound.status().message()));
    }
    plan.bindings = *bound;
    plan.apply_binding = settings_.apply_binding;
    run.bindings = ReportBindings(*bound, message, setup_.name);
  }
  // CUDA numbers only the GPUs a rank can open: in a container (whose /dev
  // has only the step's) or under the device cgroup, from 0.
  std::vector<dev_t> denied = DeniedGpus(gpu_devices_, message.gpus());
  if (plan.container.Enabled() || (launcher_.LimitsDevices() && !denied.empty())) {
    plan.gpu_numbering = step::GpuNumbering::kConfined;
  }
  // Its IMEX channel's device file, and no other channel's.
  // Channels are numbered below SwitchParameters' bound of 65536.
  if (message.has_imex_channel() && message.imex_channel() >= 0 && message.imex_channel() < 65536 &&
      !settings_.imex_channel_dir.empty() && settings_.apply_binding) {
    ImexAccess imex = ImexChannelAccess(settings_.imex_channel_dir, settings_.imex_dev_major,
                                        message.imex_channel());
    if (!imex.problem.empty()) {
      LaunchLog().warn("imex_channel job={} node={} {}", id.job_id, setup_.name, imex.problem);
    }
    denied.insert(denied.end(), imex.denied.begin(), imex.denied.end());
    if (plan.container.Enabled()) plan.container.devices.push_back(imex.file);
  }
  const std::string script_path = run.tracker.Folder() + "/script";
  absl::StatusOr<step::LaunchFile> file =
      step::PlanLaunch(plan, id.attempt, script_path, launcher_.SocketPath());
  if (!file.ok()) return file.status();
  if (!plan.script.empty()) {
    if (absl::Status written = StepLauncher::WriteScript(script_path, plan.script, setup_.name);
        !written.ok()) {
      return written;
    }
  }
  file->cpus = run.cpus;
  // Emulated nodes' cores are not this host's: their cgroups keep the
  // agent's cpuset.
  const step::LaunchLimits limits{.memory_mb = file->memory_mb,
                                  .cpus = settings_.apply_binding ? run.cpus : std::vector<int>{},
                                  .denied_devices = std::move(denied)};
  absl::StatusOr<pid_t> stepd = launcher_.Start(run.tracker.Folder(), *file, limits);
  if (!stepd.ok()) return stepd.status();
  run.watch = StepdWatch::kReaper;
  reaper_.Watch(*stepd, [this, id, serial = run.serial](int wait_status) {
    OnStepdExit(id, serial, wait_status);
  });
  LaunchLog().debug("stepd_started job={} node={} attempt={} pid={} folder={}", id.job_id,
                    setup_.name, id.attempt, *stepd, run.tracker.Folder());
  return absl::OkStatus();
}

void StepdRunner::OnStepNotice(step::LaunchId id) {
  const auto it = runs_.find(id);
  if (it == runs_.end()) return;
  Refresh(id, it->second);
}

void StepdRunner::OnStepdExit(step::LaunchId id, std::uint64_t serial, int wait_status) {
  const auto it = runs_.find(id);
  if (it == runs_.end() || it->second.serial != serial) return;
  Run& run = it->second;
  Refresh(id, run);
  if (run.tracker.Record().Done()) return;
  Abandon(id, run,
          fmt::format("cohort-stepd ended with {} before its ranks did; see {}/stepd.log",
                      WaitStatusText(wait_status), run.tracker.Folder()));
}

void StepdRunner::Poll() {
  if (settings_.gather_interval.count() > 0 && std::chrono::steady_clock::now() >= next_sample_) {
    next_sample_ = std::chrono::steady_clock::now() + settings_.gather_interval;
    // What launches use is for sstat and sacct; a sample that fails (a
    // library's exception reading /proc or NVML) is skipped and said,
    // never the end of the node's agent and of every job it runs.
    try {
      SampleUsage();
    } catch (const std::exception& e) {
      LaunchLog().error("usage_sample_failed node={} error={:?}", setup_.name, e.what());
    }
  }
  const auto now = std::chrono::system_clock::now();
  for (auto it = runs_.begin(); it != runs_.end();) {
    const step::LaunchId id = it->first;
    Run& run = it->second;
    if (run.tracker.Record().Done()) {
      if (now - run.ended_at >= kFinishedRetention) {
        LaunchLog().debug("launch_forgotten job={} node={} attempt={}", id.job_id, setup_.name,
                          id.attempt);
        StepLauncher::RemoveLaunch(run.tracker.Folder());
        it = runs_.erase(it);
        continue;
      }
      ++it;
      continue;
    }
    // Datagrams can be lost (a full queue, an agent not yet listening).
    Refresh(id, run);
    if (!run.tracker.Record().Done() && run.watch == StepdWatch::kPoll) {
      switch (run.tracker.CheckStepd()) {
        case StepdState::kGone:
          Refresh(id, run);  // its last lines may have come since
          Abandon(id, run, "cohort-stepd ended without recording the end of its ranks");
          break;
        case StepdState::kUnknown:
          if (std::chrono::steady_clock::now() - run.seen > kStepdStartTimeout) {
            Abandon(id, run, "cohort-stepd did not start");
          }
          break;
        case StepdState::kAlive:
          break;
      }
    }
    ++it;
  }
}

void StepdRunner::SampleUsage() {
  std::vector<Runs::value_type*> live;
  for (Runs::value_type& entry : runs_) {
    if (!entry.second.tracker.Record().Done() &&
        !entry.second.tracker.Record().LiveRanks().empty()) {
      live.push_back(&entry);
    }
  }
  if (live.empty()) return;
  const ProcessTable processes = ProcessTable::Read();
  const double tick_ms = ProcessTable::TickMs();
  const std::int64_t page_kb = ProcessTable::PageKb();
  const std::vector<GpuReading> gpus =
      settings_.gpus != nullptr ? settings_.gpus->Read() : std::vector<GpuReading>{};
  v1::AgentMessage message;
  v1::UsageReport& report = *message.mutable_usage();
  report.set_sampled_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].util_pct < 0) continue;
    v1::GpuSample& sample = *report.add_gpus();
    sample.set_index(static_cast<int>(i));
    sample.set_util_pct(gpus[i].util_pct);
    sample.set_mem_used_mb(gpus[i].mem_used_mb);
  }
  for (Runs::value_type* entry : live) {
    const step::LaunchId id = entry->first;
    Run& run = entry->second;
    v1::LaunchUsage& launch = *report.add_launches();
    launch.set_job_id(id.job_id);
    launch.set_attempt(id.attempt);
    if (id.step != step::kOwnLaunch) launch.set_step(id.step);
    launch.set_gpus(run.gpus);
    for (const auto& [rank, pid] : run.tracker.Record().LiveRanks()) {
      const TreeUsage tree = processes.Subtree(pid, tick_ms, page_kb);
      std::int64_t& peak = run.peak_rss_kb[rank];
      peak = std::max(peak, tree.rss_kb);
      v1::TaskSample& task = *launch.add_tasks();
      task.set_rank(rank);
      task.set_cpu_ms(tree.cpu_ms);
      task.set_rss_kb(tree.rss_kb);
      task.set_max_rss_kb(peak);
    }
    // The launch's GPUs that NVML read.
    int measured = 0;
    int busiest = 0;
    std::int64_t util = 0;
    std::int64_t memory = 0;
    std::int64_t fullest = 0;
    for (std::size_t i = 0; i < gpus.size() && i < nvml::kMaxGpus; ++i) {
      if (((run.gpus >> i) & 1U) == 0 || gpus[i].util_pct < 0) continue;
      ++measured;
      util += gpus[i].util_pct;
      busiest = std::max(busiest, gpus[i].util_pct);
      memory += gpus[i].mem_used_mb;
      fullest = std::max(fullest, gpus[i].mem_used_mb);
    }
    if (measured > 0) {
      ++run.gpu_samples;
      run.gpu_util_sum += util / measured;
      run.gpu_util_max = std::max(run.gpu_util_max, busiest);
      run.gpu_mem_max_mb = std::max(run.gpu_mem_max_mb, fullest);
      run.gpu_mem_sum_mb += memory / measured;
    }
  }
  send_(std::move(message));
}

void StepdRunner::Refresh(step::LaunchId id, Run& run) {
  for (const step::LaunchReport& report : run.tracker.ReadEvents()) Forward(id, run, report);
  NoteEnd(run);
}

void StepdRunner::NoteEnd(Run& run) {
  // Also for a launch adopted finished, whose `done` an earlier agent reported.
  if (run.tracker.Record().Done() && run.ended_at == std::chrono::system_clock::time_point{}) {
    run.ended_at = run.tracker.LastChange();
  }
}

void StepdRunner::Abandon(step::LaunchId id, Run& run, std::string_view reason) {
  const step::LaunchRecord& record = run.tracker.Record();
  if (record.HasStepd() || record.RanksStarted() > 0) {
    LaunchLog().warn("stepd_lost job={} node={} attempt={} ranks_killed={} reason={:?}", id.job_id,
                     setup_.name, id.attempt, record.LiveRanks().size(), reason);
  }
  // A reason without the node's name (the stepd's) gets it, as every launch
  // failure does.
  const std::string text = std::string(reason).starts_with(setup_.name + ": ")
                               ? std::string(reason)
                               : fmt::format("{}: {}", setup_.name, reason);
  for (const step::LaunchReport& report : run.tracker.Abandon(text)) {
    Forward(id, run, report);
  }
  // The stepd that would have removed the launch's cgroup is gone.
  launcher_.RemoveLaunchCgroup(setup_.name, id);
  NoteEnd(run);
}

void StepdRunner::Forward(step::LaunchId id, Run& run, const step::LaunchReport& report) {
  const bool own = id.step == step::kOwnLaunch;
  std::visit(
      [&](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        v1::AgentMessage message;
        if constexpr (std::is_same_v<T, step::RanksStartedReport>) {
          v1::RanksStarted* ranks = message.mutable_ranks_started();
          ranks->set_job_id(id.job_id);
          ranks->set_attempt(id.attempt);
          if (!own) ranks->set_step(id.step);
          for (const v1::RankBinding& b : run.bindings) *ranks->add_bindings() = b;
          for (const auto& [rank, pid] : r.ranks) {
            ranks->add_ranks(rank);
            ranks->add_pids(pid);
          }
          send_(std::move(message));
          ++counters_.launches_started;
          if (!run.program.empty()) {  // not adopted: this agent saw its order
            counters_.stepd_start.Observe(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - run.seen).count());
          }
          LaunchLog().info(
              "launch_started job={} step={} node={} attempt={} ranks={} "
              "pgid={} program={:?}",
              id.job_id, StepText(id), setup_.name, id.attempt, RankText(r.ranks), r.pgid,
              run.program.empty() ? std::string("(adopted)") : run.program);
          // What came while the ranks were being started.
          for (const int signal : std::exchange(run.pending_signals, {})) {
            ::killpg(r.pgid, signal);
          }
          for (const int signal : std::exchange(run.pending_batch_signals, {})) {
            if (const auto rank0 = r.ranks.find(0); rank0 != r.ranks.end()) {
              ::kill(rank0->second, signal);
            }
          }
          if (const auto at = std::exchange(run.pending_kill_at, std::nullopt)) {
            ::killpg(r.pgid, SIGTERM);
            ArmKill(id, run, *at);
          }
        } else if constexpr (std::is_same_v<T, step::RankExitedReport>) {
          v1::RankExited* exited = message.mutable_rank_exited();
          exited->set_job_id(id.job_id);
          exited->set_attempt(id.attempt);
          if (!own) exited->set_step(id.step);
          exited->set_rank(r.rank);
          exited->set_exit_code(r.exit_code);
          exited->set_signal(r.signal);
          exited->set_max_rss_kb(r.max_rss_kb);
          exited->set_cpu_ms(r.cpu_ms);
          if (run.gpu_samples > 0) {
            v1::GpuUsage& gpu = *exited->mutable_gpu();
            gpu.set_util_ave_pct(static_cast<int>(run.gpu_util_sum / run.gpu_samples));
            gpu.set_util_max_pct(run.gpu_util_max);
            gpu.set_mem_max_mb(run.gpu_mem_max_mb);
            gpu.set_mem_ave_mb(run.gpu_mem_sum_mb / run.gpu_samples);
          }
          send_(std::move(message));
          LaunchLog().log(
              r.exit_code == 0 && r.signal == 0 ? spdlog::level::debug : spdlog::level::info,
              "rank_exited job={} step={} node={} attempt={} rank={} exit_code={} "
              "signal={} ranks_left={}",
              id.job_id, StepText(id), setup_.name, id.attempt, r.rank, r.exit_code,
              r.signal == 0 ? "0" : SignalName(r.signal), run.tracker.Record().LiveRanks().size());
        } else if constexpr (std::is_same_v<T, step::LaunchFailedReport>) {
          v1::LaunchFailed* failed = message.mutable_launch_failed();
          failed->set_job_id(id.job_id);
          failed->set_attempt(id.attempt);
          if (!own) failed->set_step(id.step);
          failed->set_reason(r.reason);
          send_(std::move(message));
          ++counters_.launches_failed;
          LaunchLog().warn("launch_failed job={} step={} node={} attempt={} reason={:?}", id.job_id,
                           StepText(id), setup_.name, id.attempt, r.reason);
        } else if constexpr (std::is_same_v<T, step::ImageReport>) {
          counters_.CountImage(r.image);
          LaunchLog().debug("container_image job={} step={} node={} outcome={} bytes={} ms={}",
                            id.job_id, StepText(id), setup_.name,
                            step::ImageOutcomeName(r.image.outcome), r.image.bytes, r.image.ms);
        } else {
          static_assert(std::is_same_v<T, step::ReleasedReport>);
          if (run.kill_timer) run.kill_timer->cancel();
          run.pending_signals.clear();
          run.pending_batch_signals.clear();
          run.pending_kill_at.reset();
          MaybeReleased(id.job_id, id.attempt);
        }
      },
      report);
}

void StepdRunner::MaybeReleased(std::int64_t job_id, int attempt) {
  if (!Unfinished(job_id).empty()) return;  // the job still has ranks here
  // The job's own launch ending frees the node; a step's ending frees it
  // only once the controller has asked (Terminate): until the job ends its
  // allocation keeps the node for its next step.
  const bool own = runs_.contains(step::LaunchId{job_id, attempt, step::kOwnLaunch});
  if (!own && !terminating_.contains(job_id)) return;
  terminating_.erase(job_id);
  SendJobReleased(job_id, attempt);
}

void StepdRunner::SendJobReleased(std::int64_t job_id, int attempt) {
  if (!scripts_) {
    SendReleasedNow(job_id, attempt);
    return;
  }
  // The node is the job's until its epilog has run.
  scripts_->AfterJob(job_id, attempt, [this, job_id, attempt](bool ok, const std::string& reason) {
    if (!ok) SendScriptFailed(job_id, attempt, "epilog", reason);
    SendReleasedNow(job_id, attempt);
  });
}

void StepdRunner::SendReleasedNow(std::int64_t job_id, int attempt) {
  // The job's named containers (--container-name) live as long as it does.
  const std::string containers = fmt::format("{}/job-{}", settings_.container_state_dir, job_id);
  std::error_code error;
  if (std::filesystem::remove_all(containers, error) > 0 || error) {
    LaunchLog().info("containers_removed job={} node={} folder={}{}", job_id, setup_.name,
                     containers, error ? fmt::format(" error={:?}", error.message()) : "");
  }
  LaunchLog().info("job_released job={} node={} attempt={}", job_id, setup_.name, attempt);
  v1::AgentMessage message;
  message.mutable_job_released()->set_job_id(job_id);
  message.mutable_job_released()->set_attempt(attempt);
  send_(std::move(message));
}

std::vector<StepdRunner::Runs::value_type*> StepdRunner::Unfinished(std::int64_t job_id) {
  std::vector<Runs::value_type*> live;
  // Launch ids sort by job first: the job's launches are adjacent.
  for (auto it = runs_.lower_bound(step::LaunchId{job_id, std::numeric_limits<int>::min(),
                                                  std::numeric_limits<int>::min()});
       it != runs_.end() && it->first.job_id == job_id; ++it) {
    if (!it->second.tracker.Record().Done()) live.push_back(&*it);
  }
  return live;
}

void StepdRunner::Signal(const v1::Signal& message) {
  const std::int64_t job_id = message.job_id();
  const int signal = message.signal();
  if (signal < 1 || signal >= NSIG) {
    LaunchLog().warn("signal_ignored job={} node={} signal={} reason={:?}", job_id, setup_.name,
                     signal, "not a signal number");
    return;
  }
  int reached = 0;
  for (auto* entry : Unfinished(job_id)) {
    const step::LaunchId id = entry->first;
    Run& run = entry->second;
    if (message.has_step()) {
      if (id.step != message.step()) continue;
    } else if (message.scope() == v1::SIGNAL_BATCH) {
      if (id.step != step::kOwnLaunch) continue;
    } else if (message.scope() == v1::SIGNAL_RANKS && run.batch) {
      continue;  // as Slurm, a job's signals reach its steps, not its batch script
    }
    const bool only_first = !message.has_step() && message.scope() == v1::SIGNAL_BATCH;
    if (SignalLaunch(id, run, signal, only_first)) ++reached;
  }
  if (reached == 0) {
    LaunchLog().debug("signal_ignored job={} node={} signal={} reason={:?}", job_id, setup_.name,
                      SignalName(signal), "nothing of the job it is meant for runs on this node");
  }
}

bool StepdRunner::SignalLaunch(step::LaunchId id, Run& run, int signal, bool only_first) {
  // Fresh news first: a group whose ranks were all reaped may be reused.
  Refresh(id, run);
  const step::LaunchRecord& record = run.tracker.Record();
  if (record.Done()) return false;
  if (!record.Running()) {
    (only_first ? run.pending_batch_signals : run.pending_signals).push_back(signal);
    LaunchLog().info("job_signal_pending job={} step={} node={} signal={} batch_only={}", id.job_id,
                     StepText(id), setup_.name, SignalName(signal), only_first);
    return true;
  }
  if (only_first) {
    // --signal=B: the batch script (or a command's first rank) alone; its
    // children and the steps are left alone, as Slurm leaves them.
    const std::map<int, pid_t> live = record.LiveRanks();
    const auto rank0 = live.find(0);
    if (rank0 == live.end() || ::kill(rank0->second, signal) != 0) return false;
    LaunchLog().info("job_signalled job={} step={} node={} signal={} ranks=0 batch_only=true",
                     id.job_id, StepText(id), setup_.name, SignalName(signal));
    return true;
  }
  if (::killpg(record.ProcessGroup(), signal) != 0) {
    LaunchLog().debug("signal_failed job={} step={} node={} signal={} error={:?}", id.job_id,
                      StepText(id), setup_.name, SignalName(signal), std::strerror(errno));
    return false;
  }
  LaunchLog().info("job_signalled job={} step={} node={} signal={} ranks={}", id.job_id,
                   StepText(id), setup_.name, SignalName(signal), record.LiveRanks().size());
  return true;
}

void StepdRunner::Terminate(const v1::Terminate& message) {
  const std::int64_t job_id = message.job_id();
  // A prolog still running: the job ends before it started here.
  if (scripts_ && !message.has_step() && scripts_->PrologRunning(job_id)) scripts_->Cancel(job_id);
  const std::int64_t wait_ms = std::clamp<std::int64_t>(message.kill_wait_ms(), 0, kMaxKillWaitMs);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  const auto live = Unfinished(job_id);
  if (!message.has_step()) {
    if (live.empty()) {
      // Nothing runs here: the controller may free the node now, of the
      // attempt it stops (a node of a batch job that ran no step may never
      // have seen that attempt), else of the last one seen here.
      int attempt = message.attempt();
      for (auto found = runs_.lower_bound(step::LaunchId{job_id, std::numeric_limits<int>::min(),
                                                         std::numeric_limits<int>::min()});
           found != runs_.end() && found->first.job_id == job_id && message.attempt() == 0;
           ++found) {
        attempt = found->first.attempt;
      }
      LaunchLog().debug("terminate_unknown job={} node={}", job_id, setup_.name);
      SendJobReleased(job_id, attempt);
      return;
    }
    // Answered with JobReleased once every launch of the job here is done.
    terminating_.insert(job_id);
  }
  for (auto* entry : live) {
    if (message.has_step() && entry->first.step != message.step()) continue;
    TerminateLaunch(entry->first, entry->second, deadline, wait_ms);
  }
}

void StepdRunner::Fence() {
  std::set<std::int64_t> jobs;
  for (const auto& [id, run] : runs_) {
    if (!run.tracker.Record().Done()) jobs.insert(id.job_id);
  }
  for (const std::int64_t job_id : jobs) {
    LaunchLog().warn("job_fenced job={} node={}", job_id, setup_.name);
    v1::Terminate terminate;
    terminate.set_job_id(job_id);
    terminate.set_kill_wait_ms(0);  // SIGKILL: the job runs on elsewhere already
    Terminate(terminate);
  }
}

void StepdRunner::TerminateLaunch(step::LaunchId id, Run& run,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::int64_t wait_ms) {
  Refresh(id, run);
  const step::LaunchRecord& record = run.tracker.Record();
  if (record.Done()) return;  // its end is on its way
  if (!record.Running()) {
    // The stepd is still starting the ranks (or killing a failed launch's).
    if (!run.pending_kill_at || *run.pending_kill_at > deadline) {
      run.pending_kill_at = deadline;
    }
    LaunchLog().info("job_terminate_pending job={} step={} node={} kill_in_ms={}", id.job_id,
                     StepText(id), setup_.name, wait_ms);
    return;
  }
  ::killpg(record.ProcessGroup(), SIGTERM);
  if (run.kill_timer && run.kill_timer->expiry() <= deadline) {
    LaunchLog().info("job_terminating job={} step={} node={} signal=TERM kill_in_ms=unchanged",
                     id.job_id, StepText(id), setup_.name);
    return;  // an earlier Terminate's SIGKILL comes sooner
  }
  ArmKill(id, run, deadline);
  LaunchLog().info("job_terminating job={} step={} node={} signal=TERM ranks={} kill_in_ms={}",
                   id.job_id, StepText(id), setup_.name, record.LiveRanks().size(), wait_ms);
}

void StepdRunner::ArmKill(step::LaunchId id, Run& run, std::chrono::steady_clock::time_point at) {
  if (!run.kill_timer) run.kill_timer = std::make_unique<boost::asio::steady_timer>(loop_);
  run.kill_timer->expires_at(at);
  run.kill_timer->async_wait(
      [this, id, serial = run.serial](const boost::system::error_code& error) {
        if (error) return;
        const auto found = runs_.find(id);
        if (found == runs_.end() || found->second.serial != serial) return;
        Refresh(id, found->second);
        const step::LaunchRecord& record = found->second.tracker.Record();
        if (record.Done() || record.ProcessGroup() <= 0) return;
        ::killpg(record.ProcessGroup(), SIGKILL);
        // And whatever the ranks started outside their process group.
        launcher_.KillLaunchCgroup(setup_.name, id);
        LaunchLog().info("job_killed job={} node={} signal=KILL ranks={}", id.job_id, setup_.name,
                         record.LiveRanks().size());
      });
}

}  // namespace cohort::agent
