// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <grpcpp/support/status.h>
#include "absl/status/status.h"
#include "cohort/engine/engine.h"
#include "cohort/launch/binding.h"
#include "cohort/launch/node_layout.h"
#include "cohort/v1/cohort.pb.h"

/// Conversions between the wire protocol and the core's types. Pure; any
/// thread.
namespace cohort::controller {

/// Who is calling, as the transport established it.
struct Identity {
  std::uint32_t uid = 0;
  std::string user_name;
  enum class Trust : std::uint8_t {
    kPeerCredentials,  ///< the local Unix socket's SO_PEERCRED
    kMunge,            ///< TCP with a MUNGE credential munged decoded
    kToken,            ///< the REST API with a token the controller signed (api_token.h)
    kAnonymous,        ///< TCP without a valid credential: may read, may not change anything
  } trust = Trust::kAnonymous;
  bool is_operator = false;   ///< root, or a user of Operators=
  std::string anonymous_why;  ///< when anonymous: why no identity was established
  /// The engine's view of the caller.
  [[nodiscard]] Caller AsCaller() const { return Caller{uid, is_operator}; }
};

/// Whether `who` may see a job of user `owner`: always, unless
/// PrivateData=jobs hides other users' jobs from all but operators.
[[nodiscard]] inline bool MaySeeJob(const Identity& who, std::uint32_t owner,
                                    const config::PrivateData& hidden) {
  return !hidden.jobs || who.is_operator || owner == who.uid;
}

/// PermissionDenied for a job PrivateData=jobs hides from the caller,
/// saying who may see it.
[[nodiscard]] absl::Status HiddenJob(std::int64_t job);

/// OK unless `who` is anonymous (TCP without a valid MUNGE credential);
/// then PermissionDenied saying that `action` needs an identity, why there
/// is none and how to present one.
[[nodiscard]] absl::Status RequireTrusted(const Identity& who, std::string_view action);

/// The engine's request from a submitted spec. InvalidArgument names the
/// field and the fix.
/// Checks a job's or a step's container as a client sent it: the image
/// reference, mounts, name, workdir and env names parse (container_options.h,
/// image_ref.h). InvalidArgument, in the words a user can act on.
[[nodiscard]] absl::Status CheckContainer(const v1::ContainerSpec& container);
/// FailedPrecondition, saying why, for a container on a cluster with
/// ContainerRuntime=none; OK otherwise.
[[nodiscard]] absl::Status ContainersAllowed(const config::ClusterConfig& config,
                                             const v1::ContainerSpec& container);

[[nodiscard]] absl::StatusOr<JobRequest> RequestFromSpec(const v1::JobSpec& spec,
                                                         const Identity& who, int max_array_size);

/// A job reference as users write it: "12" or "12_3". InvalidArgument
/// says what is wrong.
[[nodiscard]] absl::StatusOr<JobRef> ParseJobRef(std::string_view text);

/// Each partition's kinds of node: the distinct configured layouts (CPUs,
/// MemoryMB, Gpus, GpuNuma) of its nodes, in the order of their first node.
/// A cluster of thousands of nodes has a handful of kinds; built once. Not
/// thread-safe (verdicts are remembered): the controller's state thread's.
class NodeKinds {
 public:
  struct Kind {
    std::string first_node;
    int gpus = 0;
    layout::NodeLayout layout;
  };
  explicit NodeKinds(const config::ClusterConfig& config);
  /// The kinds of `partition`; empty for a partition not configured.
  [[nodiscard]] const std::vector<Kind>& Of(std::string_view partition) const;
  /// binding::CheckBinding on the kind's layout, remembered per request:
  /// submissions mostly repeat a few shapes, and planning a binding lays
  /// out every core of the node.
  [[nodiscard]] absl::Status Check(const Kind& kind, const binding::BindingRequest& wanted);

 private:
  std::map<std::string, std::vector<Kind>, std::less<>> by_partition_;
  using VerdictKey = std::tuple<const Kind*, std::uint64_t, int, int, binding::GpuBindKind, int,
                                binding::CpuBind, binding::MemBind, binding::GpuNumbering, bool>;
  std::map<VerdictKey, absl::Status> verdicts_;
};

/// Whether the ranks of `spec` can be bound (--gpu-bind, --cpu-bind,
/// --mem-bind, cpus-per-task) on some node of the partition the engine
/// resolved for it, judged on each kind of node's configured layout.
/// InvalidArgument with the reason when no node can.
[[nodiscard]] absl::Status CheckBindingAtSubmit(const v1::JobSpec& spec, const JobRequest& request,
                                                const config::ClusterConfig& config,
                                                NodeKinds& kinds);

[[nodiscard]] v1::JobState ToWire(JobState state);
[[nodiscard]] std::optional<JobState> FromWire(v1::JobState state);
[[nodiscard]] v1::NodeState ToWire(NodeStatus status);

/// Fills `out` with everything known of `job`; `spec` is the submitted one,
/// `queue_position` its place among pending jobs (0 when not pending).
/// The shape of a placement (alloc::DescribePlacement) as the API reports
/// it; nothing for a job without nodes. `grants` by node rank; nodes no
/// longer in the topology are kNone and show only in the rank order.
void PlacementToWire(const topology::Topology& topology, std::span<const alloc::NodeGrant> grants,
                     std::span<const std::string> names, int segment, v1::PlacementReport* out);

void JobToWire(const Job& job, const v1::JobSpec& spec, const Engine& engine, int queue_position,
               v1::Job* out);

/// The job's steps: its batch step (from the job itself) once it started,
/// then the steps of its attempt. `state` is the job's (a job read from a
/// record has it apart, in SavedJob).
void StepsToWire(const Job& job, JobState state, const topology::Topology& topology, v1::Job* out);

/// What a launch's ranks used, as sacct shows it: MaxRSS, TotalCPU, their
/// averages per rank and the GPUs' (set only when measured). For a step,
/// and for a job's own launch.
void UsageToWire(const TaskUsage& usage, v1::JobStep& out);
void UsageToWire(const TaskUsage& usage, v1::Job& out);

/// The facts of `cohort why` (everything but the job itself).
void ExplanationToWire(const Explanation& why, v1::ExplainJobResponse* out);

/// One preemption of a job, on the wire and back (also how the store keeps it).
void PreemptionToWire(const PreemptionRecord& preemption, v1::Preemption* out);
[[nodiscard]] PreemptionRecord PreemptionFromWire(const v1::Preemption& preemption);

/// absl::Status to grpc::Status with the same code and message.
[[nodiscard]] grpc::Status ToGrpc(const absl::Status& status);

}  // namespace cohort::controller
