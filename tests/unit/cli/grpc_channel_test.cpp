// SPDX-License-Identifier: Apache-2.0
// The CLI's HTTP/2 client where no controller answers as one should: the
// targets it takes, a server that never answers, one that hangs up, a
// stream cut anywhere and one cancelled. (Calls that succeed are covered by
// every integration test, against the real controller.)
#include "transport/grpc_channel.h"

#include <netinet/in.h>
#include <poll.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include "cohort/v1/cohort.pb.h"
#include "transport/resolver.h"

namespace cohort::cli {
namespace {

using std::chrono::milliseconds;

TEST(GrpcChannelTest, TakesSocketsAddressesAndHostNames) {
  EXPECT_NE(GrpcChannel::ForTarget("unix:/var/lib/cohort/cohort.sock"), nullptr);
  EXPECT_NE(GrpcChannel::ForTarget("unix:///var/lib/cohort/cohort.sock"), nullptr);
  EXPECT_NE(GrpcChannel::ForTarget("unix:relative.sock"), nullptr);
  EXPECT_NE(GrpcChannel::ForTarget("10.0.0.1:6820"), nullptr);
  EXPECT_NE(GrpcChannel::ForTarget("[::1]:6820"), nullptr);
  EXPECT_NE(GrpcChannel::ForTarget("localhost:6820"), nullptr);
  EXPECT_NE(GrpcChannel::ForTarget("ctl01.cluster:6820"), nullptr);
  EXPECT_EQ(GrpcChannel::ForTarget("10.0.0.1:0"), nullptr);
  EXPECT_EQ(GrpcChannel::ForTarget("ctl01"), nullptr);
  EXPECT_EQ(GrpcChannel::ForTarget("ctl 01:6820"), nullptr);
  EXPECT_EQ(GrpcChannel::ForTarget("[::1:6820"), nullptr);
  EXPECT_EQ(GrpcChannel::ForTarget("unix:/" + std::string(200, 'x')), nullptr);
}

int PortOf(const Endpoint& endpoint) {
  if (endpoint.address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&endpoint.address)->sin_port);
  }
  if (endpoint.address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&endpoint.address)->sin6_port);
  }
  return -1;
}

// /etc/hosts names localhost on every system; nothing here asks DNS.
TEST(GrpcChannelTest, ResolvesNamesFromTheHostsFileAndAddresses) {
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(10);
  absl::StatusOr<std::vector<Endpoint>> local = ResolveHost("localhost", 6820, deadline);
  ASSERT_TRUE(local.ok()) << local.status();
  ASSERT_FALSE(local->empty());
  for (const Endpoint& endpoint : *local) EXPECT_EQ(PortOf(endpoint), 6820);
  absl::StatusOr<std::vector<Endpoint>> address = ResolveHost("127.0.0.1", 7, deadline);
  ASSERT_TRUE(address.ok()) << address.status();
  ASSERT_EQ(address->size(), 1u);
  EXPECT_EQ(address->front().address.ss_family, AF_INET);
  EXPECT_EQ(PortOf(address->front()), 7);
}

