// SPDX-License-Identifier: Apache-2.0
#include "mpi_wireup.h"

#include <fmt/format.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "cohort/fmt_absl.h"
#include "cohort/launch/io_frame.h"
#include "cohort/launch/mpi_type.h"
#include "run_as.h"

namespace cohort::step {
namespace {

// Adds `lines` (NAME=value) to the rank's environment, in place of any it had.
void SetEnvironment(RankLaunch& rank, const std::vector<std::string>& lines) {
  for (const std::string_view line : lines) {
    const std::size_t equals = line.find('=');
    if (equals == std::string_view::npos) continue;
    SetVariable(rank.env, line.substr(0, equals), line.substr(equals + 1));
  }
}

// SLURM_PMIX_TIMEOUT from the ranks' environment, as Slurm's PMIx plugin
// reads it from the job's: `cohort run` has refused a malformed one.
std::chrono::seconds FenceTimeout(const LaunchFile& file) {
  if (file.ranks.empty()) return launch::kDefaultFenceTimeout;
  constexpr std::string_view kName = "SLURM_PMIX_TIMEOUT=";
  for (const std::string& variable : file.ranks.front().env) {
    if (!variable.starts_with(kName)) continue;
    absl::StatusOr<std::chrono::seconds> seconds =
        launch::ParseFenceTimeout(std::string_view(variable).substr(kName.size()));
    if (seconds.ok()) return *seconds;
  }
  return launch::kDefaultFenceTimeout;
}

// Every node's tree address, from the exchange's parts ("ADDRESS\n" each).
absl::StatusOr<std::vector<std::string>> Addresses(absl::StatusOr<std::string> parts) {
  if (!parts.ok()) return parts.status();
  std::vector<std::string> addresses;
  std::string_view rest = *parts;
  while (!rest.empty()) {
    const std::size_t newline = rest.find('\n');
    if (newline == std::string_view::npos) break;
    addresses.emplace_back(rest.substr(0, newline));
    rest.remove_prefix(newline + 1);
  }
  return addresses;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MpiWireUp>> MpiWireUp::Start(const std::string& folder,
                                                            LaunchFile& file, StepIoForwarder& io,
                                                            const AbortHandler& aborts,
                                                            OnFenceFailed fence_failed) {
  std::unique_ptr<MpiWireUp> wireup(
      new MpiWireUp(io, file.ranks.empty() ? 0 : file.ranks.front().rank));
  MpiWireUp* self = wireup.get();
  wireup->fence_failed_ = std::move(fence_failed);

  // The tree first, listening where this node reached `cohort run`: the
  // others reach it there too.
  const int nodes = static_cast<int>(file.mpi.nodes.size());
  const int index = file.mpi.node_index;
  FenceTree::Options options{
      .key = file.io.key,
      .nodes = file.mpi.nodes,
      .tasks = file.mpi.tasks,
      .node_index = index,
      .width = kFenceTreeWidth,
      .timeout = FenceTimeout(file),
      .done = [self](int fence,
                     absl::StatusOr<std::string> parts) { self->Deliver(fence, std::move(parts)); },
      .answer = [self](int /*from*/, std::string request,
                       FenceTree::Reply reply) { self->Answer(request, std::move(reply)); }};
  absl::StatusOr<std::unique_ptr<FenceTree>> tree =
      FenceTree::Listen(io.Host(), std::move(options));
  if (!tree.ok()) return tree.status();
  wireup->tree_ = *std::move(tree);
  FenceTree* joined = wireup->tree_.get();
  if (nodes == 1) {
    joined->Join(std::vector<std::string>{joined->Address()});
  } else {
    io.OnFenceDone([joined](int fence, absl::StatusOr<std::string> parts) {
      if (fence == 0) joined->Join(Addresses(std::move(parts)));
    });
    io.Queue({.kind = io::FrameKind::kFencePart,
              .rank = 0,
              .data = io::EncodeFencePart(
                  {.node_index = index, .nodes = nodes, .data = joined->Address() + "\n"})});
  }
  const auto send_part = [joined](int fence, std::string part) {
    joined->Contribute(fence, std::move(part));
  };

  std::vector<int> local_ranks;
  for (const RankLaunch& rank : file.ranks) local_ranks.push_back(rank.rank);
  if (file.mpi.type == "pmi2") {
    absl::StatusOr<std::unique_ptr<PmiHost>> pmi = PmiHost::Start(
        file.job_id, file.step, file.mpi, std::move(local_ranks), send_part, aborts("PMI_Abort"));
    if (!pmi.ok()) return pmi.status();
    for (RankLaunch& rank : file.ranks) SetEnvironment(rank, (*pmi)->Environment(rank.rank));
    const std::lock_guard lock(wireup->mutex_);
    wireup->pmi_ = *std::move(pmi);
    for (auto& [request, reply] : std::exchange(wireup->early_, {})) {
      reply(
          absl::FailedPreconditionError("this node's step runs PMI-2, which has no direct modex"));
    }
    return wireup;
  }
  PmixStep step;
  step.job_id = file.job_id;
  step.step_id = file.step;
  step.layout = file.mpi;
  step.local_ranks = std::move(local_ranks);
  step.uid = ::geteuid();
  step.gid = ::getegid();
  if (file.run_as == RunAs::kOwner) {
    absl::StatusOr<Account> owner = LookupAccount(file.uid, file.node);
    if (!owner.ok()) return owner.status();
    step.uid = owner->uid;
    step.gid = owner->gid;
  }
  step.tmpdir = folder + "/pmix";
  absl::StatusOr<std::unique_ptr<PmixHost>> pmix = PmixHost::Start(
      std::move(step), send_part,
      [joined](int node, std::string request, PmixHost::ModexEnd end) {
        joined->Ask(node, std::move(request), std::move(end));
      },
      aborts("PMIx_Abort"));
  if (!pmix.ok()) return pmix.status();
  for (RankLaunch& rank : file.ranks) {
    absl::StatusOr<std::vector<std::string>> env = (*pmix)->Environment(rank.rank);
    if (!env.ok()) return env.status();
    SetEnvironment(rank, *env);
  }
  const std::lock_guard lock(wireup->mutex_);
  wireup->pmix_ = *std::move(pmix);
  for (auto& [request, reply] : std::exchange(wireup->early_, {})) {
    wireup->pmix_->AnswerModex(request, std::move(reply));
  }
  return wireup;
}

MpiWireUp::~MpiWireUp() {
  // The tree's thread first: nothing it delivers may reach a server gone.
  tree_.reset();
}

int MpiWireUp::PmiChildEnd(int rank) const { return pmi_ ? pmi_->ChildEnd(rank) : -1; }

void MpiWireUp::CloseChildEnds() {
  if (pmi_) pmi_->CloseChildEnds();
}

// A fence's end, to the node's server. A failed one is said in the output of
// the node's first rank too (the ranks' MPI library says only that it
// failed), and fails the step: its ranks cannot get past it, and left to
// themselves they would wait in the next fence, or crash, before the step
// ended.
void MpiWireUp::Deliver(int fence, absl::StatusOr<std::string> parts) {
  const std::string failure = parts.ok() ? "" : std::string(parts.status().message());
  if (!parts.ok()) {
    io_.Queue({.kind = io::FrameKind::kStderr,
               .rank = first_rank_,
               .data = fmt::format("cohort-stepd: {}\n", failure)});
  }
  OnFenceFailed failed;
  {
    const std::lock_guard lock(mutex_);
    if (pmix_) {
      pmix_->FenceDone(fence, std::move(parts));
    } else if (pmi_) {
      pmi_->FenceDone(fence, std::move(parts));
    }
    if (!failure.empty()) failed = std::exchange(fence_failed_, nullptr);
  }
  if (failed) failed(failure);
}

// Another node's stepd asks for a rank's data (PMIx's direct modex).
void MpiWireUp::Answer(std::string_view request, FenceTree::Reply reply) {
  const std::lock_guard lock(mutex_);
  if (pmix_) {
    pmix_->AnswerModex(request, std::move(reply));
  } else if (pmi_) {
    reply(absl::FailedPreconditionError("this node's step runs PMI-2, which has no direct modex"));
  } else {
    // The others learn this node's tree address before its server has
    // registered the step: a fast rank elsewhere may ask already.
    early_.emplace_back(std::string(request), std::move(reply));
  }
}

}  // namespace cohort::step
