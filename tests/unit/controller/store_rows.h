// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "store/store.h"

/// The job rows the store tests write: either engine's.
namespace cohort::controller::testing {

/// A job of `user` (alice: uid 1000, else 1001) in `state`, submitted at
/// `id` seconds, ended at `end_ms` (0: not yet), with a one-variable
/// environment.
inline StateBatch::JobRow JobRow(std::int64_t id, v1::JobState state, std::int64_t end_ms = 0,
                                 const std::string& user = "alice") {
  StateBatch::JobRow row;
  row.record.set_id(id);
  row.record.set_state(state);
  row.record.set_user_name(user);
  row.record.set_uid(user == "alice" ? 1000 : 1001);
  row.record.set_account(user);
  row.record.set_partition("gpu");
  row.record.set_submit_time_ms(1000 * id);
  row.record.mutable_run()->set_end_time_ms(end_ms);
  row.record.mutable_spec()->set_name(fmt::format("job{}", id));
  row.record.mutable_spec()->add_argv("train.py");
  v1::JobSpec env;
  v1::EnvVar* var = env.add_env();
  var->set_name("PATH");
  var->set_value("/usr/bin");
  row.env = env.SerializeAsString();
  return row;
}

}  // namespace cohort::controller::testing
