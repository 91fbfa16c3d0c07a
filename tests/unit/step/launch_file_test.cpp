// SPDX-License-Identifier: Apache-2.0
#include "launch_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace cohort::step {
namespace {

// The second node of a two-node, two-ranks-per-node job.
LaunchPlan TwoByTwo() {
  LaunchPlan plan;
  launch::LaunchContext& context = plan.context;
  context.job_id = 42;
  context.job_name = "train";
  context.user_name = "alice";
  context.nodelist = "n[1-2]";
  context.num_nodes = 2;
  context.node_rank = 1;
  context.node_name = "n2";
  context.tasks_per_node = 2;
  context.base_env = {{"PATH", "/opt/bin:/usr/bin"}, {"HOME", "/home/alice"}};
  plan.argv = {"python", "train.py", "--lr", "0.1"};
  plan.work_dir = "/home/alice/run";
  plan.output = "out-%j-%t.txt";
  plan.error = "/tmp/err-%t";
  return plan;
}

bool HasEntry(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

TEST(LaunchFileTest, APlanBecomesOneEntryPerLocalRank) {
  absl::StatusOr<LaunchFile> file = PlanLaunch(TwoByTwo(), 3, "/spool/n2/job-42.3/script", "/s");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->job_id, 42);
  EXPECT_EQ(file->attempt, 3);
  EXPECT_EQ(file->node, "n2");
  EXPECT_EQ(file->search_path, "/opt/bin:/usr/bin");
  EXPECT_TRUE(file->script_path.empty()) << "no script in the plan";
  EXPECT_EQ(file->agent_socket, "/s");
  ASSERT_EQ(file->ranks.size(), 2U);
  EXPECT_EQ(file->ranks[0].rank, 2);
  EXPECT_EQ(file->ranks[1].rank, 3);
  EXPECT_EQ(file->ranks[1].output, "/home/alice/run/out-42-3.txt");
  EXPECT_EQ(file->ranks[1].error, "/tmp/err-3");
  EXPECT_TRUE(HasEntry(file->ranks[1].env, "RANK=3"));
  EXPECT_TRUE(HasEntry(file->ranks[1].env, "LOCAL_RANK=1"));
  EXPECT_TRUE(HasEntry(file->ranks[0].env, "HOME=/home/alice"));
}

TEST(LaunchFileTest, DefaultsWithoutPathOrOutputPatterns) {
  LaunchPlan plan = TwoByTwo();
  plan.context.base_env.clear();
  plan.output.clear();
  plan.error.clear();
  plan.script = "#!/bin/sh\ntrue\n";
  absl::StatusOr<LaunchFile> file = PlanLaunch(plan, 1, "/spool/script", "");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->search_path, "/usr/local/bin:/usr/bin:/bin");
  EXPECT_EQ(file->script_path, "/spool/script");
  EXPECT_EQ(file->ranks[0].output, "/home/alice/run/cohort-42.out");
  EXPECT_TRUE(file->ranks[0].error.empty()) << "stderr goes with stdout";
}

TEST(LaunchFileTest, PlansThatCannotRunAreRefusedNamingTheNode) {
  const auto refused = [](LaunchPlan plan, const std::string& words) {
    absl::StatusOr<LaunchFile> file = PlanLaunch(plan, 1, "", "");
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(file.status().message());
    EXPECT_TRUE(message.starts_with("n2: ")) << message;
    EXPECT_NE(message.find(words), std::string::npos) << message;
  };
  LaunchPlan plan = TwoByTwo();
  plan.context.tasks_per_node = 0;
  refused(plan, "ranks per node");
  plan = TwoByTwo();
  plan.context.tasks_per_node = kMaxRanksPerNode + 1;
  refused(plan, "ranks per node");
  plan = TwoByTwo();
  plan.context.node_rank = 2;
  refused(plan, "outside a gang of 2 nodes");
  plan = TwoByTwo();
  plan.argv.clear();
  refused(plan, "nothing to run");
  plan = TwoByTwo();
  plan.work_dir.clear();
  refused(plan, "no working directory");
}

