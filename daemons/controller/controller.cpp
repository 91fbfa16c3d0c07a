// SPDX-License-Identifier: Apache-2.0
#include "controller.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "cohort/fmt_absl.h"
#include "cohort/text/hostlist.h"
#include "controller_log.h"
#include "rpc/request_bounds.h"
#include "store/account_records.h"
#include "store/reservation_records.h"

namespace cohort::controller {
namespace {

// The calls that change what the controller persists: refused while its
// state cannot be written (Outbox::WriteRefusal).
constexpr std::array<std::string_view, 10> kWritingRpcs{
    "SubmitJob",  "CancelJob",  "ControlJobs",     "UpdateJob",      "StartStep",
    "SignalStep", "UpdateNode", "UpdatePartition", "UpdateAccounts", "UpdateReservation"};

// Whose calls a call counts against: its user's, or, for a caller nobody
// vouched for, everyone's of that kind together.
std::optional<std::uint32_t> RateKey(const Identity& who) {
  if (who.trust == Identity::Trust::kAnonymous) return std::nullopt;
  return who.uid;
}

constexpr bool Writes(std::string_view method) {
  return std::find(kWritingRpcs.begin(), kWritingRpcs.end(), method) != kWritingRpcs.end();
}

// Posts one call to the thread its part runs on, and runs it there. The
// request is moved, never copied, on its way. While commits stall for want
// of space, a call that writes is refused there, and one that reads is
// answered at once.
template <typename Part, typename Request, typename Response>
void Dispatch(Part& part, void (Part::*handler)(Request&, const Identity&, Reply<Response>),
              Request&& request, Identity&& who, Reply<Response>&& reply, Outbox& outbox,
              bool writes) {
  boost::asio::post(part.io(), [&part, handler, request = std::move(request), who = std::move(who),
                                reply = std::move(reply), &outbox, writes]() mutable {
    if constexpr (std::is_same_v<Part, HistoryRpcs>) {
      // History reads the database on a thread of its own, not the outbox.
      (part.*handler)(request, who, std::move(reply));
      return;
    }
    if (const absl::Status& refusal = outbox.WriteRefusal(); !refusal.ok() && writes) {
      reply(refusal);
      return;
    }
    if (writes) {
      (part.*handler)(request, who, std::move(reply));
      return;
    }
    const Outbox::ReadScope reading(outbox);
    (part.*handler)(request, who, std::move(reply));
  });
}

}  // namespace

Controller::Controller(config::ClusterConfig config, std::unique_ptr<topology::Topology> topology,
                       alloc::NodePool pool, Options options, Stores stores, LoadedState loaded)
    : state_(std::move(config), std::move(topology), std::move(pool)),
      options_(std::move(options)),
      outbox_(io_, records_, std::move(stores.writer), std::move(stores.checkpointer),
              static_cast<std::size_t>(state_.topology->NodeCount())),
      reader_(io_, std::move(stores.reader)),
      agent_hub_(state_, outbox_, reader_, *this,
                 AgentHub::Options{.heartbeat_interval = options_.heartbeat_interval,
                                   .on_image_prepared =
                                       [this](NodeId node, const v1::ImagePrepared& prepared) {
                                         image_prefetch_.OnPrepared(node, prepared,
                                                                    ControllerState::Now());
                                       },
                                   .on_nvlink_report = [this] { nvlink_blocks_.Reported(); }}),
      nvlink_blocks_(io_, state_, options_.reconfigure),
      image_prefetch_(state_,
                      [this](NodeId node, v1::ControllerMessage message) {
                        return agent_hub_.SendNow(node, std::move(message));
                      }),
      job_rpcs_(io_, state_, outbox_, reader_, *this),
      node_rpcs_(io_, state_, outbox_, *this),
      priority_rpcs_(io_, state_, outbox_, *this),
      history_rpcs_(*state_.topology, config.private_data, std::move(stores.history)),
      admin_rpcs_(io_, state_, options_.tokens, options_.reconfigure),
      logged_node_status_(static_cast<std::size_t>(state_.topology->NodeCount()),
                          NodeStatus::kUnknown) {
  state_.job_submit = options_.job_submit;
  outbox_.OnCommit([this](const Outbox::CommitReport& report) {
    metrics_.Commit(report.took, report.records, report.waiting);
  });
  Restore(std::move(loaded));
}

Controller::~Controller() { Shutdown(); }

template <typename Part>
Part& Controller::PartOf() {
  if constexpr (std::is_same_v<Part, JobRpcs>) {
    return job_rpcs_;
  } else if constexpr (std::is_same_v<Part, NodeRpcs>) {
    return node_rpcs_;
  } else if constexpr (std::is_same_v<Part, PriorityRpcs>) {
    return priority_rpcs_;
  } else if constexpr (std::is_same_v<Part, AdminRpcs>) {
    return admin_rpcs_;
  } else {
    static_assert(std::is_same_v<Part, HistoryRpcs>,
                  "an area of cohort/v1/controller_rpcs.h has no part");
    return history_rpcs_;
  }
}

// Every request, whichever listener it came in by, is checked against
// its bounds and its caller's rate on the caller's thread before anything
// sized by it is done.
#define COHORT_CONTROLLER_DEFINE_RPC(Method, Request, Response, Area, Caller)                  \
  void Controller::Method(v1::Request request, Identity who, Reply<v1::Response> reply) {      \
    if (absl::Status bounded = CheckRequestBounds(request); !bounded.ok()) {                   \
      reply(bounded);                                                                          \
      return;                                                                                  \
    }                                                                                          \
    if (absl::Status paced = call_rate_.Admit(RateKey(who), std::chrono::steady_clock::now()); \
        !paced.ok()) {                                                                         \
      reply(paced);                                                                            \
      return;                                                                                  \
    }                                                                                          \
    Dispatch(PartOf<Area##Rpcs>(), &Area##Rpcs::Method, std::move(request), std::move(who),    \
             std::move(reply), outbox_, Writes(#Method));                                      \
  }
COHORT_CONTROLLER_RPCS(COHORT_CONTROLLER_DEFINE_RPC)
#undef COHORT_CONTROLLER_DEFINE_RPC

void Controller::Restore(LoadedState loaded) {
  SavedState saved;
  saved.next_id = loaded.next_job_id;
  outbox_.LoadedNextId(loaded.next_job_id);
  int unreadable = 0;
  saved.jobs.reserve(loaded.jobs.size());
  state_.specs.reserve(loaded.jobs.size());
  for (v1::JobRecord& record : loaded.jobs) {
    absl::StatusOr<SavedJob> job = FromRecord(record, *state_.topology);
    if (!job.ok()) {
      // Kept in the database for the operator; the engine cannot run it.
      Log("controller")->error("job_unreadable job={} reason=\"{}\"", record.id(), job.status());
      ++unreadable;
      continue;
    }
    state_.specs[record.id()] = std::move(*record.mutable_spec());
    saved.jobs.push_back(*std::move(job));
  }
  for (const v1::UsageRecordProto& u : loaded.usage) {
    saved.usage.push_back({u.account(), u.user(), u.usage(), Millis(u.as_of_ms()), u.gpu_seconds(),
                           u.cpu_seconds(), Millis(u.period_start_ms()), u.qos()});
  }
  saved.partitions = loaded.partitions;
  std::vector<std::string> account_warnings;
  saved.accounting = FromRecord(loaded.accounting, account_warnings);
  for (const std::string& warning : account_warnings) {
    Log("controller")->warn("account_dropped reason=\"{}\"", warning);
  }
  for (const v1::Reservation& kept : loaded.reservations) {
    absl::StatusOr<AdvanceReservation> r = ReservationFromWire(kept, *state_.topology);
    if (!r.ok()) {
      Log("controller")->warn("reservation_dropped name={} reason=\"{}\"", kept.name(), r.status());
      continue;
    }
    saved.reservations.push_back(*std::move(r));
  }
  for (const StateBatch::NodeRow& row : loaded.nodes) {
    const std::optional<NodeId> node = state_.topology->FindNode(row.name);
    if (!node) continue;
    saved.nodes.emplace_back(*node, row.admin);
    outbox_.LoadedAdmin(*node, row.admin);
  }
  const std::size_t jobs = saved.jobs.size();
  Effects effects;
  state_.engine.Restore(std::move(saved), ControllerState::Now(), effects);
  Log("controller")
      ->info("state_loaded path={} jobs={} unreadable={} next_job_id={} drained_nodes={}",
             options_.state_path, jobs, unreadable, state_.engine.NextId(),
             std::count_if(loaded.nodes.begin(), loaded.nodes.end(),
                           [](const StateBatch::NodeRow& r) { return r.admin.drain; }));
  Execute(effects);
  // Pending jobs with an image, loaded: their pulls ahead start afresh.
  std::vector<JobId> loaded_ids;
  for (const auto& [id, spec] : state_.specs) {
    if (spec.has_container()) loaded_ids.push_back(id);
  }
  image_prefetch_.Changed(loaded_ids);
}

void Controller::Shutdown() {
  pass_timer_.cancel();
  history_rpcs_.Stop();
  reader_.Stop();
  outbox_.Shutdown();
}

void Controller::Start() {
  outbox_.StartPurge(options_.history_retention);
  ArmTick();
}

void Controller::ArmTick() {
  tick_timer_.expires_after(options_.tick_interval);
  tick_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) Tick();
  });
}

