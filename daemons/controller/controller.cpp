// SPDX-License-Identifier: Apache-2.0
#include "controller.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <limits>

#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cohort/fmt_absl.h"
#include "cohort/hostlist.h"
#include "records.h"

namespace cohort::controller {
namespace {

// Fair-share usage changes every second while jobs run; a crash loses at
// most this much of it.
constexpr Millis kUsageWriteInterval = std::chrono::seconds(10);

std::shared_ptr<spdlog::logger> Log(const std::string& name) {
  std::shared_ptr<spdlog::logger> logger = spdlog::get(name);
  if (!logger) {
    logger = spdlog::default_logger()->clone(name);
    spdlog::register_logger(logger);
  }
  return logger;
}

absl::Status RequireTrusted(const Identity& who, std::string_view action) {
  if (who.trust != Identity::Trust::kAnonymous) return absl::OkStatus();
  return absl::PermissionDeniedError(fmt::format(
      "{} needs an identity: use the controller's local Unix socket, or present the cluster key "
      "(AuthKeyFile) over TCP",
      action));
}

}  // namespace

Worker::Worker() : guard_(io_.get_executor()), thread_([this] { io_.run(); }) {}

Worker::~Worker() { Stop(); }

void Worker::Stop() {
  guard_.reset();
  if (thread_.joinable()) thread_.join();
}

Controller::Controller(config::ClusterConfig config, std::unique_ptr<topology::Topology> topology,
                       alloc::NodePool pool, Options options, Stores stores, LoadedState loaded)
    : config_(std::move(config)),
      topology_(std::move(topology)),
      engine_(config_, *topology_, std::move(pool)),
      options_(std::move(options)),
      tick_timer_(io_),
      store_(std::move(stores.writer)),
      reader_(std::move(stores.reader)),
      history_reader_(std::move(stores.history)),
      checkpointer_(std::move(stores.checkpointer)),
      written_admin_(static_cast<std::size_t>(topology_->NodeCount())),
      logged_node_status_(static_cast<std::size_t>(topology_->NodeCount()), NodeStatus::kUnknown) {
  if (checkpointer_ != nullptr) {
    // SQLite's own threshold, checked after each commit on the store's
    // thread; the copy is made on another while commits go on.
    store_->HandOffCheckpoints(1000, [this] {
      if (checkpoint_posted_.exchange(true)) return;
      boost::asio::post(checkpoint_thread_.io(), [this] {
        checkpoint_posted_ = false;
        const auto started = std::chrono::steady_clock::now();
        if (absl::Status s = checkpointer_->Checkpoint(); !s.ok()) {
          // The writer's log grows until the next one succeeds; nothing is lost.
          Log("store")->warn("checkpoint_failed reason=\"{}\"", s);
          return;
        }
        Log("store")->debug("checkpoint took_us={}",
                            std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - started)
                                .count());
      });
    });
  }
  Restore(std::move(loaded));
}

Controller::~Controller() { Shutdown(); }

void Controller::Restore(LoadedState loaded) {
  SavedState saved;
  saved.next_id = loaded.next_job_id;
  written_next_id_ = loaded.next_job_id;
  int unreadable = 0;
  saved.jobs.reserve(loaded.jobs.size());
  specs_.reserve(loaded.jobs.size());
  for (v1::JobRecord& record : loaded.jobs) {
    absl::StatusOr<Job> job = FromRecord(record, *topology_);
    if (!job.ok()) {
      // Kept in the database for the operator; the engine cannot run it.
      Log("controller")->error("job_unreadable job={} reason=\"{}\"", record.id(), job.status());
      ++unreadable;
      continue;
    }
    specs_[record.id()] = std::move(*record.mutable_spec());
    saved.jobs.push_back(*std::move(job));
  }
  for (const v1::UsageRecordProto& u : loaded.usage) {
    saved.usage.push_back({u.account(), u.user(), u.usage(), Millis(u.as_of_ms())});
  }
  for (const StateBatch::NodeRow& row : loaded.nodes) {
    const std::optional<NodeId> node = topology_->FindNode(row.name);
    if (!node) continue;
    saved.nodes.emplace_back(*node, NodeAdmin{row.drain, row.reason});
    written_admin_[static_cast<std::size_t>(*node)] = NodeAdmin{row.drain, row.reason};
  }
  const std::size_t jobs = saved.jobs.size();
  Effects effects;
  engine_.Restore(std::move(saved), Now(), effects);
  Log("controller")->info("state_loaded path={} jobs={} unreadable={} next_job_id={} drained_nodes={}",
                          options_.state_path, jobs, unreadable, engine_.NextId(),
                          std::count_if(loaded.nodes.begin(), loaded.nodes.end(),
                                        [](const StateBatch::NodeRow& r) { return r.drain; }));
  Execute(effects);
}

void Controller::Shutdown() {
  purge_timer_.cancel();
  pass_timer_.cancel();
  store_thread_.Stop();
  history_thread_.Stop();
  checkpoint_thread_.Stop();
  if (failed_ || store_ == nullptr) return;
  // What the last turns changed and has not been written yet: write it now,
  // on this thread, so a clean stop loses nothing either.
  committing_ = false;
  usage_written_ = Millis{0};  // write the usage charged up to now too
  {
    outbox_.clear();
    flush_posted_ = true;  // no flush may be posted any more
    Flush();
    store_thread_.io().restart();
    store_thread_.io().run();
  }
  store_.reset();
}

Millis Controller::Now() {
  return std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch());
}

void Controller::Start() {
  if (options_.history_retention.count() > 0) {
    boost::asio::post(store_thread_.io(), [this] { PurgeHistory(); });
  }
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
  engine_.Tick(Now(), effects);
  Execute(effects);
  // The engine forgets finished jobs after a while (the store keeps them).
  // By id: a sweep of every spec looked up 100,000 jobs at every tick once
  // one job had been forgotten, 5-10 ms of the state thread twice a second.
  for (const JobId id : effects.forgotten_jobs) specs_.erase(id);
  ArmTick();
}