TEST(LaunchFileTest, RoundTripsThroughJson) {
  absl::StatusOr<LaunchFile> file = PlanLaunch(TwoByTwo(), 2, "", "/spool/agent.sock");
  ASSERT_TRUE(file.ok());
  file->argv.push_back("quote \" and \\ and ünïcode");
  file->open_mode = OpenMode::kTruncate;
  const std::string json = LaunchFileToJson(*file);
  absl::StatusOr<LaunchFile> back = ParseLaunchFile(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->job_id, file->job_id);
  EXPECT_EQ(back->attempt, 2);
  EXPECT_EQ(back->node, file->node);
  EXPECT_EQ(back->argv, file->argv);
  EXPECT_EQ(back->script_path, file->script_path);
  EXPECT_EQ(back->search_path, file->search_path);
  EXPECT_EQ(back->work_dir, file->work_dir);
  EXPECT_EQ(back->open_mode, OpenMode::kTruncate);
  EXPECT_EQ(back->agent_socket, "/spool/agent.sock");
  EXPECT_EQ(back->run_as, RunAs::kStepd);
  ASSERT_EQ(back->ranks.size(), file->ranks.size());
  for (std::size_t i = 0; i < back->ranks.size(); ++i) {
    EXPECT_EQ(back->ranks[i].rank, file->ranks[i].rank);
    EXPECT_EQ(back->ranks[i].env, file->ranks[i].env);
    EXPECT_EQ(back->ranks[i].output, file->ranks[i].output);
    EXPECT_EQ(back->ranks[i].error, file->ranks[i].error);
    EXPECT_EQ(back->ranks[i].output_mode, file->ranks[i].output_mode);
    EXPECT_EQ(back->ranks[i].error_mode, file->ranks[i].error_mode);
  }
}

TEST(LaunchFileTest, OwnerMemoryAndCgroupRoundTrip) {
  LaunchPlan plan = TwoByTwo();
  plan.run_as = RunAs::kOwner;
  plan.uid = 61001;
  plan.memory_mb = 2048;
  absl::StatusOr<LaunchFile> file = PlanLaunch(plan, 1, "", "");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->run_as, RunAs::kOwner);
  EXPECT_EQ(file->uid, 61001U);
  EXPECT_EQ(file->memory_mb, 2048);
  file->cgroups = {"/sys/fs/cgroup/cpuset/n2/cohort-job-42.1",
                   "/sys/fs/cgroup/memory/n2/cohort-job-42.1"};
  file->cpus = {2, 3, 10, 11};
  absl::StatusOr<LaunchFile> back = ParseLaunchFile(LaunchFileToJson(*file));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->run_as, RunAs::kOwner);
  EXPECT_EQ(back->uid, 61001U);
  EXPECT_EQ(back->memory_mb, 2048);
  EXPECT_EQ(back->cgroups, file->cgroups);
  EXPECT_EQ(back->cpus, file->cpus);
}