void Controller::Tick() {
  Effects effects;
  state_.engine.Tick(ControllerState::Now(), effects);
  image_prefetch_.Review(ControllerState::Now());
  // Before Execute clears them.
  const std::vector<JobId> forgotten = std::move(effects.forgotten_jobs);
  Execute(effects);
  // The engine forgets finished jobs after a while (the store keeps them).
  // By id: a sweep of every spec looked up 100,000 jobs at every tick once
  // one job had been forgotten, 5-10 ms of the state thread twice a second.
  for (const JobId id : forgotten) state_.specs.erase(id);
  ArmTick();
}

void Controller::RequestPass() {
  // Coalesce: however many events arrive in one turn, one pass follows them.
  if (pass_posted_ || !state_.engine.ScheduleNeeded()) return;
  pass_posted_ = true;
  if (std::chrono::steady_clock::now() >= next_pass_) {
    boost::asio::post(io_, [this] { RunPass(); });
  } else {
    pass_timer_.expires_at(next_pass_);
    pass_timer_.async_wait([this](const boost::system::error_code& error) {
      if (!error) RunPass();
    });
  }
}

void Controller::RunPass() {
  pass_posted_ = false;
  const auto started = std::chrono::steady_clock::now();
  Effects effects;
  state_.engine.Schedule(ControllerState::Now(), effects);
  const auto ended = std::chrono::steady_clock::now();
  const auto took = ended - started;
  metrics_.Pass(state_.engine.LastPassKind(), took);
  next_pass_ = ended + std::min<std::chrono::steady_clock::duration>(took, std::chrono::seconds(1));
  if (const auto& log = Log("sched"); log->should_log(spdlog::level::debug)) {
    log->debug(
        "pass took_us={} kind={} launches={} changed_jobs={} pending={}",
        std::chrono::duration_cast<std::chrono::microseconds>(took).count(),
        state_.engine.LastPassKind(),
        std::count_if(effects.commands.begin(), effects.commands.end(),
                      [](const Command& c) { return std::holds_alternative<LaunchCommand>(c); }),
        effects.changed_jobs.size(), state_.engine.PendingCount());
  }
  Execute(effects);
}

