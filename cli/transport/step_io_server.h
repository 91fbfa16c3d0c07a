// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "cohort/v1/cohort.pb.h"
#include "format/rank_output.h"

/// `cohort run`'s end of a step's I/O stream (cohort/io_frame.h), as srun's
/// I/O connections: each of the step's nodes' cohort-stepd dials in and
/// sends its ranks' stdout and stderr, which are printed here whole lines
/// at a time (with `--label`, each line after its rank); stdin goes to the
/// rank that reads it. Nothing of a step's output needs a filesystem shared
/// with the nodes.
namespace cohort::cli {

/// Whether the step's stdin rank runs on a pseudo-terminal (--pty).
enum class StepTerminal { kNone, kPty };
/// Where the ranks' output goes: over the stream, or to -o/-e's files
/// (with --mpi=pmix or pmi2, whose wire-up the stream still starts).
enum class StepOutput { kStream, kFiles };

class StepIoServer {
 public:
  /// Listens on `host` (an address of this host the nodes can reach; port
  /// chosen by the system) and starts the thread that serves the stream.
  /// `stdin_rank` -1: stdin is not read. With StepTerminal::kPty that rank
  /// runs on a pseudo-terminal: its output is printed as it comes, not a
  /// line at a time, and the terminal's size is sent to it. With
  /// StepOutput::kFiles the stepds send only what they say themselves. The errno's
  /// status when it cannot listen.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<StepIoServer>> Listen(const std::string& host,
                                                                            RankLabels labels,
                                                                            int stdin_rank,
                                                                            StepTerminal terminal,
                                                                            StepOutput output);
  ~StepIoServer();
  StepIoServer(const StepIoServer&) = delete;
  StepIoServer& operator=(const StepIoServer&) = delete;

  /// What StartStep carries to the stepds: the address, the key, the stdin
  /// rank.
  [[nodiscard]] v1::StepIo Io() const;

  /// Once the step has ended: waits until `nodes` stepds have said Done
  /// (every rank's output is here), or `limit` has passed with no output
  /// arriving (output still on its way is waited for, however long: a busy
  /// machine must not cut it off), then stops the thread and prints what is
  /// left of unfinished lines.
  void Finish(int nodes, std::chrono::milliseconds limit);

 private:
  StepIoServer() = default;
  struct Connection;
  void Serve();
  void Print(int rank, bool error, std::string_view data);
  void FlushPartials();

  int listener_ = -1;
  int wake_[2] = {-1, -1};
  std::string address_;
  std::string key_;
  int stdin_rank_ = -1;
  bool pty_ = false;
  bool files_ = false;  ///< StepOutput::kFiles
  /// How long a PMIx fence waits for every node's part before it fails
  /// (SLURM_PMIX_TIMEOUT, Slurm's PMIxTimeout: 300 s).
  std::chrono::seconds fence_timeout_{300};
  RankLabels labels_ = RankLabels::kNone;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  int done_ = 0;                     ///< stepds that said Done; guarded by mutex_
  std::uint64_t output_frames_ = 0;  ///< stdout and stderr frames received; guarded by mutex_
  /// Output without its newline yet, by (rank, stderr?); the thread's.
  std::map<std::pair<int, bool>, std::string> partial_;
};

/// 128 random bits as 32 hex digits (/dev/urandom): the stream's key, a
/// step's token.
[[nodiscard]] std::string RandomToken();

/// The address of this host that `cohort run` offers the step's nodes:
/// $COHORT_IO_ADDRESS, else the one it reaches the controller `target`
/// (HOST:PORT) from, else (a Unix socket) 127.0.0.1.
[[nodiscard]] std::string StepIoHost(const std::string& target);

}  // namespace cohort::cli
