// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/v1/cohort.pb.h"

/// How the CLI writes jobs and nodes: state names, times, and the JSON of
/// every listing (stable snake_case field names).
namespace cohort::cli {

/// The non-empty items of a comma list, as Slurm's commands read their
/// lists (`CD,,F` is `CD,F`).
[[nodiscard]] std::vector<std::string_view> CommaList(std::string_view text);
/// CommaList's items as strings.
[[nodiscard]] std::vector<std::string> CommaStrings(std::string_view text);

/// PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, TIMEOUT,
/// NODE_FAIL (as squeue's %T).
[[nodiscard]] std::string_view JobStateName(v1::JobState state);
/// PD, R, CG, CD, F, CA, TO, NF (as squeue's %t).
[[nodiscard]] std::string_view JobStateCode(v1::JobState state);
/// A job's state as squeue and scontrol show it: its state's, or STOPPED
/// (ST) while its owner has it stopped (scancel --signal=STOP).
[[nodiscard]] std::string_view JobStateName(const v1::Job& job);
[[nodiscard]] std::string_view JobStateCode(const v1::Job& job);
/// A state from its name or code, in any case; nullopt when unknown.
[[nodiscard]] std::optional<v1::JobState> ParseJobState(std::string_view text);
/// COMPLETED, FAILED, CANCELLED, TIMEOUT or NODE_FAIL: the job will not change again.
[[nodiscard]] bool IsFinished(v1::JobState state);

/// IDLE, MIXED, ALLOCATED, DRAINING, DRAINED, DOWN, UNKNOWN.
[[nodiscard]] std::string_view NodeStateName(v1::NodeState state);
/// idle, mixed, allocated, ... (as sinfo writes them).
[[nodiscard]] std::string NodeStateLower(v1::NodeState state);
/// The state as sinfo writes it: lower case, `*` after it while the node
/// is not responding (`idle*`).
[[nodiscard]] std::string NodeStateText(const v1::Node& node);
/// A node's reason; for a node not responding without one, for how long.
[[nodiscard]] std::string NodeReason(const v1::Node& node, std::int64_t now_ms);

/// Milliseconds since the epoch, now.
[[nodiscard]] std::int64_t NowMs();
/// Elapsed time as squeue shows it: M:SS, H:MM:SS or D-HH:MM:SS.
[[nodiscard]] std::string FormatElapsed(std::int64_t seconds);
/// A job's time limit in force: [D-]HH:MM:SS, or UNLIMITED for 0 (none).
[[nodiscard]] std::string FormatLimit(std::int64_t seconds);
/// A time limit as Slurm's squeue, sinfo and sacct print it: M:SS, H:MM:SS
/// or D-HH:MM:SS, UNLIMITED for 0 (none).
[[nodiscard]] std::string FormatSlurmLimit(std::int64_t seconds);
/// Local time as scontrol writes it (2024-05-01T13:45:00), or `none` for 0.
[[nodiscard]] std::string FormatTimestamp(std::int64_t epoch_ms);
/// Who gave a node its reason: an operator's name, else kControllerSetter
/// (the controller itself: a lost node, a failed prolog, a repair).
inline constexpr std::string_view kControllerSetter = "cohort";
[[nodiscard]] std::string ReasonSetter(const v1::Node& node);
/// ` [root@2026-12-06T13:30:00]` after a node's reason, as scontrol shows
/// who gave it and when; empty where the time is not known.
[[nodiscard]] std::string ReasonStamp(const v1::Node& node);
/// How long the job has run (pending: 0; finished: until its end).
[[nodiscard]] std::int64_t TimeUsedSeconds(const v1::Job& job, std::int64_t now_ms);
/// The owner's login name, else the uid as a number.
[[nodiscard]] std::string JobUser(const v1::Job& job);
/// The signal's name without SIG (KILL, USR1), or its number.
[[nodiscard]] std::string SignalName(int signal);
/// A signal from its name (USR1, SIGUSR1, usr1) or number (1-64); nullopt
/// when it is neither.
[[nodiscard]] std::optional<int> SignalNumber(std::string_view text);
/// The job's time-limit warning as --signal writes it (USR1@90, B:USR2@300),
/// or `none`; the spec's 0 fields are the defaults (SIGUSR1, 90 s).
[[nodiscard]] std::string FormatWarning(const v1::JobSpec& spec);
/// The exit as sacct's ExitCode and scontrol's ExitCode=: `CODE:SIGNAL` (0:9
/// when the signal 9 ended it).
[[nodiscard]] std::string FormatExitCode(const v1::Job& job);

/// The job as users write it: `12`; `12_3` for task 3 of array 12; for an
/// array's tasks not yet started, `12_[5-999%8]` (as squeue shows them).
/// Falls back to the numeric id when the controller sent no display id.
[[nodiscard]] std::string JobDisplayId(const v1::Job& job);
/// Orders jobs as the listings show them: by the array's id (a plain job's
/// own id), then by task, an array's not-yet-started tasks after its tasks.
[[nodiscard]] bool DisplayOrder(const v1::Job& a, const v1::Job& b);
/// One preemption as JSON: time_ms, by_job, by_display_id, mode, attempt,
/// signal (its name, USR1), grace_s, detail.
[[nodiscard]] nlohmann::ordered_json PreemptionToJson(const v1::Preemption& preemption);

/// Prints rows as left-aligned columns as wide as their widest cell, two
/// blanks apart (the first row is usually the header).
void PrintColumns(const std::vector<std::vector<std::string>>& rows, std::ostream& out);

/// How PrintParsable ends a line: with a `|` after the last cell too (as
/// `sacct -p`), or without (as `sacct -P`).
enum class ParsableEnd { kTrailingBar, kNoTrailingBar };

/// Prints rows as cells joined by `|`, without padding, for scripts. Cells
/// are written as they are (a `|` inside one is not escaped, as in sacct).
void PrintParsable(const std::vector<std::vector<std::string>>& rows, ParsableEnd end,
                   std::ostream& out);

/// A job as JSON: id, name, user, uid, account, partition, state, reason,
/// reason_detail, nodes, node_count, tasks_per_node, cpus_per_task,
/// gpus_per_node, memory_mb, time_limit_s (null: unlimited), time_used_s,
/// submit_time_ms, start_time_ms, end_time_ms (null: not yet), exit_code,
/// exit_signal, attempt, leaves, queue_position (null unless pending),
/// argv, batch_script, work_dir, submit_dir, output, error, exclusive,
/// switches, switches_wait_s, requeue, features, nodelist, exclude,
/// warn_signal (USR1; null: no warning), warn_seconds, warn_batch_only,
/// then the scheduling policy's: display_id, array_job_id (null: not an
/// array), array_task_id (null: not a task), array_pending, array (as
/// submitted), qos, priority, expected_start_ms (null: unknown), held,
/// dependency (what is left of it), kill_on_invalid_dep, suspended,
/// preempt_deadline_ms (null: not being preempted), preemptions, and
/// steps (StepToJson, the batch step first).
/// Never the environment or the script's text.
[[nodiscard]] nlohmann::ordered_json JobToJson(const v1::Job& job, std::int64_t now_ms);

/// One step as JSON: id (JOB.NAME), name (batch, 0, 1, …), state, nodes,
/// tasks, exit_code, exit_signal, start_time_ms, end_time_ms (null:
/// running), elapsed_s, reason, max_rss_kb, total_cpu_ms (of its ranks that
/// ended).
[[nodiscard]] nlohmann::ordered_json StepToJson(const v1::Job& job, const v1::JobStep& step,
                                                std::int64_t now_ms);
/// A step as users write it: `12.batch`, `12.0`, `12_3.1`.
[[nodiscard]] std::string StepDisplayId(const v1::Job& job, const v1::JobStep& step);
/// Peak resident memory as sacct's MaxRSS (`2048K`); empty for 0 (none
/// measured yet).
[[nodiscard]] std::string FormatMaxRss(std::int64_t kb);
/// CPU time as sacct's TotalCPU: `MM:SS.mmm` under an hour, else
/// `[D-]HH:MM:SS`.
[[nodiscard]] std::string FormatCpuTime(std::int64_t ms);
/// Usage as sacct's and sstat's TRESUsageInAve and TRESUsageInMax write
/// it: `cpu=TIME,mem=SIZE`, then, where the GPUs were measured (a
/// utilization of 0 or more), `gres/gpumem=SIZE,gres/gpuutil=PERCENT`.
/// Sizes as Slurm prints them: `2044K`, `1.50M`, `40G`.
[[nodiscard]] std::string FormatTresUsage(std::int64_t cpu_ms, std::int64_t rss_kb,
                                          std::int64_t gpu_mem_mb, int gpu_util_pct);
/// A size in kB as Slurm prints usage: `512K` below a MiB, then `1.50M`,
/// `2.25G`.
[[nodiscard]] std::string FormatUsageSize(std::int64_t kb);
/// How many nodes a hostlist names (0 when it does not parse).
[[nodiscard]] int HostlistSize(const std::string& hostlist);
/// How many nodes the step runs on (its hostlist's).
[[nodiscard]] int StepNodeCount(const v1::JobStep& step);
/// How long the step has run (until its end once it ended).
[[nodiscard]] std::int64_t StepElapsedSeconds(const v1::JobStep& step, std::int64_t now_ms);

/// A node as JSON: the Node message's fields, state as NodeStateName.
[[nodiscard]] nlohmann::ordered_json NodeToJson(const v1::Node& node);

}  // namespace cohort::cli