void Controller::PurgeHistory() {
  // On the store's thread, in small chunks so that commits interleave.
  const std::int64_t before =
      (Now() - std::chrono::duration_cast<Millis>(options_.history_retention)).count();
  constexpr int kChunk = 500;
  absl::StatusOr<int> purged = store_->PurgeHistory(before, kChunk);
  if (!purged.ok()) {
    Log("store")->warn("history_purge_failed reason=\"{}\"", purged.status());
  } else if (*purged > 0) {
    Log("store")->info("history_purged jobs={}", *purged);
  }
  const bool more = purged.ok() && *purged == kChunk;
  purge_timer_.expires_after(more ? std::chrono::milliseconds(10) : std::chrono::minutes(10));
  purge_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) PurgeHistory();
  });
}

void Controller::Defer(std::function<void()> out) {
  if (!committing_ && outbox_.empty() && dirty_jobs_.empty() && dirty_nodes_.empty() &&
      engine_.NextId() == written_next_id_) {
    out();
    return;
  }
  outbox_.push_back(std::move(out));
  ScheduleFlush();
}

void Controller::ScheduleFlush() {
  if (flush_posted_ || committing_) return;
  flush_posted_ = true;
  // After the handlers already queued: their changes join this batch.
  boost::asio::post(io_, [this] {
    flush_posted_ = false;
    Flush();
  });
}

void Controller::Flush() {
  if (committing_ || failed_) return;
  StateBatch batch;
  for (const JobId id : dirty_jobs_) {
    const Job* job = engine_.FindJob(id);
    if (job == nullptr) continue;
    StateBatch::JobRow& row = batch.jobs.emplace_back();
    row.record = ToRecord(*job, specs_[id], *topology_);
    if (new_jobs_.contains(id)) {
      const auto env = envs_.find(id);
      row.env = env == envs_.end() ? v1::JobSpec().SerializeAsString() : env->second.SerializeAsString();
    }
  }
  for (const NodeId node : dirty_nodes_) {
    const NodeAdmin admin = engine_.Admin(node);
    NodeAdmin& written = written_admin_[static_cast<std::size_t>(node)];
    if (admin.drain == written.drain && admin.reason == written.reason) continue;
    written = admin;
    batch.nodes.push_back({topology_->NodeName(node), admin.drain, admin.reason});
  }
  if (engine_.NextId() != written_next_id_) {
    batch.next_job_id = engine_.NextId();
    written_next_id_ = engine_.NextId();
  }
  if (const Millis now = Now(); now - usage_written_ >= kUsageWriteInterval) {
    usage_written_ = now;
    std::vector<v1::UsageRecordProto>& rows = batch.usage.emplace();
    for (const policy::UsageRecord& u : engine_.Usage().Snapshot(now)) {
      v1::UsageRecordProto& row = rows.emplace_back();
      row.set_account(u.account);
      row.set_user(u.user);
      row.set_usage(u.usage);
      row.set_as_of_ms(u.as_of.count());
    }
    if (rows.empty()) batch.usage.reset();
  }
  dirty_jobs_.clear();
  new_jobs_.clear();
  dirty_nodes_.clear();
  std::vector<std::function<void()>> out = std::move(outbox_);
  outbox_.clear();
  if (batch.jobs.empty() && batch.nodes.empty() && batch.next_job_id == 0 && !batch.usage) {
    for (std::function<void()>& f : out) f();
    return;
  }
  committing_ = true;
  boost::asio::post(store_thread_.io(), [this, batch = std::move(batch), out = std::move(out)]() mutable {
    const auto started = std::chrono::steady_clock::now();
    absl::Status status = store_->Commit(batch);
    Log("store")->trace("commit jobs={} nodes={} took_us={}", batch.jobs.size(), batch.nodes.size(),
                        std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - started)
                            .count());
    boost::asio::post(io_, [this, status = std::move(status), out = std::move(out)]() mutable {
      Committed(status, out);
    });
  });
}

void Controller::Committed(const absl::Status& status, std::vector<std::function<void()>>& out) {
  committing_ = false;
  if (!status.ok()) {
    // Nothing in this batch may be acknowledged, and later ones cannot be
    // made durable either: stop rather than tell clients what may be lost.
    failed_ = true;
    Log("store")->critical(
        "state_write_failed reason=\"{}\"; stopping: nothing more can be made durable (fix the "
        "cause and start the controller again; what was acknowledged is in the database)",
        status);
    io_.stop();
    return;
  }
  for (std::function<void()>& f : out) f();
  if (!outbox_.empty() || !dirty_jobs_.empty() || !dirty_nodes_.empty()) ScheduleFlush();
}

const v1::JobSpec& Controller::EnvironmentOf(JobId id) {
  auto it = envs_.find(id);
  if (it != envs_.end()) return it->second;
  // Submitted before a restart: the store has it.
  absl::StatusOr<std::optional<v1::JobSpec>> stored = reader_->FindEnvironment(id);
  if (!stored.ok()) {
    Log("store")->error("environment_unreadable job={} reason=\"{}\"", id, stored.status());
  }
  v1::JobSpec env = stored.ok() && stored->has_value() ? **stored : v1::JobSpec();
  if (!stored.ok() || !stored->has_value()) {
    // An array's tasks share the environment stored once with the array.
    const Job* job = engine_.FindJob(id);
    if (job != nullptr && job->array_job_id != 0 && job->array_job_id != id) {
      env = EnvironmentOf(job->array_job_id);
    }
  }
  return envs_.emplace(id, std::move(env)).first->second;
}

void Controller::SendToNode(NodeId node, v1::ControllerMessage message) {
  // A node without a stream cannot hear it; when its agent registers again
  // it reports its jobs and the engine stops what should not run.
  Defer([this, node, message = std::move(message)]() mutable {
    if (const auto it = links_.find(node); it != links_.end()) it->second->Send(std::move(message));
  });
}

