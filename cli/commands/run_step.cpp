// SPDX-License-Identifier: Apache-2.0
#include "commands/run_step.h"

#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "cohort/fmt_absl.h"
#include "cohort/launch/mpi_type.h"
#include "commands/job_follow.h"
#include "format/job_format.h"
#include "spec/job_resources.h"
#include "transport/step_io_server.h"

namespace cohort::cli {
namespace {

using Clock = std::chrono::steady_clock;

// How long a second Ctrl-C may come after the first to cancel the step.
constexpr std::chrono::seconds kCancelWindow{1};
// How often a step that waits for the allocation asks again.
constexpr std::chrono::milliseconds kBusyRetry{500};

// Options of a job that a step cannot change: refused, since each changes
// what runs, or warned about and ignored, since the step runs within its
// job's limits.
absl::Status CheckStepOptions(const JobOptions& o, std::string_view job) {
  const auto refuse = [&](std::string_view option, std::string_view why) {
    return absl::InvalidArgumentError(fmt::format(
        "{} inside job {}: {}; submit a job with cohort submit instead", option, job, why));
  };
  if (o.array) return refuse("--array", "a step is one command, not an array of jobs");
  if (o.dependency) return refuse("--dependency", "a step starts when it is run");
  if (o.hold) return refuse("--hold", "a step starts when it is run");
  if (o.test_only) return refuse("--test-only", "a step is placed in its job's allocation");
  const std::pair<bool, std::string_view> ignored[] = {
      {o.time.has_value(), "--time"},
      {o.partition.has_value(), "--partition"},
      {o.account.has_value(), "--account"},
      {o.qos.has_value(), "--qos"},
      {o.memory.has_value(), "--mem"},
      {o.switches.has_value(), "--switches"},
      {o.constraint.has_value(), "--constraint"},
      {o.exclude.has_value(), "--exclude"},
      {o.requeue.has_value(), "--requeue"},
      {o.no_kill, "--no-kill"},
      {o.spares.has_value(), "--spares"},
      {o.restart_policy.has_value(), "--restart-policy"},
      {o.signal.has_value(), "--signal"},
      {o.begin.has_value(), "--begin"},
      {o.deadline.has_value(), "--deadline"},
      {o.mem_per_gpu.has_value(), "--mem-per-gpu"},
      {o.mem_per_cpu.has_value(), "--mem-per-cpu"},
  };
  for (const auto& [given, name] : ignored) {
    if (given) {
      std::cerr << fmt::format(
          "cohort: warning: {} shapes jobs; a step runs within job {}'s, so it is ignored\n", name,
          job);
    }
  }
  return absl::OkStatus();
}

// The GPUs per node and CPUs per rank a step's options ask (unset: the
// job's). --gpus and --gpus-per-task divide by the step's nodes and ranks
// per node, which must then be given: a step's default is the whole
// allocation, which this command does not know.
struct StepShape {
  std::optional<int> gpus_per_node;
  std::optional<int> cpus_per_task;
};
// The options a step's shape is read from. Without -N the step's nodes come
// from the allocation and -n (the controller's step ledger takes as many as
// the tasks need, as Slurm's srun does inside a job, and may run fewer on
// the last): -n is checked against them there, not here against one node.
JobOptions StepShapeOptions(const JobOptions& o) {
  JobOptions shaped = o;
  if (!o.nodes) shaped.ntasks.reset();
  return shaped;
}

// `o`: StepShapeOptions of the command's.
absl::StatusOr<StepShape> StepResources(const JobOptions& o) {
  if (o.gpus && !o.nodes) {
    return absl::InvalidArgumentError(
        "--gpus inside a job needs -N, to spread them over the step's nodes; or give "
        "--gpus-per-node");
  }
  const bool per_node_known = o.tasks_per_node || (o.ntasks && o.nodes);
  if ((o.gpus_per_task || o.cpus_per_gpu) && !per_node_known) {
    return absl::InvalidArgumentError(fmt::format(
        "{} inside a job needs the step's ranks per node: give --ntasks-per-node, or -n with -N",
        o.gpus_per_task ? "--gpus-per-task" : "--cpus-per-gpu"));
  }
  absl::StatusOr<NodeShape> shape = ResolveShape(o);
  if (!shape.ok()) return shape.status();
  StepShape step;
  if (o.gpus_per_node || o.gres || o.gpus || o.gpus_per_task)
    step.gpus_per_node = shape->gpus_per_node;
  if (o.cpus_per_task || o.cpus_per_gpu) step.cpus_per_task = shape->cpus_per_task;
  return step;
}

// How long a step's start is asked again while the controller cannot be
// reached (restarting): the request's token keeps it one step.
constexpr std::chrono::minutes kControllerWait{5};

// Starts the step, asking again while the allocation is busy with other
// steps, and while the controller is away (an answer lost with a controller
// that died after it started the step names the same step: the token). An
// interrupt while waiting gives up (the status says so).
absl::StatusOr<v1::StartStepResponse> StartWhenFree(ControllerClient& client,
                                                    const v1::StartStepRequest& request) {
  bool said_busy = false;
  bool said_lost = false;
  const Clock::time_point give_up = Clock::now() + kControllerWait;
  std::chrono::milliseconds backoff{250};
  while (true) {
    absl::StatusOr<v1::StartStepResponse> started = client.StartStep(request);
    if (absl::IsUnavailable(started.status()) && Clock::now() < give_up) {
      if (!said_lost) {
        std::cerr << fmt::format("cohort: lost the controller at {} ({}); asking again\n",
                                 client.Address(), started.status().message());
        said_lost = true;
      }
      if (Interrupts() > 0) {
        return absl::CancelledError("interrupted while the controller was away");
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
      continue;
    }
    if (!absl::IsResourceExhausted(started.status())) {
      if (started.ok() && said_busy) {
        std::cerr << fmt::format("cohort: step {}.{} created\n", request.job_ref(),
                                 started->step_id());
      }
      return started;
    }
    if (!said_busy) {
      // Slurm's words, which scripts and people recognise.
      std::cerr << fmt::format("cohort: job {} step creation temporarily disabled, retrying ({})\n",
                               request.job_ref(), started.status().message());
      said_busy = true;
    }
    if (Interrupts() > 0) {
      return absl::CancelledError(
          fmt::format("interrupted while waiting for job {}'s resources; no step was started",
                      request.job_ref()));
    }
    std::this_thread::sleep_for(kBusyRetry);
  }
}

// The step as the job's last event lists it.
std::optional<v1::JobStep> FindStep(const v1::Job& job, int step_id) {
  for (const v1::JobStep& step : job.steps()) {
    if (step.step_id() == step_id) return step;
  }
  return std::nullopt;
}

// Our terminal in raw mode while a --pty step runs (when stdin is one), as
// it was again afterwards.
class RawTerminal {
 public:
  RawTerminal() {
    if (::isatty(STDIN_FILENO) == 0 || ::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

// What Ctrl-C does while a step runs: SIGINT to its ranks; a second within
// kCancelWindow cancels it; one more stops waiting.
class Interrupter {
 public:
  Interrupter(ControllerClient& client, std::string job, int step)
      : client_(client), job_(std::move(job)), step_(step) {}

  // Acts on interrupts that came since the last call; false once the user
  // wants to stop waiting.
  bool Handle() {
    const int seen = Interrupts();
    for (; handled_ < seen; ++handled_) {
      if (cancelled_) return false;
      const Clock::time_point now = Clock::now();
      if (last_ && now - *last_ <= kCancelWindow) {
        std::cerr << fmt::format(
            "cohort: cancelling step {}.{} (interrupt again to stop waiting)\n", job_, step_);
        Send(0);
        cancelled_ = true;
      } else {
        std::cerr << fmt::format(
            "cohort: sending SIGINT to step {}.{} (interrupt again within a second to cancel "
            "it)\n",
            job_, step_);
        Send(SIGINT);
      }
      last_ = now;
    }
    return true;
  }
  [[nodiscard]] bool Interrupted() const { return handled_ > 0; }

 private:
  void Send(int signal) {
    v1::SignalStepRequest request;
    request.set_job_ref(job_);
    request.set_step_id(step_);
    request.set_signal(signal);
    if (absl::StatusOr<v1::SignalStepResponse> r = client_.SignalStep(request); !r.ok()) {
      client_.PrintError(r.status());
    }
  }

  ControllerClient& client_;
  std::string job_;
  int step_;
  int handled_ = 0;
  bool cancelled_ = false;
  std::optional<Clock::time_point> last_;
};

// The exit status of `cohort run` for an ended step, after saying why it did
// not complete.
int StepOutcome(const v1::Job& job, const std::optional<v1::JobStep>& step, const std::string& name,
                bool interrupted) {
  if (!step) {
    std::cerr << fmt::format("cohort: step {} is not listed by its job; see cohort show job {}\n",
                             name, job.id());
    return 1;
  }
  if (step->state() == "COMPLETED") return 0;
  const std::string why = step->reason().empty() ? "" : fmt::format(": {}", step->reason());
  if (step->state() == "FAILED") {
    if (step->exit_signal() != 0) {
      std::cerr << fmt::format("cohort: step {} failed: a rank was killed by signal {} ({}){}\n",
                               name, step->exit_signal(), SignalName(step->exit_signal()), why);
      return 128 + step->exit_signal();
    }
    std::cerr << fmt::format("cohort: step {} failed with exit code {}{}\n", name,
                             step->exit_code(), why);
    return step->exit_code() > 0 && step->exit_code() < 256 ? step->exit_code() : 1;
  }
  if (IsFinished(job.state()) && step->state() == "CANCELLED" && !interrupted) {
    std::cerr << fmt::format("cohort: step {} ended with its job, which is {}\n", name,
                             JobStateName(job.state()));
    return 1;
  }
  std::cerr << fmt::format("cohort: step {} {}{}\n", name,
                           step->state() == "CANCELLED" ? "cancelled" : step->state(), why);
  return interrupted ? 130 : 1;
}

// How long the output streams of a step that ended may stay silent before
// cohort run stops waiting for them (a stepd that died says no Done);
// output that keeps arriving is waited for.
constexpr std::chrono::seconds kOutputWait{5};

// Waits for the step to end while printing its ranks' output, from `folder`
// (when set) or as `server` receives it; returns the exit status of
// `cohort run`.
int FollowStep(ControllerClient& client, const v1::StartStepResponse& started,
               const std::string& job_ref, const std::optional<std::filesystem::path>& folder,
               RankLabels labels, StepIoServer* server, std::optional<RawTerminal>& raw) {
  const std::string name = fmt::format("{}.{}", job_ref, started.step_id());
  Watch watch;
  std::thread watcher([&] { WatchLoop(client, started.job_id(), watch); });
  std::optional<RankOutput> output;
  if (folder) output.emplace(*folder, started.job_id(), labels);
  Interrupter interrupter(client, job_ref, started.step_id());
  std::optional<v1::Job> last;
  std::optional<absl::Status> ended;
  bool done = false;
  while (!done && !ended) {
    WatchNews news = TakeNews(watch, std::chrono::milliseconds(200));
    ended = std::move(news.ended);
    for (v1::Job& job : news.events) {
      const std::optional<v1::JobStep> step = FindStep(job, started.step_id());
      done = done || IsFinished(job.state()) || (step && step->state() != "RUNNING");
      last = std::move(job);
    }
    if (output) output->Poll();
    if (!interrupter.Handle()) {
      std::cerr << fmt::format("cohort: not waiting for step {} any more; see cohort show job {}\n",
                               name, job_ref);
      break;
    }
  }
  StopWatch(watch);
  watcher.join();
  if (output) output->Flush();
  if (server != nullptr) server->Finish(HostlistSize(started.nodes()), kOutputWait);
  raw.reset();  // our words below are for a terminal in its usual mode
  if (folder) {
    std::error_code ignored;
    std::filesystem::remove_all(*folder, ignored);
  }
  if (!done) {
    if (ended && !ended->ok()) client.PrintError(*ended);
    if (ended) std::cerr << fmt::format("cohort: lost track of step {}\n", name);
    return interrupter.Interrupted() ? 130 : 1;
  }
  return StepOutcome(*last, FindStep(*last, started.step_id()), name, interrupter.Interrupted());
}

}  // namespace

void SetLaunchHost(google::protobuf::RepeatedPtrField<v1::EnvVar>& env, const std::string& host) {
  for (const std::string_view name : {"SLURM_LAUNCH_NODE_IPADDR", "SLURM_SRUN_COMM_HOST"}) {
    const auto it = std::find_if(env.begin(), env.end(),
                                 [&](const v1::EnvVar& var) { return var.name() == name; });
    v1::EnvVar& var = it != env.end() ? *it : *env.Add();
    var.set_name(std::string(name));
    var.set_value(host);
  }
}

int RunStep(ControllerClient& client, const JobOptions& options, const StepRun& step,
            const std::vector<std::string>& command) {
  if (absl::Status checked = CheckStepOptions(options, step.job); !checked.ok()) {
    std::cerr << fmt::format("cohort: {}\n", checked);
    return 2;
  }
  const JobOptions shaped = StepShapeOptions(options);
  absl::StatusOr<v1::JobSpec> spec =
      BuildJobSpec(shaped, std::filesystem::path(command.front()).filename().string());
  if (!spec.ok()) {
    std::cerr << fmt::format("cohort: {}\n", spec.status());
    return 2;
  }
  const bool pty = step.terminal == StepTerminal::kPty;
  if (pty && (options.nodes.value_or(1) != 1 || options.ntasks.value_or(1) != 1 ||
              options.tasks_per_node.value_or(1) != 1 || options.output || options.error)) {
    std::cerr << "cohort: --pty runs one task on a terminal: leave out -N, -n, "
                 "--ntasks-per-node, -o and -e (or give 1)\n";
    return 2;
  }
  absl::StatusOr<StepShape> shape = StepResources(shaped);
  if (!shape.ok()) {
    std::cerr << fmt::format("cohort: {}\n", shape.status().message());
    return 2;
  }
  v1::StartStepRequest request;
  request.set_job_ref(step.job);
  request.set_token(RandomToken());
  request.set_nodes(pty ? 1 : options.nodes.value_or(0));
  request.set_tasks(pty ? 1 : options.ntasks.value_or(0));
  request.set_tasks_per_node(options.tasks_per_node.value_or(0));
  request.set_cpus_per_task(shape->cpus_per_task.value_or(0));
  if (shape->gpus_per_node) request.set_gpus_per_node(*shape->gpus_per_node);
  request.set_nodelist(options.nodelist.value_or(""));
  request.set_sharing(step.sharing);
  request.set_name(spec->name());
  request.set_mpi(step.mpi);
  request.set_overcommit(options.overcommit);
  if (spec->has_container()) *request.mutable_container() = spec->container();
  for (const std::string& word : command) request.add_argv(word);
  *request.mutable_env() = spec->env();
  SetLaunchHost(*request.mutable_env(), StepIoHost(client.Address()));
  request.set_work_dir(spec->work_dir());

  // The ranks' output: over the network unless -o or -e name files, which
  // are then the ranks' (and FollowStep prints those in its folder). An
  // MPI step's stream starts its wire-up, so it is there either way.
  std::unique_ptr<StepIoServer> server;
  std::optional<std::filesystem::path> folder;
  const bool files = options.output || options.error;
  if (!files || launch::MpiTypeNeedsServer(step.mpi)) {
    absl::StatusOr<std::unique_ptr<StepIoServer>> listening =
        StepIoServer::Listen(StepIoHost(client.Address()), step.labels, step.stdin_rank,
                             step.terminal, files ? StepOutput::kFiles : StepOutput::kStream);
    if (!listening.ok()) {
      std::cerr << fmt::format("cohort: {}\n", listening.status());
      return 1;
    }
    server = *std::move(listening);
    *request.mutable_io() = server->Io();
  }
  if (files) {
    absl::StatusOr<std::optional<std::filesystem::path>> taken = TakeOutput(options, *spec);
    if (!taken.ok()) {
      std::cerr << fmt::format("cohort: {}\n", taken.status());
      return 1;
    }
    folder = *taken;
    request.set_output(spec->output());
    request.set_error(spec->error());
  }

  // From here on an interrupt acts on the step rather than ending us.
  CatchInterrupts();
  absl::StatusOr<v1::StartStepResponse> started = StartWhenFree(client, request);
  if (!started.ok()) {
    client.PrintError(started.status());
    if (folder) {
      std::error_code ignored;
      std::filesystem::remove_all(*folder, ignored);
    }
    return absl::IsCancelled(started.status()) ? 130 : 1;
  }
  // A terminal session: keys go to the rank's terminal as typed (Ctrl-C
  // too), so ours is raw until the step ends.
  std::optional<RawTerminal> raw;
  if (pty) raw.emplace();
  return FollowStep(client, *started, step.job, folder, step.labels, server.get(), raw);
}

}  // namespace cohort::cli