// A Unix socket in a folder of its own, listening; removed at the end.
class Listener {
 public:
  Listener() {
    char folder[] = "/tmp/cohort-grpc.XXXXXX";
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
absl::Status CallSubmit(GrpcChannel& channel, milliseconds within) {
  const v1::GetJobRequest request;
  v1::GetJobResponse response;
  return channel.Call("/cohort.v1.Controller/SubmitJob", request, response, {},
                      std::chrono::system_clock::now() + within);
}

TEST(GrpcChannelTest, AServerThatNeverAnswersMeetsTheDeadline) {
  Listener listener;  // connections wait in its backlog, never read
  std::unique_ptr<GrpcChannel> channel = GrpcChannel::ForTarget(listener.Target());
  ASSERT_NE(channel, nullptr);
  const absl::Status status = CallSubmit(*channel, milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

// A TCP listener whose accept queue is full: the kernel drops each further
// handshake's SYN, as a host cut off from the network does.
TEST(GrpcChannelTest, ALimitedConnectToAHostThatDoesNotAnswerIsUnavailableAndUnsent) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int queued = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(queued, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string target = fmt::format("127.0.0.1:{}", ntohs(address.sin_port));

  std::unique_ptr<GrpcChannel> limited = GrpcChannel::ForTarget(target);
  ASSERT_NE(limited, nullptr);
  limited->LimitConnect(milliseconds(100));
  absl::Status status = CallSubmit(*limited, milliseconds(30'000));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(NeverSent(status)) << status;
  EXPECT_NE(std::string(status.message()).find("no answer within 100 ms"), std::string::npos)
      << status;
  // Without a limit, the call's deadline is the connection's.
  std::unique_ptr<GrpcChannel> unlimited = GrpcChannel::ForTarget(target);
  status = CallSubmit(*unlimited, milliseconds(100));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  ::close(queued);
  ::close(listener);
}

TEST(GrpcChannelTest, AServerThatHangsUpLeavesTheCallUnavailable) {
  Listener listener;
  std::thread server([&] {
    const int connection = ::accept(listener.fd(), nullptr, nullptr);
    char buffer[256];
    (void)::read(connection, buffer, sizeof(buffer));  // the preface, then gone
    ::close(connection);
  });
  std::unique_ptr<GrpcChannel> channel = GrpcChannel::ForTarget(listener.Target());
  const absl::Status status = CallSubmit(*channel, milliseconds(5000));
  server.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
}

TEST(GrpcChannelTest, NothingListeningIsUnavailableAndSaysWhere) {
  std::unique_ptr<GrpcChannel> channel = GrpcChannel::ForTarget("unix:/nonexistent/cohort.sock");
  const absl::Status status = CallSubmit(*channel, milliseconds(1000));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(status.message()).find("connect to unix:/nonexistent/cohort.sock"),
            std::string::npos)
      << status;
}

TEST(GrpcChannelTest, AServerThatIsNotHttp2IsAProtocolError) {
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
  std::unique_ptr<GrpcChannel> channel = GrpcChannel::ForTarget(listener.Target());
  const absl::Status status = CallSubmit(*channel, milliseconds(5000));
  channel.reset();  // closes the connection: the server thread ends
  server.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(std::string(status.message()).find("SETTINGS"), std::string::npos) << status;
}

// Header blocks as a server's HPACK encoder (nghttp2's) writes them, one
// after another on one connection.
class HeaderEncoder {
 public:
  HeaderEncoder() { nghttp2_hd_deflate_new(&deflater_, 4096); }
  ~HeaderEncoder() { nghttp2_hd_deflate_del(deflater_); }
  HeaderEncoder(const HeaderEncoder&) = delete;
  HeaderEncoder& operator=(const HeaderEncoder&) = delete;

  std::string Block(std::vector<std::pair<std::string, std::string>> fields) {
    std::vector<nghttp2_nv> nva;
    for (auto& [name, value] : fields) {
      nva.push_back({reinterpret_cast<std::uint8_t*>(name.data()),
                     reinterpret_cast<std::uint8_t*>(value.data()), name.size(), value.size(),
                     NGHTTP2_NV_FLAG_NONE});
    }
    std::string out(nghttp2_hd_deflate_bound(deflater_, nva.data(), nva.size()), '\0');
    const ssize_t size = nghttp2_hd_deflate_hd(
        deflater_, reinterpret_cast<std::uint8_t*>(out.data()), out.size(), nva.data(), nva.size());
    out.resize(static_cast<std::size_t>(std::max<ssize_t>(size, 0)));
    return out;
  }

 private:
  nghttp2_hd_deflater* deflater_ = nullptr;
};

// An HTTP/2 frame as a server writes it.
std::string Frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                  std::string_view payload) {
  std::string out;
  for (const int shift : {16, 8, 0}) out.push_back(static_cast<char>(payload.size() >> shift));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  for (const int shift : {24, 16, 8, 0}) out.push_back(static_cast<char>(stream >> shift));
  out.append(payload);
  return out;
}

std::string Message(const v1::JobEvent& event) {
  const std::string body = event.SerializeAsString();
  std::string out(1, '\0');
  for (const int shift : {24, 16, 8, 0}) out.push_back(static_cast<char>(body.size() >> shift));
  return out + body;
}

TEST(GrpcChannelTest, AStreamHandsOverEachMessageWhereverTheFramesCutIt) {
  Listener listener;
  std::thread server([&] {
    const int connection = ::accept(listener.fd(), nullptr, nullptr);
    char buffer[4096];
    (void)::read(connection, buffer, sizeof(buffer));  // preface, settings, the call
    HeaderEncoder encoder;
    const std::string headers =
        encoder.Block({{":status", "200"}, {"content-type", "application/grpc"}});
    const std::string trailers = encoder.Block({{"grpc-status", "0"}});
    v1::JobEvent first;
    first.mutable_job()->set_id(7);
    v1::JobEvent second;
    second.mutable_job()->set_id(8);
    second.mutable_job()->set_nodes(std::string(300, 'n'));
    const std::string messages = Message(first) + Message(second);
    // Cut in the first message's prefix, and inside the second one.
    const std::string out = Frame(4, 0, 0, "") + Frame(1, 4, 1, headers) +
                            Frame(0, 0, 1, messages.substr(0, 3)) +
                            Frame(0, 0, 1, messages.substr(3, 20)) +
                            Frame(0, 0, 1, messages.substr(23)) + Frame(1, 5, 1, trailers);
    (void)::write(connection, out.data(), out.size());
    while (::read(connection, buffer, sizeof(buffer)) > 0) {
    }
    ::close(connection);
  });
  std::unique_ptr<GrpcChannel> channel = GrpcChannel::ForTarget(listener.Target());
  std::vector<std::int64_t> ids;
  std::size_t name_length = 0;
  const CallCanceller canceller;
  const absl::Status status = channel->ServerStream(
      "/cohort.v1.Controller/WatchJob", v1::WatchJobRequest(), {},
      [&](std::string_view message) {
        v1::JobEvent event;
        EXPECT_TRUE(event.ParseFromArray(message.data(), static_cast<int>(message.size())));
        ids.push_back(event.job().id());
        name_length += event.job().nodes().size();
        return true;
      },
      canceller);
  channel.reset();
  server.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(ids, (std::vector<std::int64_t>{7, 8}));
  EXPECT_EQ(name_length, 300u);
}

TEST(GrpcChannelTest, AnAnswerBeforeTheWholeRequestLeavesTheConnection) {
  // The server refuses each call from its headers, before the 1 MiB
  // request is in: the stream stays half-open on the client's side, so the
  // next call goes on a connection of its own.
  Listener listener;
  int connections = 0;
  std::thread server([&] {
    HeaderEncoder encoder;
    const std::string refusal =
        encoder.Block({{":status", "200"}, {"grpc-status", "3"}, {"grpc-message", "too%20big"}});
    std::vector<int> open;
    for (int call = 0; call < 2; ++call) {
      // A client that keeps its first connection never dials again.
      pollfd waiting{.fd = listener.fd(), .events = POLLIN, .revents = 0};
      if (::poll(&waiting, 1, 6000) != 1) break;
      const int connection = ::accept(listener.fd(), nullptr, nullptr);
      ++connections;
      char buffer[4096];
      (void)::read(connection, buffer, sizeof(buffer));  // the preface, the headers
      const std::string out = Frame(4, 0, 0, "") + Frame(1, 5, 1, refusal);
      (void)::write(connection, out.data(), out.size());
      open.push_back(connection);
    }
    for (const int connection : open) ::close(connection);
  });
  std::unique_ptr<GrpcChannel> channel = GrpcChannel::ForTarget(listener.Target());
  v1::SubmitJobRequest request;
  request.mutable_spec()->set_script(std::string(1 << 20, '#'));
  v1::SubmitJobResponse response;
  for (int call = 0; call < 2; ++call) {
    const absl::Status status =
        channel->Call("/cohort.v1.Controller/SubmitJob", request, response, {},
                      std::chrono::system_clock::now() + milliseconds(5000));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(status.message(), "too big");
  }
  channel.reset();
  server.join();
  EXPECT_EQ(connections, 2);
}

TEST(GrpcChannelTest, AStreamCancelledFromAnotherThreadEndsCancelled) {
  Listener listener;
  // The cancel comes once the server has read the start of the request, so
  // that it lands on a call in flight, whatever the threads' timing.
  std::promise<void> request_read;
  std::future<void> request_seen = request_read.get_future();
  std::thread server([&] {
    const int connection = ::accept(listener.fd(), nullptr, nullptr);
    char buffer[256];
    bool first = true;
    while (::read(connection, buffer, sizeof(buffer)) > 0) {
      if (std::exchange(first, false)) request_read.set_value();
    }  // never answers; reads until the client closes
    ::close(connection);
  });
  std::unique_ptr<GrpcChannel> channel = GrpcChannel::ForTarget(listener.Target());
  CallCanceller canceller;
  std::thread cancel([&] {
    request_seen.wait();
    canceller.Cancel();
  });
  // No deadline: without the cancel this call would never return.
  const absl::Status status = channel->ServerStream(
      "/cohort.v1.Controller/WatchJob", v1::WatchJobRequest(), {},
      [](std::string_view) { return true; }, canceller);
  cancel.join();
  channel.reset();
  server.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
}

}  // namespace
}  // namespace cohort::cli