// srun --mpi=pmix: the step's shape for the node's PMIx server, from its
// layout, and SLURM_MPI_TYPE for its ranks.
TEST(LaunchFileTest, APmixStepCarriesItsShapeForTheServer) {
  LaunchPlan plan = TwoByTwo();
  launch::LaunchContext& context = plan.context;
  context.kind = launch::LaunchKind::kStep;
  context.step_id = 3;
  context.mpi_type = "pmix";
  context.step = {.nodelist = "n[1-3]",
                  .num_nodes = 3,
                  .node_index = 1,
                  .first_rank = 2,
                  .tasks = 2,
                  .num_tasks = 5,
                  .tasks_per_node = "2(x2),1"};
  absl::StatusOr<LaunchFile> file = PlanLaunch(plan, 1, "", "");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->mpi.type, "pmix");
  EXPECT_EQ(file->mpi.nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(file->mpi.tasks, (std::vector<int>{2, 2, 1}));
  EXPECT_EQ(file->mpi.node_index, 1);
  EXPECT_TRUE(HasEntry(file->ranks[0].env, "SLURM_MPI_TYPE=pmix"));
  // The agent names the machine's topology for the server (StepLauncher).
  file->mpi.topology_file = "/var/spool/cohort/hwloc-topology.xml";
  absl::StatusOr<LaunchFile> back = ParseLaunchFile(LaunchFileToJson(*file));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->mpi.nodes, file->mpi.nodes);
  EXPECT_EQ(back->mpi.tasks, file->mpi.tasks);
  EXPECT_EQ(back->mpi.node_index, 1);
  EXPECT_EQ(back->mpi.topology_file, "/var/spool/cohort/hwloc-topology.xml");
  // A layout whose counts do not cover its nodes cannot be served.
  context.step.tasks_per_node = "2(x2)";
  EXPECT_EQ(PlanLaunch(plan, 1, "", "").status().message(),
            "n2: --mpi=pmix: the step's layout names 3 nodes, 2 counts and node 1");
}

// --open-mode=truncate: each file is truncated once per launch, by the first
// rank that writes to it, and never under a rank already writing.
TEST(LaunchFileTest, TruncateIsDoneOncePerFileByItsFirstRank) {
  launch::LaunchContext node0;
  node0.num_nodes = 2;
  node0.tasks_per_node = 2;
  node0.node_rank = 0;
  launch::LaunchContext node1 = node0;
  node1.node_rank = 1;
  constexpr OpenMode kT = OpenMode::kTruncate;
  constexpr OpenMode kA = OpenMode::kAppend;
  // One file for the whole job: rank 0 of node rank 0 only.
  EXPECT_EQ(FileOpenMode(kT, "cohort-%j.out", node0, 0, 1), kT);
  EXPECT_EQ(FileOpenMode(kT, "cohort-%j.out", node0, 1, 1), kA);
  EXPECT_EQ(FileOpenMode(kT, "cohort-%j.out", node1, 0, 1), kA);
  // One file per node: each node's first rank.
  EXPECT_EQ(FileOpenMode(kT, "out-%N", node1, 0, 1), kT);
  EXPECT_EQ(FileOpenMode(kT, "out-%n", node1, 0, 1), kT);
  EXPECT_EQ(FileOpenMode(kT, "out-%n", node1, 1, 1), kA);
  // One file per rank: its rank.
  EXPECT_EQ(FileOpenMode(kT, "out-%t", node1, 1, 1), kT);
  // %% escapes: "%%t" and "%%n" are literals, so the file is the job's.
  EXPECT_EQ(FileOpenMode(kT, "out-%%t", node0, 1, 1), kA);
  EXPECT_EQ(FileOpenMode(kT, "out-%%n", node1, 0, 1), kA);
  // append never truncates; a requeued job's later attempt appends.
  EXPECT_EQ(FileOpenMode(kA, "out-%t", node0, 0, 1), kA);
  EXPECT_EQ(FileOpenMode(kT, "out-%t", node0, 0, 2), kA);

  // PlanLaunch applies it to each rank's files.
  LaunchPlan plan = TwoByTwo();  // node rank 1; -o with %t, -e with %t
  plan.output = "shared.out";
  absl::StatusOr<LaunchFile> file = PlanLaunch(plan, 1, "", "");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->ranks[0].output_mode, kA) << "node rank 1 appends to the job's file";
  EXPECT_EQ(file->ranks[0].error_mode, kT);
  EXPECT_EQ(file->ranks[1].error_mode, kT);
  plan.context.node_rank = 0;
  file = PlanLaunch(plan, 1, "", "");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->ranks[0].output_mode, kT);
  EXPECT_EQ(file->ranks[1].output_mode, kA);
}

