// SPDX-License-Identifier: Apache-2.0
#include "spec/job_options.h"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "format/job_format.h"

namespace cohort::cli {
namespace {

absl::StatusOr<v1::JobSpec> SpecWithSignal(const std::string& text) {
  JobOptions options;
  options.signal = text;
  return BuildJobSpec(options, "job");
}

struct SignalCase {
  const char* text;
  int signal;
  int seconds;
  bool batch_only;
  const char* shown;
};

TEST(JobOptionsTest, SignalFillsTheWarning) {
  const SignalCase cases[] = {
      {"USR1@3", 10, 3, false, "USR1@3"},       {"SIGUSR2", 12, 90, false, "USR2@90"},
      {"usr1@600", 10, 600, false, "USR1@600"}, {"B:USR1@60", 10, 60, true, "B:USR1@60"},
      {"R:10@120", 10, 120, false, "USR1@120"}, {"b:sigterm", 15, 90, true, "B:TERM@90"},
      {"none", -1, 0, false, "none"},           {"NONE", -1, 0, false, "none"},
  };
  for (const SignalCase& c : cases) {
    absl::StatusOr<v1::JobSpec> spec = SpecWithSignal(c.text);
    ASSERT_TRUE(spec.ok()) << c.text << ": " << spec.status();
    EXPECT_EQ(spec->warn_signal(), c.signal) << c.text;
    EXPECT_EQ(spec->warn_seconds(), c.seconds) << c.text;
    EXPECT_EQ(spec->warn_batch_only(), c.batch_only) << c.text;
    EXPECT_EQ(FormatWarning(*spec), c.shown) << c.text;
  }
}

TEST(JobOptionsTest, NoSignalOptionLeavesTheControllersDefault) {
  absl::StatusOr<v1::JobSpec> spec = BuildJobSpec(JobOptions{}, "job");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->warn_signal(), 0);
  EXPECT_EQ(spec->warn_seconds(), 0);
  EXPECT_EQ(FormatWarning(*spec), "USR1@90");
}

TEST(JobOptionsTest, BadSignalIsRefusedWithTheAcceptedForms) {
  EXPECT_EQ(SpecWithSignal("FOO").status().message(),
            "--signal: \"FOO\" is not a signal; write USR1, SIGUSR1 or 10, optionally B: before "
            "and @SECONDS after (or none for no warning)");
  EXPECT_EQ(SpecWithSignal("B:65@30").status().message(),
            "--signal: \"65\" is not a signal; write USR1, SIGUSR1 or 10, optionally B: before "
            "and @SECONDS after (or none for no warning)");
  EXPECT_EQ(SpecWithSignal("USR1@0").status().message(),
            "--signal: \"@0\" is not a warning time; write @SECONDS from 1 to 65535, the seconds "
            "before the time limit (such as USR1@90)");
  EXPECT_EQ(SpecWithSignal("USR1@1m").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SpecWithSignal("USR1@70000").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SpecWithSignal("X:USR1").status().message(),
            "--signal: \"X:\" is not a target; write B: (only the batch script, rank 0) or R: "
            "(every rank, the default) before the signal, such as B:USR1@90");
  EXPECT_EQ(SpecWithSignal("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobOptionsTest, SignalDirectiveIsReadAndTheCommandLineWins) {
  const std::string script = "#!/bin/bash\n#SBATCH --signal=B:USR1@60\n#SBATCH -N 2\nrun\n";
  JobOptions from_script;
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(ApplyDirectives(script, "job.sh", from_script).ok());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // no "not supported" warning
  EXPECT_EQ(from_script.signal, "B:USR1@60");

  JobOptions command_line;
  command_line.signal = "none";
  ASSERT_TRUE(ApplyDirectives(script, "job.sh", command_line).ok());
  EXPECT_EQ(command_line.signal, "none");

  JobOptions bad;
  const absl::Status status =
      ApplyDirectives("#!/bin/bash\n#SBATCH --signal=FOO@30\n", "job.sh", bad);
  EXPECT_EQ(status.message(),
            "job.sh:2: #SBATCH --signal=FOO@30: --signal: \"FOO\" is not a signal; write USR1, "
            "SIGUSR1 or 10, optionally B: before and @SECONDS after (or none for no warning)");
}

TEST(JobOptionsTest, InputVariablesSitBetweenTheCommandLineAndTheScript) {
  const char* const environment[] = {
      "SBATCH_ACCOUNT=vision", "SBATCH_OUTPUT=out-%j.txt", "SBATCH_TIMELIMIT=10", "SBATCH_REQUEUE=",
      "SBATCH_UNKNOWN=x",      "SALLOC_PARTITION=debug",   "PATH=/usr/bin",       nullptr};
  JobOptions options;
  options.account = "from-command-line";
  ASSERT_TRUE(ApplyInputVariables("SBATCH_", options, environment).ok());
  EXPECT_EQ(options.account, "from-command-line");
  EXPECT_EQ(options.output, "out-%j.txt");
  EXPECT_EQ(options.time, "10");
  EXPECT_EQ(options.requeue, true);
  EXPECT_FALSE(options.partition.has_value()) << "SALLOC_ is salloc's";
  // The script's directives fill only what is still unset.
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(
      ApplyDirectives("#!/bin/bash\n#SBATCH -t 99 -o script.out -N 2\n", "job.sh", options).ok());
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(options.time, "10");
  EXPECT_EQ(options.output, "out-%j.txt");

  JobOptions salloc;
  ASSERT_TRUE(ApplyInputVariables("SALLOC_", salloc, environment).ok());
  EXPECT_EQ(salloc.partition, "debug");

  const char* const bad[] = {"SBATCH_SIGNAL=FOO@30", nullptr};
  JobOptions refused;
  const absl::Status status = ApplyInputVariables("SBATCH_", refused, bad);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_TRUE(std::string(status.message()).starts_with("SBATCH_SIGNAL=\"FOO@30\": --signal: "))
      << status;
}

TEST(JobOptionsTest, JobJsonShowsTheWarning) {
  v1::Job job;
  EXPECT_EQ(JobToJson(job, 0)["warn_signal"], "USR1");
  EXPECT_EQ(JobToJson(job, 0)["warn_seconds"], 90);
  job.mutable_spec()->set_warn_signal(-1);
  EXPECT_TRUE(JobToJson(job, 0)["warn_signal"].is_null());
  EXPECT_EQ(JobToJson(job, 0)["warn_batch_only"], false);
}

TEST(JobOptionsTest, PolicyOptionsGoIntoTheSpecAsTyped) {
  JobOptions options;
  options.qos = "high";
  options.array = "0-99%8";
  options.dependency = "afterok:12_3?afterany:4";
  options.kill_on_invalid_dep = "YES";
  options.hold = true;
  absl::StatusOr<v1::JobSpec> spec = BuildJobSpec(options, "job");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->qos(), "high");
  EXPECT_EQ(spec->array(), "0-99%8");
  EXPECT_EQ(spec->dependency(), "afterok:12_3?afterany:4");
  EXPECT_TRUE(spec->kill_on_invalid_dep());
  EXPECT_TRUE(spec->hold());

  options.kill_on_invalid_dep = "no";
  spec = BuildJobSpec(options, "job");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->kill_on_invalid_dep());

  spec = BuildJobSpec(JobOptions{}, "job");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->qos(), "");
  EXPECT_EQ(spec->array(), "");
  EXPECT_EQ(spec->dependency(), "");
  EXPECT_FALSE(spec->kill_on_invalid_dep());
  EXPECT_FALSE(spec->hold());
}

