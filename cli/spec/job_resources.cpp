// SPDX-License-Identifier: Apache-2.0
#include "spec/job_resources.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "cohort/text/slurm_memory.h"

namespace cohort::cli {
namespace {

absl::Status Refuse(const std::string& message) { return absl::InvalidArgumentError(message); }

bool IsTypeName(std::string_view name) {
  // As Gres= on a node line allows: MIG-like names may start with a digit
  // (3g.20gb), but a name is not a count.
  if (name.empty() || std::isalnum(static_cast<unsigned char>(name.front())) == 0 ||
      ParseCount(name)) {
    return false;
  }
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

std::string_view Plural(int n) { return n == 1 ? "" : "s"; }

// A node's GPUs (as Gres= and Gpus= allow) and the memory ParseSlurmMemoryMb
// reads (2^40 megabytes): products of the per-GPU and per-CPU options stay
// within them, and within 64 bits.
constexpr std::int64_t kMaxGpusPerNode = 64;
constexpr std::int64_t kMaxMemoryMb = std::int64_t{1} << 50;
constexpr std::int64_t kMaxCpusPerNode = std::int64_t{1} << 20;

// Megabytes from a memory option already vetted by CheckMemory.
std::int64_t Megabytes(const std::optional<std::string>& text) {
  return text ? ParseSlurmMemoryMb(*text).value_or(0) : 0;
}

absl::Status CheckMemory(const std::optional<std::string>& text, std::string_view option) {
  if (!text) return absl::OkStatus();
  absl::StatusOr<std::int64_t> mb = ParseSlurmMemoryMb(*text);
  if (!mb.ok()) return Refuse(fmt::format("{}: {}", option, std::string(mb.status().message())));
  return absl::OkStatus();
}

// The GPUs per node and their type, from --gpus-per-node, --gres, --gpus
// and --gpus-per-task, at most one of which may be given.
absl::StatusOr<std::pair<int, std::string>> GpusPerNode(const JobOptions& o, int nodes,
                                                        int tasks_per_node) {
  std::vector<std::string_view> given;
  if (o.gpus_per_node) given.emplace_back("--gpus-per-node");
  if (o.gres) given.emplace_back("--gres");
  if (o.gpus) given.emplace_back("-G/--gpus");
  if (o.gpus_per_task) given.emplace_back("--gpus-per-task");
  if (given.size() > 1) {
    return Refuse(fmt::format("{} and {} both say how many GPUs the job has; give only one of them",
                              given[0], given[1]));
  }
  if (o.gpus_per_node) return std::pair<int, std::string>{*o.gpus_per_node, ""};
  if (o.gres) {
    absl::StatusOr<GpuCount> gres = ParseGres(*o.gres);
    if (!gres.ok()) return gres.status();
    return std::pair<int, std::string>{gres->count, gres->type};
  }
  if (o.gpus_per_task) {
    const std::int64_t gpus = std::int64_t{*o.gpus_per_task} * tasks_per_node;
    if (gpus > kMaxGpusPerNode) {
      return Refuse(fmt::format(
          "--gpus-per-task={} × {} rank{} per node is {} GPUs per node; a node holds at most {}",
          *o.gpus_per_task, tasks_per_node, Plural(tasks_per_node), gpus, kMaxGpusPerNode));
    }
    return std::pair<int, std::string>{static_cast<int>(gpus), ""};
  }
  if (!o.gpus) return std::pair<int, std::string>{0, ""};
  absl::StatusOr<GpuCount> gpus = ParseGpus(*o.gpus);
  if (!gpus.ok()) return gpus.status();
  if (gpus->count % nodes != 0) {
    return Refuse(fmt::format(
        "-G/--gpus={} does not split evenly over {} node{}; every node of a job holds the same "
        "GPUs: ask for a multiple of -N, or use --gpus-per-node",
        *o.gpus, nodes, Plural(nodes)));
  }
  return std::pair<int, std::string>{gpus->count / nodes, gpus->type};
}

}  // namespace

std::optional<int> ParseCount(std::string_view text) {
  int n = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

absl::StatusOr<NodeRange> ParseNodeRange(std::string_view text) {
  const std::size_t dash = text.find('-');
  // As Slurm's: -N-3 (no MIN) is one to three nodes.
  const std::optional<int> min =
      dash == 0 ? std::optional<int>(1) : ParseCount(text.substr(0, dash));
  const std::optional<int> max =
      dash == std::string_view::npos ? min : ParseCount(text.substr(dash + 1));
  if (!min || !max || *min < 1 || *max < *min) {
    return Refuse(fmt::format(
        "-N/--nodes \"{}\": write a node count (4) or a range MIN-MAX (2-4, or -4 for 1-4) of at "
        "least 1 node",
        text));
  }
  return NodeRange{*min, *max};
}

absl::StatusOr<GpuCount> ParseGpus(std::string_view text) {
  const std::size_t colon = text.rfind(':');
  const std::string_view type = colon == std::string_view::npos ? "" : text.substr(0, colon);
  const std::optional<int> count =
      ParseCount(colon == std::string_view::npos ? text : text.substr(colon + 1));
  if (!count || *count < 0 || (colon != std::string_view::npos && !IsTypeName(type))) {
    return Refuse(fmt::format(
        "-G/--gpus \"{}\": write the job's GPUs in all, N or TYPE:N (such as 8, or h100:8)", text));
  }
  return GpuCount{*count, std::string(type)};
}

absl::StatusOr<GpuCount> ParseGres(std::string_view text) {
  const auto invalid = [&] {
    return Refuse(fmt::format(
        "--gres \"{}\": write gpu:N or gpu:TYPE:N (such as gpu:8 or gpu:h100:8); GPUs are the "
        "only generic resource",
        text));
  };
  if (!text.starts_with("gpu")) return invalid();
  std::string_view rest = text.substr(3);
  if (rest.empty()) return GpuCount{1, ""};
  if (!rest.starts_with(":")) return invalid();
  rest.remove_prefix(1);
  const std::size_t colon = rest.find(':');
  if (colon == std::string_view::npos) {
    if (const std::optional<int> count = ParseCount(rest); count && *count >= 0) {
      return GpuCount{*count, ""};
    }
    if (IsTypeName(rest)) return GpuCount{1, std::string(rest)};  // gpu:h100 is one
    return invalid();
  }
  const std::string_view type = rest.substr(0, colon);
  const std::optional<int> count = ParseCount(rest.substr(colon + 1));
  if (!IsTypeName(type) || !count || *count < 0) return invalid();
  return GpuCount{*count, std::string(type)};
}

absl::StatusOr<NodeShape> ResolveShape(const JobOptions& o) {
  NodeShape shape;
  shape.nodes = o.nodes.value_or(1);
  shape.tasks_per_node = o.tasks_per_node.value_or(1);
  if (o.ntasks && o.tasks_per_node && !o.nodes && *o.tasks_per_node > 0) {
    // -n with --ntasks-per-node and no -N: as many nodes as that makes, as
    // Slurm takes them (`-n 8 --ntasks-per-node 4` is two nodes).
    shape.nodes = std::max(1, (*o.ntasks + *o.tasks_per_node - 1) / *o.tasks_per_node);
  }
  if (o.ntasks) {
    if (*o.ntasks % shape.nodes != 0) {
      return Refuse(fmt::format(
          "-n/--ntasks {} does not split evenly over {} node{}; every node of a job runs the same "
          "number of ranks: ask for a multiple of -N, or use --ntasks-per-node",
          *o.ntasks, shape.nodes, Plural(shape.nodes)));
    }
    // With -n, --ntasks-per-node is the most a node runs (Slurm's rule).
    if (o.tasks_per_node && *o.tasks_per_node < *o.ntasks / shape.nodes) {
      return Refuse(fmt::format(
          "-n/--ntasks {} over {} node{} is {} per node, more than --ntasks-per-node {}: ask for "
          "more nodes (-N) or fewer tasks",
          *o.ntasks, shape.nodes, Plural(shape.nodes), *o.ntasks / shape.nodes, *o.tasks_per_node));
    }
    shape.tasks_per_node = *o.ntasks / shape.nodes;
  }
  absl::StatusOr<std::pair<int, std::string>> gpus =
      GpusPerNode(o, shape.nodes, shape.tasks_per_node);
  if (!gpus.ok()) return gpus.status();
  if (gpus->first > kMaxGpusPerNode) {
    return Refuse(fmt::format("{} GPUs per node asked; a node holds at most {}", gpus->first,
                              kMaxGpusPerNode));
  }
  shape.gpus_per_node = gpus->first;
  shape.gpu_type = gpus->second;

  shape.cpus_per_task = o.cpus_per_task.value_or(1);
  if (o.cpus_per_gpu) {
    if (o.cpus_per_task) {
      return Refuse(
          "-c/--cpus-per-task and --cpus-per-gpu both say how many CPUs the ranks have; give "
          "only one of them");
    }
    if (shape.gpus_per_node == 0) {
      return Refuse(
          "--cpus-per-gpu needs GPUs: add --gpus-per-node, --gpus or --gres=gpu:N, or use -c");
    }
    const std::int64_t cpus = std::int64_t{*o.cpus_per_gpu} * shape.gpus_per_node;
    if (cpus > kMaxCpusPerNode) {
      return Refuse(
          fmt::format("--cpus-per-gpu={} × {} GPUs is {} CPUs per node; no node has so many",
                      *o.cpus_per_gpu, shape.gpus_per_node, cpus));
    }
    if (cpus % shape.tasks_per_node != 0) {
      return Refuse(fmt::format(
          "--cpus-per-gpu={} gives each node {} CPUs, which do not split evenly over its {} "
          "rank{}; use -c/--cpus-per-task",
          *o.cpus_per_gpu, cpus, shape.tasks_per_node, Plural(shape.tasks_per_node)));
    }
    shape.cpus_per_task = static_cast<int>(cpus / shape.tasks_per_node);
  }

  std::vector<std::string_view> memory;
  if (o.memory) memory.emplace_back("--mem");
  if (o.mem_per_gpu) memory.emplace_back("--mem-per-gpu");
  if (o.mem_per_cpu) memory.emplace_back("--mem-per-cpu");
  if (memory.size() > 1) {
    return Refuse(
        fmt::format("{} and {} both say how much memory the job has; give only one of them",
                    memory[0], memory[1]));
  }
  shape.memory_mb = Megabytes(o.memory);
  if (o.mem_per_gpu) {
    if (shape.gpus_per_node == 0) {
      return Refuse(
          "--mem-per-gpu needs GPUs: add --gpus-per-node, --gpus or --gres=gpu:N, or use --mem");
    }
    shape.memory_mb = Megabytes(o.mem_per_gpu) * shape.gpus_per_node;  // both bounded
  }
  if (o.mem_per_cpu) {
    const std::int64_t cpus = std::int64_t{shape.cpus_per_task} * shape.tasks_per_node;
    if (Megabytes(o.mem_per_cpu) > kMaxMemoryMb / std::max<std::int64_t>(cpus, 1)) {
      return Refuse(
          fmt::format("--mem-per-cpu={} × {} CPUs per node is more memory than any node has",
                      *o.mem_per_cpu, cpus));
    }
    shape.memory_mb = Megabytes(o.mem_per_cpu) * cpus;
  }
  return shape;
}

absl::Status CheckResourceValues(const JobOptions& o) {
  if (o.gpus) {
    if (absl::StatusOr<GpuCount> gpus = ParseGpus(*o.gpus); !gpus.ok()) return gpus.status();
  }
  if (o.gres) {
    if (absl::StatusOr<GpuCount> gres = ParseGres(*o.gres); !gres.ok()) return gres.status();
  }
  if (o.gpus_per_task && *o.gpus_per_task < 1) {
    return Refuse(
        fmt::format("--gpus-per-task is {}; ask for at least 1 GPU per rank", *o.gpus_per_task));
  }
  if (o.cpus_per_gpu && *o.cpus_per_gpu < 1) {
    return Refuse(
        fmt::format("--cpus-per-gpu is {}; ask for at least 1 CPU per GPU", *o.cpus_per_gpu));
  }
  for (const auto& [text, option] :
       {std::pair{&o.memory, "--mem"}, std::pair{&o.mem_per_gpu, "--mem-per-gpu"},
        std::pair{&o.mem_per_cpu, "--mem-per-cpu"}}) {
    if (absl::Status valid = CheckMemory(*text, option); !valid.ok()) return valid;
  }
  return absl::OkStatus();
}

}  // namespace cohort::cli
