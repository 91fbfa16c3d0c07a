// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "launch_file.h"

/// The PMI server a step's cohort-stepd hosts for its ranks on the node
/// (`srun --mpi=pmi2`), as Slurm's pmi2 plugin does, over a socket each
/// rank finds in PMI_FD. Both wire protocols: PMI-1's lines (`cmd=init
/// pmi_version=1`, what MPICH's own client library speaks) and PMI-2's
/// length-prefixed messages (`cmd=init pmi_version=2`, then `fullinit`:
/// what Slurm's libpmi2, Intel MPI and MPICH built for PMI-2 speak). The
/// key-value space is the step's: a rank's puts reach the other nodes at
/// the next barrier (PMI-2's kvs-fence), whose parts travel the step's
/// fence tree as a PMIx fence's do (fence_tree.h). PMI-2's node attributes
/// are the node's alone.
namespace cohort::step {

/// Where a rank finds its end of the PMI socket.
inline constexpr int kPmiFd = 4;

class PmiHost {
 public:
  /// Sends this node's part of barrier `fence` to `cohort run` (any thread).
  using SendPart = std::function<void(int fence, std::string part)>;
  /// A rank called PMI_Abort: its step rank, exit code and message.
  using OnAbort = std::function<void(int rank, int code, const std::string& message)>;

  /// Makes one socket pair per local rank of `layout` (the step's ranks on
  /// this node: `local_ranks`) and starts the thread that serves them.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<PmiHost>> Start(std::int64_t job_id,
                                                                      int step_id, MpiSetup layout,
                                                                      std::vector<int> local_ranks,
                                                                      SendPart send_part,
                                                                      OnAbort on_abort);
  /// Stops the thread and closes the sockets.
  ~PmiHost();
  PmiHost(const PmiHost&) = delete;
  PmiHost& operator=(const PmiHost&) = delete;

  /// The rank's end of its socket (to become kPmiFd in it), and its
  /// environment: PMI_FD, PMI_RANK, PMI_SIZE, PMI_JOBID.
  [[nodiscard]] int ChildEnd(int rank) const;
  [[nodiscard]] std::vector<std::string> Environment(int rank) const;
  /// Closes the ranks' ends once they have them.
  void CloseChildEnds();

  /// Barrier `fence` ended: every node's part, in node order, or why not.
  /// Any thread.
  void FenceDone(int fence, absl::StatusOr<std::string> parts);

  /// What a rank's line (PMI-1) or message (PMI-2, without its length
  /// field) asks, and the bytes to answer with: none while it waits (a
  /// barrier, a node attribute not put yet). For the thread, and for tests.
  struct Client;
  std::string Handle(Client& client, std::string_view message);

 private:
  PmiHost() = default;
  void Serve();
  void Drain(Client& client);
  std::string HandlePmi2(Client& client, std::string_view body);
  std::string Barrier(Client& client);
  void EndBarrier(const absl::StatusOr<std::string>& parts);
  void Send(Client& client, std::string_view text);

  std::int64_t job_id_ = 0;
  int step_id_ = 0;
  MpiSetup layout_;
  int size_ = 0;
  std::string kvsname_;
  std::string process_mapping_;
  SendPart send_part_;
  OnAbort on_abort_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::map<std::string, std::string> kvs_;         ///< the step's, as of the last barrier
  std::map<std::string, std::string> puts_;        ///< this node's since the last barrier
  std::map<std::string, std::string> node_attrs_;  ///< PMI-2's info-putnodeattr, this node's
  std::size_t put_bytes_ = 0;
  int next_fence_ = 0;
  int waiting_ = 0;   ///< local ranks in the barrier
  std::mutex mutex_;  ///< done_ between threads
  std::vector<std::pair<int, absl::StatusOr<std::string>>> done_;
  int wake_[2] = {-1, -1};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cohort::step
