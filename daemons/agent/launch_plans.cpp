// SPDX-License-Identifier: Apache-2.0
// A launch as a node plans it: its ranks' bindings, how they are reported,
// and the plan cohort-stepd is handed (launch_plans.h).
#include "launch_plans.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "cohort/launch/binding.h"
#include "cohort/launch/node_layout.h"
#include "launch_tasks.h"

namespace cohort::agent {

absl::StatusOr<std::vector<binding::RankBinding>> PlanBindings(const layout::NodeLayout& layout,
                                                               const v1::Launch& launch,
                                                               std::span<const int> cpus) {
  const v1::JobSpec& spec = launch.spec();
  binding::BindingRequest request;
  request.gpus = launch.gpus();
  request.ranks = LaunchTasks(launch);
  request.cpus_per_task = spec.cpus_per_task() > 0 ? spec.cpus_per_task() : 1;
  request.overcommit = spec.overcommit();
  absl::StatusOr<binding::BindingOptions> options =
      binding::ParseBindingOptions(spec.gpu_bind(), spec.cpu_bind(), spec.mem_bind());
  if (!options.ok()) return options.status();
  request.options = *options;
  if (cpus.empty()) return binding::PlanBinding(layout, request);
  absl::StatusOr<std::vector<binding::RankBinding>> kept =
      binding::PlanBinding(binding::KeepCpus(layout, cpus), request);
  if (kept.ok()) return kept;
  // The granted cores cannot be split as the options ask (they lie on
  // another NUMA node than the GPUs, say): the node-wide plan, each rank
  // kept to the grant.
  absl::StatusOr<std::vector<binding::RankBinding>> plan = binding::PlanBinding(layout, request);
  if (!plan.ok()) return plan;
  for (binding::RankBinding& rank : *plan) {
    if (rank.cpus.empty()) continue;
    std::vector<int> inside;
    std::ranges::set_intersection(rank.cpus, cpus, std::back_inserter(inside));
    rank.cpus = inside.empty() ? std::vector<int>(cpus.begin(), cpus.end()) : inside;
  }
  return plan;
}

std::vector<v1::RankBinding> ReportBindings(const std::vector<binding::RankBinding>& bindings,
                                            const v1::Launch& launch, const std::string& node) {
  const int tasks = launch.tasks_per_node() != 0 ? launch.tasks_per_node() : 1;
  const int first_rank =
      launch.has_step() ? launch.step_layout().first_rank() : launch.node_rank() * tasks;
  std::vector<v1::RankBinding> out;
  for (const binding::RankBinding& b : bindings) {
    v1::RankBinding& r = out.emplace_back();
    r.set_rank(first_rank + b.local_rank);
    r.set_node(node);
    r.set_gpus(fmt::format("{}", fmt::join(b.gpus, ",")));
    r.set_cpus(layout::FormatCpuList(b.cpus));
    r.set_numa(b.mem_numa.empty() ? (b.numa_nodes.empty() ? -1 : b.numa_nodes.front())
                                  : b.mem_numa.front());
    r.set_nics(fmt::format("{}", fmt::join(b.nics, ",")));
  }
  return out;
}

step::LaunchPlan MakePlan(const v1::Launch& launch, const std::string& node,
                          const std::string& cluster_name) {
  const v1::JobSpec& spec = launch.spec();
  step::LaunchPlan plan;
  launch::LaunchContext& context = plan.context;
  context.job_id = launch.job_id();
  context.restart_count = std::max(launch.attempt() - 1, 0);
  context.job_name = spec.name();
  context.user_name = spec.user_name();
  context.partition = launch.partition().empty() ? spec.partition() : launch.partition();
  context.cluster_name = launch.cluster_name().empty() ? cluster_name : launch.cluster_name();
  context.nodelist = launch.nodelist().empty() ? node : launch.nodelist();
  // Zero is proto3's "unset"; a negative count is left for PlanLaunch to
  // refuse.
  context.num_nodes = launch.num_nodes() != 0 ? launch.num_nodes() : 1;
  context.node_rank = launch.node_rank();
  context.node_name = node;
  context.tasks_per_node = launch.tasks_per_node() != 0 ? launch.tasks_per_node()
                           : spec.tasks_per_node() != 0 ? spec.tasks_per_node()
                                                        : 1;
  context.cpus_per_task = spec.cpus_per_task() > 0 ? spec.cpus_per_task() : 1;
  context.overcommit = spec.overcommit();
  for (int gpu = 0; gpu < 64; ++gpu) {
    if ((launch.gpus() >> gpu) & 1U) context.gpus.push_back(gpu);
  }
  context.master_addr = launch.master_addr();
  context.topology_addr = launch.topology_addr();
  context.topology_addr_pattern = launch.topology_addr_pattern();
  if (launch.has_imex_channel()) context.imex_channel = launch.imex_channel();
  context.master_port = launch.master_port();
  context.submit_dir = spec.submit_dir();
  context.base_env.reserve(static_cast<std::size_t>(spec.env_size()));
  for (const v1::EnvVar& var : spec.env()) context.base_env.push_back({var.name(), var.value()});
  context.time_limit_s = launch.time_limit_s();
  context.job_start_s = launch.job_start_time_ms() / 1000;
  context.account = spec.account();
  context.cpus_on_node = launch.cpus();
  context.memory_mb = spec.memory_mb();
  if (launch.has_step()) {
    const v1::StepLayout& layout = launch.step_layout();
    context.kind = launch::LaunchKind::kStep;
    context.step_id = launch.step();
    context.step = {.nodelist = layout.nodelist(),
                    .num_nodes = layout.num_nodes(),
                    .node_index = layout.node_index(),
                    .first_rank = layout.first_rank(),
                    .tasks = layout.tasks(),
                    .num_tasks = layout.num_tasks(),
                    .tasks_per_node = layout.tasks_per_node()};
    context.mpi_type = spec.mpi().empty() ? "none" : spec.mpi();
    // Only steps run in the job's container: its batch script stays on the
    // host, as with pyxis.
    const v1::ContainerSpec& c = spec.container();
    step::ContainerSetup& container = plan.container;
    container.image = c.image();
    container.mounts = c.mounts();
    container.workdir = c.workdir();
    container.name = c.name();
    container.env = c.env();
    container.save = c.save();
    container.mount_home = c.mount_home();
    container.remap_root = c.remap_root();
    container.writable = !c.has_writable() || c.writable();
    container.entrypoint = c.entrypoint();
  } else if (launch.batch()) {
    context.kind = launch::LaunchKind::kBatch;
  }
  if (launch.array_job_id() != 0) {
    context.array_job_id = launch.array_job_id();
    context.array_task_id = launch.array_task_id();
    context.array_task_min = launch.array_task_min();
    context.array_task_max = launch.array_task_max();
    context.array_task_count = launch.array_task_count();
    context.array_task_step = launch.array_task_step();
  }

  plan.argv.assign(spec.argv().begin(), spec.argv().end());
  plan.script = spec.script();
  // sbatch's rule: without --chdir a job runs where it was submitted.
  plan.work_dir = spec.work_dir().empty() ? spec.submit_dir() : spec.work_dir();
  plan.output = spec.output();
  plan.error = spec.error();
  // Slurm's default, and the wire's empty value, is truncate.
  plan.open_mode =
      spec.open_mode() == "append" ? step::OpenMode::kAppend : step::OpenMode::kTruncate;
  plan.umask = spec.has_umask() ? spec.umask() & 0777 : 022;
  // Only root can become the job's owner; any other agent runs ranks as
  // itself (docs/operations.md, "Users and the agent").
  plan.run_as = ::geteuid() == 0 ? step::RunAs::kOwner : step::RunAs::kStepd;
  plan.uid = launch.uid();
  plan.memory_mb = spec.memory_mb();
  if (launch.has_step() && !launch.step_io().address().empty()) {
    plan.io = {.address = launch.step_io().address(),
               .key = launch.step_io().key(),
               .stdin_rank = launch.step_io().stdin_rank(),
               .pty = launch.step_io().pty(),
               .files = launch.step_io().files()};
  }
  return plan;
}

}  // namespace cohort::agent