void Controller::RequestPass() {
  // Coalesce: however many events arrive in one turn, one pass follows them.
  if (pass_posted_ || !engine_.ScheduleNeeded()) return;
  pass_posted_ = true;
  auto pass = [this] {
    pass_posted_ = false;
    const auto started = std::chrono::steady_clock::now();
    Effects effects;
    engine_.Schedule(Now(), effects);
    const auto ended = std::chrono::steady_clock::now();
    const auto took = ended - started;
    next_pass_ = ended + std::min<std::chrono::steady_clock::duration>(took, std::chrono::seconds(1));
    if (const auto& log = Log("sched"); log->should_log(spdlog::level::debug)) {
      log->debug("pass took_us={} kind={} launches={} changed_jobs={} pending={}",
                 std::chrono::duration_cast<std::chrono::microseconds>(took).count(),
                 engine_.LastPassKind(),
                 std::count_if(effects.commands.begin(), effects.commands.end(),
                               [](const Command& c) { return std::holds_alternative<LaunchCommand>(c); }),
                 effects.changed_jobs.size(), engine_.PendingCount());
    }
    Execute(effects);
  };
  if (std::chrono::steady_clock::now() >= next_pass_) {
    boost::asio::post(io_, pass);
  } else {
    pass_timer_.expires_at(next_pass_);
    pass_timer_.async_wait([pass](const boost::system::error_code& error) {
      if (!error) pass();
    });
  }
}

void Controller::Execute(Effects& effects) {
  for (const JobId id : effects.changed_jobs) {
    // A task split off an array: it runs the array's spec.
    if (specs_.contains(id)) continue;
    const Job* job = engine_.FindJob(id);
    if (job != nullptr && job->array_job_id != 0 && job->array_job_id != id) {
      specs_[id] = specs_[job->array_job_id];
    }
  }
  dirty_jobs_.insert(effects.changed_jobs.begin(), effects.changed_jobs.end());
  dirty_nodes_.insert(effects.changed_nodes.begin(), effects.changed_nodes.end());
  for (const Command& command : effects.commands) {
    if (const auto* launch = std::get_if<LaunchCommand>(&command)) {
      SendLaunch(*launch);
      continue;
    }
    v1::ControllerMessage message;
    NodeId node = 0;
    if (const auto* signal = std::get_if<SignalCommand>(&command)) {
      message.mutable_signal()->set_job_id(signal->job);
      message.mutable_signal()->set_signal(signal->signal);
      message.mutable_signal()->set_batch_only(signal->batch_only);
      node = signal->node;
    } else {
      const auto& terminate = std::get<TerminateCommand>(command);
      message.mutable_terminate()->set_job_id(terminate.job);
      message.mutable_terminate()->set_kill_wait_ms(
          std::chrono::duration_cast<std::chrono::milliseconds>(config_.kill_wait).count());
      node = terminate.node;
    }
    SendToNode(node, std::move(message));
  }
  for (const JobId id : effects.changed_jobs) Notify(id);
  for (const NodeId node : effects.changed_nodes) {
    const NodeView view = engine_.ViewNode(node);
    NodeStatus& logged = logged_node_status_[static_cast<std::size_t>(node)];
    if (view.status == logged) continue;
    logged = view.status;
    Log("controller")->info("node_state node={} state={}{}", topology_->NodeName(node),
                            NodeStatusName(view.status),
                            view.reason.empty() ? "" : fmt::format(" reason=\"{}\"", view.reason));
  }
  effects = {};
  // The commit first: it runs on the store thread while the pass runs here,
  // so that a reply waits for its records, not for a pass it does not need.
  ScheduleFlush();
  RequestPass();
}

void Controller::FailLaunch(const LaunchCommand& launch) {
  // Registered but its stream dropped: the gang cannot start whole.
  Effects effects;
  engine_.LaunchFailed(launch.job, launch.node, "its agent is not connected", Now(), effects);
  engine_.JobReleased(launch.job, launch.node, Now(), effects);
  Execute(effects);
}

void Controller::SendLaunch(const LaunchCommand& launch) {
  const Job* job = engine_.FindJob(launch.job);
  if (job == nullptr) return;
  if (!links_.contains(launch.node)) {
    FailLaunch(launch);
    return;
  }
  const topology::Topology& topology = *topology_;
  v1::ControllerMessage message;
  v1::Launch* l = message.mutable_launch();
  l->set_job_id(job->id);
  l->set_attempt(job->attempt);
  *l->mutable_spec() = specs_[job->id];
  *l->mutable_spec()->mutable_env() = EnvironmentOf(job->id).env();
  l->mutable_spec()->set_name(job->request.name);
  l->mutable_spec()->set_partition(job->request.partition);
  l->mutable_spec()->set_account(job->request.account);
  l->set_uid(job->request.uid);
  l->set_node_rank(launch.node_rank);
  std::vector<std::string> names;
  for (const alloc::NodeGrant& g : job->placement.grants) names.push_back(topology.NodeName(g.node));
  l->set_nodelist(hostlist::Compress(names));
  l->set_num_nodes(static_cast<int>(job->placement.grants.size()));
  l->set_tasks_per_node(job->gang.tasks_per_node);
  const NodeId master = job->placement.grants.front().node;
  const auto master_link = links_.find(master);
  l->set_master_addr(master_link != links_.end() ? master_link->second->PeerHost()
                                                 : topology.NodeName(master));
  l->set_master_port(job->master_port);
  l->set_cpus(launch.grant.cpus);
  l->set_gpus(launch.grant.gpus);
  l->set_time_limit_s(job->time_limit == kUnlimited ? 0 : job->time_limit.count());
  l->set_cluster_name(config_.cluster_name);
  l->set_partition(job->request.partition);
  if (job->array_job_id != 0 && job->array_task_id >= 0) {
    l->set_array_job_id(job->array_job_id);
    l->set_array_task_id(job->array_task_id);
    // Min, max, count and step describe the whole array, as Slurm's do.
    if (absl::StatusOr<ArraySpec> array = ParseArraySpec(l->spec().array(), std::numeric_limits<int>::max());
        array.ok() && !array->tasks.empty()) {
      l->set_array_task_min(array->tasks.front());
      l->set_array_task_max(array->tasks.back());
      l->set_array_task_count(static_cast<int>(array->tasks.size()));
      l->set_array_task_step(array->step);
    }
  }
  // Sent once the job's RUNNING state is durable.
  Defer([this, launch, message = std::move(message)]() mutable {
    const auto link = links_.find(launch.node);
    if (link == links_.end()) {
      FailLaunch(launch);
      return;
    }
    link->second->Send(std::move(message));
  });
}

