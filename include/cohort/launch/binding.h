// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cohort/launch/node_layout.h"

/// The binding plan: which GPUs, CPUs, memory and network adapters each rank
/// of a job on one node gets, by Slurm's --gpu-bind, --cpu-bind and
/// --mem-bind. Pure: the agent applies the plan when it starts the ranks; the
/// controller calls CheckBinding at submit to refuse what cannot be bound.
/// The rules are in docs/environment.md ("Binding").
namespace cohort::binding {

enum class GpuBindKind {
  kOrdered,  ///< as kClosest, but when every rank has one GPU of its own,
             ///< each sees all the job's GPUs on the node, its own at
             ///< position LOCAL_RANK
  kClosest,  ///< the granted GPUs split among the ranks, a NUMA node's GPUs
             ///< together; each rank sees only its own
  kSingle,   ///< one GPU per rank, `ranks_per_gpu` consecutive ranks on each
  kNone,     ///< every rank sees all the job's GPUs on the node
};

struct GpuBind {
  GpuBindKind kind = GpuBindKind::kOrdered;
  int ranks_per_gpu = 1;  ///< kSingle only: the N of single:N

  friend bool operator==(const GpuBind&, const GpuBind&) = default;
};

enum class CpuBind {
  kCores,    ///< the rank's share of whole cores of its NUMA node(s)
  kThreads,  ///< cpus-per-task hardware threads of that share, one per core
             ///< first
  kNuma,     ///< every CPU of its NUMA node(s), shared with the other ranks there
  kNone,     ///< not bound
};

enum class MemBind {
  kLocal,  ///< memory on the rank's NUMA node(s)
  kNone,   ///< not bound
};

/// How CUDA_VISIBLE_DEVICES numbers GPUs: by the node's indices (ranks see
/// every GPU of the node, today's case), or 0..n-1 over the job's GPUs on the
/// node in index order (when the launcher hides the other GPUs from the job).
enum class GpuNumbering { kNode, kJob };

struct BindingOptions {
  GpuBind gpu;
  CpuBind cpu = CpuBind::kCores;
  MemBind mem = MemBind::kLocal;
  GpuNumbering numbering = GpuNumbering::kNode;
};

/// Parse the values of --gpu-bind (`ordered`, `closest`, `single:N` with N ≥ 1,
/// `none`),
/// --cpu-bind (`cores`, `threads`, `numa`, `none`) and --mem-bind (`local`,
/// `none`), case-insensitively. InvalidArgument names the option, the value
/// and what it may be: `--gpu-bind: 'foo' is not ordered, closest, single:N or none`.
[[nodiscard]] absl::StatusOr<GpuBind> ParseGpuBind(std::string_view text);
[[nodiscard]] absl::StatusOr<CpuBind> ParseCpuBind(std::string_view text);
[[nodiscard]] absl::StatusOr<MemBind> ParseMemBind(std::string_view text);

/// The three options at once, as a job gives them; an empty value is the
/// default (ordered, cores, local).
[[nodiscard]] absl::StatusOr<BindingOptions> ParseBindingOptions(std::string_view gpu,
                                                                 std::string_view cpu,
                                                                 std::string_view mem);

/// The option values as ParseGpuBind & co. read them: `single:2`, `cores`,
/// `local`.
[[nodiscard]] std::string ToString(const GpuBind& bind);
[[nodiscard]] std::string_view ToString(CpuBind bind);
[[nodiscard]] std::string_view ToString(MemBind bind);

/// What one node runs of a job.
struct BindingRequest {
  std::uint64_t gpus = 0;  ///< the GPUs granted on this node: bit i is GPU index i
  int ranks = 1;           ///< the job's ranks on this node (local ranks 0..ranks-1)
  int cpus_per_task = 1;   ///< CPUs (hardware threads) each rank needs at least
  BindingOptions options;
  /// -O/--overcommit: more ranks than hardware threads share them, each
  /// thread taking ranks in turn, and a rank may get fewer threads than
  /// cpus_per_task.
  bool overcommit = false;
};

/// One local rank's binding.
struct RankBinding {
  int local_rank = 0;
  std::vector<int> gpus;             ///< node GPU indices it uses, ascending
  std::vector<int> numa_nodes;       ///< its NUMA nodes (those of its GPUs),
                                     ///< ascending; empty: none known
  std::vector<int> cpus;             ///< PU OS indices, ascending; empty: not bound
  std::vector<int> mem_numa;         ///< NUMA nodes for its memory; empty: not bound
  std::vector<std::string> nics;     ///< its nearest InfiniBand/RoCE adapters
  std::string cuda_visible_devices;  ///< empty: the job has no GPU here; leave it unset
  std::string nccl_ib_hca;           ///< empty: no adapter known; leave it unset
};

/// The binding of every local rank, in local rank order. Returns
/// InvalidArgument, with the reason and what to change, for a request that
/// is malformed (no rank, cpus-per-task below 1, a granted GPU the layout
/// lacks) or cannot be bound on this layout (more ranks than single:N allows,
/// more ranks on a NUMA node than it has hardware threads or cpus-per-task
/// above a rank's share, both unless overcommitted; binding CPUs of a node
/// without any).
[[nodiscard]] absl::StatusOr<std::vector<RankBinding>> PlanBinding(const layout::NodeLayout& layout,
                                                                   const BindingRequest& request);

/// PlanBinding's verdict without the plan: what the controller calls at
/// submit, with the layout of the job's node type.
[[nodiscard]] absl::Status CheckBinding(const layout::NodeLayout& layout,
                                        const BindingRequest& request);

/// The hardware threads one launch takes on a node, so that jobs sharing a
/// node never share a core.
struct CpuGrant {
  std::vector<int> pus;  ///< PU OS indices, ascending
  int shared_cores = 0;  ///< cores among them that other jobs hold too (the
                         ///< node had too few free ones)
};

/// Picks whole cores for a launch of `cpus` hardware threads (at least 1):
/// first the cores its own job already holds (`own`), then free cores (in
/// neither `own` nor `held`, the threads other jobs' launches hold), in both
/// cases those on the NUMA nodes of `gpus` (a mask of GPU indices) before the
/// others, in layout order. A core's threads all go to the launch, so the
/// last core may bring more threads than `cpus`. When free cores run out it
/// takes held ones, in the same order, and counts them in shared_cores.
/// Cores without a NUMA node are never picked. Pure.
[[nodiscard]] CpuGrant GrantCpus(const layout::NodeLayout& layout, std::span<const int> own,
                                 std::span<const int> held, std::uint64_t gpus, int cpus);

/// `layout` with only the cores that have a thread in `pus` (ascending), and
/// of those only those threads: what PlanBinding splits among a launch's
/// ranks once GrantCpus has picked its cores. NUMA nodes, GPUs and NICs stay.
/// Pure.
[[nodiscard]] layout::NodeLayout KeepCpus(const layout::NodeLayout& layout,
                                          std::span<const int> pus);

}  // namespace cohort::binding
