// SPDX-License-Identifier: Apache-2.0
#include "pmi_host.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cohort::step {
namespace {

// A rank's end of its PMI socket, as MPICH's client uses it: a line out,
// a line back.
std::string Ask(int fd, const std::string& line) {
  EXPECT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  std::string reply;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n') reply += c;
  return reply;
}

// A rank's end as Slurm's libpmi2 uses it after PMI-1's init line: the
// body's length in 6 bytes, the body; the answer read the same way.
std::string ReadPmi2(int fd) {
  char field[7] = {};
  for (std::size_t got = 0; got < 6;) {
    const ssize_t n = ::read(fd, field + got, 6 - got);
    if (n <= 0) return "<closed>";
    got += static_cast<std::size_t>(n);
  }
  std::string body(static_cast<std::size_t>(std::atoi(field)), '\0');
  for (std::size_t got = 0; got < body.size();) {
    const ssize_t n = ::read(fd, body.data() + got, body.size() - got);
    if (n <= 0) return "<closed>";
    got += static_cast<std::size_t>(n);
  }
  return body;
}
void SendPmi2(int fd, const std::string& body) {
  const std::string message = fmt::format("{:<6}", body.size()) + body;
  EXPECT_EQ(::write(fd, message.data(), message.size()), static_cast<ssize_t>(message.size()));
}
std::string AskPmi2(int fd, const std::string& body) {
  SendPmi2(fd, body);
  return ReadPmi2(fd);
}

struct Sent {
  int fence = 0;
  std::string part;
};

// Ranks 2 and 3 of a step of 2 nodes x 2 ranks, on its second node.
class PmiHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MpiSetup layout{.type = "pmi2", .nodes = {"n1", "n2"}, .tasks = {2, 2}, .node_index = 1};
    absl::StatusOr<std::unique_ptr<PmiHost>> host = PmiHost::Start(
        12, 3, std::move(layout), {2, 3},
        [this](int fence, std::string part) {
          const std::lock_guard lock(mutex_);
          sent_.push_back({fence, std::move(part)});
        },
        [this](int rank, int code, const std::string& /*message*/) {
          aborted_.emplace_back(rank, code);
        });
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
    two_ = host_->ChildEnd(2);
    three_ = host_->ChildEnd(3);
  }

  // What the host's thread sent, once it sent something (2 s at most).
  std::vector<Sent> SentWithin2s() {
    for (int i = 0; i < 400; ++i) {
      {
        const std::lock_guard lock(mutex_);
        if (!sent_.empty()) return sent_;
      }
      ::usleep(5000);
    }
    return {};
  }

  std::unique_ptr<PmiHost> host_;
  int two_ = -1;
  int three_ = -1;
  // What the host's thread sent, and what it told of aborts.
  std::mutex mutex_;
  std::vector<Sent> sent_;
  std::vector<std::pair<int, int>> aborted_;
};

