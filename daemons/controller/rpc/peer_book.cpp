// SPDX-License-Identifier: Apache-2.0
#include "rpc/peer_book.h"

#include <charconv>

namespace cohort::controller {

void PeerBook::Put(int fd, Peer peer) {
  const std::lock_guard lock(mutex_);
  peers_[fd] = std::move(peer);
}

std::optional<Peer> PeerBook::Find(std::string_view grpc_peer) const {
  constexpr std::string_view kPrefix = "fd:";
  if (!grpc_peer.starts_with(kPrefix)) return std::nullopt;
  grpc_peer.remove_prefix(kPrefix.size());
  int fd = -1;
  const auto [end, error] =
      std::from_chars(grpc_peer.data(), grpc_peer.data() + grpc_peer.size(), fd);
  if (error != std::errc() || end != grpc_peer.data() + grpc_peer.size()) return std::nullopt;
  const std::lock_guard lock(mutex_);
  const auto it = peers_.find(fd);
  if (it == peers_.end()) return std::nullopt;
  return it->second;
}

}  // namespace cohort::controller
