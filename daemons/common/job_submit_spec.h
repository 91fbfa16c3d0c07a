// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

#include "cohort/text/slurm_time.h"
#include "job_submit_policy.h"

/// A submission's JobSpec (cohort/v1/cohort.proto) as the submit policy
/// sees it, and back. Templates: the controller has the full protobuf
/// classes, the CLI (replaying a policy over history) the lite ones.
namespace cohort::policy {

template <typename Spec>
[[nodiscard]] SubmitFields SubmitFieldsOf(const Spec& spec, const std::string& user_name,
                                          std::uint32_t uid) {
  SubmitFields f;
  f.name = spec.name();
  f.partition = spec.partition();
  f.account = spec.account();
  f.qos = spec.qos();
  f.comment = spec.comment();
  f.wckey = spec.wckey();
  if (spec.time_limit_s() == kUnlimited.count()) {
    f.time_limit_min = kUnlimitedMinutes;
  } else if (spec.time_limit_s() > 0) {
    f.time_limit_min = MinutesOf(spec.time_limit_s());
  }
  f.nodes = spec.nodes() == 0 ? 1 : spec.nodes();
  f.tasks_per_node = spec.tasks_per_node() == 0 ? 1 : spec.tasks_per_node();
  f.cpus_per_task = spec.cpus_per_task() == 0 ? 1 : spec.cpus_per_task();
  f.memory_mb = spec.memory_mb();
  f.gpus_per_node = spec.gpus_per_node();
  f.features.assign(spec.features().begin(), spec.features().end());
  f.requeue = spec.requeue();
  f.user_name = user_name;
  f.user_id = uid;
  f.work_dir = spec.work_dir();
  f.array = spec.array();
  f.dependency = spec.dependency();
  f.script = spec.script();
  return f;
}

/// Writes into `spec` what the policy changed: the fields of `after` that
/// differ from `before` (SubmitFieldsOf the same spec). The rest keeps its
/// exact value (a time limit in seconds the script saw in minutes).
template <typename Spec>
void ApplySubmitFields(const SubmitFields& before, const SubmitFields& after, Spec& spec) {
  if (after.name != before.name) spec.set_name(after.name);
  if (after.partition != before.partition) spec.set_partition(after.partition);
  if (after.account != before.account) spec.set_account(after.account);
  if (after.qos != before.qos) spec.set_qos(after.qos);
  if (after.comment != before.comment) spec.set_comment(after.comment);
  if (after.wckey != before.wckey) spec.set_wckey(after.wckey);
  if (after.time_limit_min != before.time_limit_min) {
    spec.set_time_limit_s(!after.time_limit_min ? 0
                          : *after.time_limit_min == kUnlimitedMinutes
                              ? kUnlimited.count()
                              : *after.time_limit_min * 60);
  }
  if (after.nodes != before.nodes) spec.set_nodes(after.nodes);
  if (after.tasks_per_node != before.tasks_per_node) spec.set_tasks_per_node(after.tasks_per_node);
  if (after.cpus_per_task != before.cpus_per_task) spec.set_cpus_per_task(after.cpus_per_task);
  if (after.memory_mb != before.memory_mb) spec.set_memory_mb(after.memory_mb);
  if (after.gpus_per_node != before.gpus_per_node) spec.set_gpus_per_node(after.gpus_per_node);
  if (after.features != before.features) {
    spec.clear_features();
    for (const std::string& feature : after.features) spec.add_features(feature);
  }
  if (after.requeue != before.requeue) spec.set_requeue(after.requeue);
}

}  // namespace cohort::policy