// --max-restarts bounds the requeues after node failures and implies
// --requeue, unless --no-requeue says otherwise.
TEST(JobOptionsTest, MaxRestartsImpliesRequeueAndIsBounded) {
  JobOptions options;
  options.max_restarts = 3;
  absl::StatusOr<v1::JobSpec> spec = BuildJobSpec(options, "job");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->requeue());
  ASSERT_TRUE(spec->has_max_restarts());
  EXPECT_EQ(spec->max_restarts(), 3);

  options.requeue = false;
  spec = BuildJobSpec(options, "job");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->requeue());

  options = JobOptions{};
  options.max_restarts = 0;
  spec = BuildJobSpec(options, "job");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->requeue());
  EXPECT_TRUE(spec->has_max_restarts());

  spec = BuildJobSpec(JobOptions{}, "job");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->has_max_restarts());

  for (const int bad : {-1, 10'001}) {
    options.max_restarts = bad;
    EXPECT_EQ(BuildJobSpec(options, "job").status().message(),
              fmt::format("--max-restarts={}: give how often a node failure may requeue the job, "
                          "0-10000",
                          bad));
  }
}

TEST(JobOptionsTest, EmptyPolicyValuesAreRefused) {
  JobOptions qos;
  qos.qos = "";
  EXPECT_EQ(BuildJobSpec(qos, "job").status().message(),
            "-q/--qos is empty; name a QOS (see cohort.conf's QOSName= lines), or leave --qos out "
            "for the cluster's DefaultQOS");
  JobOptions array;
  array.array = "";
  EXPECT_EQ(BuildJobSpec(array, "job").status().message(),
            "-a/--array is empty; give the task ids, such as 0-99, 1,5,9-15:2 or 0-99%8");
  JobOptions dependency;
  dependency.dependency = "";
  EXPECT_EQ(BuildJobSpec(dependency, "job").status().message(),
            "-d/--dependency is empty; write TYPE:JOB[:JOB...], such as afterok:12, or leave it "
            "out");
  JobOptions kill;
  kill.kill_on_invalid_dep = "maybe";
  EXPECT_EQ(BuildJobSpec(kill, "job").status().message(),
            "--kill-on-invalid-dep \"maybe\": write yes (cancel the job when its dependency can "
            "never be satisfied) or no (leave it pending, the default)");
}

