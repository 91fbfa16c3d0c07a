// SPDX-License-Identifier: Apache-2.0
#include "job_scripts.h"

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "agent_log.h"
#include "health_check.h"
#include "step_launcher.h"

namespace cohort::agent {

struct JobScripts::Run {
  Key key;
  std::string kind;  ///< prolog or epilog
  std::string output;
  boost::asio::steady_timer deadline;
  bool timed_out = false;
  std::function<void(bool, std::string)> finished;
};

JobScripts::JobScripts(boost::asio::io_context& loop, ChildReaper& reaper, std::string prolog,
                       std::string epilog, std::chrono::seconds timeout, std::string node,
                       std::string folder)
    : loop_(loop),
      reaper_(reaper),
      prolog_(std::move(prolog)),
      epilog_(std::move(epilog)),
      timeout_(timeout),
      node_(std::move(node)),
      folder_(std::move(folder)) {}

JobScripts::~JobScripts() { Stop(); }

void JobScripts::Stop() {
  *alive_ = false;
  for (auto& [pid, run] : running_) {
    run->deadline.cancel();
    ::kill(pid, SIGKILL);
  }
  running_.clear();
  waiting_.clear();
}

void JobScripts::BeforeLaunch(const v1::Launch& launch, Done then) {
  const Key key{launch.job_id(), launch.attempt()};
  if (prolog_.empty()) {
    then(true, {});
    return;
  }
  if (const auto done = prolog_done_.find(key); done != prolog_done_.end()) {
    then(done->second.empty(), done->second);
    return;
  }
  const bool started = waiting_.contains(key);
  waiting_[key].push_back(std::move(then));
  if (started) return;
  const std::string id = std::to_string(launch.job_id());
  const std::string uid = std::to_string(launch.uid());
  std::vector<std::string> env;
  for (const char* prefix : {"SLURM_", "COHORT_"}) {
    env.push_back(fmt::format("{}JOB_ID={}", prefix, id));
    env.push_back(fmt::format("{}JOB_USER={}", prefix, launch.spec().user_name()));
    env.push_back(fmt::format("{}JOB_UID={}", prefix, uid));
    env.push_back(fmt::format("{}JOB_PARTITION={}", prefix, launch.partition()));
    env.push_back(fmt::format("{}JOB_NODELIST={}", prefix, launch.nodelist()));
  }
  env.push_back("SLURMD_NODENAME=" + node_);
  env.push_back("COHORT_NODENAME=" + node_);
  job_env_[launch.job_id()] = env;
  Start("prolog", prolog_, key, std::move(env), [this, key](bool ok, std::string reason) {
    prolog_done_[key] = ok ? std::string() : reason;
    std::vector<Done> launches = std::move(waiting_[key]);
    waiting_.erase(key);
    for (Done& launch_now : launches) launch_now(ok, reason);
  });
}

void JobScripts::AfterJob(std::int64_t job_id, int attempt, Done then) {
  std::vector<std::string> env;
  if (const auto found = job_env_.find(job_id); found != job_env_.end()) {
    env = std::move(found->second);
    job_env_.erase(found);
  } else {
    // A job an earlier agent started: what this one knows of it.
    env = {"SLURM_JOB_ID=" + std::to_string(job_id), "COHORT_JOB_ID=" + std::to_string(job_id),
           "SLURMD_NODENAME=" + node_, "COHORT_NODENAME=" + node_};
  }
  // Attempts of this job are over here: their prologs are forgotten.
  std::erase_if(prolog_done_, [job_id](const auto& entry) { return entry.first.first == job_id; });
  if (epilog_.empty()) {
    then(true, {});
    return;
  }
  Start("epilog", epilog_, Key{job_id, attempt}, std::move(env),
        [then = std::move(then)](bool ok, std::string reason) { then(ok, reason); });
}

bool JobScripts::PrologRunning(std::int64_t job_id) const {
  for (const auto& [key, launches] : waiting_) {
    if (key.first == job_id) return true;
  }
  return false;
}

void JobScripts::Cancel(std::int64_t job_id) {
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->second->key.first == job_id && it->second->kind == "prolog") {
      it->second->deadline.cancel();
      ::kill(it->first, SIGKILL);
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(waiting_, [job_id](const auto& entry) { return entry.first.first == job_id; });
}

void JobScripts::Start(const std::string& kind, const std::string& program, Key key,
                       std::vector<std::string> env,
                       std::function<void(bool, std::string)> finished) {
  const std::string output = fmt::format("{}/{}-{}.{}.out", folder_, kind, key.first, key.second);
  absl::StatusOr<pid_t> pid = SpawnAlone(program, {}, env, output, OpenMode::kTruncate);
  if (!pid.ok()) {
    AgentLog().warn("{}_failed job={} node={} reason={:?}", kind, key.first, node_,
                    std::string(pid.status().message()));
    finished(false, std::string(pid.status().message()));
    return;
  }
  AgentLog().info("{}_started job={} node={} pid={}", kind, key.first, node_, *pid);
  auto run = std::make_unique<Run>(Run{.key = key,
                                       .kind = kind,
                                       .output = output,
                                       .deadline = boost::asio::steady_timer(loop_),
                                       .timed_out = false,
                                       .finished = std::move(finished)});
  run->deadline.expires_after(timeout_);
  run->deadline.async_wait([this, alive = alive_, pid = *pid](const boost::system::error_code& e) {
    if (e || !*alive) return;
    if (const auto found = running_.find(pid); found != running_.end()) {
      found->second->timed_out = true;
      ::kill(pid, SIGKILL);
    }
  });
  running_.emplace(*pid, std::move(run));
  reaper_.Watch(*pid, [this, alive = alive_, pid = *pid](int wait_status) {
    if (!*alive) return;
    const auto found = running_.find(pid);
    if (found == running_.end()) return;  // cancelled
    std::unique_ptr<Run> done = std::move(found->second);
    running_.erase(found);
    done->deadline.cancel();
    const bool ok = !done->timed_out && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
    std::string reason;
    if (done->timed_out) {
      reason = fmt::format("did not finish within PrologEpilogTimeout ({} s)", timeout_.count());
    } else if (!ok) {
      std::ifstream in(done->output);
      std::ostringstream text;
      text << in.rdbuf();
      reason = HealthReason(text.str(), wait_status);
    }
    if (ok) {
      AgentLog().info("{}_done job={} node={}", done->kind, done->key.first, node_);
    } else {
      AgentLog().warn("{}_failed job={} node={} reason={:?}", done->kind, done->key.first, node_,
                      reason);
    }
    done->finished(ok, reason);
  });
}

}  // namespace cohort::agent
