// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cohort/alloc/channel_pool.h"
#include "cohort/alloc/gang_allocator.h"
#include "cohort/engine/job.h"

namespace cohort {
struct Effects;
struct FinishedReport;
}  // namespace cohort

namespace cohort::engine {

class JobBook;
class PassTriggers;
class Prioritizer;
using alloc::NodeId;

/// A job's life once it is queued: starting its gang, what its ranks and
/// nodes report, stopping it, finishing or requeueing it, time limits and
/// warnings. Every change of state goes through Apply and the transition
/// table (job.h); the commands it decides go into Effects.
class Lifecycle {
 public:
  /// The parts it uses, each of which outlives it.
  struct Parts {
    const topology::Topology& topology;
    alloc::NodePool& pool;
    JobBook& book;
    PassTriggers& triggers;
    Prioritizer& priority;
    alloc::ChannelPool& imex;                 ///< no channels without SwitchType=switch/nvidia_imex
    bool imex_per_segment = false;            ///< a channel per --segment rather than per job
    int max_batch_requeue = 5;                ///< MaxBatchRequeue=: the cap without --max-restarts
    std::chrono::seconds requeue_backoff{0};  ///< RequeueBackoff=: the first restart's wait
  };
  explicit Lifecycle(const Parts& parts)
      : topology_(parts.topology),
        pool_(parts.pool),
        book_(parts.book),
        triggers_(parts.triggers),
        priority_(parts.priority),
        imex_(parts.imex),
        imex_per_segment_(parts.imex_per_segment),
        max_batch_requeue_(parts.max_batch_requeue),
        requeue_backoff_(parts.requeue_backoff) {}

  /// The IMEX channels the job needs to start: none without IMEX, else one,
  /// or one per segment with imex_channel_per=segment.
  [[nodiscard]] int ImexChannelsNeeded(const Job& job) const;
  /// Whether that many are free; when not, the job's reason says so.
  bool ImexChannelsFree(Job& job, Effects& effects);
  /// Holds a restored active job's channels again; false (and the channels
  /// that could not be held dropped) when one is out of range or taken.
  [[nodiscard]] bool RestoreImexChannels(Job& job);
  [[nodiscard]] const alloc::ChannelPool& Imex() const { return imex_; }

  /// Asked when a rank of a running job died of a signal that was not its
  /// own time-limit warning, before the exit fails the job: true when a
  /// part above this one sent that signal and has dealt with the exit (a
  /// preemption victim's warning; Preemption::EndedOnWarning).
  using SignalledExit =
      std::function<bool(Job& job, NodeId node, int signal, Millis now, Effects& effects)>;
  void OnSignalledExit(SignalledExit hook) { signalled_exit_ = std::move(hook); }

  /// Applies an event through the transition table; ignored where it does
  /// not apply.
  void Apply(Job& job, JobEvent event, Millis now, Effects& effects);
  /// Commits the placement and launches the gang.
  void Start(Job& job, const alloc::Placement& placement, Millis now, Effects& effects);
  /// Splits a pending task off an array's record, the next one (`task` -1)
  /// or the one named, which must be pending there; the last task takes the
  /// record itself. The task keeps the record's hold. Returns the task.
  Job& SplitTask(Job& array, Millis now, Effects& effects, int task = -1);

  // What agents report. Unknown jobs and nodes outside the gang are ignored.
  void RankExited(JobId id, NodeId node, int exit_code, int signal, Millis now, Effects& effects);
  void LaunchFailed(JobId id, NodeId node, const std::string& reason, Millis now, Effects& effects);
  void JobReleased(JobId id, NodeId node, Millis now, Effects& effects);
  /// A node of a running --no-kill batch job or allocation was lost (`why`):
  /// the job goes on without it (its steps there end, its share is freed).
  /// False, and nothing done, where the job ends instead: not --no-kill, a
  /// command run as every rank, its first node, or its last.
  bool DropNode(Job& job, NodeId node, std::string_view why, Millis now, Effects& effects);
  /// A node of a job was lost (`why`). A spare of the job: let go, true. A
  /// node of a running gang that may be repaired (it asked for --spares or
  /// --requeue, and its restart cap allows one more): its rank waits for the
  /// repair, decided once for every loss within kRepairSettle (Tick), true.
  /// False, and nothing done, otherwise.
  bool HoldForRepair(Job& job, NodeId node, std::string_view why, Millis now, Effects& effects);
  /// `ranks_ok` ranks of the job on node rank `node_rank` exited 0 so far.
  void CountOk(Job& job, int node_rank, int ranks_ok, Millis now, Effects& effects);
  /// What a registering node reports of a job whose ranks there ended.
  void ApplyFinished(Job& job, NodeId node, int node_rank, const FinishedReport& report, Millis now,
                     Effects& effects);