TEST(JobOptionsTest, PolicyDirectivesAreReadWithoutWarnings) {
  const std::string script =
      "#!/bin/bash\n#SBATCH --array=1-10:3 --qos=low\n#SBATCH -d afterany:7 -H\n"
      "#SBATCH --kill-on-invalid-dep=yes\n#COHORT -q high\nrun\n";
  JobOptions options;
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(ApplyDirectives(script, "job.sh", options).ok());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // no "not supported" warning
  EXPECT_EQ(options.array, "1-10:3");
  EXPECT_EQ(options.qos, "high");  // #COHORT wins over #SBATCH
  EXPECT_EQ(options.dependency, "afterany:7");
  EXPECT_EQ(options.kill_on_invalid_dep, "yes");
  EXPECT_TRUE(options.hold);

  JobOptions bad;
  EXPECT_EQ(
      ApplyDirectives("#!/bin/bash\n#SBATCH --kill-on-invalid-dep=1\n", "job.sh", bad).message(),
      "job.sh:2: #SBATCH --kill-on-invalid-dep=1: --kill-on-invalid-dep \"1\": write yes "
      "(cancel the job when its dependency can never be satisfied) or no (leave it pending, "
      "the default)");
}

TEST(JobOptionsTest, TestOnlyPrintsThePolicyOptions) {
  JobOptions options;
  options.array = "0-3";
  options.dependency = "afterok:5";
  options.kill_on_invalid_dep = "yes";
  absl::StatusOr<v1::JobSpec> spec = BuildJobSpec(options, "job");
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::ostringstream out;
  PrintJobSpec(*spec, out);
  EXPECT_NE(out.str().find("qos             (the cluster's DefaultQOS)\n"), std::string::npos);
  EXPECT_NE(out.str().find("array           0-3\n"), std::string::npos);
  EXPECT_NE(out.str().find("dependency      afterok:5, cancelled if it can never be satisfied\n"),
            std::string::npos);
  EXPECT_NE(out.str().find("hold            no\n"), std::string::npos);
}