void Controller::Execute(Effects& effects) {
  for (const JobId id : effects.changed_jobs) {
    // A task split off an array: it runs the array's spec.
    if (state_.specs.contains(id)) continue;
    const Job* job = state_.engine.FindJob(id);
    if (job != nullptr && job->array.job_id != 0 && job->array.job_id != id) {
      state_.specs[id] = state_.specs[job->array.job_id];
    }
  }
  outbox_.MarkChanged(effects.changed_jobs, effects.changed_nodes);
  if (effects.changed_partitions) outbox_.MarkPartitionsChanged();
  if (effects.changed_accounts) outbox_.MarkAccountsChanged();
  if (effects.changed_reservations) outbox_.MarkReservationsChanged();
  image_prefetch_.Changed(effects.changed_jobs);
  for (const Command& command : effects.commands) agent_hub_.Send(command);
  LogTransitions(effects.transitions);
  metrics_.Count(effects.transitions);
  for (const JobId id : effects.changed_jobs) Notify(id);
  LogNodes(effects.changed_nodes);
  effects = {};
  // The commit first: it runs on the store thread while the pass runs here,
  // so that a reply waits for its records, not for a pass it does not need.
  outbox_.ScheduleFlush();
  RequestPass();
}

void Controller::LogNodes(const std::vector<NodeId>& nodes) {
  for (const NodeId node : nodes) {
    const NodeView view = state_.engine.ViewNode(node);
    NodeStatus& logged = logged_node_status_[static_cast<std::size_t>(node)];
    if (view.status == logged) continue;
    logged = view.status;
    Log("controller")
        ->info("node_state node={} state={}{}", state_.topology->NodeName(node),
               NodeStatusName(view.status),
               view.reason.empty() ? "" : fmt::format(" reason=\"{}\"", view.reason));
  }
}

