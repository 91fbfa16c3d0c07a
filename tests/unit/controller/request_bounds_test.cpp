// SPDX-License-Identifier: Apache-2.0
// The bounds on what clients and agents send (daemons/controller/
// request_bounds.cpp and RequestFromSpec): each checked before anything
// sized by the field is made, each refusal naming the field and its bound.
#include "rpc/request_bounds.h"

#include <string>

#include <gtest/gtest.h>

#include "store/wire.h"

namespace cohort::controller {
namespace {

v1::JobSpec Spec() {
  v1::JobSpec spec;
  spec.set_nodes(1);
  spec.add_argv("true");
  return spec;
}

Identity Alice() {
  Identity who;
  who.uid = 1000;
  who.user_name = "alice";
  return who;
}

void ExpectRefused(const absl::Status& status, const std::string& words) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(words), std::string_view::npos) << status.message();
}

TEST(RequestBoundsTest, AJobOfOrdinarySizeIsWithinEveryBound) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = Spec();
  request.mutable_spec()->set_name("train");
  request.mutable_spec()->set_script(std::string(64 * 1024, '#'));
  for (int i = 0; i < 200; ++i) {
    v1::EnvVar* var = request.mutable_spec()->add_env();
    var->set_name("VAR" + std::to_string(i));
    var->set_value(std::string(1000, 'x'));
  }
  EXPECT_TRUE(CheckRequestBounds(request).ok());
}

TEST(RequestBoundsTest, ALongStringIsRefusedByItsPath) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = Spec();
  request.mutable_spec()->set_comment(std::string(1024 * 1024, 'c'));
  ExpectRefused(CheckRequestBounds(request), "spec.comment is 1048576 bytes long; at most 1024");

  request.mutable_spec()->clear_comment();
  request.mutable_spec()->set_name(std::string(257, 'n'));
  ExpectRefused(CheckRequestBounds(request), "spec.name is 257 bytes long; at most 256");

  request.mutable_spec()->clear_name();
  request.mutable_spec()->add_env()->set_name("OK");
  request.mutable_spec()->add_env()->set_value(std::string(200 * 1024, 'v'));
  ExpectRefused(CheckRequestBounds(request), "spec.env[1].value is 204800 bytes long");

  // A field without a bound of its own has the default.
  v1::UpdateNodeRequest drain;
  drain.set_reason(std::string(2000, 'r'));
  ExpectRefused(CheckRequestBounds(drain), "reason is 2000 bytes long; at most 1024");
  v1::GetJobRequest get;
  get.set_job_ref(std::string(kDefaultStringBytes + 1, '1'));
  ExpectRefused(CheckRequestBounds(get), "job_ref is 4097 bytes long");
}

TEST(RequestBoundsTest, ARepeatedFieldIsBoundedByItsEntries) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = Spec();
  for (int i = 0; i < 65; ++i) request.mutable_spec()->add_features("f");
  ExpectRefused(CheckRequestBounds(request), "spec.features has 65 entries; at most 64");

  v1::AgentMessage report;
  for (int i = 0; i <= static_cast<int>(kDefaultRepeated); ++i) {
    report.mutable_register_()->add_running()->set_job_id(i);
  }
  ExpectRefused(CheckRequestBounds(report), "register.running has 65537 entries");
}

// --ntasks-per-node 2147483647 once ended the controller with bad_alloc:
// the binding check sized a plan by it before any bound was looked at.
TEST(RequestBoundsTest, CountsAreBoundedBeforeAnythingIsSizedByThem) {
  for (const auto& [set, words] :
       std::initializer_list<std::pair<void (*)(v1::JobSpec&), std::string>>{
           {[](v1::JobSpec& s) { s.set_tasks_per_node(2147483647); },
            "ntasks-per-node is 2147483647; at most 4096"},
           {[](v1::JobSpec& s) { s.set_cpus_per_task(100000000); }, "cpus-per-task (-c) is"},
           {[](v1::JobSpec& s) { s.set_nodes(1 << 30); }, "nodes (-N) is 1073741824"},
           {[](v1::JobSpec& s) { s.set_gpus_per_node(65); }, "gpus-per-node is 65"},
           {[](v1::JobSpec& s) { s.set_nodelist("n[1-100000000]"); }, "nodelist"},
           {[](v1::JobSpec& s) { s.set_open_mode("../../x"); }, "give append or truncate"}}) {
    v1::JobSpec spec = Spec();
    set(spec);
    ExpectRefused(RequestFromSpec(spec, Alice(), 1000).status(), words);
  }
  v1::JobSpec fine = Spec();
  fine.set_tasks_per_node(kMaxTasksPerNode);
  fine.set_open_mode("append");
  EXPECT_TRUE(RequestFromSpec(fine, Alice(), 1000).ok());
}

TEST(RequestBoundsTest, TheTableNamesFieldsThatExist) {
  // A bound on a field the protocol does not have would bound nothing.
  for (const std::string_view name :
       {"cohort.v1.JobSpec.name", "cohort.v1.JobSpec.comment", "cohort.v1.JobSpec.script",
        "cohort.v1.EnvVar.value", "cohort.v1.UpdateNodeRequest.reason"}) {
    EXPECT_NE(
        google::protobuf::DescriptorPool::generated_pool()->FindFieldByName(std::string(name)),
        nullptr)
        << name;
  }
  EXPECT_EQ(BoundOf("cohort.v1.JobSpec.name").bytes, 256U);
  EXPECT_EQ(BoundOf("cohort.v1.Nothing.at_all").bytes, kDefaultStringBytes);
}

}  // namespace
}  // namespace cohort::controller
