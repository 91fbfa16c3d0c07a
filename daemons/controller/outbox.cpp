// SPDX-License-Identifier: Apache-2.0
#include "outbox.h"

#include <utility>

#include <boost/asio/post.hpp>

#include "cohort/fmt_absl.h"
#include "controller_log.h"

namespace cohort::controller {
namespace {

// Fair-share usage changes every second while jobs run; a crash loses at
// most this much of it.
constexpr Millis kUsageWriteInterval = std::chrono::seconds(10);

Millis WallNow() {
  return std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch());
}

long long MicrosSince(std::chrono::steady_clock::time_point started) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               started)
      .count();
}

}  // namespace

Outbox::Outbox(boost::asio::io_context& state_io, RecordSource& source,
               std::unique_ptr<Store> writer, std::unique_ptr<Store> checkpointer,
               std::size_t node_count)
    : state_io_(state_io),
      source_(source),
      store_(std::move(writer)),
      checkpointer_(std::move(checkpointer)),
      written_admin_(node_count) {
  if (checkpointer_ != nullptr) HandOffCheckpoints();
}

Outbox::~Outbox() { Shutdown(); }

void Outbox::HandOffCheckpoints() {
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
      Log("store")->debug("checkpoint took_us={}", MicrosSince(started));
    });
  });
}

void Outbox::LoadedAdmin(NodeId node, const NodeAdmin& admin) {
  written_admin_[static_cast<std::size_t>(node)] = admin;
}

void Outbox::MarkChanged(const std::vector<JobId>& jobs, const std::vector<NodeId>& nodes) {
  dirty_jobs_.insert(jobs.begin(), jobs.end());
  dirty_nodes_.insert(nodes.begin(), nodes.end());
}

void Outbox::Defer(std::function<void()> out) {
  if ((!committing_ && outbox_.empty() && !Dirty() && source_.NextId() == written_next_id_) ||
      (reading_ && stalled_)) {
    out();
    return;
  }
  outbox_.push_back(std::move(out));
  ScheduleFlush();
}

void Outbox::ScheduleFlush() {
  if (flush_posted_ || committing_ || stalled_) return;
  flush_posted_ = true;
  // After the handlers already queued: their changes join this batch.
  boost::asio::post(state_io_, [this] {
    flush_posted_ = false;
    Flush();
  });
}

StateBatch Outbox::TakeBatch() {
  StateBatch batch;
  for (const JobId id : dirty_jobs_) {
    StateBatch::JobRow row;
    const auto with_env =
        new_jobs_.contains(id) ? RecordSource::WithEnv::kYes : RecordSource::WithEnv::kNo;
    if (source_.JobRow(id, with_env, row)) batch.jobs.push_back(std::move(row));
  }
  for (const NodeId node : dirty_nodes_) {
    const NodeAdmin admin = source_.Admin(node);
    NodeAdmin& written = written_admin_[static_cast<std::size_t>(node)];
    if (admin == written) continue;
    written = admin;
    batch.nodes.push_back({source_.NodeName(node), admin});
  }
  if (std::exchange(dirty_partitions_, false)) batch.partitions = source_.PartitionOverrides();
  if (std::exchange(dirty_accounting_, false)) batch.accounting = source_.Accounting();
  if (std::exchange(dirty_reservations_, false)) batch.reservations = source_.Reservations();
  if (const JobId next = source_.NextId(); next != written_next_id_) {
    batch.next_job_id = next;
    written_next_id_ = next;
  }
  if (const Millis now = WallNow(); now - usage_written_ >= kUsageWriteInterval) {
    usage_written_ = now;
    std::vector<v1::UsageRecordProto>& rows = batch.usage.emplace();
    for (const policy::UsageRecord& u : source_.Usage(now)) {
      v1::UsageRecordProto& row = rows.emplace_back();
      row.set_account(u.account);
      row.set_user(u.user);
      row.set_usage(u.usage);
      row.set_as_of_ms(u.as_of.count());
      row.set_gpu_seconds(u.gpu_seconds);
      row.set_cpu_seconds(u.cpu_seconds);
      row.set_period_start_ms(u.period_start.count());
      row.set_qos(u.qos);
    }
    if (rows.empty()) batch.usage.reset();
  }
  dirty_jobs_.clear();
  new_jobs_.clear();
  dirty_nodes_.clear();
  return batch;
}

void Outbox::Flush() {
  if (committing_ || failed_ || stalled_) return;
  StateBatch batch = TakeBatch();
  std::vector<std::function<void()>> out = std::move(outbox_);
  outbox_.clear();
  if (batch.jobs.empty() && batch.nodes.empty() && batch.next_job_id == 0 && !batch.usage &&
      !batch.partitions && !batch.accounting && !batch.reservations) {
    for (std::function<void()>& f : out) f();
    return;
  }
  Commit(std::move(batch), std::move(out));
}

