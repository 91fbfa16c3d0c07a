// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>

/// Following the output files of a job's ranks, for `cohort run`.
namespace cohort::cli {

/// Whether each line printed starts with `<rank>: ` (srun --label).
enum class RankLabels { kNone, kRank };

/// Follows the files `<job>-<rank>.out` and `<job>-<rank>.err` that the
/// ranks of one job write into `folder` (the output pattern %j-%t.out) and
/// prints their whole lines as they grow: .out to stdout, .err to stderr,
/// ranks in order. A file that shrinks (the job was started again) is read
/// from its start. Single-threaded; owns no file between calls.
class RankOutput {
 public:
  RankOutput(std::filesystem::path folder, std::int64_t job_id, RankLabels labels);

  /// Prints the lines completed since the last call.
  void Poll();
  /// Prints everything left, a last line without a newline too.
  void Flush();
  /// Whether any output file has appeared.
  [[nodiscard]] bool SawFiles() const { return !files_.empty(); }

 private:
  enum class Stream { kOut, kErr };
  struct File {
    std::filesystem::path path;
    std::uintmax_t offset = 0;
    std::string partial;  ///< read, not yet printed: no newline yet
  };
  void Discover();
  void Read(int rank, Stream stream, File& file);
  void Print(int rank, Stream stream, std::string_view text);

  std::filesystem::path folder_;
  std::string prefix_;  ///< "<job>-"
  RankLabels labels_;
  std::map<std::pair<int, Stream>, File> files_;
};

}  // namespace cohort::cli
