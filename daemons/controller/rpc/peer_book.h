// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cohort::controller {

/// Who is at the other end of a connection the controller accepted itself
/// and handed to gRPC as a descriptor (whose calls gRPC names "fd:N").
struct Peer {
  enum class Kind : std::uint8_t {
    kLocal,  ///< the local Unix socket: `uid` from SO_PEERCRED
    kTcp,    ///< the TCP port, through the HTTP/2 guard: `host`, and TLS's verified names
  };
  Kind kind = Kind::kLocal;
  std::uint32_t uid = 0;
  std::string host;                            ///< the client's address (kTcp)
  std::vector<std::string> certificate_names;  ///< DNS names of a verified client certificate
};

/// The peers of the connections handed to gRPC, by descriptor. An entry is
/// written before its descriptor is handed on and overwritten when the
/// number is reused, which the kernel does only once gRPC closed it, after
/// the last call on it. Any thread.
class PeerBook {
 public:
  void Put(int fd, Peer peer);
  /// The peer of a call whose gRPC peer string is `grpc_peer`; nullopt
  /// for one that is not "fd:N" of an entry.
  [[nodiscard]] std::optional<Peer> Find(std::string_view grpc_peer) const;

 private:
  mutable std::mutex mutex_;  ///< guards only the table below
  std::unordered_map<int, Peer> peers_;
};

}  // namespace cohort::controller