TEST(JobOptionsTest, ContainerOptionsBecomeTheJobsContainer) {
  JobOptions options;
  options.container.image = "nvcr.io#nvidia/pytorch:24.07-py3";
  options.container.mounts = "/lustre/data:/data,/home/alice:/workspace";
  options.container.workdir = "/workspace";
  options.container.writable = false;
  options.container.save = "trained.sqsh";
  absl::StatusOr<v1::JobSpec> spec = BuildJobSpec(options, "job");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->container().image(), "nvcr.io#nvidia/pytorch:24.07-py3");
  EXPECT_EQ(spec->container().save(), "trained.sqsh");
  EXPECT_EQ(spec->container().mounts(), "/lustre/data:/data,/home/alice:/workspace");
  EXPECT_EQ(spec->container().workdir(), "/workspace");
  ASSERT_TRUE(spec->container().has_writable());
  EXPECT_FALSE(spec->container().writable());
  EXPECT_FALSE(spec->container().has_remap_root());
  // No container option: no container.
  absl::StatusOr<v1::JobSpec> bare = BuildJobSpec(JobOptions{}, "job");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->has_container());
}

TEST(JobOptionsTest, BadContainerOptionsAreRefusedByName) {
  for (const auto& [set, words] :
       std::vector<std::pair<std::function<void(ContainerOptions&)>, std::string>>{
           {[](ContainerOptions& c) { c.image = "Bad#Image"; }, "lowercase"},
           {[](ContainerOptions& c) {
              c.image = "ubuntu";
              c.mounts = "/a:b";
            },
            "--container-mounts"},
           {[](ContainerOptions& c) {
              c.image = "ubuntu";
              c.name = "x:run";
            },
            "--container-name"},
           {[](ContainerOptions& c) { c.workdir = "w"; }, "--container-workdir"},
           {[](ContainerOptions& c) {
              c.image = "ubuntu";
              c.save = "/tmp/sqsh/";
            },
            "--container-save"},
       }) {
    JobOptions options;
    set(options.container);
    absl::StatusOr<v1::JobSpec> spec = BuildJobSpec(options, "job");
    ASSERT_FALSE(spec.ok()) << words;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(spec.status().message().find(words), std::string::npos) << spec.status().message();
  }
}

TEST(JobOptionsTest, HintIsTheCpuBindItStandsFor) {
  for (const auto& [hint, bind] :
       {std::pair{"nomultithread", "cores"}, std::pair{"compute_bound", "cores"},
        std::pair{"multithread", "threads"}}) {
    JobOptions options;
    options.hint = hint;
    absl::StatusOr<v1::JobSpec> spec = BuildJobSpec(options, "job");
    ASSERT_TRUE(spec.ok()) << hint << ": " << spec.status();
    EXPECT_EQ(spec->cpu_bind(), bind) << hint;
  }
  for (const auto& [hint, cpu_bind, words] :
       {std::tuple{"memory_bound", "", "--cpu-bind=numa"}, std::tuple{"fast", "", "is not"},
        std::tuple{"nomultithread", "cores", "give one of them"}}) {
    JobOptions options;
    options.hint = hint;
    if (*cpu_bind != '\0') options.cpu_bind = cpu_bind;
    absl::StatusOr<v1::JobSpec> spec = BuildJobSpec(options, "job");
    ASSERT_FALSE(spec.ok()) << hint;
    EXPECT_NE(spec.status().message().find(words), std::string::npos) << spec.status().message();
  }
}

}  // namespace
}  // namespace cohort::cli
