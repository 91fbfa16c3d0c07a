// SPDX-License-Identifier: Apache-2.0
#include "rpc/history_rpcs.h"

#include "store/records.h"

namespace cohort::controller {

void HistoryRpcs::JobHistory(v1::JobHistoryRequest& request, const Identity& who,
                             Reply<v1::JobHistoryResponse> reply) {
  HistoryQuery query;
  query.job_ids.assign(request.job_ids().begin(), request.job_ids().end());
  query.user_name = request.user_name();
  query.account = request.account();
  // Like sacct: users see their own jobs unless they ask for all or name
  // a user or job; operators see everyone's.
  const bool asks_for_others =
      !query.user_name.empty() || !query.job_ids.empty() || request.all_users();
  if (!who.is_operator && (!asks_for_others || hidden_.jobs)) query.uid = who.uid;
  for (const int state : request.states()) query.states.push_back(state);
  query.since_ms = request.since_ms();
  query.until_ms = request.until_ms();
  query.limit = request.limit();
  query.newest = request.newest();
  absl::StatusOr<std::vector<v1::JobRecord>> records = reader_->History(query);
  if (!records.ok()) {
    reply(records.status());
    return;
  }
  v1::JobHistoryResponse response;
  for (const v1::JobRecord& record : *records) RecordToWire(record, topology_, response.add_jobs());
  reply(std::move(response));
}

}  // namespace cohort::controller