void Controller::LogTransitions(const std::vector<JobTransition>& transitions) {
  for (const JobTransition& t : transitions) {
    const Job* job = state_.engine.FindJob(t.job);
    std::vector<std::string> nodes;
    if (job != nullptr) {
      for (const alloc::NodeGrant& g : job->run.placement.grants) {
        nodes.push_back(state_.topology->NodeName(g.node));
      }
    }
    Log("controller")
        ->info("job_state job={} from={} to={} event={} nodes={} leaves={} reason=\"{}\"", t.job,
               t.from ? JobStatusName(*t.from) : "none", JobStatusName(t.to),
               t.event ? JobEventName(*t.event) : "submitted", hostlist::Compress(nodes),
               job == nullptr ? 0 : job->run.placement.leaves.size(),
               job == nullptr ? "" : job->reason);
  }
}

void Controller::Notify(JobId id) {
  const Engine& engine = state_.engine;
  const Job* job = engine.FindJob(id);
  if (job == nullptr) return;
  const bool finished = IsFinished(job->state);
  if (watch_hub_.Watched(id)) {
    v1::JobEvent event;
    state_.JobToWire(*job, engine.QueuePosition(id), event.mutable_job());
    watch_hub_.Publish(id, std::move(event),
                       finished ? JobWatcher::Last::kYes : JobWatcher::Last::kNo);
  }
  if (finished || job->state == JobState::kPending) {  // ended, or requeued
    state_.bindings.erase(id);
    state_.usage.Forget(id);
  }
  if (finished) state_.envs.erase(id);
  // A step's command is needed until its launches are out; they went with
  // the effects that started it.
  for (auto it = state_.step_specs.lower_bound({id, std::numeric_limits<int>::min()});
       it != state_.step_specs.end() && it->first.first == id;) {
    const int step = it->first.second;
    const bool running = std::any_of(
        job->run.steps.begin(), job->run.steps.end(),
        [&](const JobStep& s) { return s.id == step && s.state == StepState::kRunning; });
    it = running ? std::next(it) : state_.step_specs.erase(it);
  }
}