TEST(LaunchFileTest, BrokenFilesAreRefused) {
  EXPECT_FALSE(ParseLaunchFile("").ok());
  EXPECT_FALSE(ParseLaunchFile("{\"version\": 1}").ok());
  EXPECT_FALSE(ParseLaunchFile("[1, 2").ok());
  absl::StatusOr<LaunchFile> file = PlanLaunch(TwoByTwo(), 1, "", "");
  ASSERT_TRUE(file.ok());
  std::string json = LaunchFileToJson(*file);
  json.replace(json.find("\"version\":1"), 11, "\"version\":9");
  absl::StatusOr<LaunchFile> later = ParseLaunchFile(json);
  ASSERT_FALSE(later.ok());
  EXPECT_NE(std::string(later.status().message()).find("same release"), std::string::npos);
}

TEST(LaunchFileTest, FolderNamesRoundTrip) {
  EXPECT_EQ(LaunchFolderName({42, 3}), "job-42.3");
  EXPECT_EQ(LaunchFolderName({42, 3, 0}), "job-42.3.0");
  const std::optional<LaunchId> id = ParseLaunchFolderName("job-42.3");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->job_id, 42);
  EXPECT_EQ(id->attempt, 3);
  EXPECT_EQ(id->step, kOwnLaunch);
  const std::optional<LaunchId> step = ParseLaunchFolderName("job-42.3.7");
  ASSERT_TRUE(step);
  EXPECT_EQ(*step, (LaunchId{42, 3, 7}));
  for (const std::string_view name :
       {"job-42", "job-.3", "job-42.", "job-x.1", "job-1.2.3.4", "job-1.2.", "job-1.2.-1",
        "jobs-1.2", "job--1.2", "agent.sock"}) {
    EXPECT_FALSE(ParseLaunchFolderName(name)) << name;
  }
}

TEST(LaunchFileTest, AStepsContainerTravelsWithItsFile) {
  LaunchPlan plan = TwoByTwo();
  plan.container = {.image = "127.0.0.1:5000#tiny:1",
                    .mounts = "/data:/data:ro",
                    .workdir = "/work",
                    .name = "train:auto",
                    .env = "PATH",
                    .save = "out/trained.sqsh",
                    .mount_home = true,
                    .remap_root = true,
                    .writable = false,
                    .entrypoint = true,
                    .images = {.cache_dir = "/spool/images",
                               .cache_max_bytes = 1 << 30,
                               .registry_ca_file = "/etc/ca.pem",
                               .credentials_file = "/etc/cohort/credentials",
                               .registry_mirrors = {"nvcr.io=https://mirror:5000"}},
                    .hooks_dir = "/etc/cohort/hooks.d",
                    .state_dir = "/spool/containers/job-42",
                    .devices = {"/dev/nvidia0"}};
  absl::StatusOr<LaunchFile> file = PlanLaunch(plan, 0, "/s/script", "/s");
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<LaunchFile> back = ParseLaunchFile(LaunchFileToJson(*file));
  ASSERT_TRUE(back.ok()) << back.status();
  const ContainerSetup& c = back->container;
  EXPECT_TRUE(c.Enabled());
  EXPECT_EQ(c.image, "127.0.0.1:5000#tiny:1");
  EXPECT_EQ(c.mounts, "/data:/data:ro");
  EXPECT_EQ(c.workdir, "/work");
  EXPECT_EQ(c.name, "train:auto");
  EXPECT_EQ(c.env, "PATH");
  EXPECT_EQ(c.save, "out/trained.sqsh");
  EXPECT_TRUE(c.mount_home && c.remap_root && c.entrypoint);
  EXPECT_FALSE(c.writable);
  EXPECT_EQ(c.images.cache_dir, "/spool/images");
  EXPECT_EQ(c.images.cache_max_bytes, 1 << 30);
  EXPECT_EQ(c.images.registry_ca_file, "/etc/ca.pem");
  EXPECT_EQ(c.images.credentials_file, "/etc/cohort/credentials");
  EXPECT_EQ(c.images.registry_mirrors, std::vector<std::string>{"nvcr.io=https://mirror:5000"});
  EXPECT_EQ(c.hooks_dir, "/etc/cohort/hooks.d");
  EXPECT_EQ(c.state_dir, "/spool/containers/job-42");
  EXPECT_EQ(c.devices, std::vector<std::string>{"/dev/nvidia0"});
  // None asked: none written, none read.
  absl::StatusOr<LaunchFile> bare = PlanLaunch(TwoByTwo(), 0, "/s/script", "/s");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(LaunchFileToJson(*bare).find("container"), std::string::npos);
  EXPECT_FALSE(ParseLaunchFile(LaunchFileToJson(*bare))->container.Enabled());
}

