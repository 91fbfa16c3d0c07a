// SPDX-License-Identifier: Apache-2.0
#include "cohort/launch/binding.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <climits>
#include <optional>
#include <set>

namespace cohort::binding {
namespace {

// The layout's GPU of index `index`; null when there is none.
const layout::Gpu* GpuAt(const layout::NodeLayout& layout, int index) {
  for (const layout::Gpu& gpu : layout.gpus) {
    if (gpu.index == index) return &gpu;
  }
  return nullptr;
}

using layout::Core;
using layout::Gpu;
using layout::NodeLayout;
using layout::NumaNode;

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

int PuCount(const std::vector<Core>& cores) {
  int n = 0;
  for (const Core& core : cores) n += static_cast<int>(core.pus.size());
  return n;
}

// [begin, end) of part `i` when `total` items are split into `parts` runs
// whose sizes differ by at most one, the larger runs first.
std::pair<int, int> EvenRun(int total, int parts, int i) {
  const int base = total / parts;
  const int extra = total % parts;
  const int begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

std::string Join(const std::vector<int>& items) { return fmt::format("{}", fmt::join(items, ",")); }

// What one rank is given out of one NUMA node: whole cores, or (when the
// node has fewer cores than ranks) some hardware threads of a core.
struct Share {
  std::vector<Core> cores;
  int numa = 0;
  int numa_pus = 0;    // hardware threads of that NUMA node
  int numa_ranks = 0;  // ranks sharing it
};

// Splits `node` among `ranks` ranks: whole cores while there are at least as
// many cores as ranks, else its hardware threads in core order, so that a
// rank shares a core only once every core has a rank.
std::vector<std::vector<Core>> SplitNuma(const NumaNode& node, int ranks) {
  std::vector<std::vector<Core>> parts(static_cast<std::size_t>(ranks));
  const int cores = static_cast<int>(node.cores.size());
  if (ranks <= cores) {
    for (int i = 0; i < ranks; ++i) {
      const auto [begin, end] = EvenRun(cores, ranks, i);
      parts[static_cast<std::size_t>(i)].assign(node.cores.begin() + begin,
                                                node.cores.begin() + end);
    }
    return parts;
  }
  std::vector<std::pair<std::size_t, int>> pus;  // (core, PU), core-major
  for (std::size_t c = 0; c < node.cores.size(); ++c) {
    for (const int pu : node.cores[c].pus) pus.emplace_back(c, pu);
  }
  for (int i = 0; i < ranks; ++i) {
    const auto [begin, end] = EvenRun(static_cast<int>(pus.size()), ranks, i);
    std::vector<Core>& part = parts[static_cast<std::size_t>(i)];
    std::size_t last_core = SIZE_MAX;
    for (int p = begin; p < end; ++p) {
      const auto [core, pu] = pus[static_cast<std::size_t>(p)];
      if (core != last_core) part.emplace_back();
      part.back().pus.push_back(pu);
      last_core = core;
    }
  }
  return parts;
}

// `count` hardware threads of `cores`: the first thread of each core, then
// the second, and so on, so that whole cores are spread before threads.
std::vector<int> ThreadsOf(const std::vector<Core>& cores, int count) {
  std::vector<int> out;
  for (std::size_t t = 0; static_cast<int>(out.size()) < count; ++t) {
    bool any = false;
    for (const Core& core : cores) {
      if (t < core.pus.size()) {
        any = true;
        out.push_back(core.pus[t]);
        if (static_cast<int>(out.size()) == count) break;
      }
    }
    if (!any) break;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string GpuBindText(const BindingOptions& options) {
  return fmt::format("--gpu-bind={}", ToString(options.gpu));
}

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// InvalidArgument for a request no layout could bind: no rank, no CPU per
// rank, or single:N with N below 1.
absl::Status CheckRequest(const BindingRequest& request) {
  const BindingOptions& options = request.options;
  if (request.ranks < 1) {
    return Invalid(
        fmt::format("the job has {} ranks on this node; a node runs at least 1", request.ranks));
  }
  if (request.cpus_per_task < 1) {
    return Invalid(
        fmt::format("--cpus-per-task={}; a rank needs at least 1 CPU", request.cpus_per_task));
  }
  if (options.gpu.kind == GpuBindKind::kSingle && options.gpu.ranks_per_gpu < 1) {
    return Invalid(
        fmt::format("--gpu-bind=single:{}: N must be at least 1", options.gpu.ranks_per_gpu));
  }
  return absl::OkStatus();
}

// Whether GPUs and ranks can be homed on NUMA node `numa`: it is known and
// has cores.
bool HasCores(const NodeLayout& layout, int numa) {
  const NumaNode* node = layout.FindNuma(numa);
  return node != nullptr && !node->cores.empty();
}

// The granted GPUs by index, or InvalidArgument for one the node lacks.
absl::StatusOr<std::vector<const Gpu*>> GrantedGpus(const NodeLayout& layout, std::uint64_t gpus) {
  std::vector<const Gpu*> granted;
  for (std::uint64_t left = gpus; left != 0; left &= left - 1) {
    const int index = std::countr_zero(left);
    const auto it = std::find_if(layout.gpus.begin(), layout.gpus.end(),
                                 [&](const Gpu& gpu) { return gpu.index == index; });
    if (it == layout.gpus.end()) {
      return Invalid(fmt::format("GPU {} is granted but the node has {} GPUs (0-{})", index,
                                 layout.gpus.size(), static_cast<int>(layout.gpus.size()) - 1));
    }
    granted.push_back(&*it);
  }
  return granted;
}

// The granted GPUs, NUMA node by NUMA node (unknown or CPU-less last), so
// that a rank's GPUs share a NUMA node whenever they can.
std::vector<const Gpu*> ByNuma(const NodeLayout& layout, const std::vector<const Gpu*>& granted) {
  std::vector<const Gpu*> ordered = granted;
  std::stable_sort(ordered.begin(), ordered.end(), [&](const Gpu* a, const Gpu* b) {
    const int ka = HasCores(layout, a->numa) ? a->numa : INT_MAX;
    const int kb = HasCores(layout, b->numa) ? b->numa : INT_MAX;
    return ka != kb ? ka < kb : a->index < b->index;
  });
  return ordered;
}

// Which GPUs each rank is near (and, but for --gpu-bind=none, uses), out of
// `ordered` (ByNuma's order).
absl::StatusOr<std::vector<std::vector<const Gpu*>>> NearGpus(
    const BindingRequest& request, const std::vector<const Gpu*>& ordered) {
  const BindingOptions& options = request.options;
  const int ranks = request.ranks;
  const int gpu_count = static_cast<int>(ordered.size());
  std::vector<std::vector<const Gpu*>> near(static_cast<std::size_t>(ranks));
  if (options.gpu.kind == GpuBindKind::kSingle) {
    const int per_gpu = options.gpu.ranks_per_gpu;
    if (gpu_count == 0) {
      return Invalid(
          fmt::format("{} binds each rank to a GPU, but the job has "
                      "no GPU on this node; ask for GPUs "
                      "(--gpus-per-node) or use --gpu-bind=none",
                      GpuBindText(options)));
    }
    if (ranks > per_gpu * gpu_count) {
      return Invalid(fmt::format(
          "{} puts at most {} rank{} on each GPU: {} "
          "ranks need {} GPUs, the job has {} on this "
          "node; ask for more GPUs, run fewer ranks per "
          "node, or use --gpu-bind=single:{}",
          GpuBindText(options), per_gpu, per_gpu == 1 ? "" : "s", ranks,
          (ranks + per_gpu - 1) / per_gpu, gpu_count, (ranks + gpu_count - 1) / gpu_count));
    }
    for (int r = 0; r < ranks; ++r) {
      near[static_cast<std::size_t>(r)].push_back(ordered[static_cast<std::size_t>(r / per_gpu)]);
    }
  } else if (gpu_count > 0) {
    for (int r = 0; r < ranks; ++r) {
      std::vector<const Gpu*>& mine = near[static_cast<std::size_t>(r)];
      if (ranks <= gpu_count) {
        const auto [begin, end] = EvenRun(gpu_count, ranks, r);
        mine.assign(ordered.begin() + begin, ordered.begin() + end);
      } else {
        // More ranks than GPUs: consecutive ranks share a GPU.
        mine.push_back(ordered[static_cast<std::size_t>(r * gpu_count / ranks)]);
      }
    }
  }
  return near;
}

// Each rank's home NUMA nodes (those of its near GPUs; ranks without a GPU
// of known locality take the NUMA nodes with cores, `usable`, in turn) and
// the GPUs it uses.
std::vector<RankBinding> HomeRanks(const NodeLayout& layout, const BindingRequest& request,
                                   const std::vector<const Gpu*>& granted,
                                   const std::vector<std::vector<const Gpu*>>& near,
                                   const std::vector<int>& usable) {
  std::vector<RankBinding> plan(static_cast<std::size_t>(request.ranks));
  std::size_t round_robin = 0;
  for (int r = 0; r < request.ranks; ++r) {
    RankBinding& rank = plan[static_cast<std::size_t>(r)];
    rank.local_rank = r;
    std::set<int> homes;
    for (const Gpu* gpu : near[static_cast<std::size_t>(r)]) {
      if (HasCores(layout, gpu->numa)) homes.insert(gpu->numa);
    }
    if (homes.empty() && !usable.empty()) homes.insert(usable[round_robin++ % usable.size()]);
    rank.numa_nodes.assign(homes.begin(), homes.end());

    if (request.options.gpu.kind == GpuBindKind::kNone) {
      for (const Gpu* gpu : granted) rank.gpus.push_back(gpu->index);
    } else {
      for (const Gpu* gpu : near[static_cast<std::size_t>(r)]) rank.gpus.push_back(gpu->index);
    }
    std::sort(rank.gpus.begin(), rank.gpus.end());
  }
  return plan;
}

// What each rank gets of each NUMA node it is home to: the node's cores
// split among the ranks there (or all of them, for --cpu-bind=numa).
absl::StatusOr<std::vector<std::vector<Share>>> ShareNumaNodes(
    const NodeLayout& layout, CpuBind cpu, bool overcommit, const std::vector<int>& usable,
    const std::vector<RankBinding>& plan) {
  std::vector<std::vector<Share>> shares(plan.size());
  for (const int numa : usable) {
    const NumaNode& node = *layout.FindNuma(numa);
    std::vector<int> here;
    for (const RankBinding& rank : plan) {
      if (std::find(rank.numa_nodes.begin(), rank.numa_nodes.end(), numa) !=
          rank.numa_nodes.end()) {
        here.push_back(rank.local_rank);
      }
    }
    if (here.empty()) continue;
    const int k = static_cast<int>(here.size());
    const int pus = PuCount(node.cores);
    if (cpu == CpuBind::kNuma) {
      for (const int r : here) {
        shares[static_cast<std::size_t>(r)].push_back({node.cores, numa, pus, k});
      }
      continue;
    }
    if (k > pus && !overcommit) {
      return Invalid(
          fmt::format("{} ranks share NUMA node {}, which has {} "
                      "hardware thread{}; run fewer ranks per "
                      "node, use --cpu-bind=none, or let ranks share threads with "
                      "-O/--overcommit",
                      k, numa, pus, pus == 1 ? "" : "s"));
    }
    // Overcommitted, each thread takes ranks in turn: rank i the part i
    // modulo the threads.
    const int part_count = std::min(k, pus);
    std::vector<std::vector<Core>> parts = SplitNuma(node, part_count);
    for (int i = 0; i < k; ++i) {
      shares[static_cast<std::size_t>(here[static_cast<std::size_t>(i)])].push_back(
          {parts[static_cast<std::size_t>(i % part_count)], numa, pus, k});
    }
  }
  return shares;
}

// Sets each rank's CPUs from its shares: all their threads, or for
// --cpu-bind=threads only cpus_per_task of them.
absl::Status BindCpus(const BindingRequest& request, const std::vector<std::vector<Share>>& shares,
                      std::vector<RankBinding>& plan) {
  for (RankBinding& rank : plan) {
    std::vector<Core> cores;
    for (const Share& share : shares[static_cast<std::size_t>(rank.local_rank)]) {
      cores.insert(cores.end(), share.cores.begin(), share.cores.end());
    }
    const int have = PuCount(cores);
    if (have < request.cpus_per_task && !request.overcommit) {
      const Share& first = shares[static_cast<std::size_t>(rank.local_rank)].front();
      return Invalid(fmt::format(
          "--cpus-per-task={} but rank {} gets {} hardware thread{} (NUMA "
          "node {} has {} for {} "
          "rank{}); lower --cpus-per-task or run fewer ranks per node",
          request.cpus_per_task, rank.local_rank, have, have == 1 ? "" : "s", first.numa,
          first.numa_pus, first.numa_ranks, first.numa_ranks == 1 ? "" : "s"));
    }
    if (request.options.cpu == CpuBind::kThreads) {
      rank.cpus = ThreadsOf(cores, request.cpus_per_task);
    } else {
      for (const Core& core : cores)
        rank.cpus.insert(rank.cpus.end(), core.pus.begin(), core.pus.end());
      std::sort(rank.cpus.begin(), rank.cpus.end());
      rank.cpus.erase(std::unique(rank.cpus.begin(), rank.cpus.end()), rank.cpus.end());
    }
  }
  return absl::OkStatus();
}

// Memory, NICs and the environment each rank's process gets from its NUMA
// nodes and GPUs.
void FillDevices(const NodeLayout& layout, const BindingOptions& options,
                 const std::vector<const Gpu*>& granted, std::vector<RankBinding>& plan) {
  // Job-relative GPU numbers: positions among the granted GPUs by index.
  std::vector<int> by_index;
  for (const Gpu* gpu : granted) by_index.push_back(gpu->index);
  std::sort(by_index.begin(), by_index.end());
  // --gpu-bind=ordered: one list for every rank, the GPU of local rank r at
  // position r (a rank's own is the first of those it is near), then the
  // rest in index order. torch.cuda.set_device(LOCAL_RANK) then picks the
  // rank's own GPU, and every GPU stays visible for peer-to-peer.
  std::vector<int> ordered;
  // Only with a GPU of its own per rank: a rank of several GPUs uses them
  // all (cuda:0..n-1 must be its own), and ranks that share one cannot
  // each have a position; they see their own, as with closest.
  const bool one_each = std::all_of(plan.begin(), plan.end(),
                                    [](const RankBinding& r) { return r.gpus.size() == 1; }) &&
                        plan.size() == granted.size();
  if (options.gpu.kind == GpuBindKind::kOrdered && one_each) {
    for (const RankBinding& rank : plan) {
      if (!rank.gpus.empty() &&
          std::find(ordered.begin(), ordered.end(), rank.gpus.front()) == ordered.end()) {
        ordered.push_back(rank.gpus.front());
      }
    }
    for (const int gpu : by_index) {
      if (std::find(ordered.begin(), ordered.end(), gpu) == ordered.end()) ordered.push_back(gpu);
    }
  }
  for (RankBinding& rank : plan) {
    if (options.mem == MemBind::kLocal) rank.mem_numa = rank.numa_nodes;
    // Rail-aware: the adapters that share its GPUs' PCIe switches, when
    // every GPU of the rank has some; else those of its NUMA nodes.
    const bool rails =
        !rank.gpus.empty() && std::all_of(rank.gpus.begin(), rank.gpus.end(), [&](int gpu) {
          const layout::Gpu* g = GpuAt(layout, gpu);
          return g != nullptr && !g->nics.empty();
        });
    if (rails) {
      for (const int gpu : rank.gpus) {
        for (const std::string& nic : GpuAt(layout, gpu)->nics) {
          if (std::find(rank.nics.begin(), rank.nics.end(), nic) == rank.nics.end()) {
            rank.nics.push_back(nic);
          }
        }
      }
    }
    for (const layout::Nic& nic : layout.nics) {
      if (!rails && std::find(rank.numa_nodes.begin(), rank.numa_nodes.end(), nic.numa) !=
                        rank.numa_nodes.end()) {
        rank.nics.push_back(nic.name);
      }
    }
    if (rank.nics.empty()) {
      for (const layout::Nic& nic : layout.nics) rank.nics.push_back(nic.name);
    }
    if (!rank.nics.empty()) {
      // "=" makes NCCL match names exactly: mlx5_1 alone would also pick
      // mlx5_10.
      rank.nccl_ib_hca = fmt::format("={}", fmt::join(rank.nics, ","));
    }
    if (!rank.gpus.empty()) {
      std::vector<int> visible = ordered.empty() ? rank.gpus : ordered;
      if (options.numbering == GpuNumbering::kJob) {
        for (int& gpu : visible) {
          gpu = static_cast<int>(std::lower_bound(by_index.begin(), by_index.end(), gpu) -
                                 by_index.begin());
        }
      }
      rank.cuda_visible_devices = Join(visible);
    }
  }
}

}  // namespace

absl::StatusOr<GpuBind> ParseGpuBind(std::string_view text) {
  const std::string value = Lower(text);
  if (value == "ordered") return GpuBind{GpuBindKind::kOrdered, 1};
  if (value == "closest") return GpuBind{GpuBindKind::kClosest, 1};
  if (value == "none") return GpuBind{GpuBindKind::kNone, 1};
  constexpr std::string_view kSingle = "single:";
  if (value.starts_with(kSingle)) {
    const std::string_view number = std::string_view(value).substr(kSingle.size());
    int n = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), n);
    if (number.empty() || error != std::errc() || end != number.data() + number.size() || n < 1) {
      return Invalid(
          fmt::format("--gpu-bind: '{}': N of single:N is the ranks "
                      "per GPU, a whole number of at least 1",
                      text));
    }
    return GpuBind{GpuBindKind::kSingle, n};
  }
  return Invalid(fmt::format("--gpu-bind: '{}' is not ordered, closest, single:N or none", text));
}

absl::StatusOr<CpuBind> ParseCpuBind(std::string_view text) {
  // Slurm's form: [quiet|verbose,]TYPE, where q[uiet] and v[erbose] only say
  // how much is printed and may stand alone (Snakemake runs `srun
  // --cpu-bind=q`): the binding is then the default one.
  std::optional<CpuBind> bind;
  const std::string lowered = Lower(text);
  std::string_view rest = lowered;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view word = rest.substr(0, comma);
    if (word == "q" || word == "quiet") {
      // Cohort prints nothing per rank: quiet already.
    } else if (word == "v" || word == "verbose") {
      return Invalid(fmt::format(
          "--cpu-bind={}: verbose is not printed per rank; `cohort show job ID --ranks` lists "
          "each rank's CPUs, GPUs and NUMA node",
          text));
    } else if (bind) {
      return Invalid(fmt::format(
          "--cpu-bind={}: give one binding type, with quiet (q) if you like: cores, threads, "
          "numa or none",
          text));
    } else if (word == "cores") {
      bind = CpuBind::kCores;
    } else if (word == "threads") {
      bind = CpuBind::kThreads;
    } else if (word == "numa" || word == "ldoms") {
      bind = CpuBind::kNuma;  // Slurm's locality domains are NUMA nodes
    } else if (word == "none") {
      bind = CpuBind::kNone;
    } else {
      return Invalid(fmt::format(
          "--cpu-bind: '{}' is not cores, threads, numa (ldoms), none, or quiet (q)", word));
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return bind.value_or(BindingOptions{}.cpu);
}

absl::StatusOr<MemBind> ParseMemBind(std::string_view text) {
  const std::string value = Lower(text);
  if (value == "local") return MemBind::kLocal;
  if (value == "none") return MemBind::kNone;
  return Invalid(fmt::format("--mem-bind: '{}' is not local or none", text));
}

absl::StatusOr<BindingOptions> ParseBindingOptions(std::string_view gpu, std::string_view cpu,
                                                   std::string_view mem) {
  BindingOptions options;
  if (!gpu.empty()) {
    absl::StatusOr<GpuBind> parsed = ParseGpuBind(gpu);
    if (!parsed.ok()) return parsed.status();
    options.gpu = *parsed;
  }
  if (!cpu.empty()) {
    absl::StatusOr<CpuBind> parsed = ParseCpuBind(cpu);
    if (!parsed.ok()) return parsed.status();
    options.cpu = *parsed;
  }
  if (!mem.empty()) {
    absl::StatusOr<MemBind> parsed = ParseMemBind(mem);
    if (!parsed.ok()) return parsed.status();
    options.mem = *parsed;
  }
  return options;
}

std::string ToString(const GpuBind& bind) {
  switch (bind.kind) {
    case GpuBindKind::kOrdered:
      return "ordered";
    case GpuBindKind::kClosest:
      return "closest";
    case GpuBindKind::kSingle:
      return fmt::format("single:{}", bind.ranks_per_gpu);
    case GpuBindKind::kNone:
      return "none";
  }
  return "ordered";
}

std::string_view ToString(CpuBind bind) {
  switch (bind) {
    case CpuBind::kCores:
      return "cores";
    case CpuBind::kThreads:
      return "threads";
    case CpuBind::kNuma:
      return "numa";
    case CpuBind::kNone:
      return "none";
  }
  return "cores";
}

std::string_view ToString(MemBind bind) { return bind == MemBind::kLocal ? "local" : "none"; }

absl::StatusOr<std::vector<RankBinding>> PlanBinding(const NodeLayout& layout,
                                                     const BindingRequest& request) {
  if (absl::Status valid = CheckRequest(request); !valid.ok()) return valid;
  absl::StatusOr<std::vector<const Gpu*>> granted = GrantedGpus(layout, request.gpus);
  if (!granted.ok()) return granted.status();
  absl::StatusOr<std::vector<std::vector<const Gpu*>>> near =
      NearGpus(request, ByNuma(layout, *granted));
  if (!near.ok()) return near.status();

  std::vector<int> usable;  // NUMA nodes with cores, ascending
  for (const NumaNode& node : layout.numa_nodes) {
    if (!node.cores.empty()) usable.push_back(node.os_index);
  }
  std::vector<RankBinding> plan = HomeRanks(layout, request, *granted, *near, usable);

  if (request.options.cpu != CpuBind::kNone) {
    if (usable.empty()) {
      return Invalid(
          "the node has no cores on any NUMA node to bind ranks to; "
          "use --cpu-bind=none");
    }
    absl::StatusOr<std::vector<std::vector<Share>>> shares =
        ShareNumaNodes(layout, request.options.cpu, request.overcommit, usable, plan);
    if (!shares.ok()) return shares.status();
    if (absl::Status bound = BindCpus(request, *shares, plan); !bound.ok()) return bound;
  }
  FillDevices(layout, request.options, *granted, plan);
  return plan;
}

absl::Status CheckBinding(const NodeLayout& layout, const BindingRequest& request) {
  return PlanBinding(layout, request).status();
}

CpuGrant GrantCpus(const NodeLayout& layout, std::span<const int> own, std::span<const int> held,
                   std::uint64_t gpus, int cpus) {
  const std::set<int> own_set(own.begin(), own.end());
  const std::set<int> held_set(held.begin(), held.end());
  std::set<int> near;  // the NUMA nodes of the launch's GPUs
  for (const Gpu& gpu : layout.gpus) {
    if (gpu.index >= 0 && gpu.index < 64 && ((gpus >> gpu.index) & 1) != 0 && gpu.numa >= 0) {
      near.insert(gpu.numa);
    }
  }
  std::vector<const Core*> order;  // near NUMA nodes' cores, then the others'
  for (const bool near_pass : {true, false}) {
    for (const NumaNode& node : layout.numa_nodes) {
      if (near.contains(node.os_index) != near_pass) continue;
      for (const Core& core : node.cores) order.push_back(&core);
    }
  }
  enum class Holder { kOwn, kFree, kOther };
  const auto holder = [&](const Core& core) {
    const auto in = [&](const std::set<int>& set) {
      return std::ranges::any_of(core.pus, [&](int pu) { return set.contains(pu); });
    };
    return in(own_set) ? Holder::kOwn : in(held_set) ? Holder::kOther : Holder::kFree;
  };
  CpuGrant grant;
  const std::size_t want = static_cast<std::size_t>(std::max(cpus, 1));
  for (const Holder pass : {Holder::kOwn, Holder::kFree, Holder::kOther}) {
    for (const Core* core : order) {
      if (grant.pus.size() >= want) break;
      if (holder(*core) != pass) continue;
      grant.pus.insert(grant.pus.end(), core->pus.begin(), core->pus.end());
      if (pass == Holder::kOther) ++grant.shared_cores;
    }
  }
  std::ranges::sort(grant.pus);
  return grant;
}

NodeLayout KeepCpus(const NodeLayout& layout, std::span<const int> pus) {
  const std::set<int> keep(pus.begin(), pus.end());
  const auto filter = [&](std::vector<Core>& cores) {
    std::vector<Core> kept;
    for (const Core& core : cores) {
      Core part;
      for (const int pu : core.pus) {
        if (keep.contains(pu)) part.pus.push_back(pu);
      }
      if (!part.pus.empty()) kept.push_back(std::move(part));
    }
    cores = std::move(kept);
  };
  NodeLayout out = layout;
  for (NumaNode& node : out.numa_nodes) filter(node.cores);
  filter(out.cores_without_numa);
  return out;
}

}  // namespace cohort::binding