void Controller::Watch(std::int64_t id, Identity who, JobWatcher* watcher, Reply<bool> reply) {
  boost::asio::post(
      io_, [this, id, who = std::move(who), watcher, reply = std::move(reply)]() mutable {
        const Job* job = state_.engine.FindJob(id);
        if (job == nullptr) {
          outbox_.Respond<bool>(std::move(reply), absl::NotFoundError(fmt::format(
                                                      "job {} not found; see cohort queue", id)));
          return;
        }
        if (!MaySeeJob(who, job->request.uid, state_.config.private_data)) {
          outbox_.Respond<bool>(std::move(reply), HiddenJob(id));
          return;
        }
        v1::JobEvent event;
        state_.JobToWire(*job, state_.engine.QueuePosition(id), event.mutable_job());
        const JobWatcher::Last last =
            IsFinished(job->state) ? JobWatcher::Last::kYes : JobWatcher::Last::kNo;
        watch_hub_.Watch(id, watcher, std::move(event), last, std::move(reply));
      });
}

void Controller::Unwatch(JobWatcher* watcher, std::function<void()> after) {
  boost::asio::post(io_, [this, watcher, after = std::move(after)] {
    watch_hub_.Unwatch(watcher);
    after();
  });
}

std::vector<std::string> Controller::CheckReload(const config::ClusterConfig& next,
                                                 const topology::Topology& next_topology) const {
  std::vector<std::string> errors;
  if (next.state_dir != state_.config.state_dir) {
    errors.push_back(fmt::format(
        "StateDir changes from {} to {}: the state database cannot move while the controller "
        "runs; stop it, move the folder, and start it",
        state_.config.state_dir, next.state_dir));
  }
  for (const auto& [id, job] : state_.engine.Jobs()) {
    if (IsFinished(job.state)) continue;
    const std::string& partition = job.request.partition;
    if (!partition.empty() && next.FindPartition(partition) == nullptr) {
      errors.push_back(fmt::format(
          "job {} is {} in partition {}, which the new configuration removes; keep the partition "
          "until its jobs have ended (cancel them, or wait)",
          id, JobStateName(job.state), partition));
    }
    for (const alloc::NodeGrant& grant : job.run.placement.grants) {
      const std::string& node = state_.topology->NodeName(grant.node);
      if (!next_topology.FindNode(node)) {
        errors.push_back(fmt::format(
            "job {} runs on {}, which the new configuration removes; drain {} and remove it once "
            "its jobs have ended (cohort drain {})",
            id, node, node, node));
      }
    }
  }
  return errors;
}

void Controller::ObserveRpc(std::string_view method, std::chrono::steady_clock::duration took) {
  boost::asio::post(io_, [this, method, took] { metrics_.Rpc(method, took); });
}

void Controller::Metrics(Reply<std::string> reply) {
  boost::asio::post(io_, [this, reply = std::move(reply)] {
    const ListenerCounts listeners = listener_counts_ ? listener_counts_() : ListenerCounts{};
    reply(metrics_.Render(state_.engine, agent_hub_.ConnectedNodes(),
                          Refusals{.rpc_connections_refused = listeners.rpc_refused,
                                   .rpc_connections_shed = listeners.rpc_shed,
                                   .http_connections_refused = listeners.http_refused,
                                   .http_connections_shed = listeners.http_shed,
                                   .rpc_calls_refused = call_rate_.Refused(),
                                   .agent_reports_refused = agent_hub_.RefusedReports(),
                                   .state_write_stalls = outbox_.Stalls(),
                                   .state_writes_refused = !outbox_.WriteRefusal().ok()},
                          &state_.usage, state_.config.metrics_job_series));
  });
}

void Controller::OnAgentMessage(AgentLink* link, v1::AgentMessage message) {
  boost::asio::post(
      io_, [this, link, message = std::move(message)] { agent_hub_.OnMessage(link, message); });
}

void Controller::OnAgentGone(AgentLink* link, std::function<void()> after) {
  boost::asio::post(io_, [this, link, after = std::move(after)] {
    agent_hub_.OnGone(link);
    after();
  });
}

}  // namespace cohort::controller
