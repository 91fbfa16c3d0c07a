// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "spec/job_options.h"

/// The resource words GPU users write (--gpus, --gpus-per-task,
/// --cpus-per-gpu, --mem-per-gpu, --mem-per-cpu, -N MIN-MAX), turned into
/// the per-node shape a Cohort job has: the same ranks, CPUs, GPUs and
/// memory on each of its nodes.
namespace cohort::cli {

/// A whole number that is all of `text` (no sign, blank or suffix around
/// it); nullopt otherwise.
[[nodiscard]] std::optional<int> ParseCount(std::string_view text);

/// `-N N` or `-N MIN-MAX`.
struct NodeRange {
  int min = 1;
  int max = 1;
};
/// Reads -N's value; InvalidArgument with the accepted forms otherwise.
[[nodiscard]] absl::StatusOr<NodeRange> ParseNodeRange(std::string_view text);

/// `--gpus` / `--gres=gpu[:TYPE][:N]`: how many GPUs and of which type
/// (empty: any).
struct GpuCount {
  int count = 0;
  std::string type;
};
/// --gpus's value: N or TYPE:N.
[[nodiscard]] absl::StatusOr<GpuCount> ParseGpus(std::string_view text);
/// --gres's value: gpu, gpu:N, gpu:TYPE:N (gpu alone is one GPU).
[[nodiscard]] absl::StatusOr<GpuCount> ParseGres(std::string_view text);

/// What one node of the job holds.
struct NodeShape {
  int nodes = 1;
  int tasks_per_node = 1;
  int cpus_per_task = 1;
  int gpus_per_node = 0;
  std::string gpu_type;        ///< empty: any
  std::int64_t memory_mb = 0;  ///< 0: none asked
};

/// Combines the options into the shape, as Slurm reads them:
///  - --gpus=N spreads N over the nodes (a multiple of -N);
///  - --gpus-per-task=G gives each node G × its ranks;
///  - --cpus-per-gpu=C gives each rank C × the node's GPUs ÷ its ranks CPUs;
///  - --mem-per-gpu=M asks M × the node's GPUs, --mem-per-cpu=M asks
///    M × the node's CPUs, --mem=M per node.
/// InvalidArgument names the options that contradict each other (two ways
/// of giving the same quantity) or do not divide evenly, and the fix.
[[nodiscard]] absl::StatusOr<NodeShape> ResolveShape(const JobOptions& options);

/// Checks each resource option's value on its own (ResolveShape checks how
/// they combine), so that a directive's mistake names its line.
[[nodiscard]] absl::Status CheckResourceValues(const JobOptions& options);

}  // namespace cohort::cli
