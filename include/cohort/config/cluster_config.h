// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/config/account_limits.h"
#include "cohort/diagnostics.h"
#include "cohort/text/slurm_time.h"

/// cohort.conf: the cluster's nodes, partitions and daemon settings, in
/// slurm.conf's `Key=Value` syntax with hostlists.
namespace cohort::config {

/// What happens to a preempted job (PreemptMode=).
enum class PreemptMode : std::uint8_t {
  kOff,      ///< never preempted
  kRequeue,  ///< stopped and queued again with the same id and the next attempt
  kCancel,   ///< stopped and CANCELLED
  kSuspend,  ///< SIGSTOP, SIGCONT once the preemptor ends; frees no GPU memory
};
[[nodiscard]] std::string_view PreemptModeName(PreemptMode mode);  ///< OFF, REQUEUE, …

/// A partition's `State=`, as Slurm's: what it takes and what it starts.
enum class PartitionState : std::uint8_t {
  kUp,        ///< takes jobs and starts them
  kDown,      ///< takes jobs, starts none (running ones go on)
  kDrain,     ///< takes no new jobs, starts those queued
  kInactive,  ///< takes no new jobs and starts none
};
[[nodiscard]] std::string_view PartitionStateName(PartitionState state);  ///< UP, DOWN, …
/// The state of that name (any case); none for any other word.
[[nodiscard]] std::optional<PartitionState> ParsePartitionStateName(std::string_view name);
/// Whether a partition in `state` takes new jobs, and starts queued ones.
[[nodiscard]] inline bool TakesJobs(PartitionState state) {
  return state == PartitionState::kUp || state == PartitionState::kDown;
}
[[nodiscard]] inline bool StartsJobs(PartitionState state) {
  return state == PartitionState::kUp || state == PartitionState::kDrain;
}

/// One node, as its `NodeName=` line declares it (hostlists already expanded).
struct NodeSpec {
  std::string name;
  int cpus = 1;
  std::int64_t memory_mb = 1;
  int gpus = 0;
  /// GpuNuma=: the NUMA node of each GPU, by GPU index; empty when unknown.
  std::vector<int> gpu_numa;
  /// GpuFiles=: the device file of each GPU, by GPU index (gres.conf's
  /// File=), that the agent keeps other jobs' launches from opening; empty:
  /// /dev/nvidia<N> for GPU N (or the file hwloc found it by).
  std::vector<std::string> gpu_files;
  /// Sockets=, CoresPerSocket=, ThreadsPerCore= as `cohort-agent --print-node`
  /// (and `slurmd -C`) print them; 0 when not given. Not used for placement.
  int sockets = 0;
  int cores_per_socket = 0;
  int threads_per_core = 0;
  std::vector<std::string> features;
  std::string gpu_type;  ///< Gres=gpu:TYPE:N; empty: not said
  SourceLocation defined_at;
};

struct PartitionSpec {
  std::string name;
  std::vector<std::string> nodes;  ///< expanded, in configuration order
  bool is_default = false;
  std::chrono::seconds max_time = kUnlimited;
  std::optional<std::chrono::seconds> default_time;  ///< none: the job's limit is max_time
  std::optional<int> max_nodes;                      ///< none: unlimited
  int priority_tier = 1;
  std::vector<std::string> allow_accounts;  ///< empty: every account
  std::vector<std::string> allow_users;     ///< AllowUsers=: empty: every user
  std::vector<std::string> allow_qos;       ///< AllowQos=: empty: every QOS
  /// PreemptMode= of this partition's jobs when they are preempted; none:
  /// the cluster's PreemptMode.
  std::optional<PreemptMode> preempt_mode;
  std::optional<std::chrono::seconds> grace_time;  ///< GraceTime=; none: PreemptGraceTime
  std::optional<int> preempt_signal;  ///< PreemptSignal= (a number); none: the cluster's
  /// State=: as an operator's `scontrol update PartitionName=… State=`
  /// leaves it where none is in force.
  PartitionState state = PartitionState::kUp;
  SourceLocation defined_at;
};

/// `QOSName=` lines: a quality of service a job asks for with --qos.
struct QosSpec {
  std::string name;
  int priority = 0;  ///< Priority=: the QOS factor is priority ÷ the highest QOS priority
  std::optional<int> max_jobs_per_user;          ///< MaxJobsPerUser=: running at once
  std::optional<int> max_submit_jobs_per_user;   ///< MaxSubmitJobsPerUser=: pending + running
  std::optional<int> max_gpus_per_user;          ///< MaxGpusPerUser=: GPUs held at once
  std::optional<int> max_gpus_per_account;       ///< MaxGpusPerAccount=
  std::optional<std::chrono::seconds> max_wall;  ///< MaxWall=: time limit per job
  std::vector<std::string> preempt;         ///< Preempt=: QOS names whose jobs this one may preempt
  std::optional<PreemptMode> preempt_mode;  ///< PreemptMode= for its jobs as victims
  std::optional<std::chrono::seconds> grace_time;  ///< GraceTime= for its jobs as victims
  std::optional<int> preempt_signal;               ///< PreemptSignal= for its jobs as victims
  /// AllowAccounts=, AllowUsers=: who may ask for this QOS (a job passes
  /// when its account or its user is listed); both empty: everyone.
  std::vector<std::string> allow_accounts;
  std::vector<std::string> allow_users;
  /// GrpTRES=, GrpTRESMins=, GrpJobs=: every running job of the QOS
  /// together (a budget: their use this period); MaxTRESPerJob=. The
  /// association keys (MaxJobs, QOS, …) are not a QOS's and stay unset.
  AssocLimits limits;
  std::string description;  ///< Description=
  /// Made by sacctmgr and kept in the state store, not read from cohort.conf.
  bool managed = false;
  SourceLocation defined_at;
};

/// One user's own limits in an account (sacctmgr's user association).
struct UserAssoc {
  std::string user;
  AssocLimits limits;
  bool operator==(const UserAssoc&) const = default;
};

/// `AccountName=` lines, and the accounts `sacctmgr add account` makes: an
/// account's place in the tree, its fair share among its siblings, its
/// limits, and optionally its users' shares and limits within it.
struct AccountSpec {
  std::string name;
  std::string parent;  ///< Parent=: empty: the root
  int shares = 1;      ///< Shares= (sacctmgr's Fairshare=)
  /// UserShares=alice:2,bob:1 — a user not listed has 1 share in the account.
  std::vector<std::pair<std::string, int>> user_shares;
  /// Users=: the users who may charge jobs to the account (-A); empty: any
  /// user (an account without members, as before Users= existed).
  std::vector<std::string> users;
  AssocLimits limits;                  ///< GrpTRES=, GrpTRESMins=, MaxJobs=, …
  std::vector<UserAssoc> user_limits;  ///< per-user limits (sacctmgr only)
  std::string description;             ///< Description=
  std::string organization;            ///< Organization=
  /// Made by sacctmgr and kept in the state store, not read from cohort.conf.
  /// Such an account takes jobs only from its users (and operators), even
  /// before it has any.
  bool managed = false;
  /// The users sacctmgr added (all of a managed account's); their shares
  /// and limits are their entries in user_shares and user_limits.
  std::vector<std::string> managed_users;
  SourceLocation defined_at;
};

/// AuthType=: how a caller over TCP proves who it is.
enum class AuthType : std::uint8_t {
  kAuto,   ///< unset: MUNGE when munged answers on its socket, else none
  kMunge,  ///< a MUNGE credential with every call and on every agent's stream
  kNone,   ///< no credential: TCP users are anonymous; agents show AuthKeyFile's key
};
[[nodiscard]] std::string_view AuthTypeName(AuthType type);  ///< auto, munge, none

/// PrivateData=: what users other than operators may not see of others.
struct PrivateData {
  bool jobs = false;   ///< other users' jobs (queue, show, history)
  bool usage = false;  ///< other users' fair-share usage (shares)
};

/// The multifactor priority's weights and shapes (Slurm's PriorityWeight*).
struct PriorityWeights {
  int age = 1000;                                       ///< PriorityWeightAge=
  int fairshare = 10000;                                ///< PriorityWeightFairshare=
  int job_size = 1000;                                  ///< PriorityWeightJobSize=
  int partition = 1000;                                 ///< PriorityWeightPartition=
  int qos = 2000;                                       ///< PriorityWeightQOS=
  std::chrono::seconds max_age{7 * 24 * 3600};          ///< PriorityMaxAge=: the age factor's cap
  std::chrono::seconds decay_half_life{7 * 24 * 3600};  ///< PriorityDecayHalfLife=
  bool favor_small = false;  ///< PriorityFavorSmall=YES: smaller jobs get the larger size factor
};

/// Which registered policy fills each seam of the scheduler
/// (include/cohort/plugin.h), by the names plugins/builtin.cpp registers.
/// The parser checks only their shape (`kind/name`); the registry refuses a
/// name it does not know when the engine is built.
struct PluginChoice {
  std::string queue_order = "priority/multifactor";             ///< PriorityType=
  std::vector<std::string> admission = {"admission/limits"};    ///< AdmissionPlugins=
  std::vector<std::string> node_filter = {"filter/resources"};  ///< NodeFilterPlugins=
  std::string node_score = "score/locality";                    ///< NodeScoreType=
  std::string domain_score = "domain/tightest";                 ///< DomainScoreType=
};

/// SwitchParameters= for SwitchType=switch/nvidia_imex (docs/configuration.md).
struct ImexParameters {
  int channel_count = 2048;  ///< imex_channel_count=: channels 0 .. count-1
  bool per_segment = false;  ///< imex_channel_per=segment: one per --segment, not per job
  int dev_major = -1;  ///< imex_dev_major=: the channels' device major; -1: from /proc/devices
  /// imex_channel_dir=: where the channels' device files are (Cohort's).
  std::string channel_dir = "/dev/nvidia-caps-imex-channels";
};

struct ClusterConfig {
  std::string cluster_name = "cohort";
  /// ControllerAddr=: the host the controller listens on (the first entry
  /// of the list, or the one --listen names)...
  std::string controller_addr = "127.0.0.1";
  /// ...and every entry as written (HOST, HOST:PORT, [IPV6]:PORT), in the
  /// order clients and agents try them: one per controller of the cluster,
  /// as Slurm's SlurmctldHost lines. ControllerTargets() gives them ports.
  std::vector<std::string> controller_addrs;
  int controller_port = 6820;
  /// ControllerTimeout=: how long an active controller may go without
  /// renewing its lease in the state database before a standby takes over
  /// (StateBackend=postgresql; one whose database session ended is taken
  /// over at once).
  std::chrono::seconds controller_timeout{10};
  /// HttpPort=: the controller's HTTP port (the dashboard, /metrics, the
  /// REST API); -1: none.
  int http_port = -1;
  /// LogFile=: where the controller logs (reopened on SIGUSR2 and SIGHUP);
  /// empty: stderr.
  std::string log_file;
  /// TokenKeyFile=: the key REST API tokens are signed with; empty:
  /// StateDir/token.key, made at the first start.
  std::string token_key_file;
  std::string state_dir = "/var/lib/cohort";
  std::string auth_key_file = "/etc/cohort/cohort.key";
  AuthType auth_type = AuthType::kAuto;
  /// AuthInfo=socket=PATH: munged's socket; empty: libmunge's default
  /// (/run/munge/munge.socket.2).
  std::string munge_socket;
  /// CohortUser=: the user an agent may run as besides root (Slurm's
  /// SlurmUser); an agent's MUNGE credential must be one of the two.
  std::string cohort_user = "root";
  /// Operators=: users who may hold, release, cancel and update any job and
  /// drain and resume nodes, as root may.
  std::vector<std::string> operators;
  PrivateData private_data;
  /// TLSCertFile=, TLSKeyFile=: the controller's certificate (PEM, chain
  /// first) and key; set, TLS is on for its TCP port, and clients and agents
  /// speak TLS to it. TLSCAFile=: the CA they verify the certificate with;
  /// empty: the system's CAs. Paths resolved as AuthKeyFile's.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  /// AgentCertFile=, AgentKeyFile=: an agent's client certificate (signed
  /// by TLSCAFile's CA, naming its nodes as DNS names) and key; with them an
  /// agent proves itself by TLS instead of a MUNGE credential.
  std::string agent_cert_file;
  std::string agent_key_file;
  [[nodiscard]] bool TlsOn() const { return !tls_cert_file.empty(); }
  std::string topology_file;  ///< resolved against the config's folder; empty: none
  std::chrono::seconds node_timeout{300};
  /// HealthCheckProgram=: what each agent runs every HealthCheckInterval to
  /// check its node; empty: none.
  std::string health_check_program;
  std::chrono::seconds health_check_interval{0};  ///< 0: never
  /// JobAcctGatherFrequency=: how often each agent samples what its
  /// launches use (CPU, memory, GPUs: sstat); 0: never.
  std::chrono::seconds job_acct_gather_frequency{30};
  /// MetricsJobSeries=: at most this many running jobs get cohort_job_*
  /// usage series in /metrics (those holding the most GPUs); 0: none.
  int metrics_job_series = 100;
  /// Prolog= and Epilog=: what each agent runs before a job's first launch
  /// on its node and after the job left it; empty: none.
  std::string prolog;
  std::string epilog;
  /// JobSubmitPlugins=lua: the site's submit policy, the Lua script
  /// JobSubmitScript= names (resolved), else job_submit.lua beside the
  /// file that chose it; empty: none.
  std::string job_submit_script;
  std::chrono::seconds prolog_epilog_timeout{300};  ///< PrologEpilogTimeout=
  std::chrono::seconds kill_wait{30};
  /// The most restarts MaxBatchRequeue= and --max-restarts allow.
  static constexpr int kMaxRestarts = 10'000;
  /// MaxBatchRequeue=: how often a node failure may requeue a job that
  /// gives no --max-restarts (Slurm's name and default).
  int max_batch_requeue = 5;
  /// RequeueBackoff=: a job requeued after a node failure waits this long
  /// before its next start, doubled at each further failure (at most ten
  /// minutes, or this when longer); 0: no wait.
  std::chrono::seconds requeue_backoff{10};
  /// MpiDefault=: a step's MPI type when srun gives no --mpi ("none" or "pmix").
  std::string mpi_default = "none";
  /// SwitchType=: "none", or "nvidia_imex" for an NVIDIA IMEX channel per
  /// job (Slurm's switch/nvidia_imex), as SwitchParameters= sets it up.
  std::string switch_type = "none";
  ImexParameters imex;
  /// TopologyBlocks=: "file" (BlockName lines of topology.conf) or "auto"
  /// (the NVLink domains the nodes report, which the controller writes to
  /// StateDir/nvlink-blocks.conf and applies by restarting in place).
  std::string topology_blocks = "file";
  /// ContainerRuntime=: "builtin" (Cohort makes steps' containers itself,
  /// docs/containers.md) or "none" (jobs and steps asking for a container
  /// are refused at submission).
  std::string container_runtime = "builtin";
  /// ContainerCacheDir=: where each agent's node keeps the container images
  /// it pulled (docs/containers.md); empty: `images` in its spool folder.
  std::string container_cache_dir;
  /// ContainerCacheMaxGB=: the most the cache holds before the least
  /// recently used images not in use are removed; 0: no bound.
  int container_cache_max_gb = 0;
  /// ContainerRegistryCAFile=: the certificates registries' TLS is checked
  /// against; empty: the system's.
  std::string container_registry_ca_file;
  /// ContainerCredentialsFile=: registry logins (enroot's .credentials
  /// format) for users who keep none in ~/.config/enroot/.credentials.
  std::string container_credentials_file;
  /// ContainerHooksDir=: programs each container's holder runs, in name
  /// order, before the ranks enter (enroot's hooks.d: the GPU driver's
  /// libraries); empty: none.
  std::string container_hooks_dir;
  /// ContainerPullAhead=: how long before a pending job's planned start its
  /// image is pulled on the nodes planned for it; 0: only at the start.
  std::chrono::seconds container_pull_ahead{3600};
  /// ContainerRegistryMirrors=: REGISTRY=URL pairs; a pull from REGISTRY
  /// tries its mirrors first, then the registry itself.
  std::vector<std::string> container_registry_mirrors;
  /// How commits to the state database wait for the disk: "full" (fsync
  /// every commit), "normal" (survives a controller crash, not a power
  /// loss) or "off".
  std::string state_sync = "full";
  /// StateBackend=: "sqlite" (StateDir/state.db, one controller) or
  /// "postgresql" (StateDatabase=, any number of controllers, one active).
  std::string state_backend = "sqlite";
  /// StateDatabase=: libpq's connection string (key=value words or a
  /// postgresql:// URI) for StateBackend=postgresql.
  std::string state_database;
  int history_days = 30;  ///< finished jobs kept this long; 0: forever
  PriorityWeights priority;
  /// PreemptMode=: the default for victims; OFF (the default) turns
  /// preemption off for the whole cluster.
  PreemptMode preempt_mode = PreemptMode::kOff;
  std::chrono::seconds preempt_grace_time{60};  ///< PreemptGraceTime=: warning to kill
  std::chrono::seconds preempt_exempt_time{0};  ///< PreemptExemptTime=: no preemption this young
  int preempt_signal = 10;                      ///< PreemptSignal=: SIGUSR1 by default
  int backfill_depth = 100;            ///< BackfillDepth=: pending jobs that get a reservation
  int max_array_size = 10001;          ///< MaxArraySize=: task ids are 0 … MaxArraySize-1
  std::string default_qos = "normal";  ///< DefaultQOS=
  /// PriorityUsageResetPeriod=: when GrpTRESMins budgets start again.
  UsageResetPeriod usage_reset_period = UsageResetPeriod::kNone;
  std::vector<NodeSpec> nodes;
  std::vector<PartitionSpec> partitions;
  /// QOSName= lines; a QOS named by DefaultQOS= exists even when no line
  /// declares it (Priority=0, no limits).
  std::vector<QosSpec> qos;
  std::vector<AccountSpec> accounts;  ///< AccountName= lines, then sacctmgr's
  /// Users' default accounts (sacctmgr's DefaultAccount=): the account of a
  /// job that names none. A user without one gets the first account listing
  /// it, else an account named as the user.
  std::vector<std::pair<std::string, std::string>> default_accounts;
  PluginChoice plugins;