void Outbox::Commit(StateBatch batch, std::vector<std::function<void()>> out) {
  committing_ = true;
  boost::asio::post(
      store_thread_.io(), [this, batch = std::move(batch), out = std::move(out)]() mutable {
        const auto started = std::chrono::steady_clock::now();
        absl::Status status = store_->Commit(batch);
        const CommitReport report{.took = std::chrono::steady_clock::now() - started,
                                  .records = batch.jobs.size() + batch.nodes.size(),
                                  .waiting = out.size()};
        Log("store")->trace("commit jobs={} nodes={} took_us={}", batch.jobs.size(),
                            batch.nodes.size(), MicrosSince(started));
        boost::asio::post(
            state_io_, [this, status = std::move(status), report, batch = std::move(batch),
                        out = std::move(out)]() mutable { Committed(status, report, batch, out); });
      });
}

void Outbox::Committed(const absl::Status& status, const CommitReport& report, StateBatch& batch,
                       std::vector<std::function<void()>>& out) {
  committing_ = false;
  if (absl::IsResourceExhausted(status)) {
    // The disk is full: the transaction was rolled back, and nothing of it
    // is acknowledged. The same batch is tried again every second; until
    // it lands, what changes state is refused (WriteRefusal) and reads are
    // answered. Nothing is lost: the batch holds every record in it, and
    // what changes meanwhile waits in the dirty sets.
    if (!stalled_) {
      Log("store")->error(
          "state_write_stalled reason=\"{}\"; refusing changes until it can write again "
          "(free space for the state database)",
          status);
    }
    stalled_ = true;
    refusal_ = absl::ResourceExhaustedError(fmt::format(
        "the controller cannot write its state ({}); it refuses changes until space is freed and "
        "answers the rest; try again later",
        std::string(status.message())));
    ++stalls_;
    stalled_batch_ = std::move(batch);
    stalled_out_ = std::move(out);
    retry_timer_.expires_after(std::chrono::seconds(1));
    retry_timer_.async_wait([this](const boost::system::error_code& error) {
      if (!error) Commit(std::exchange(stalled_batch_, {}), std::exchange(stalled_out_, {}));
    });
    return;
  }
  if (stalled_ && status.ok()) {
    stalled_ = false;
    refusal_ = absl::OkStatus();
    Log("store")->info("state_write_resumed");
  }
  if (!status.ok()) {
    // Nothing in this batch may be acknowledged, and later ones cannot be
    // made durable either: stop rather than tell clients what may be lost.
    failed_ = true;
    failure_ = status;
    Log("store")->critical(
        "state_write_failed reason=\"{}\"; stopping: nothing more can be made durable (fix the "
        "cause and start the controller again; what was acknowledged is in the database)",
        status);
    state_io_.stop();
    return;
  }
  if (on_commit_) on_commit_(report);
  for (std::function<void()>& f : out) f();
  if (!outbox_.empty() || Dirty()) ScheduleFlush();
}

void Outbox::StartPurge(std::chrono::hours retention) {
  if (retention.count() <= 0) return;
  boost::asio::post(store_thread_.io(), [this, retention] { PurgeHistory(retention); });
}

void Outbox::PurgeHistory(std::chrono::hours retention) {
  // On the store's thread, in small chunks so that commits interleave.
  const std::int64_t before = (WallNow() - std::chrono::duration_cast<Millis>(retention)).count();
  constexpr int kChunk = 500;
  absl::StatusOr<int> purged = store_->PurgeHistory(before, kChunk);
  if (!purged.ok()) {
    Log("store")->warn("history_purge_failed reason=\"{}\"", purged.status());
  } else if (*purged > 0) {
    Log("store")->info("history_purged jobs={}", *purged);
  }
  const bool more = purged.ok() && *purged == kChunk;
  purge_timer_.expires_after(more ? std::chrono::milliseconds(10) : std::chrono::minutes(10));
  purge_timer_.async_wait([this, retention](const boost::system::error_code& error) {
    if (!error) PurgeHistory(retention);
  });
}

void Outbox::Shutdown() {
  purge_timer_.cancel();
  retry_timer_.cancel();
  store_thread_.Stop();
  checkpoint_thread_.Stop();
  if (failed_ || store_ == nullptr) return;
  // What the last turns changed and has not been written yet: write it now,
  // on this thread, so a clean stop loses nothing either.
  committing_ = false;
  usage_written_ = Millis{0};  // write the usage charged up to now too
  outbox_.clear();
  flush_posted_ = true;  // no flush may be posted any more
  if (stalled_) {
    // A batch that waited for space goes first, should there be some now;
    // if not, what it held was never acknowledged.
    stalled_ = false;
    if (absl::Status s = store_->Commit(stalled_batch_); !s.ok()) {
      Log("store")->error("state_write_lost_at_stop reason=\"{}\"", s);
      store_.reset();
      return;
    }
  }
  Flush();
  store_thread_.io().restart();
  store_thread_.io().run();
  store_.reset();
}

}  // namespace cohort::controller