void Controller::Notify(JobId id) {
  const Job* job = engine_.FindJob(id);
  if (job == nullptr) return;
  auto [logged, fresh] = logged_state_.try_emplace(id, job->state);
  if (fresh || logged->second != job->state) {
    logged->second = job->state;
    std::vector<std::string> nodes;
    for (const alloc::NodeGrant& g : job->placement.grants) nodes.push_back(topology_->NodeName(g.node));
    Log("controller")->info("job_state job={} state={} nodes={} leaves={} reason=\"{}\"", id,
                            JobStateName(job->state), hostlist::Compress(nodes),
                            job->placement.leaves.size(), job->reason);
  }
  const bool finished = IsFinished(job->state);
  auto [first, last] = watchers_.equal_range(id);
  if (first != last) {
    v1::JobEvent event;
    JobToWire(*job, specs_[id], engine_, engine_.QueuePosition(id), event.mutable_job());
    std::vector<JobWatcher*> watchers;
    for (auto it = first; it != last; ++it) watchers.push_back(it->second);
    // Watchers are unregistered (and deleted) only on this thread, after
    // Unwatch; a deferred push checks the watcher is still registered.
    Defer([this, id, event = std::move(event), watchers = std::move(watchers), finished] {
      for (JobWatcher* watcher : watchers) {
        const auto [lo, hi] = watchers_.equal_range(id);
        const bool still = std::any_of(lo, hi, [&](const auto& e) { return e.second == watcher; }) ||
                           finished_watchers_.contains(watcher);
        if (still) watcher->Push(event, finished ? JobWatcher::Last::kYes : JobWatcher::Last::kNo);
      }
      if (finished) {
        for (JobWatcher* watcher : watchers) finished_watchers_.erase(watcher);
      }
    });
  }
  if (finished || job->state == JobState::kPending) bindings_.erase(id);  // ended, or requeued
  if (finished) {
    for (auto it = first; it != last; ++it) finished_watchers_.insert(it->second);
    watchers_.erase(id);
    logged_state_.erase(id);
    envs_.erase(id);
  }
}

void Controller::SubmitJob(v1::SubmitJobRequest request, Identity who,
                           Reply<v1::SubmitJobResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), who = std::move(who),
                          reply = std::move(reply)]() mutable {
    if (absl::Status trusted = RequireTrusted(who, "submitting"); !trusted.ok()) {
      Respond<v1::SubmitJobResponse>(std::move(reply), trusted);
      return;
    }
    absl::StatusOr<JobRequest> job = RequestFromSpec(request.spec(), who, config_.max_array_size);
    if (!job.ok()) {
      Respond<v1::SubmitJobResponse>(std::move(reply), job.status());
      return;
    }
    if (absl::Status bindable = CheckBindingAtSubmit(request.spec(), *job, config_, node_kinds_);
        !bindable.ok()) {
      Respond<v1::SubmitJobResponse>(std::move(reply), bindable);
      return;
    }
    v1::SubmitJobResponse response;
    if (request.test_only()) {
      absl::StatusOr<Engine::Preview> preview = engine_.TestSubmit(*job);
      if (!preview.ok()) {
        Respond<v1::SubmitJobResponse>(std::move(reply), preview.status());
        return;
      }
      response.set_would_run_on(preview->would_run_on);
      response.set_reason(preview->reason);
      Respond<v1::SubmitJobResponse>(std::move(reply), response);
      return;
    }
    Effects effects;
    absl::StatusOr<JobId> id = engine_.Submit(*std::move(job), Now(), effects);
    if (!id.ok()) {
      Log("rpc")->info("submit_refused user={} reason=\"{}\"", who.user_name, id.status());
      Respond<v1::SubmitJobResponse>(std::move(reply), id.status());
      return;
    }
    v1::JobSpec& spec = specs_[*id] = std::move(*request.mutable_spec());
    spec.set_user_name(who.user_name);
    spec.mutable_env()->Swap(envs_[*id].mutable_env());
    new_jobs_.insert(*id);
    response.set_job_id(*id);
    Execute(effects);
    // The id goes out once the job is durable.
    Respond<v1::SubmitJobResponse>(std::move(reply), response);
  });
}

void Controller::CancelJob(v1::CancelJobRequest request, Identity who,
                           Reply<v1::CancelJobResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), who = std::move(who),
                          reply = std::move(reply)] {
    if (absl::Status trusted = RequireTrusted(who, "cancelling"); !trusted.ok()) {
      Respond<v1::CancelJobResponse>(reply, trusted);
      return;
    }
    Effects effects;
    absl::Status result = absl::OkStatus();
    for (const std::int64_t id : request.job_ids()) {
      absl::Status s = engine_.Cancel(JobRef{id, -1}, request.signal(), Caller{who.uid}, Now(), effects);
      if (!s.ok() && result.ok()) result = s;
    }
    for (const std::string& text : request.job_refs()) {
      absl::StatusOr<JobRef> ref = ParseJobRef(text);
      absl::Status s = ref.ok() ? engine_.Cancel(*ref, request.signal(), Caller{who.uid}, Now(), effects)
                                : ref.status();
      if (!s.ok() && result.ok()) result = s;
    }
    Execute(effects);
    Respond(reply, result.ok() ? absl::StatusOr<v1::CancelJobResponse>(v1::CancelJobResponse{})
                               : absl::StatusOr<v1::CancelJobResponse>(result));
  });
}

