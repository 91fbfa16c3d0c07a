// SPDX-License-Identifier: Apache-2.0
// The CLI's HTTP/2 client where no controller answers as one should: the
// targets it takes, a server that never answers, one that hangs up. (Calls
// that succeed are covered by every integration test, against the real
// controller.)
#include "unary_channel.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <google/protobuf/empty.pb.h>

namespace cohort::cli {
namespace {

using std::chrono::milliseconds;

TEST(UnaryChannelTest, TakesSocketsAndNumericAddressesButNotHostNames) {
  EXPECT_NE(UnaryChannel::ForTarget("unix:/var/lib/cohort/cohort.sock"), nullptr);
  EXPECT_NE(UnaryChannel::ForTarget("unix:///var/lib/cohort/cohort.sock"), nullptr);
  EXPECT_NE(UnaryChannel::ForTarget("unix:relative.sock"), nullptr);
  EXPECT_NE(UnaryChannel::ForTarget("10.0.0.1:6820"), nullptr);
  EXPECT_NE(UnaryChannel::ForTarget("[::1]:6820"), nullptr);
  // Names need a resolver: gRPC's stack takes them.
  EXPECT_EQ(UnaryChannel::ForTarget("localhost:6820"), nullptr);
  EXPECT_EQ(UnaryChannel::ForTarget("ctl01.cluster:6820"), nullptr);
  EXPECT_EQ(UnaryChannel::ForTarget("10.0.0.1:0"), nullptr);
  EXPECT_EQ(UnaryChannel::ForTarget("unix:/" + std::string(200, 'x')), nullptr);
}

// A Unix socket in a folder of its own, listening; removed at the end.
class Listener {
 public:
  Listener() {
    char folder[] = "/tmp/cohort-unary.XXXXXX";
    folder_ = ::mkdtemp(folder);
    path_ = folder_ + "/s.sock";
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path_.c_str(), path_.size() + 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
  }
  ~Listener() {
    ::close(fd_);
    std::filesystem::remove_all(folder_);
  }
  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] std::string Target() const { return "unix:" + path_; }

 private:
  std::string folder_;
  std::string path_;
  int fd_ = -1;
};

// A call of any method: none of these servers answers it as gRPC would.
absl::Status CallSubmit(UnaryChannel& channel, milliseconds within) {
  const google::protobuf::Empty request;
  google::protobuf::Empty response;
  return channel.Call("/cohort.v1.Controller/SubmitJob", request, response, {},
                      std::chrono::system_clock::now() + within);
}

TEST(UnaryChannelTest, AServerThatNeverAnswersMeetsTheDeadline) {
  Listener listener;  // connections wait in its backlog, never read
  std::unique_ptr<UnaryChannel> channel = UnaryChannel::ForTarget(listener.Target());
  ASSERT_NE(channel, nullptr);
  const absl::Status status = CallSubmit(*channel, milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

TEST(UnaryChannelTest, AServerThatHangsUpLeavesTheCallUnavailable) {
  Listener listener;
  std::thread server([&] {
    const int connection = ::accept(listener.fd(), nullptr, nullptr);
    char buffer[256];
    (void)::read(connection, buffer, sizeof(buffer));  // the preface, then gone
    ::close(connection);
  });
  std::unique_ptr<UnaryChannel> channel = UnaryChannel::ForTarget(listener.Target());
  const absl::Status status = CallSubmit(*channel, milliseconds(5000));
  server.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
}

TEST(UnaryChannelTest, NothingListeningIsUnavailableAndSaysWhere) {
  std::unique_ptr<UnaryChannel> channel = UnaryChannel::ForTarget("unix:/nonexistent/cohort.sock");
  const absl::Status status = CallSubmit(*channel, milliseconds(1000));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(status.message()).find("connect to unix:/nonexistent/cohort.sock"),
            std::string::npos)
      << status;
}

TEST(UnaryChannelTest, AServerThatIsNotHttp2IsAProtocolError) {
  Listener listener;
  std::thread server([&] {
    const int connection = ::accept(listener.fd(), nullptr, nullptr);
    char buffer[256];
    (void)::read(connection, buffer, sizeof(buffer));
    // A SETTINGS frame whose length is not a multiple of six.
    const char frame[] = {0, 0, 5, 4, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5};
    (void)::write(connection, frame, sizeof(frame));
    while (::read(connection, buffer, sizeof(buffer)) > 0) {
    }  // all the client sends, until it closes
    ::close(connection);
  });
  std::unique_ptr<UnaryChannel> channel = UnaryChannel::ForTarget(listener.Target());
  const absl::Status status = CallSubmit(*channel, milliseconds(5000));
  channel.reset();  // closes the connection: the server thread ends
  server.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(std::string(status.message()).find("SETTINGS"), std::string::npos) << status;
}

}  // namespace
}  // namespace cohort::cli
