// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "launch_file.h"

struct pmix_proc;
using pmix_proc_t = struct pmix_proc;

/// The PMIx server a step's cohort-stepd hosts for its ranks on the node
/// (`srun --mpi=pmix`), built on OpenPMIx: the ranks' PMIx clients (Open
/// MPI, MPICH, NVSHMEM, ...) connect to it and learn the step's shape from
/// it. Their fences across nodes go through the host (each node's part out,
/// every node's parts back: the step's fence tree, fence_tree.h), and so
/// does a rank's get of a remote rank's data outside a fence (PMIx's direct
/// modex): asked of the node that holds the rank, whose server answers.
namespace cohort::step {

/// What the server tells the ranks, and whose they are.
struct PmixStep {
  std::int64_t job_id = 0;
  int step_id = 0;
  MpiSetup layout;               ///< the step's nodes and tasks on each
  std::vector<int> local_ranks;  ///< the step's ranks on this node, ascending
  uid_t uid = 0;                 ///< whose processes connect
  gid_t gid = 0;
  std::string tmpdir;  ///< the server's folder: made, given to uid, removed
};

/// One per process: OpenPMIx hosts one server. Its callbacks come on
/// OpenPMIx's own thread; the functions below may be called from any.
class PmixHost {
 public:
  /// Sends this node's part of fence `fence` (numbered from 0 in the order
  /// the ranks call fences, the same on every node) to `cohort run`.
  using SendPart = std::function<void(int fence, std::string part)>;
  /// A rank called PMIx_Abort: its step rank, status and message.
  using OnAbort = std::function<void(int rank, int status, const std::string& message)>;
  /// What a direct-modex get ends with: the rank's data, or why not.
  using ModexEnd = std::function<void(absl::StatusOr<std::string>)>;
  /// Asks node `node`'s stepd `request` (AnswerModex there); any thread.
  using AskNode = std::function<void(int node, std::string request, ModexEnd end)>;

  /// Starts the server, registers the step's namespace ("cohort.JOB.STEP")
  /// with its job-level and per-rank facts, and each local rank as a client.
  /// The status names what failed.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<PmixHost>> Start(PmixStep step,
                                                                       SendPart send_part,
                                                                       AskNode ask_node,
                                                                       OnAbort on_abort);
  /// Finalizes the server and removes its folder.
  ~PmixHost();
  PmixHost(const PmixHost&) = delete;
  PmixHost& operator=(const PmixHost&) = delete;

  /// What rank `rank` (of the step, on this node) needs in its environment
  /// to reach the server: NAME=value lines (PMIX_NAMESPACE, PMIX_RANK, the
  /// server's address, ...).
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> Environment(int rank) const;

  /// Fence `fence` ended: every node's parts in node order, or why not.
  void FenceDone(int fence, absl::StatusOr<std::string> parts);

  /// For the OpenPMIx callbacks (pmix_host.cpp), on its thread: this
  /// node's part of the next fence, and what to do with every node's.
  using FenceEnd = std::function<void(absl::StatusOr<std::string>)>;
  void Fence(std::string part, FenceEnd end);
  void Abort(int rank, int status, const std::string& message) const;
  /// A local rank asked for remote rank `rank`'s data outside a fence.
  void Modex(int rank, ModexEnd end) const;
  /// Whether `proc` is of the step's namespace; whether `procs` name the
  /// whole step (its wildcard, or every rank).
  [[nodiscard]] bool Ours(const pmix_proc_t& proc) const;
  [[nodiscard]] bool WholeStep(const pmix_proc_t procs[], std::size_t count) const;

  /// Another node's stepd asks for the data of a rank of this node
  /// (`request`: its number): `reply` gets what the rank committed, once
  /// it has (OpenPMIx holds the request until then), from any thread.
  void AnswerModex(std::string_view request, ModexEnd reply) const;

 private:
  explicit PmixHost(PmixStep step) : step_(std::move(step)) {}

  PmixStep step_;
  std::string nspace_;
  SendPart send_part_;
  AskNode ask_node_;
  OnAbort on_abort_;
  mutable std::mutex mutex_;
  int next_fence_ = 0;
  std::map<int, FenceEnd> fences_;
  bool started_ = false;
};

}  // namespace cohort::step