void Controller::GetJob(v1::GetJobRequest request, Identity /*who*/,
                        Reply<v1::GetJobResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), reply = std::move(reply)]() mutable {
    if (!request.job_ref().empty()) {
      absl::StatusOr<JobRef> ref = ParseJobRef(request.job_ref());
      if (!ref.ok()) {
        Respond<v1::GetJobResponse>(reply, ref.status());
        return;
      }
      const std::vector<JobId> ids = engine_.Lookup(*ref);
      request.set_job_id(ids.empty() ? ref->job : ids.front());
      if (ids.empty() && ref->task >= 0) {
        Respond<v1::GetJobResponse>(reply, absl::NotFoundError(fmt::format(
                                               "job {} not found; see cohort queue", request.job_ref())));
        return;
      }
    }
    const Job* job = engine_.FindJob(request.job_id());
    v1::GetJobResponse response;
    if (job != nullptr) {
      JobToWire(*job, specs_[job->id], engine_, engine_.QueuePosition(job->id),
                response.mutable_job());
      if (const auto ranks = bindings_.find(job->id); ranks != bindings_.end()) {
        for (const v1::RankBinding& b : ranks->second) *response.mutable_job()->add_ranks() = b;
      }
      Respond(reply, absl::StatusOr<v1::GetJobResponse>(std::move(response)));
      return;
    }
    // Finished long enough ago to have left memory: the store has it.
    absl::StatusOr<std::optional<v1::JobRecord>> stored = reader_->FindJob(request.job_id());
    if (!stored.ok()) {
      Respond<v1::GetJobResponse>(reply, stored.status());
    } else if (!stored->has_value()) {
      Respond<v1::GetJobResponse>(
          reply, absl::NotFoundError(fmt::format("job {} not found; see cohort queue and cohort "
                                                 "history",
                                                 request.job_id())));
    } else {
      RecordToWire(**stored, *topology_, response.mutable_job());
      Respond(reply, absl::StatusOr<v1::GetJobResponse>(std::move(response)));
    }
  });
}

void Controller::ListJobs(v1::ListJobsRequest request, Identity who,
                          Reply<v1::ListJobsResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), who = std::move(who),
                          reply = std::move(reply)] {
    std::set<JobState> states;
    for (const int s : request.states()) {
      if (const std::optional<JobState> state = FromWire(static_cast<v1::JobState>(s))) {
        states.insert(*state);
      }
    }
    if (states.empty()) states = {JobState::kPending, JobState::kRunning, JobState::kCompleting};
    std::unordered_map<JobId, int> positions;
    int position = 0;
    for (const JobId id : engine_.PendingOrder()) positions[id] = ++position;
    v1::ListJobsResponse response;
    for (const auto& [id, job] : engine_.Jobs()) {
      if (!states.contains(job.state)) continue;
      if (!request.all_users() && request.user_name().empty() && job.request.uid != who.uid) continue;
      if (!request.user_name().empty() && job.request.user_name != request.user_name()) continue;
      const auto at = positions.find(id);
      v1::Job* out = response.add_jobs();
      JobToWire(job, specs_[id], engine_, at == positions.end() ? 0 : at->second, out);
      out->mutable_spec()->clear_script();  // a listing does not show it; show job does
    }
    Respond(reply, absl::StatusOr<v1::ListJobsResponse>(std::move(response)));
  });
}

void Controller::JobHistory(v1::JobHistoryRequest request, Identity who,
                            Reply<v1::JobHistoryResponse> reply) {
  // On the history thread, from its own connection: a long query never holds
  // up the state thread, and it sees only what is durable.
  boost::asio::post(history_thread_.io(), [this, request = std::move(request), who = std::move(who),
                                           reply = std::move(reply)] {
    HistoryQuery query;
    query.job_ids.assign(request.job_ids().begin(), request.job_ids().end());
    query.user_name = request.user_name();
    query.account = request.account();
    // Like sacct: users see their own jobs unless they ask for all or name
    // a user or job; operators see everyone's.
    if (query.user_name.empty() && query.job_ids.empty() && !request.all_users() &&
        who.uid != 0) {
      query.uid = who.uid;
    }
    for (const int state : request.states()) query.states.push_back(state);
    query.since_ms = request.since_ms();
    query.until_ms = request.until_ms();
    query.limit = request.limit();
    absl::StatusOr<std::vector<v1::JobRecord>> records = history_reader_->History(query);
    if (!records.ok()) {
      reply(records.status());
      return;
    }
    v1::JobHistoryResponse response;
    for (const v1::JobRecord& record : *records) RecordToWire(record, *topology_, response.add_jobs());
    reply(std::move(response));
  });
}

void Controller::ListNodes(v1::ListNodesRequest request, Reply<v1::ListNodesResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), reply = std::move(reply)] {
    const topology::Topology& topology = *topology_;
    std::vector<NodeId> nodes;
    if (request.nodes().empty()) {
      for (NodeId n = 0; n < topology.NodeCount(); ++n) nodes.push_back(n);
    } else {
      absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(request.nodes());
      if (!names.ok()) {
        Respond<v1::ListNodesResponse>(reply, names.status());
        return;
      }
      for (const std::string& name : *names) {
        const std::optional<NodeId> id = topology.FindNode(name);
        if (!id) {
          Respond<v1::ListNodesResponse>(
              reply, absl::NotFoundError(fmt::format("no node {}; see cohort nodes", name)));
          return;
        }
        nodes.push_back(*id);
      }
    }
    const alloc::NodePool& pool = engine_.Pool();
    v1::ListNodesResponse response;
    for (const NodeId n : nodes) {
      const NodeView view = engine_.ViewNode(n);
      const alloc::NodeCapacity& capacity = pool.Capacity(n);
      const alloc::NodeFree& free = pool.Free(n);
      v1::Node* out = response.add_nodes();
      out->set_name(topology.NodeName(n));
      out->set_state(ToWire(view.status));
      out->set_reason(view.reason);
      out->set_cpus(capacity.cpus);
      out->set_cpus_allocated(capacity.cpus - free.cpus);
      out->set_memory_mb(capacity.memory_mb);
      out->set_memory_allocated_mb(capacity.memory_mb - free.memory_mb);
      out->set_gpus(capacity.gpus);
      out->set_gpus_allocated(capacity.gpus - std::popcount(free.gpus));
      for (std::size_t i = 0; i < pool.FeatureNames().size(); ++i) {
        if ((capacity.features >> i) & 1U) out->add_features(pool.FeatureNames()[i]);
      }
      for (alloc::PartitionId p = 0; p < pool.PartitionCount(); ++p) {
        if (pool.GetPartition(p).contains[static_cast<std::size_t>(n)] != 0) {
          out->add_partitions(pool.GetPartition(p).name);
        }
      }
      for (const JobId id : view.jobs) out->add_jobs(id);
      const topology::SwitchId leaf = topology.LeafOf(n);
      if (leaf != topology::kNone) out->set_leaf(topology.GetSwitch(leaf).name);
      const topology::BlockId block = topology.BlockOf(n);
      if (block != topology::kNone) out->set_block(topology.Blocks()[block].name);
    }
    Respond(reply, absl::StatusOr<v1::ListNodesResponse>(std::move(response)));
  });
}

