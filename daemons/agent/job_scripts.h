// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "child_reaper.h"
#include "cohort/v1/cohort.pb.h"

/// Prolog= and Epilog=, as slurmd runs them: the prolog once per job
/// attempt on a node, before the job's first launch there (launches that
/// come meanwhile wait for it); the epilog once the job has left the node,
/// before the node is given back. Both run as the agent's user (root), with
/// the job's SLURM_JOB_ID, SLURM_JOB_USER, SLURM_JOB_UID,
/// SLURM_JOB_PARTITION, SLURM_JOB_NODELIST and SLURMD_NODENAME (and their
/// COHORT_ twins), stdin from /dev/null, their output to a file in the
/// node's spool folder; killed past PrologEpilogTimeout. Exit 0 is success;
/// anything else fails for the reason the output's first line gives.
namespace cohort::agent {

/// Runs one node's prologs and epilogs. Lives on, and is used only from,
/// the agent's loop thread; the reaper must outlive it.
class JobScripts {
 public:
  /// Called once with the script's verdict: ok, or why not.
  using Done = std::function<void(bool ok, const std::string& reason)>;

  JobScripts(boost::asio::io_context& loop, ChildReaper& reaper, std::string prolog,
             std::string epilog, std::chrono::seconds timeout, std::string node,
             std::string folder);
  JobScripts(const JobScripts&) = delete;
  JobScripts& operator=(const JobScripts&) = delete;
  ~JobScripts();

  /// Runs the prolog of `launch`'s job attempt, once: `then` when it is
  /// done, at once (ok) when it already succeeded here or there is none.
  /// After a failed prolog, later launches of the attempt get the same
  /// failure.
  void BeforeLaunch(const v1::Launch& launch, Done then);
  /// Runs the epilog of the job after its last launch here: `then` when it
  /// is done, at once (ok) when there is none.
  void AfterJob(std::int64_t job_id, int attempt, Done then);
  /// Whether a prolog of `job_id` runs now; Cancel kills it and drops the
  /// launches waiting for it (their Done is not called).
  [[nodiscard]] bool PrologRunning(std::int64_t job_id) const;
  void Cancel(std::int64_t job_id);
  /// Kills whatever runs; no Done is called after this.
  void Stop();

 private:
  struct Run;
  using Key = std::pair<std::int64_t, int>;  ///< job, attempt
  /// Starts `program` for `key` with `env`; `finished` gets the verdict.
  void Start(const std::string& kind, const std::string& program, Key key,
             std::vector<std::string> env, std::function<void(bool, std::string)> finished);

  boost::asio::io_context& loop_;
  ChildReaper& reaper_;
  std::string prolog_;
  std::string epilog_;
  std::chrono::seconds timeout_;
  std::string node_;
  std::string folder_;
  std::map<Key, std::vector<Done>> waiting_;     ///< launches held by a running prolog
  std::map<Key, std::string> prolog_done_;       ///< attempts whose prolog ran: "" ok, else why not
  std::map<std::int64_t, std::vector<std::string>> job_env_;  ///< for the epilog
  std::map<pid_t, std::unique_ptr<Run>> running_;
  /// Cleared when this goes; a script that ends later finds it false.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cohort::agent
