// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "fence_tree.h"
#include "launch_file.h"
#include "pmi_host.h"
#include "pmix_host.h"
#include "step_io.h"

/// A step's MPI wire-up on one node (`srun --mpi=pmix` or `pmi2`): the
/// PMIx or PMI server the node's ranks talk to, and the fence tree
/// (fence_tree.h) that carries their fences between the step's nodes. The
/// tree's addresses travel once, as the step starts, through its `cohort
/// run` (a fence of the I/O stream, io_frame.h's kFencePart and
/// kFenceDone); the fences themselves go from stepd to stepd.
namespace cohort::step {

class MpiWireUp {
 public:
  /// What a rank's abort does: its step rank, status and message.
  using OnAbort = std::function<void(int rank, int status, const std::string& message)>;
  /// The OnAbort for the server's abort call, named `api` ("PMIx_Abort").
  using AbortHandler = std::function<OnAbort(std::string_view api)>;
  /// What a failed fence does to the step, once, after its ranks have been
  /// told and `why` was said in the node's first rank's error output (it
  /// names the fence and what failed: at a timeout, the nodes and ranks
  /// that never arrived).
  using OnFenceFailed = std::function<void(const std::string& why)>;

  /// Starts the fence tree and the server of `file.mpi.type`, and adds to
  /// each rank's environment what reaches the server. The status names
  /// what failed.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MpiWireUp>> Start(const std::string& folder,
                                                                        LaunchFile& file,
                                                                        StepIoForwarder& io,
                                                                        const AbortHandler& aborts,
                                                                        OnFenceFailed fence_failed);
  ~MpiWireUp();
  MpiWireUp(const MpiWireUp&) = delete;
  MpiWireUp& operator=(const MpiWireUp&) = delete;

  /// `srun --mpi=pmi2`: the rank's end of its PMI socket; -1 otherwise.
  [[nodiscard]] int PmiChildEnd(int rank) const;
  /// Closes the ranks' ends of their sockets once they have them.
  void CloseChildEnds();

 private:
  MpiWireUp(StepIoForwarder& io, int first_rank) : io_(io), first_rank_(first_rank) {}
  void Deliver(int fence, absl::StatusOr<std::string> parts);
  void Answer(std::string_view request, FenceTree::Reply reply);

  StepIoForwarder& io_;
  int first_rank_ = 0;          ///< the node's first rank, whose output says a fence failed
  OnFenceFailed fence_failed_;  ///< cleared once called
  std::mutex mutex_;            ///< the servers, as the tree's thread reaches them
  std::unique_ptr<PmixHost> pmix_;
  std::unique_ptr<PmiHost> pmi_;
  /// Direct-modex questions that came before this node's PMIx server was up
  /// (the other nodes learn its address first): answered once it is.
  std::vector<std::pair<std::string, FenceTree::Reply>> early_;
  std::unique_ptr<FenceTree> tree_;  ///< last: stopped first, before the servers go
};

}  // namespace cohort::step