  /// Time passes for active and waiting jobs: time limits, warnings,
  /// --switches waits (the end of a victim's grace time is Preemption's).
  void Tick(Millis now, Effects& effects);

  /// Notes that the job changed (once per call, for watchers and the store).
  static void Changed(const Job& job, Effects& effects);
  /// Sets a pending job's reason and its detail; a change is reported.
  static void SetReason(Job& job, PendingReason reason, std::string_view detail, Effects& effects);

  /// A rendezvous port (MASTER_PORT) for `job`'s own launch (`step` null)
  /// or one of its steps, whose first node is `master`: `preferred`, else
  /// the next in 20000-39999 that no other running job or step whose first
  /// node is `master` has.
  [[nodiscard]] int FreePort(NodeId master, int preferred, const Job& job,
                             const JobStep* step) const;

 private:
  void StopGang(Job& job, Effects& effects);
  void Finish(Job& job, Millis now, Effects& effects);
  /// A node of a running job was lost: whether it goes back to the queue
  /// (--requeue, under its restart cap); when the cap stops it, its reason
  /// says so.
  bool RequeueOnNodeLoss(Job& job) const;
  /// What an attempt that ends in a requeue leaves for accounting.
  [[nodiscard]] PastAttempt PastOf(const Job& job, Millis now) const;
  void ReleaseNode(Job& job, int node_rank, Effects& effects);
  /// Moves the gang's --spares out of a new placement into job.run.spares.
  void SetSparesApart(Job& job, Effects& effects);
  /// Gives back the job's spares (it stops, or a spare's node was lost).
  void ReleaseSpares(Job& job, Effects& effects);
  /// How often node failures may restart the job, and where the cap comes
  /// from in words.
  [[nodiscard]] std::pair<int, std::string> RestartCap(const Job& job) const;
  /// The repair decision for every rank in job.run.lost_ranks: a spare for
  /// each (the job's own in the lost node's group, a SpareNodes= node of
  /// that group, then the job's own elsewhere), else the job ends as a
  /// node loss does (requeued or failed).
  void Repair(Job& job, Millis now, Effects& effects);
  /// A replacement for a node lost from `group`: `inside`, one in the group
  /// (the job's own spare, then a SpareNodes= node that fits), else any of
  /// the job's own; none when no such spare is left (or up).
  struct Replacement {
    alloc::NodeGrant grant;
    int own = -1;  ///< index in job.run.spares; -1: a SpareNodes= node
  };
  [[nodiscard]] std::optional<Replacement> ChooseSpare(const Job& job, topology::GroupId group,
                                                       bool inside,
                                                       const std::vector<int>& own_taken,
                                                       const std::vector<NodeId>& site_taken) const;
  /// After a repair: the job's own launch starts again as the next attempt
  /// on the repaired allocation (its steps have ended).
  void RestartOwnLaunch(Job& job, Effects& effects);
  void Warn(Job& job, Effects& effects);
  [[nodiscard]] int MasterPort(const Job& job) const;

  const topology::Topology& topology_;
  alloc::NodePool& pool_;
  JobBook& book_;
  PassTriggers& triggers_;
  Prioritizer& priority_;
  alloc::ChannelPool& imex_;
  bool imex_per_segment_;
  int max_batch_requeue_;
  std::chrono::seconds requeue_backoff_;
  SignalledExit signalled_exit_;
};

}  // namespace cohort::engine