void Controller::UpdateNode(v1::UpdateNodeRequest request, Identity who,
                            Reply<v1::UpdateNodeResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), who = std::move(who),
                          reply = std::move(reply)] {
    if (absl::Status trusted = RequireTrusted(who, "changing nodes"); !trusted.ok()) {
      Respond<v1::UpdateNodeResponse>(reply, trusted);
      return;
    }
    absl::StatusOr<std::vector<std::string>> names = hostlist::Expand(request.nodes());
    if (!names.ok()) {
      Respond<v1::UpdateNodeResponse>(reply, names.status());
      return;
    }
    std::vector<NodeId> nodes;
    for (const std::string& name : *names) {
      const std::optional<NodeId> id = topology_->FindNode(name);
      if (!id) {
        Respond<v1::UpdateNodeResponse>(
            reply, absl::NotFoundError(fmt::format("no node {}; see cohort nodes", name)));
        return;
      }
      nodes.push_back(*id);
    }
    Effects effects;
    for (const NodeId n : nodes) {
      absl::Status s;
      if (request.action() == v1::NODE_DRAIN) {
        s = engine_.Drain(n, request.reason(), Caller{who.uid}, effects);
      } else if (request.action() == v1::NODE_RESUME) {
        s = engine_.Resume(n, Caller{who.uid}, effects);
      } else {
        s = absl::InvalidArgumentError("action: say drain or resume");
      }
      if (!s.ok()) {
        Execute(effects);
        Respond<v1::UpdateNodeResponse>(reply, s);
        return;
      }
      Log("controller")->info("node_update node={} action={} by_uid={}", topology_->NodeName(n),
                              request.action() == v1::NODE_DRAIN ? "drain" : "resume", who.uid);
    }
    Execute(effects);
    Respond(reply, absl::StatusOr<v1::UpdateNodeResponse>(v1::UpdateNodeResponse{}));
  });
}

void Controller::GetTopology(Reply<v1::GetTopologyResponse> reply) {
  boost::asio::post(io_, [this, reply = std::move(reply)] {
    const topology::Topology& topology = *topology_;
    // Per node: 0 idle, 1 running jobs, 2 unavailable.
    std::vector<int> kind(static_cast<std::size_t>(topology.NodeCount()));
    for (NodeId n = 0; n < topology.NodeCount(); ++n) {
      switch (engine_.ViewNode(n).status) {
        case NodeStatus::kIdle: kind[static_cast<std::size_t>(n)] = 0; break;
        case NodeStatus::kMixed:
        case NodeStatus::kAllocated: kind[static_cast<std::size_t>(n)] = 1; break;
        default: kind[static_cast<std::size_t>(n)] = 2; break;
      }
    }
    v1::GetTopologyResponse response;
    for (const topology::SwitchId s : topology.SwitchesByLevel()) {
      const topology::Switch& sw = topology.GetSwitch(s);
      v1::Switch* out = response.add_switches();
      out->set_name(sw.name);
      out->set_level(sw.level);
      if (sw.parent != topology::kNone) out->set_parent(topology.GetSwitch(sw.parent).name);
      for (const topology::SwitchId c : sw.children) out->add_children(topology.GetSwitch(c).name);
      std::vector<std::string> names;
      for (const NodeId n : sw.nodes) names.push_back(topology.NodeName(n));
      out->set_nodes(hostlist::Compress(names));
      out->set_node_count(sw.node_count);
      int counts[3] = {0, 0, 0};
      for (const topology::SwitchId leaf : sw.leaves) {
        for (const NodeId n : topology.GetSwitch(leaf).nodes) ++counts[kind[static_cast<std::size_t>(n)]];
      }
      out->set_idle(counts[0]);
      out->set_allocated(counts[1]);
      out->set_unavailable(counts[2]);
    }
    for (const topology::SwitchId r : topology.Roots()) response.add_roots(topology.GetSwitch(r).name);
    Respond(reply, absl::StatusOr<v1::GetTopologyResponse>(std::move(response)));
  });
}

void Controller::ControlJobs(v1::ControlJobsRequest request, Identity who,
                             Reply<v1::ControlJobsResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), who = std::move(who),
                          reply = std::move(reply)] {
    if (absl::Status trusted = RequireTrusted(who, "changing jobs"); !trusted.ok()) {
      Respond<v1::ControlJobsResponse>(reply, trusted);
      return;
    }
    if (request.job_refs().empty()) {
      Respond<v1::ControlJobsResponse>(reply, absl::InvalidArgumentError("job: name at least one job"));
      return;
    }
    Effects effects;
    absl::Status result = absl::OkStatus();
    v1::ControlJobsResponse response;
    const Caller caller{who.uid};
    for (const std::string& text : request.job_refs()) {
      absl::StatusOr<JobRef> ref = ParseJobRef(text);
      absl::Status s = ref.status();
      if (ref.ok()) {
        switch (request.action()) {
          case v1::JOB_HOLD: s = engine_.Hold(*ref, caller, effects); break;
          case v1::JOB_RELEASE: s = engine_.Release(*ref, caller, Now(), effects); break;
          case v1::JOB_REQUEUE: s = engine_.Requeue(*ref, caller, Now(), effects); break;
          case v1::JOB_CHECKPOINT_DONE: s = engine_.CheckpointDone(*ref, caller, Now(), effects); break;
          default: s = absl::InvalidArgumentError("action: give hold, release, requeue or checkpoint-done");
        }
      }
      if (s.ok()) {
        response.add_done(text);
        Log("rpc")->info("job_control action={} job={} user={}", v1::JobAction_Name(request.action()),
                         text, who.user_name);
      } else if (result.ok()) {
        result = s;
      }
    }
    Execute(effects);
    // Partial success still reports the first failure; what was done is durable.
    Respond(reply, result.ok() ? absl::StatusOr<v1::ControlJobsResponse>(std::move(response))
                               : absl::StatusOr<v1::ControlJobsResponse>(result));
  });
}