// AMD GPUs: ROCr selects the devices, HIP and CUDA_VISIBLE_DEVICES (which
// HIP also reads) count them from 0 on top.
TEST(LaunchFileTest, RocmGetsTheDevicesInRocrVisibleDevices) {
  LaunchPlan plan = TwoByTwo();
  plan.context.gpus = {4, 6};
  plan.bindings.resize(2);
  plan.bindings[0].cuda_visible_devices = "4,6";
  plan.bindings[1].cuda_visible_devices = "6,4";
  plan.rocm = true;
  absl::StatusOr<LaunchFile> file = PlanLaunch(plan, 0, "/s/script", "/s");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(HasEntry(file->ranks[1].env, "ROCR_VISIBLE_DEVICES=6,4"));
  EXPECT_TRUE(HasEntry(file->ranks[1].env, "HIP_VISIBLE_DEVICES=0,1"));
  EXPECT_TRUE(HasEntry(file->ranks[1].env, "CUDA_VISIBLE_DEVICES=0,1"));
  // Confined to the granted GPUs' render nodes: ROCr counts them from 0 too.
  plan.gpu_numbering = GpuNumbering::kConfined;
  file = PlanLaunch(plan, 0, "/s/script", "/s");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(HasEntry(file->ranks[1].env, "ROCR_VISIBLE_DEVICES=1,0"));
  std::vector<std::string> none = {"PATH=/bin"};
  RocmVisibleDevices(none);
  EXPECT_EQ(none, std::vector<std::string>{"PATH=/bin"});
}

TEST(LaunchFileTest, ConfinedGpusAreNumberedFromZeroOverTheGrantedOnes) {
  // Granted 4-7 of a node: CUDA sees four GPUs, 0-3.
  EXPECT_EQ(ConfinedGpuIndices("4,5,6,7", {4, 5, 6, 7}), "0,1,2,3");
  // --gpu-bind=ordered's own GPU first keeps its place in the list.
  EXPECT_EQ(ConfinedGpuIndices("6,4,5,7", {4, 5, 6, 7}), "2,0,1,3");
  EXPECT_EQ(ConfinedGpuIndices("3", {1, 3}), "1");
  // What is not a granted index stays as it was.
  EXPECT_EQ(ConfinedGpuIndices("2,x", {1, 3}), "2,x");
  EXPECT_EQ(ConfinedGpuIndices("", {1}), "");

  LaunchPlan plan = TwoByTwo();
  plan.context.gpus = {4, 6};
  plan.bindings.resize(2);
  plan.bindings[0].cuda_visible_devices = "4,6";
  plan.bindings[1].cuda_visible_devices = "6,4";
  plan.gpu_numbering = GpuNumbering::kConfined;
  absl::StatusOr<LaunchFile> file = PlanLaunch(plan, 0, "/s/script", "/s");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(HasEntry(file->ranks[0].env, "CUDA_VISIBLE_DEVICES=0,1"));
  EXPECT_TRUE(HasEntry(file->ranks[1].env, "CUDA_VISIBLE_DEVICES=1,0"));
  plan.gpu_numbering = GpuNumbering::kNode;
  file = PlanLaunch(plan, 0, "/s/script", "/s");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(HasEntry(file->ranks[1].env, "CUDA_VISIBLE_DEVICES=6,4"));
}

}  // namespace
}  // namespace cohort::step
