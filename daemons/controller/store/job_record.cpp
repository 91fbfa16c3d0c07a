// SPDX-License-Identifier: Apache-2.0
#include "store/job_record.h"

namespace cohort::controller {

bool ParseJobRecord(std::string_view bytes, v1::JobRecord& out) {
  if (!out.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return false;
  UpgradeJobRecord(out);
  return true;
}

void UpgradeJobRecord(v1::JobRecord& r) {
  // A record of version 4 has its run (every job that was ever stored has
  // an attempt), and never a field of the old shape.
  if (r.has_run()) return;
  v1::JobRunRecord& run = *r.mutable_run();
  run.set_cause(r.legacy_cause());
  run.set_start_time_ms(r.legacy_start_time_ms());
  run.set_end_time_ms(r.legacy_end_time_ms());
  run.set_attempt(r.legacy_attempt());
  run.set_exit_code(r.legacy_exit_code());
  run.set_exit_signal(r.legacy_exit_signal());
  run.mutable_grants()->Swap(r.mutable_legacy_grants());
  run.set_master_port(r.legacy_master_port());
  run.set_warned_attempt(r.legacy_warned_attempt());
  run.mutable_steps()->Swap(r.mutable_legacy_steps());
  run.set_next_step(r.legacy_next_step());
  run.set_own_max_rss_kb(r.legacy_own_max_rss_kb());
  run.set_own_cpu_ms(r.legacy_own_cpu_ms());
  v1::JobWaitRecord& wait = *r.mutable_wait();
  wait.set_eligible_time_ms(r.legacy_eligible_time_ms());
  wait.set_dependency_left(r.legacy_dependency_left());
  // As ToRecord writes them: the array and preemption groups only where
  // the job has them.
  if (r.legacy_array_job_id() != 0) {
    v1::JobArrayRecord& array = *r.mutable_array();
    array.set_job_id(r.legacy_array_job_id());
    array.set_task_id(r.legacy_array_task_id());
    array.mutable_pending()->Swap(r.mutable_legacy_array_pending());
  }
  if (r.legacy_preemptions_size() > 0 || r.legacy_preempted_by() != 0 ||
      r.legacy_preempt_deadline_ms() != 0 || r.legacy_suspended_since_ms() != 0) {
    v1::JobPreemptionRecord& preemption = *r.mutable_preemption();
    preemption.mutable_records()->Swap(r.mutable_legacy_preemptions());
    preemption.set_deadline_ms(r.legacy_preempt_deadline_ms());
    preemption.set_by(r.legacy_preempted_by());
    preemption.set_suspended_since_ms(r.legacy_suspended_since_ms());
  }
  // The repeated ones were swapped out above (an array's pending tasks
  // with no array are none).
  r.clear_legacy_array_pending();
  r.clear_legacy_cause();
  r.clear_legacy_start_time_ms();
  r.clear_legacy_end_time_ms();
  r.clear_legacy_attempt();
  r.clear_legacy_exit_code();
  r.clear_legacy_exit_signal();
  r.clear_legacy_master_port();
  r.clear_legacy_warned_attempt();
  r.clear_legacy_array_job_id();
  r.clear_legacy_array_task_id();
  r.clear_legacy_preempt_deadline_ms();
  r.clear_legacy_preempted_by();
  r.clear_legacy_eligible_time_ms();
  r.clear_legacy_dependency_left();
  r.clear_legacy_suspended_since_ms();
  r.clear_legacy_next_step();
  r.clear_legacy_own_max_rss_kb();
  r.clear_legacy_own_cpu_ms();
}

}  // namespace cohort::controller