void Controller::ExplainJob(v1::ExplainJobRequest request, Reply<v1::ExplainJobResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), reply = std::move(reply)] {
    absl::StatusOr<JobRef> ref = ParseJobRef(request.job_ref());
    if (!ref.ok()) {
      Respond<v1::ExplainJobResponse>(reply, ref.status());
      return;
    }
    absl::StatusOr<Explanation> why = engine_.Explain(*ref, Now());
    if (!why.ok()) {
      Respond<v1::ExplainJobResponse>(reply, why.status());
      return;
    }
    v1::ExplainJobResponse response;
    const std::vector<JobId> ids = engine_.Lookup(*ref);
    const Job* job = nullptr;
    for (const JobId id : ids) {
      const Job* j = engine_.FindJob(id);
      if (job == nullptr || (j->state == JobState::kPending && job->state != JobState::kPending)) job = j;
    }
    if (job != nullptr) {
      JobToWire(*job, specs_[job->id], engine_, engine_.QueuePosition(job->id), response.mutable_job());
    }
    response.set_summary(why->summary);
    for (std::string& b : why->blockers) response.add_blockers(std::move(b));
    for (std::string& s : why->suggestions) response.add_suggestions(std::move(s));
    response.set_expected_start_ms(why->expected_start.count());
    Respond(reply, absl::StatusOr<v1::ExplainJobResponse>(std::move(response)));
  });
}

void Controller::GetPriorities(v1::PriorityRequest request, Reply<v1::PriorityResponse> reply) {
  boost::asio::post(io_, [this, request = std::move(request), reply = std::move(reply)] {
    std::vector<JobId> ids;
    if (request.job_refs().empty()) {
      ids = engine_.PendingOrder();
    } else {
      for (const std::string& text : request.job_refs()) {
        absl::StatusOr<JobRef> ref = ParseJobRef(text);
        if (!ref.ok()) {
          Respond<v1::PriorityResponse>(reply, ref.status());
          return;
        }
        const std::vector<JobId> found = engine_.Lookup(*ref);
        if (found.empty()) {
          Respond<v1::PriorityResponse>(
              reply, absl::NotFoundError(fmt::format("job {} not found; see cohort queue", text)));
          return;
        }
        ids.insert(ids.end(), found.begin(), found.end());
      }
    }
    const config::PriorityWeights& w = config_.priority;
    v1::PriorityResponse response;
    response.set_weight_age(w.age);
    response.set_weight_fairshare(w.fairshare);
    response.set_weight_job_size(w.job_size);
    response.set_weight_partition(w.partition);
    response.set_weight_qos(w.qos);
    const Millis now = Now();
    for (const JobId id : ids) {
      const Job* job = engine_.FindJob(id);
      if (job == nullptr || job->state != JobState::kPending) continue;
      const policy::PriorityFactors f = engine_.PriorityOf(*job, now);
      v1::JobPriority* p = response.add_jobs();
      p->set_job_id(id);
      p->set_display_id(DisplayId(*job));
      p->set_user_name(job->request.user_name);
      p->set_account(job->request.account);
      p->set_partition(job->request.partition);
      p->set_qos(job->qos);
      p->set_total(f.total);
      p->set_age(w.age * f.age);
      p->set_fairshare(w.fairshare * f.fairshare);
      p->set_job_size(w.job_size * f.job_size);
      p->set_partition_factor(w.partition * f.partition);
      p->set_qos_factor(w.qos * f.qos);
      p->set_age_raw(f.age);
      p->set_fairshare_raw(f.fairshare);
      p->set_job_size_raw(f.job_size);
      p->set_partition_raw(f.partition);
      p->set_qos_raw(f.qos);
    }
    std::stable_sort(response.mutable_jobs()->begin(), response.mutable_jobs()->end(),
                     [](const v1::JobPriority& a, const v1::JobPriority& b) { return a.total() > b.total(); });
    Respond(reply, absl::StatusOr<v1::PriorityResponse>(std::move(response)));
  });
}

void Controller::GetShares(Reply<v1::SharesResponse> reply) {
  boost::asio::post(io_, [this, reply = std::move(reply)] {
    v1::SharesResponse response;
    response.set_half_life_s(config_.priority.decay_half_life.count());
    for (const policy::ShareRow& row : engine_.Usage().Rows(config_, Now())) {
      v1::AccountShare* out = response.add_rows();
      out->set_account(row.account);
      out->set_user(row.user);
      out->set_shares(row.shares);
      out->set_norm_shares(row.norm_shares);
      out->set_usage_gpu_seconds(row.usage);
      out->set_norm_usage(row.norm_usage);
      out->set_factor(row.factor);
    }
    Respond(reply, absl::StatusOr<v1::SharesResponse>(std::move(response)));
  });
}

void Controller::Watch(std::int64_t id, JobWatcher* watcher, Reply<bool> reply) {
  boost::asio::post(io_, [this, id, watcher, reply = std::move(reply)] {
    const Job* job = engine_.FindJob(id);
    if (job == nullptr) {
      Respond<bool>(reply, absl::NotFoundError(fmt::format("job {} not found; see cohort queue", id)));
      return;
    }
    v1::JobEvent event;
    JobToWire(*job, specs_[id], engine_, engine_.QueuePosition(id), event.mutable_job());
    const bool finished = IsFinished(job->state);
    if (!finished) watchers_.emplace(id, watcher);
    if (finished) finished_watchers_.insert(watcher);
    Defer([this, id, reply, watcher, event = std::move(event), finished]() mutable {
      // The client may have gone (and its watcher with it) meanwhile.
      if (finished) {
        if (finished_watchers_.erase(watcher) == 0) return;
      } else {
        const auto [lo, hi] = watchers_.equal_range(id);
        if (std::none_of(lo, hi, [&](const auto& e) { return e.second == watcher; })) return;
      }
      reply(true);
      watcher->Push(std::move(event), finished ? JobWatcher::Last::kYes : JobWatcher::Last::kNo);
    });
  });
}

