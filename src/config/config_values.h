// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cohort/config/cluster_config.h"
#include "cohort/diagnostics.h"
#include "config/conf_lexer.h"

/// The value parsers of cohort.conf's keys, one per kind of value. Each has
/// the shape `bool Parse(const conf::Word&, T& out, Diagnostics&)`: on
/// success it sets `out` and returns true; otherwise it reports one located
/// error (the value's file:line:column, the key, the fix) and leaves `out`
/// as it was (GpuNuma= and UserShares= may leave it partly filled; their
/// line is left out then). The key tables (config_tables.cpp) bind them to
/// fields.
namespace cohort::config {

// Weights, priorities, shares and limits stay far below INT_MAX so that
// weighted sums and share totals cannot overflow.
inline constexpr long long kMaxCount = 1'000'000'000;
inline constexpr long long kMaxBackfillDepth = 1'000'000;
inline constexpr long long kMaxArraySizeLimit = 4'000'001;  ///< Slurm's limit on MaxArraySize

/// An integer in [lo, hi]; out of range is reported with the bound it broke.
[[nodiscard]] bool ParseIntIn(const conf::Word& word, long long lo, long long hi, int& out,
                              Diagnostics& diagnostics);
/// ParseIntIn with the range in the type, for a key table's row.
template <long long kLo, long long kHi>
[[nodiscard]] bool ParseIntFrom(const conf::Word& word, int& out, Diagnostics& diagnostics) {
  return ParseIntIn(word, kLo, kHi, out, diagnostics);
}

/// Integers without a range of their own (truncated to int as they always were).
[[nodiscard]] bool ParsePositiveInt(const conf::Word& word, int& out, Diagnostics& diagnostics);
[[nodiscard]] bool ParseNonNegativeInt(const conf::Word& word, int& out, Diagnostics& diagnostics);
[[nodiscard]] bool ParsePositiveInt64(const conf::Word& word, std::int64_t& out,
                                      Diagnostics& diagnostics);
/// Sockets=, CoresPerSocket=, ThreadsPerCore=: positive, capped at 2^20.
[[nodiscard]] bool ParseShapeCount(const conf::Word& word, int& out, Diagnostics& diagnostics);
/// Gpus=: 0 to 64.
[[nodiscard]] bool ParseGpuCount(const conf::Word& word, int& out, Diagnostics& diagnostics);
/// ControllerPort=: 0 to 65535.
[[nodiscard]] bool ParsePort(const conf::Word& word, int& out, Diagnostics& diagnostics);
/// HistoryDays=: 0 or more, capped at 100000.
[[nodiscard]] bool ParseHistoryDays(const conf::Word& word, int& out, Diagnostics& diagnostics);
/// A whole number of seconds (NodeTimeout= positive, KillWait= 0 or more).
[[nodiscard]] bool ParsePositiveSeconds(const conf::Word& word, std::chrono::seconds& out,
                                        Diagnostics& diagnostics);
[[nodiscard]] bool ParseNonNegativeSeconds(const conf::Word& word, std::chrono::seconds& out,
                                           Diagnostics& diagnostics);
/// RequeueBackoff=: seconds, 0 to a day (it is doubled, and added to a time).
[[nodiscard]] bool ParseRequeueBackoff(const conf::Word& word, std::chrono::seconds& out,
                                       Diagnostics& diagnostics);

/// A count limit: UNLIMITED clears it (overriding a DEFAULT line), else 0 or more.
[[nodiscard]] bool ParseCountLimit(const conf::Word& word, std::optional<int>& out,
                                   Diagnostics& diagnostics);
/// MaxNodes=: UNLIMITED clears it, else a positive integer.
[[nodiscard]] bool ParseNodeLimit(const conf::Word& word, std::optional<int>& out,
                                  Diagnostics& diagnostics);

/// A time in sbatch --time's forms (a plain number is minutes), UNLIMITED allowed.
[[nodiscard]] bool ParseTime(const conf::Word& word, std::chrono::seconds& out,
                             Diagnostics& diagnostics);
/// As ParseTime, but UNLIMITED is refused.
[[nodiscard]] bool ParseFiniteTime(const conf::Word& word, std::chrono::seconds& out,
                                   Diagnostics& diagnostics);
/// PriorityMaxAge=: a finite time longer than 0.
[[nodiscard]] bool ParseMaxAge(const conf::Word& word, std::chrono::seconds& out,
                               Diagnostics& diagnostics);
/// PriorityDecayHalfLife=: a time longer than 0, or UNLIMITED (no decay).
[[nodiscard]] bool ParseHalfLife(const conf::Word& word, std::chrono::seconds& out,
                                 Diagnostics& diagnostics);
/// MaxWall=: a time longer than 0; UNLIMITED clears it.
[[nodiscard]] bool ParseMaxWall(const conf::Word& word, std::optional<std::chrono::seconds>& out,
                                Diagnostics& diagnostics);
/// A grace time as Slurm's GraceTime: a plain number is seconds; a value with
/// ':' or '-' is a time in sbatch --time's forms.
[[nodiscard]] bool ParseGraceTime(const conf::Word& word, std::chrono::seconds& out,
                                  Diagnostics& diagnostics);

/// OFF, REQUEUE, CANCEL or SUSPEND in any case; Slurm's GANG, WITHIN and
/// PRIORITY are refused by name.
/// State=UP|DOWN|DRAIN|INACTIVE of a partition.
/// PriorityUsageResetPeriod=.
[[nodiscard]] bool ParseUsageReset(const conf::Word& word, UsageResetPeriod& out,
                                   Diagnostics& diagnostics);
/// One of an AccountName line's limits (GrpTRES=, MaxJobs=, …), by its key.
[[nodiscard]] bool ParseAccountLimit(const conf::Word& word, AssocLimits& out,
                                     Diagnostics& diagnostics);
[[nodiscard]] bool ParsePartitionState(const conf::Word& word, PartitionState& out,
                                       Diagnostics& diagnostics);
[[nodiscard]] bool ParsePreemptMode(const conf::Word& word, PreemptMode& out,
                                    Diagnostics& diagnostics);
/// A signal by name (USR1, SIGUSR1, any case) or number; stored as the number.
[[nodiscard]] bool ParseSignal(const conf::Word& word, int& out, Diagnostics& diagnostics);

/// The value as written (names, addresses, folders).
[[nodiscard]] bool ParseText(const conf::Word& word, std::string& out, Diagnostics& diagnostics);
/// DefaultQOS=: a name, not empty.
[[nodiscard]] bool ParseDefaultQos(const conf::Word& word, std::string& out,
                                   Diagnostics& diagnostics);
/// StateSync=: full, normal or off, stored in lowercase.
[[nodiscard]] bool ParseStateSync(const conf::Word& word, std::string& out,
                                  Diagnostics& diagnostics);
/// SwitchType=: switch/none or switch/nvidia_imex (or without switch/),
/// stored as "none" or "nvidia_imex".
[[nodiscard]] bool ParseSwitchType(const conf::Word& word, std::string& out,
                                   Diagnostics& diagnostics);
/// TopologyBlocks=: file or auto, stored in lowercase.
[[nodiscard]] bool ParseTopologyBlocks(const conf::Word& word, std::string& out,
                                       Diagnostics& diagnostics);
/// SwitchParameters=: imex_channel_count=N (1-65536), imex_dev_major=N
/// (0-4095), imex_channel_per=job|segment, imex_channel_dir=PATH
/// (absolute), separated by commas.
[[nodiscard]] bool ParseSwitchParameters(const conf::Word& word, ImexParameters& out,
                                         Diagnostics& diagnostics);
/// MpiDefault=: an MPI type (launch::CanonicalMpiType), stored canonical.
[[nodiscard]] bool ParseMpiType(const conf::Word& word, std::string& out, Diagnostics& diagnostics);
/// JobAcctGatherFrequency=: seconds between the agents' samples of what
/// launches use, as `N` or Slurm's `task=N` (its other kinds, energy=,
/// network= and filesystem=, are gathered by nothing here: refused); 0:
/// never. At most a day.
[[nodiscard]] bool ParseGatherFrequency(const conf::Word& word, std::chrono::seconds& out,
                                        Diagnostics& diagnostics);
/// StateBackend=: sqlite or postgresql, stored in lowercase.
/// ContainerRuntime=: "builtin" or "none" (any case), lowercased.
[[nodiscard]] bool ParseContainerRuntime(const conf::Word& word, std::string& out,
                                         Diagnostics& diagnostics);
[[nodiscard]] bool ParseStateBackend(const conf::Word& word, std::string& out,
                                     Diagnostics& diagnostics);
/// ControllerAddr=: one or more controllers, HOST[:PORT] separated by
/// commas; fills `controller_addrs` and `controller_addr` (the first host).
[[nodiscard]] bool ParseControllerAddr(const conf::Word& word, ClusterConfig& out,
                                       Diagnostics& diagnostics);
/// AuthType=: munge or none (Slurm's auth/munge and auth/none also).
[[nodiscard]] bool ParseAuthType(const conf::Word& word, AuthType& out, Diagnostics& diagnostics);
/// AuthInfo=: comma-separated KEY=VALUE options as Slurm's; `socket=PATH`
/// (munged's socket) is the one Cohort takes.
[[nodiscard]] bool ParseAuthInfo(const conf::Word& word, std::string& munge_socket,
                                 Diagnostics& diagnostics);
/// PrivateData=: a comma list of jobs and usage.
[[nodiscard]] bool ParsePrivateData(const conf::Word& word, PrivateData& out,
                                    Diagnostics& diagnostics);
/// ContainerRegistryMirrors=: REGISTRY=URL,... with http:// or https:// URLs.
[[nodiscard]] bool ParseRegistryMirrors(const conf::Word& word, std::vector<std::string>& out,
                                        Diagnostics& diagnostics);
/// A comma list; empty items are dropped.
[[nodiscard]] bool ParseCommaList(const conf::Word& word, std::vector<std::string>& out,
                                  Diagnostics& diagnostics);
/// A comma list, or ALL (every one): an empty list.
[[nodiscard]] bool ParseListOrAll(const conf::Word& word, std::vector<std::string>& out,
                                  Diagnostics& diagnostics);
/// UserShares=alice:2,bob: a user without :N has 1 share. Errors point at the item.
[[nodiscard]] bool ParseUserShares(const conf::Word& word,
                                   std::vector<std::pair<std::string, int>>& out,
                                   Diagnostics& diagnostics);
/// Gres=gpu:N or gpu:TYPE:N (Slurm's slurm.conf form; GPUs are the only
/// generic resource): the count and the type (empty: not said).
[[nodiscard]] bool ParseNodeGres(const conf::Word& word, int& gpus, std::string& type,
                                 Diagnostics& diagnostics);
/// GpuNuma=0,0,1,1: the NUMA node of each GPU, by GPU index; empty: unknown.
[[nodiscard]] bool ParseGpuNuma(const conf::Word& word, std::vector<int>& out,
                                Diagnostics& diagnostics);

/// The scheduler seams a policy name may fill, by the kind its names start with.
enum class Seam : std::uint8_t { kQueueOrder, kAdmission, kNodeFilter, kNodeScore, kDomainScore };
/// One `kind/name` policy name of `seam` (PriorityType=priority/multifactor).
/// Only the shape is checked; whether the name is registered is the registry's.
[[nodiscard]] bool ParsePolicyName(const conf::Word& word, Seam seam, std::string& out,
                                   Diagnostics& diagnostics);
/// A comma list of such names, not empty, none twice.
[[nodiscard]] bool ParsePolicyList(const conf::Word& word, Seam seam, std::vector<std::string>& out,
                                   Diagnostics& diagnostics);
/// ParsePolicyName and ParsePolicyList with the seam in the type, for a row.
template <Seam kSeam>
[[nodiscard]] bool ParsePolicyOf(const conf::Word& word, std::string& out,
                                 Diagnostics& diagnostics) {
  return ParsePolicyName(word, kSeam, out, diagnostics);
}
template <Seam kSeam>
[[nodiscard]] bool ParsePolicyListOf(const conf::Word& word, std::vector<std::string>& out,
                                     Diagnostics& diagnostics) {
  return ParsePolicyList(word, kSeam, out, diagnostics);
}

/// Resolves `path` against the folder of `from`, as Slurm resolves Include.
[[nodiscard]] std::string ResolvePath(std::string_view from, const std::string& path);

}  // namespace cohort::config