  /// The partition with Default=YES, else the first one; null when none.
  [[nodiscard]] const PartitionSpec* DefaultPartition() const;
  [[nodiscard]] const PartitionSpec* FindPartition(std::string_view name) const;
  /// The QOS of that name (case-sensitive); DefaultQOS= even when undeclared
  /// (ParseClusterConfig appends it to `qos`; a config built in code without
  /// it gets a shared entry with Priority=0, no limits and an empty name).
  [[nodiscard]] const QosSpec* FindQos(std::string_view name) const;
  [[nodiscard]] const AccountSpec* FindAccount(std::string_view name) const;
  /// The account and those above it, nearest first; only the account
  /// itself (none when it has no AccountName) up to the root.
  [[nodiscard]] std::vector<const AccountSpec*> AccountChain(std::string_view name) const;
};

/// Whether `accounts` form a tree: names unique, every Parent= an account
/// of the list (or root), no account under itself. The error names the
/// account and the fix; `culprit`, when given, is set to that account's
/// index.
[[nodiscard]] absl::Status CheckAccountTree(const std::vector<AccountSpec>& accounts,
                                            std::size_t* culprit = nullptr);

/// Whether the QOS=, QOS+= and DefaultQOS= of `accounts` (a tree, as
/// CheckAccountTree passes) and of their users name QOS of `qos`, and each
/// DefaultQOS is one of the QOS its association may use. The error names
/// the association, the QOS and the fix; `culprit` as in CheckAccountTree.
[[nodiscard]] absl::Status CheckAccountQos(const std::vector<AccountSpec>& accounts,
                                           const std::vector<QosSpec>& qos,
                                           std::size_t* culprit = nullptr);

/// Sets one key of `qos` as a QOSName line does (Priority, MaxWall,
/// MaxJobsPerUser, GrpTRES, Preempt, …; any case). Preempt's names are not
/// checked against the other QOS here. Bad input: InvalidArgument with
/// cohort.conf's message and fix; `qos` is then unchanged.
[[nodiscard]] absl::Status SetQosKey(std::string_view key, std::string_view value, QosSpec& qos);

/// The QOS a job of `user` in `account` may ask for (empty: any) and its
/// default (empty: the cluster's DefaultQOS): the user's own, else the
/// nearest account's up the tree.
struct AssocQos {
  std::vector<std::string> allowed;
  std::string default_qos;
};
[[nodiscard]] AssocQos QosOf(const ClusterConfig& config, const std::string& account,
                             const std::string& user);

/// Reads a file for `Include=` lines. The shell passes one that reads the
/// disk; tests pass one that serves strings. Returns NotFound or another
/// error status when the file cannot be read.
using FileLoader = std::function<absl::StatusOr<std::string>(const std::string& path)>;

struct ConfigResult {
  ClusterConfig config;
  Diagnostics diagnostics;  ///< every error and warning of the file and its includes
};

/// Parses cohort.conf text. `file` names it in diagnostics and anchors
/// relative `Include=` and `TopologyFile=` paths. Keys are case-insensitive.
/// Every problem is collected; the config is usable only when
/// `!diagnostics.HasErrors()`.
[[nodiscard]] ConfigResult ParseClusterConfig(std::string_view text, std::string_view file,
                                              const FileLoader& loader);

/// What a client needs of cohort.conf: the StateDir that holds the
/// controller's socket and the AuthKeyFile a TCP client proves itself with
/// (ClusterConfig's defaults where the file does not say). Reads the global
/// keys of the file and of its Include= files and passes over every other
/// line, so that a command does not pay for expanding and checking the nodes
/// and partitions of a large cluster (a 16,384-node file takes tens of
/// milliseconds in full). Reports nothing: errors are the daemons' and
/// `cohort config check`'s to report.
struct ClientSettings {
  std::string state_dir;
  std::string auth_key_file;
  AuthType auth_type = AuthType::kAuto;
  std::string munge_socket;  ///< AuthInfo=socket=
  bool tls = false;          ///< TLSCertFile= is set: the TCP port speaks TLS
  std::string tls_ca_file;   ///< TLSCAFile=
  /// ControllerAddr= with ControllerPort=, as ControllerTargets gives them
  /// (one entry for a single controller).
  std::vector<std::string> controllers;
};
[[nodiscard]] ClientSettings ReadClientSettings(std::string_view text, std::string_view file,
                                                const FileLoader& loader);

/// The kinds of line of cohort.conf: global keys, and the lines that
/// `NodeName=`, `PartitionName=`, `QOSName=` and `AccountName=` start.
enum class LineKind : std::uint8_t { kGlobal, kNode, kPartition, kQos, kAccount };

/// Every key a line of `kind` takes, as docs/configuration.md spells it: the
/// global keys, or a line's own keys followed by the key that starts it. The
/// parser and its "did you mean" hints read the same table. Static storage;
/// any thread.
[[nodiscard]] std::span<const std::string_view> KnownKeys(LineKind kind);

/// The default node of topology-only use (`cohort config check -t`, `cohort
/// place -t`): a typical 8-GPU node, stated in the output where it is used.
[[nodiscard]] NodeSpec DefaultNodeSpec(std::string name);

}  // namespace cohort::config
