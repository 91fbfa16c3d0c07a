// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <vector>

#include "cohort/cluster_config.h"
#include "cohort/fair_share.h"
#include "cohort/job.h"
#include "cohort/priority.h"
#include "cohort/topology.h"

namespace cohort::engine {

class JobBook;

/// Fair share and multifactor priority: owns the usage the running jobs are
/// charged with and computes each pending job's priority from it.
class Prioritizer {
 public:
  /// `config` (with its default QOS declared) and `topology` outlive it.
  Prioritizer(const config::ClusterConfig& config, const topology::Topology& topology);

  /// The multifactor priority of a job at `now`.
  [[nodiscard]] policy::PriorityFactors Of(const Job& job, Millis now) const;
  /// Sets `job.priority`; `shares` caches the fair-share factor per
  /// (account, user) slot of `book` (-1: not computed yet).
  void Prioritize(Job& job, std::vector<double>& shares, const JobBook& book, Millis now) const;

  /// Charges what the job used since it was last charged.
  void Charge(Job& job, Millis now);
  /// Charges every active job of `book`, once per (account, user).
  void ChargeActive(const JobBook& book, Millis now);

  [[nodiscard]] const policy::FairShare& Usage() const { return fair_share_; }
  [[nodiscard]] policy::FairShare& Usage() { return fair_share_; }

 private:
  [[nodiscard]] policy::PriorityFactors With(const Job& job, double fairshare, Millis now) const;

  const config::ClusterConfig& config_;
  const topology::Topology& topology_;
  policy::FairShare fair_share_;
  int max_tier_ = 0;
  int max_qos_priority_ = 0;
};

}  // namespace cohort::engine