TEST_F(PmiHostTest, AnswersPmi1sQuestionsAboutTheStep) {
  EXPECT_EQ(host_->Environment(3), (std::vector<std::string>{"PMI_FD=4", "PMI_RANK=3", "PMI_SIZE=4",
                                                             "PMI_JOBID=cohort.12.3"}));
  EXPECT_EQ(Ask(two_, "cmd=init pmi_version=1 pmi_subversion=1\n"),
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
  EXPECT_EQ(Ask(two_, "cmd=get_maxes\n"),
            "cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=4096 rc=0");
  EXPECT_EQ(Ask(two_, "cmd=get_my_kvsname\n"), "cmd=my_kvsname kvsname=cohort.12.3 rc=0");
  EXPECT_EQ(Ask(two_, "cmd=get_universe_size\n"), "cmd=universe_size size=4 rc=0");
  EXPECT_EQ(Ask(two_, "cmd=get kvsname=cohort.12.3 key=PMI_process_mapping\n"),
            "cmd=get_result rc=0 value=(vector,(0,2,2))");
}

TEST_F(PmiHostTest, ABarrierSendsTheNodesPutsAndEndsWithEveryNodes) {
  EXPECT_EQ(Ask(two_, "cmd=put kvsname=cohort.12.3 key=addr-2 value=aa\n"), "cmd=put_result rc=0");
  EXPECT_EQ(Ask(three_, "cmd=put kvsname=cohort.12.3 key=addr-3 value=bb\n"),
            "cmd=put_result rc=0");
  const std::string barrier = "cmd=barrier_in\n";
  ASSERT_EQ(::write(two_, barrier.data(), barrier.size()), static_cast<ssize_t>(barrier.size()));
  ASSERT_EQ(::write(three_, barrier.data(), barrier.size()), static_cast<ssize_t>(barrier.size()));
  // The node's part goes out once both are in; the other node's comes back.
  const std::vector<Sent> sent = SentWithin2s();
  ASSERT_EQ(sent.size(), 1U);
  EXPECT_EQ(sent[0].fence, 0);
  EXPECT_EQ(sent[0].part, "addr-2=aa\naddr-3=bb\n");
  host_->FenceDone(0, "addr-0=x\naddr-1=y\n" + sent[0].part);
  std::string reply;
  char c = 0;
  while (::read(two_, &c, 1) == 1 && c != '\n') reply += c;
  EXPECT_EQ(reply, "cmd=barrier_out rc=0");
  EXPECT_EQ(Ask(two_, "cmd=get kvsname=cohort.12.3 key=addr-1\n"), "cmd=get_result rc=0 value=y");
  EXPECT_EQ(Ask(two_, "cmd=get kvsname=cohort.12.3 key=addr-9\n"),
            "cmd=get_result rc=-1 msg=key_addr-9_not_found");
}

TEST_F(PmiHostTest, BadLinesAreRefusedAndTheRankIsStillServed) {
  EXPECT_EQ(Ask(two_, "cmd=bogus\n"),
            "cmd=bogus rc=-1 msg=cohort-stepd_serves_PMI-1;_this_line_is_none_of_its_commands");
  EXPECT_EQ(Ask(two_, "cmd=put kvsname=other key=k value=v\n"),
            "cmd=put_result rc=-1 msg=no_such_kvsname");
  EXPECT_EQ(Ask(two_, "cmd=put kvsname=cohort.12.3 key=k value=" + std::string(5000, 'v') + "\n"),
            "cmd=put_result rc=-1 msg=keys_take_1_to_256_bytes,_values_at_most_4096");
  EXPECT_EQ(Ask(two_, "cmd=init pmi_version=3 pmi_subversion=0\n"),
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1");
  EXPECT_EQ(Ask(two_, "cmd=get_appnum\n"), "cmd=appnum appnum=0 rc=0");
}

TEST_F(PmiHostTest, SpeaksPmi2ToARankThatAsksForItAtInit) {
  for (const int fd : {two_, three_}) {
    EXPECT_EQ(Ask(fd, "cmd=init pmi_version=2 pmi_subversion=0\n"),
              "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0");
  }
  EXPECT_EQ(AskPmi2(two_, "cmd=fullinit;pmijobid=cohort.12.3;pmirank=2;threaded=FALSE;"),
            "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=2;size=4;appnum=0;"
            "debugged=FALSE;pmiverbose=FALSE;");
  EXPECT_EQ(AskPmi2(two_, "cmd=job-getid;"), "cmd=job-getid-response;rc=0;jobid=cohort.12.3;");
  EXPECT_EQ(AskPmi2(two_, "cmd=info-getjobattr;key=PMI_process_mapping;"),
            "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,2,2));");
  EXPECT_EQ(AskPmi2(two_, "cmd=info-getjobattr;key=nothing;"),
            "cmd=info-getjobattr-response;rc=0;found=FALSE;");
  // A value's ';' travels doubled, and comes back so.
  EXPECT_EQ(AskPmi2(two_, "cmd=kvs-put;key=card-2;value=a;;b;"), "cmd=kvs-put-response;rc=0;");
  EXPECT_EQ(AskPmi2(three_, "cmd=kvs-put;key=card-3;value=c;"), "cmd=kvs-put-response;rc=0;");
  SendPmi2(two_, "cmd=kvs-fence;");
  SendPmi2(three_, "cmd=kvs-fence;");
  const std::vector<Sent> sent = SentWithin2s();
  ASSERT_EQ(sent.size(), 1U);
  EXPECT_EQ(sent[0].part, "card-2=a;b\ncard-3=c\n");
  host_->FenceDone(0, "card-0=z\n" + sent[0].part);
  EXPECT_EQ(ReadPmi2(two_), "cmd=kvs-fence-response;rc=0;");
  EXPECT_EQ(ReadPmi2(three_), "cmd=kvs-fence-response;rc=0;");
  EXPECT_EQ(AskPmi2(three_, "cmd=kvs-get;jobid=cohort.12.3;srcid=-1;key=card-2;"),
            "cmd=kvs-get-response;rc=0;found=TRUE;value=a;;b;");
  EXPECT_EQ(AskPmi2(three_, "cmd=kvs-get;jobid=cohort.12.3;srcid=-1;key=card-0;"),
            "cmd=kvs-get-response;rc=0;found=TRUE;value=z;");
  EXPECT_EQ(AskPmi2(three_, "cmd=kvs-get;jobid=cohort.12.3;srcid=-1;key=card-9;"),
            "cmd=kvs-get-response;rc=0;found=FALSE;");
  EXPECT_EQ(AskPmi2(two_, "cmd=finalize;"), "cmd=finalize-response;rc=0;");
}

TEST_F(PmiHostTest, ANodeAttributeReachesTheRankThatWaitsForIt) {
  for (const int fd : {two_, three_}) Ask(fd, "cmd=init pmi_version=2 pmi_subversion=0\n");
  EXPECT_EQ(AskPmi2(three_, "cmd=info-getnodeattr;key=segment;wait=FALSE;"),
            "cmd=info-getnodeattr-response;rc=0;found=FALSE;");
  SendPmi2(three_, "cmd=info-getnodeattr;key=segment;wait=TRUE;");
  EXPECT_EQ(AskPmi2(two_, "cmd=info-putnodeattr;key=segment;value=/dev/shm/x;"),
            "cmd=info-putnodeattr-response;rc=0;");
  EXPECT_EQ(ReadPmi2(three_), "cmd=info-getnodeattr-response;rc=0;found=TRUE;value=/dev/shm/x;");
}

TEST_F(PmiHostTest, BadPmi2MessagesAreRefusedAndTheOthersServed) {
  for (const int fd : {two_, three_}) Ask(fd, "cmd=init pmi_version=2 pmi_subversion=0\n");
  EXPECT_EQ(AskPmi2(two_, "no pairs here"),
            "cmd=error-response;rc=1;errmsg=cohort-stepd: a PMI-2 message that is not "
            "cmd=NAME;;KEY=VALUE;;...: not KEY=VALUE;; pairs;");
  EXPECT_EQ(AskPmi2(two_, "cmd=spawn;ncmds=1;"),
            "cmd=spawn-response;rc=1;errmsg=spawn is not served by cohort-stepd;");
  EXPECT_EQ(AskPmi2(two_, "cmd=kvs-put;key=k;value=" + std::string(5000, 'v') + ";"),
            "cmd=kvs-put-response;rc=1;errmsg=keys take 1 to 256 bytes, values at most 4096 and "
            "no newline;");
  EXPECT_EQ(AskPmi2(two_, "cmd=job-getid;"), "cmd=job-getid-response;rc=0;jobid=cohort.12.3;");
  // A length field that is no number: no next message can be found, so the
  // rank is told and its socket ended; the other rank is served.
  const std::string garbage = "abcdefcmd=job-getid;";
  ASSERT_EQ(::write(two_, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
  EXPECT_EQ(ReadPmi2(two_),
            "cmd=error-response;rc=1;errmsg=cohort-stepd: a PMI-2 message's length field is not "
            "0 to 65536 in 6 bytes;");
  EXPECT_EQ(ReadPmi2(two_), "<closed>");
  EXPECT_EQ(AskPmi2(three_, "cmd=job-getid;"), "cmd=job-getid-response;rc=0;jobid=cohort.12.3;");
}

TEST_F(PmiHostTest, APmi2AbortIsReported) {
  Ask(three_, "cmd=init pmi_version=2 pmi_subversion=0\n");
  SendPmi2(three_, "cmd=abort;isworld=TRUE;msg=out of memory;");
  EXPECT_EQ(ReadPmi2(three_), "<closed>");
  ASSERT_EQ(aborted_.size(), 1U);
  EXPECT_EQ(aborted_[0], std::make_pair(3, 1));
}

// A rank that asks and never reads the answers is dropped once its socket
// is full; the server never blocks on it, and the other rank is served.
TEST_F(PmiHostTest, ARankThatDoesNotReadIsDroppedAndTheOthersServed) {
  const std::string ask = "cmd=get_maxes\n";
  std::string many;
  for (int i = 0; i < 2000; ++i) many += ask;
  for (int round = 0; round < 200; ++round) {
    if (::send(two_, many.data(), many.size(), MSG_NOSIGNAL) < 0) break;  // dropped
  }
  EXPECT_EQ(Ask(three_, "cmd=get_appnum\n"), "cmd=appnum appnum=0 rc=0");
}

TEST_F(PmiHostTest, AnAbortIsReportedWithItsCode) {
  const std::string line = "cmd=abort exitcode=7\n";
  ASSERT_EQ(::write(three_, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  char c = 0;
  EXPECT_EQ(::read(three_, &c, 1), 0) << "the server ends the rank's socket";
  ASSERT_EQ(aborted_.size(), 1U);
  EXPECT_EQ(aborted_[0], std::make_pair(3, 7));
}

}  // namespace
}  // namespace cohort::step
