// SPDX-License-Identifier: Apache-2.0
#include "tls_session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <memory>
#include <string>
#include <thread>

namespace cohort::tls {
namespace {

constexpr char kKey[] = "00112233445566778899aabbccddeeff";
constexpr char kOtherKey[] = "ffeeddccbbaa99887766554433221100";

// A step's stream with a wiretap: the client's socket pair and the
// server's, joined by Pump, which copies what each end sends to the other
// and keeps every byte that crossed.
class Wire {
 public:
  Wire() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, client_.data()), 0);
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, server_.data()), 0);
  }
  ~Wire() {
    for (const int fd : {client_[0], client_[1], server_[0], server_[1]}) ::close(fd);
  }
  Wire(const Wire&) = delete;
  Wire& operator=(const Wire&) = delete;

  [[nodiscard]] int ClientEnd() const { return client_[0]; }
  [[nodiscard]] int ServerEnd() const { return server_[0]; }
  [[nodiscard]] const std::string& Seen() const { return seen_; }

  void Pump() {
    Copy(client_[1], server_[1]);
    Copy(server_[1], client_[1]);
  }
  /// Sends raw bytes to the server, as a peer without TLS would.
  void SendToServer(std::string_view bytes) const {
    ASSERT_EQ(::write(server_[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }

 private:
  void Copy(int from, int to) {
    char buffer[4096];
    ssize_t got = 0;
    while ((got = ::read(from, buffer, sizeof buffer)) > 0) {
      seen_.append(buffer, static_cast<std::size_t>(got));
      ASSERT_EQ(::write(to, buffer, static_cast<std::size_t>(got)), got);
    }
    if (got == 0) ::shutdown(to, SHUT_WR);  // the end too
  }

  std::array<int, 2> client_{};
  std::array<int, 2> server_{};
  std::string seen_;
};

// Steps both handshakes until both are done, or one fails; true when done.
bool Handshake(Wire& wire, TlsSession& client, TlsSession& server, std::string& error) {
  bool client_done = false;
  bool server_done = false;
  for (int round = 0; round < 50 && !(client_done && server_done); ++round) {
    for (auto [session, done] : {std::pair{&client, &client_done}, {&server, &server_done}}) {
      if (*done) continue;
      const TlsSession::Step step = session->Handshake();
      *done = step.bytes > 0;
      if (!*done && step.wait == 0) {
        error = step.error;
        return false;
      }
    }
    wire.Pump();
  }
  return client_done && server_done;
}

std::string ReadAll(Wire& wire, TlsSession& session) {
  std::string text;
  char buffer[256];
  for (int round = 0; round < 20; ++round) {
    wire.Pump();
    TlsSession::Step step;
    while ((step = session.Read(buffer, sizeof buffer)).bytes > 0) {
      text.append(buffer, static_cast<std::size_t>(step.bytes));
    }
  }
  return text;
}

TEST(TlsSessionTest, AStepsStreamIsEncryptedUnderItsKey) {
  Wire wire;
  auto client = TlsSession::StartPsk(wire.ClientEnd(), TlsSide::kClient, kKey);
  auto server = TlsSession::StartPsk(wire.ServerEnd(), TlsSide::kServer, kKey);
  ASSERT_TRUE(client.ok() && server.ok());
  std::string error;
  ASSERT_TRUE(Handshake(wire, **client, **server, error)) << error;
  const std::string secret = "rank 0 says: HF_TOKEN=hf_abcdefghijklmnop";
  ASSERT_EQ((*client)->Write(secret).bytes, static_cast<ssize_t>(secret.size()));
  EXPECT_EQ(ReadAll(wire, **server), secret);
  ASSERT_EQ((*server)->Write("stdin for rank 0").bytes, 16);
  EXPECT_EQ(ReadAll(wire, **client), "stdin for rank 0");
  EXPECT_EQ(wire.Seen().find("HF_TOKEN"), std::string::npos) << "plaintext crossed the wire";
  EXPECT_EQ(wire.Seen().find("stdin for rank"), std::string::npos);
  EXPECT_EQ(wire.Seen().find(kKey), std::string::npos) << "the key crossed the wire";
}

TEST(TlsSessionTest, WhatWasSentBeforeThePeerLeftIsRead) {
  Wire wire;
  auto client = TlsSession::StartPsk(wire.ClientEnd(), TlsSide::kClient, kKey);
  auto server = TlsSession::StartPsk(wire.ServerEnd(), TlsSide::kServer, kKey);
  ASSERT_TRUE(client.ok() && server.ok());
  std::string error;
  ASSERT_TRUE(Handshake(wire, **client, **server, error)) << error;
  ASSERT_EQ((*client)->Write("output").bytes, 6);
  ASSERT_EQ((*client)->Write("done").bytes, 4);
  ::shutdown(wire.ClientEnd(), SHUT_WR);  // a stepd that ends without close_notify
  wire.Pump();
  wire.Pump();
  std::string text;
  char buffer[256];
  TlsSession::Step step;
  while ((step = (*server)->Read(buffer, sizeof buffer)).bytes > 0) {
    text.append(buffer, static_cast<std::size_t>(step.bytes));
  }
  EXPECT_EQ(text, "outputdone");
  EXPECT_EQ(step.wait, 0) << "the end is seen";
}

TEST(TlsSessionTest, AWriteToAGonePeerFailsWhetherOrNotTheThreadBlocksSigpipe) {
  // Once around each call, then (in a thread of its own) blocked for good:
  // either way the write says the connection broke and nothing dies.
  const auto write_to_gone_peer = [] {
    int pair[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    auto client = TlsSession::StartPsk(pair[0], TlsSide::kClient, kKey);
    EXPECT_TRUE(client.ok());
    ::close(pair[1]);
    const TlsSession::Step step = (*client)->Handshake();
    ::close(pair[0]);
    return step;
  };
  EXPECT_FALSE(write_to_gone_peer().error.empty());
  bool blocked_there = false;
  TlsSession::Step there;
  std::thread guard([&] {
    TlsSession::BlockSigpipeInThisThread();
    there = write_to_gone_peer();
    sigset_t mask;
    pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    blocked_there = sigismember(&mask, SIGPIPE) == 1;
  });
  guard.join();
  EXPECT_FALSE(there.error.empty());
  EXPECT_TRUE(blocked_there);
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  EXPECT_FALSE(sigismember(&mask, SIGPIPE)) << "only the thread that asked blocks it";
}

TEST(TlsSessionTest, APeerWithoutTheKeyIsRefused) {
  Wire wire;
  auto client = TlsSession::StartPsk(wire.ClientEnd(), TlsSide::kClient, kOtherKey);
  auto server = TlsSession::StartPsk(wire.ServerEnd(), TlsSide::kServer, kKey);
  ASSERT_TRUE(client.ok() && server.ok());
  std::string error;
  EXPECT_FALSE(Handshake(wire, **client, **server, error));
  EXPECT_FALSE(error.empty());
}

TEST(TlsSessionTest, APlainPeerIsRefused) {
  Wire wire;
  auto server = TlsSession::StartPsk(wire.ServerEnd(), TlsSide::kServer, kKey);
  ASSERT_TRUE(server.ok());
  // What a stepd without TLS would send first: a Hello frame in clear.
  wire.SendToServer(std::string("\x01\xff\xff\xff\xff\x00\x00\x00\x05hello", 14));
  const TlsSession::Step step = (*server)->Handshake();
  EXPECT_LE(step.bytes, 0);
  EXPECT_EQ(step.wait, 0);
  EXPECT_FALSE(step.error.empty());
}

TEST(TlsSessionTest, MalformedKeysAreRefused) {
  for (const char* key : {"", "0011", "zz112233445566778899aabbccddeeff", "0"}) {
    const auto session = TlsSession::StartPsk(-1, TlsSide::kClient, key);
    EXPECT_FALSE(session.ok()) << key;
  }
}

}  // namespace
}  // namespace cohort::tls