void Controller::Unwatch(JobWatcher* watcher, std::function<void()> after) {
  boost::asio::post(io_, [this, watcher, after = std::move(after)] {
    std::erase_if(watchers_, [watcher](const auto& entry) { return entry.second == watcher; });
    finished_watchers_.erase(watcher);
    after();
  });
}

void Controller::OnAgentMessage(AgentLink* link, v1::AgentMessage message) {
  boost::asio::post(io_, [this, link, message = std::move(message)] {
    if (message.has_register_()) {
      Register(link, message.register_());
      return;
    }
    const auto known = link_nodes_.find(link);
    if (known == link_nodes_.end()) {
      link->Close(absl::FailedPreconditionError("send Register first"));
      return;
    }
    const NodeId node = known->second;
    const Millis now = Now();
    engine_.NodeHeartbeat(node, now);
    Effects effects;
    switch (message.message_case()) {
      case v1::AgentMessage::kRanksStarted: {
        const v1::RanksStarted& started = message.ranks_started();
        Log("launch")->debug("ranks_started job={} node={} ranks={}", started.job_id(),
                             topology_->NodeName(node), started.ranks_size());
        const Job* job = engine_.FindJob(started.job_id());
        if (job != nullptr && job->state == JobState::kRunning &&
            (started.attempt() == 0 || started.attempt() == job->attempt)) {
          std::vector<v1::RankBinding>& ranks = bindings_[started.job_id()];
          for (const v1::RankBinding& b : started.bindings()) ranks.push_back(b);
          std::sort(ranks.begin(), ranks.end(),
                    [](const v1::RankBinding& a, const v1::RankBinding& b) { return a.rank() < b.rank(); });
        }
        break;
      }
      case v1::AgentMessage::kRankExited: {
        const v1::RankExited& e = message.rank_exited();
        engine_.RankExited(e.job_id(), node, e.exit_code(), e.signal(), now, effects);
        break;
      }
      case v1::AgentMessage::kLaunchFailed: {
        const v1::LaunchFailed& e = message.launch_failed();
        Log("launch")->warn("launch_failed job={} node={} reason=\"{}\"", e.job_id(),
                            topology_->NodeName(node), e.reason());
        engine_.LaunchFailed(e.job_id(), node, e.reason(), now, effects);
        break;
      }
      case v1::AgentMessage::kJobReleased:
        engine_.JobReleased(message.job_released().job_id(), node, now, effects);
        break;
      default: break;
    }
    Execute(effects);
  });
}

void Controller::Register(AgentLink* link, const v1::Register& message) {
  const std::optional<NodeId> node = topology_->FindNode(message.node_name());
  if (message.auth_key() != options_.auth_key) {
    Log("controller")->warn("agent_refused node={} peer={} reason=\"wrong cluster key\"",
                            message.node_name(), link->PeerHost());
    link->Close(absl::PermissionDeniedError(
        "the agent's key does not match the cluster's AuthKeyFile; copy the controller's key file "
        "to this node"));
    return;
  }
  if (!node) {
    link->Close(absl::FailedPreconditionError(fmt::format(
        "node {} is not in the controller's cohort.conf; add a NodeName line for it",
        message.node_name())));
    return;
  }
  if (message.protocol_version() != 1) {
    link->Close(absl::FailedPreconditionError(fmt::format(
        "agent speaks protocol {}, the controller 1; run matching versions",
        message.protocol_version())));
    return;
  }
  if (const auto old = links_.find(*node); old != links_.end() && old->second != link) {
    link_nodes_.erase(old->second);
    old->second->Close(absl::AbortedError("replaced by a newer connection of the same node"));
  }
  links_[*node] = link;
  link_nodes_[link] = *node;
  NodeReport report;
  report.cpus = message.resources().cpus();
  report.memory_mb = message.resources().memory_mb();
  report.gpus = message.resources().gpus();
  report.gpu_groups.assign(message.resources().gpu_groups().begin(),
                           message.resources().gpu_groups().end());
  for (const v1::RunningJob& r : message.running()) {
    report.running.push_back({r.job_id(), r.attempt(), r.ranks_ok()});
  }
  for (const v1::FinishedJob& f : message.finished()) {
    report.finished.push_back(
        {f.job_id(), f.attempt(), f.ranks_ok(), f.failed(), f.exit_code(), f.signal(), f.launch_error()});
  }
  Effects effects;
  (void)engine_.NodeRegistered(*node, report, Now(), effects);
  Log("controller")->info(
      "agent_registered node={} peer={} cpus={} memory_mb={} gpus={} running_jobs={} "
      "finished_jobs={}",
      message.node_name(), link->PeerHost(), report.cpus, report.memory_mb, report.gpus,
      report.running.size(), report.finished.size());
  v1::ControllerMessage reply;
  reply.mutable_registered()->set_heartbeat_interval_ms(options_.heartbeat_interval.count());
  link->Send(std::move(reply));
  Execute(effects);
}

void Controller::OnAgentGone(AgentLink* link, std::function<void()> after) {
  boost::asio::post(io_, [this, link, after = std::move(after)] {
    if (const auto it = link_nodes_.find(link); it != link_nodes_.end()) {
      // The node stays up until NodeTimeout: an agent that reconnects in
      // time loses nothing.
      Log("controller")->info("agent_disconnected node={}", topology_->NodeName(it->second));
      if (links_[it->second] == link) links_.erase(it->second);
      link_nodes_.erase(it);
    }
    after();
  });
}

}  // namespace cohort::controller
