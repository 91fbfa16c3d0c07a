// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct lua_State;
struct lua_Debug;

/// A site's job submit policy, as Slurm's job_submit/lua: a Lua 5.4 script
/// whose `slurm_job_submit(job_desc, part_list, submit_uid)` sees every
/// submission before it is queued, may change its fields, and may refuse
/// it with a message the user reads (docs/operations.md, "A site policy
/// for submissions").
namespace cohort::policy {

/// time_limit of a job without one: slurm.INFINITE.
inline constexpr std::int64_t kUnlimitedMinutes = 0xffffffff;
/// A limit in seconds as the script sees it: whole minutes, rounded up.
[[nodiscard]] constexpr std::int64_t MinutesOf(std::int64_t seconds) { return (seconds + 59) / 60; }

/// The fields of a submission the script sees, by Slurm's job_desc names
/// (the comments); the writable ones may be changed.
struct SubmitFields {
  // Writable.
  std::string name;       ///< name
  std::string partition;  ///< partition (empty: nil, the default one)
  std::string account;    ///< account
  std::string qos;        ///< qos
  std::string comment;    ///< comment
  std::string wckey;      ///< wckey
  /// time_limit, minutes; none: not asked (slurm.NO_VAL); kUnlimitedMinutes:
  /// none at all.
  std::optional<std::int64_t> time_limit_min;
  int nodes = 1;                      ///< min_nodes
  int tasks_per_node = 1;             ///< ntasks_per_node
  int cpus_per_task = 1;              ///< cpus_per_task
  std::int64_t memory_mb = 0;         ///< pn_min_memory (0: none asked)
  int gpus_per_node = 0;              ///< gpus_per_node (Cohort's; tres_per_node says it too)
  std::vector<std::string> features;  ///< features ("a,b")
  bool requeue = false;               ///< requeue (0 or 1)
  // Read-only.
  std::string user_name;      ///< user_name
  std::uint32_t user_id = 0;  ///< user_id
  std::string work_dir;       ///< work_dir
  std::string array;          ///< array_inx
  std::string dependency;     ///< dependency
  std::string script;         ///< script (empty: nil, a command)
  friend bool operator==(const SubmitFields&, const SubmitFields&) = default;
};

/// What an update of a pending job (scontrol update) asks to change, as
/// slurm_job_modify's job_desc shows it: only what is set.
struct UpdateFields {
  std::optional<std::string> partition;        ///< partition
  std::optional<std::int64_t> time_limit_min;  ///< time_limit (kUnlimitedMinutes: none at all)
  std::optional<int> nodes;                    ///< min_nodes
  friend bool operator==(const UpdateFields&, const UpdateFields&) = default;
};

/// A partition as part_list shows it.
struct PartitionFields {
  std::string name;
  std::string nodes;                             ///< hostlist
  std::string state;                             ///< UP, DOWN, DRAIN, INACTIVE
  bool is_default = false;                       ///< flag_default
  std::optional<std::int64_t> max_time_min;      ///< max_time (none: slurm.INFINITE)
  std::optional<std::int64_t> default_time_min;  ///< default_time (none: slurm.NO_VAL)
  int max_nodes = 0;                             ///< max_nodes (0: slurm.INFINITE)
};

/// How long one call of the script may run, and how much memory the
/// script's state may hold: past either, the call fails (the submission is
/// refused, saying so) and the controller goes on.
inline constexpr std::chrono::milliseconds kPolicyCallLimit{200};
inline constexpr std::size_t kPolicyMemoryLimit = 64 * 1024 * 1024;

/// One loaded script, in a Lua state of its own: the base, string, table,
/// math and utf8 libraries only (no os, io, package, debug, load or
/// dofile), a `slurm` table of constants and log functions. Not
/// thread-safe: one caller at a time.
class JobSubmitPolicy {
 public:
  /// A line the script logged (slurm.log_info, print, ...), for the log.
  using Logger = std::function<void(int level, std::string_view line)>;

  /// Loads and runs the script's top level. InvalidArgument names the file,
  /// the line and the fault (a syntax error, an error at load, a missing
  /// slurm_job_submit).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> Load(
      const std::string& path, Logger log = {});
  ~JobSubmitPolicy();
  JobSubmitPolicy(const JobSubmitPolicy&) = delete;
  JobSubmitPolicy& operator=(const JobSubmitPolicy&) = delete;

  /// Runs slurm_job_submit on `job` (changed in place when the script
  /// changes it). PermissionDenied with the script's slurm.log_user message
  /// (or the code it returned) when it refuses; FailedPrecondition naming
  /// the script's line when it fails, runs too long or uses too much
  /// memory, or sets a field it may not.
  [[nodiscard]] absl::Status Submit(SubmitFields& job, const std::vector<PartitionFields>& parts,
                                    std::uint32_t submit_uid);

  /// Runs slurm_job_modify, where the script defines it, on an update of
  /// pending job `job` by `modify_uid`: the update may be changed (in its
  /// partition, time_limit and min_nodes) or refused, as Submit's.
  [[nodiscard]] absl::Status Modify(UpdateFields& update, const SubmitFields& job,
                                    const std::vector<PartitionFields>& parts,
                                    std::uint32_t modify_uid);

  /// The script's file name, as messages say it.
  [[nodiscard]] const std::string& Name() const { return name_; }

 private:
  JobSubmitPolicy() = default;
  /// The script's memory. Outside its calls (the policy's own pushes and
  /// reads, finalizers the collector runs meanwhile) a little more is
  /// allowed, so that an allocation there cannot fail outside a protected
  /// call, which would abort the process.
  struct Memory {
    std::size_t used = 0;
    std::size_t limit = kPolicyMemoryLimit;
    bool in_call = false;
  };
  static void* Allocate(void* ud, void* ptr, std::size_t osize, std::size_t nsize);
  static void Hook(lua_State* L, lua_Debug* ar);
  static int LogUser(lua_State* L);
  static int LogLine(lua_State* L);
  /// Calls the function on the stack with `args` arguments under the time
  /// bound; the error's message when it fails.
  std::optional<std::string> CallBounded(int args, int results);
  /// Calls a hook (function, then `args` arguments, on the stack) and reads
  /// its verdict: OK for slurm.SUCCESS, else the refusal or the failure.
  absl::Status Verdict(int args);
  absl::Status Failure(std::string_view what) const;

  std::string name_;
  Logger log_;
  Memory memory_;
  lua_State* L_ = nullptr;
  std::chrono::steady_clock::time_point deadline_{};
  std::string user_message_;  ///< slurm.log_user's lines of the current call
};

}  // namespace cohort::policy
