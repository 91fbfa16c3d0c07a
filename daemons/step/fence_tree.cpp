// SPDX-License-Identifier: Apache-2.0
#include "fence_tree.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <set>

#include "cohort/launch/io_frame.h"
#include "psk_link.h"
#include "tls_session.h"

namespace cohort::step {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kDialWait{10};
// Each level below a node adds this to its fences' timeout, so that the
// node nearest a missing one times out first and names it.
constexpr std::chrono::seconds kLevelGrace{2};
// Fences under way at once: the ranks call them one after another; a peer
// that opens more is not a stepd of the step.
constexpr std::size_t kMaxOpenFences = 64;
// Requests of Ask awaiting their answers at once.
constexpr std::size_t kMaxAsks = 65536;
// Failed fences kept for a part that comes after the failure.
constexpr std::size_t kKeptFailures = 64;
// Nodes a timeout names one by one; the rest are counted.
constexpr std::size_t kNamedMissing = 8;
constexpr std::size_t kReadSize = 64 * 1024;
// How long a stopping tree still writes what it queued for its peers.
constexpr std::chrono::seconds kFlushWait{2};

template <typename T>
bool ParseNumber(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

std::string Encode(io::FrameKind kind, int fence, std::string data) {
  return io::EncodeFrame({.kind = kind, .rank = fence, .data = std::move(data)});
}

}  // namespace

struct FenceTree::Link {
  int fd = -1;
  std::unique_ptr<tls::TlsSession> tls{};
  bool secured = false;
  short wait = 0;
  std::string inbox{};
  std::string outbox{};
  int index = -1;      ///< the node at the other end, once known
  bool asker = false;  ///< dialled by another node to ask this one (Ask)
  bool peer = false;   ///< dialled by this node to ask another
  std::uint64_t serial = 0;
  std::chrono::steady_clock::time_point since{};  ///< accepted at

  void Close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

struct FenceTree::Replies {
  std::mutex mutex;
  bool open = true;  ///< false once the tree has gone
  int wake = -1;
  std::vector<std::tuple<std::uint64_t, int, absl::StatusOr<std::string>>> answered;
};

struct FenceTree::Pending {
  bool own = false;                  ///< this node's part came
  std::set<int> children;            ///< the children whose subtree's parts came
  std::map<int, std::string> parts;  ///< by node index
  Clock::time_point began;
  bool sent_up = false;  ///< the subtree's parts, or its failure, went to the parent
};

FenceTree::FenceTree(Options options) : options_(std::move(options)) {
  const int count = static_cast<int>(options_.nodes.size());
  for (int c = options_.node_index * options_.width + 1;
       c <= options_.node_index * options_.width + options_.width && c < count; ++c) {
    children_.push_back(c);
  }
}

absl::StatusOr<std::unique_ptr<FenceTree>> FenceTree::Listen(const std::string& host,
                                                             Options options) {
  if (options.nodes.empty() || options.tasks.size() != options.nodes.size() ||
      options.node_index < 0 || options.node_index >= static_cast<int>(options.nodes.size()) ||
      options.width < 2 || !options.done) {
    return absl::InvalidArgumentError(fmt::format(
        "fence tree: {} nodes, {} task counts, node index {}, width {}: not a step's layout",
        options.nodes.size(), options.tasks.size(), options.node_index, options.width));
  }
  std::unique_ptr<FenceTree> tree(new FenceTree(std::move(options)));
  std::string bare = host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(bare.c_str(), "0", &hints, &found); error != 0) {
    return absl::InvalidArgumentError(
        fmt::format("fence tree: cannot listen on {}: {}", host, ::gai_strerror(error)));
  }
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const bool listening =
      fd >= 0 && ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0;
  const int error = errno;
  ::freeaddrinfo(found);
  if (!listening) {
    if (fd >= 0) ::close(fd);
    return absl::Status(
        absl::ErrnoToStatusCode(error),
        fmt::format("fence tree: cannot listen on {}: {}", host, std::strerror(error)));
  }
  tree->listener_ = fd;
  sockaddr_storage bound{};
  socklen_t size = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &size);
  const int port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  tree->address_ = fmt::format("{}:{}", host, port);
  if (::pipe2(tree->wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        fmt::format("fence tree: cannot make a pipe: {}", std::strerror(errno)));
  }
  tree->replies_ = std::make_shared<Replies>();
  tree->replies_->wake = tree->wake_[1];
  tree->thread_ = std::thread([t = tree.get()] { t->Serve(); });
  return tree;
}

FenceTree::~FenceTree() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  if (replies_) {
    const std::lock_guard lock(replies_->mutex);
    replies_->open = false;
  }
  if (wake_[1] >= 0) (void)::write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  if (parent_) parent_->Close();
  for (const auto& link : links_) link->Close();
  for (const auto& [node, link] : peers_) link->Close();
  for (const int fd : {listener_, wake_[0], wake_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void FenceTree::Join(absl::StatusOr<std::vector<std::string>> addresses) {
  {
    const std::lock_guard lock(mutex_);
    addresses_ = std::move(addresses);
  }
  (void)::write(wake_[1], "x", 1);
}

void FenceTree::Contribute(int fence, std::string part) {
  {
    const std::lock_guard lock(mutex_);
    contributed_.emplace_back(fence, std::move(part));
  }
  (void)::write(wake_[1], "x", 1);
}

void FenceTree::Ask(int node, std::string request, Reply done) {
  {
    const std::lock_guard lock(mutex_);
    asking_.emplace_back(node, std::move(request), std::move(done));
  }
  (void)::write(wake_[1], "x", 1);
}

std::string FenceTree::EncodeParts(const std::map<int, std::string>& parts) {
  std::string out;
  for (const auto& [index, data] : parts) {
    out += fmt::format("{} {}\n", index, data.size());
    out += data;
  }
  return out;
}

absl::StatusOr<std::map<int, std::string>> FenceTree::ParseParts(
    std::string_view text, const std::function<bool(int)>& allowed) {
  std::map<int, std::string> parts;
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    const std::string_view head = text.substr(0, newline);
    const std::size_t space = head.find(' ');
    int index = 0;
    std::size_t length = 0;
    if (newline == std::string_view::npos || space == std::string_view::npos ||
        !ParseNumber(head.substr(0, space), index) ||
        !ParseNumber(head.substr(space + 1), length) || length > text.size() - newline - 1) {
      return absl::InvalidArgumentError(
          "fence tree: a subtree's parts are not \"INDEX LENGTH\\n\" and the part");
    }
    if (!allowed(index) || parts.contains(index)) {
      return absl::InvalidArgumentError(
          fmt::format("fence tree: a part of node {}, which is not the sender's", index));
    }
    parts.emplace(index, std::string(text.substr(newline + 1, length)));
    text.remove_prefix(newline + 1 + length);
  }
  return parts;
}

bool FenceTree::InSubtree(int root, int node) const {
  while (node > root) node = (node - 1) / options_.width;
  return node == root;
}

int FenceTree::SubtreeSize(int root) const {
  int size = 0;
  for (int n = root; n < static_cast<int>(options_.nodes.size()); ++n) size += InSubtree(root, n);
  return size;
}

int FenceTree::Height() const {
  const long count = static_cast<long>(options_.nodes.size());
  int height = 0;
  for (long first = options_.node_index;;) {
    first = first * options_.width + 1;
    if (first >= count) return height;
    ++height;
  }
}

std::string FenceTree::Missing(const Pending& pending) const {
  std::vector<int> missing;
  if (!pending.own) missing.push_back(options_.node_index);
  for (const int child : children_) {
    if (pending.children.contains(child)) continue;
    for (int n = child; n < static_cast<int>(options_.nodes.size()); ++n) {
      if (InSubtree(child, n)) missing.push_back(n);
    }
  }
  std::vector<std::string> named;
  for (const int n : missing) {
    if (named.size() == kNamedMissing) {
      named.push_back(fmt::format("{} more nodes", missing.size() - kNamedMissing));
      break;
    }
    int first = 0;
    for (int i = 0; i < n; ++i) first += options_.tasks[static_cast<std::size_t>(i)];
    const int ranks = options_.tasks[static_cast<std::size_t>(n)];
    const std::string& name = options_.nodes[static_cast<std::size_t>(n)];
    named.push_back(ranks == 1 ? fmt::format("{} (rank {})", name, first)
                               : fmt::format("{} (ranks {}-{})", name, first, first + ranks - 1));
  }
  return fmt::format("{}", fmt::join(named, ", "));
}

void FenceTree::Serve() {
  tls::TlsSession::BlockSigpipeInThisThread();
  char buffer[kReadSize];
  while (true) {
    {
      const std::lock_guard lock(mutex_);
      if (stop_) break;
    }
    Take();
    std::vector<Link*> polled;
    if (parent_) polled.push_back(parent_.get());
    for (const auto& link : links_) polled.push_back(link.get());
    for (const auto& [node, link] : peers_) polled.push_back(link.get());
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
    for (Link* link : polled) {
      const bool write = (link->secured && !link->outbox.empty()) || link->wait == POLLOUT;
      fds.push_back({link->fd, static_cast<short>(POLLIN | (write ? POLLOUT : 0)), 0});
    }
    if (::poll(fds.data(), fds.size(), 250) < 0 && errno != EINTR) return;
    if ((fds[0].revents & POLLIN) != 0) {
      while (::read(wake_[0], buffer, sizeof buffer) > 0) {
      }
    }
    if ((fds[1].revents & POLLIN) != 0) Accept();
    for (std::size_t i = 0; i < polled.size(); ++i) {
      if (fds[i + 2].revents != 0) Step(*polled[i]);
    }
    // Links closed: a known peer's loss fails what waits on it.
    std::vector<std::string> lost;
    if (parent_ && parent_->fd < 0) {
      lost.push_back(options_.nodes[static_cast<std::size_t>(parent_->index)]);
      parent_.reset();
    }
    for (const auto& link : links_) {
      if (link->fd < 0 && link->index >= 0 && !link->asker) {
        lost.push_back(options_.nodes[static_cast<std::size_t>(link->index)]);
      }
    }
    std::erase_if(links_, [](const auto& link) { return link->fd < 0; });
    // A link dialled to ask that broke: its questions get no answer.
    for (auto it = peers_.begin(); it != peers_.end();) {
      if (it->second->fd >= 0) {
        ++it;
        continue;
      }
      const int node = it->first;
      const std::string why =
          it->second->secured
              ? fmt::format("the link to {}'s cohort-stepd broke before it answered",
                            options_.nodes[static_cast<std::size_t>(node)])
              : fmt::format("cannot reach {}'s cohort-stepd at {}",
                            options_.nodes[static_cast<std::size_t>(node)],
                            known_[static_cast<std::size_t>(node)]);
      it = peers_.erase(it);
      for (auto ask = asked_.begin(); ask != asked_.end();) {
        if (ask->second.node != node) {
          ++ask;
          continue;
        }
        Reply done = std::move(ask->second.done);
        ask = asked_.erase(ask);
        done(absl::UnavailableError(why));
      }
    }
    for (const std::string& node : lost) {
      Broke(fmt::format("the step's fence tree lost its link to {}'s cohort-stepd", node));
    }
    Expire();
  }
  // What is still queued (a fence's end for the nodes below, sent as this
  // node's ranks finished) leaves before the links close.
  const Clock::time_point deadline = Clock::now() + kFlushWait;
  while (Clock::now() < deadline) {
    std::vector<pollfd> fds;
    std::vector<Link*> waiting;
    if (parent_) waiting.push_back(parent_.get());
    for (const auto& link : links_) waiting.push_back(link.get());
    for (const auto& [node, link] : peers_) waiting.push_back(link.get());
    std::erase_if(waiting, [](const Link* link) {
      return link->fd < 0 || !link->secured || link->outbox.empty();
    });
    if (waiting.empty()) return;
    for (const Link* link : waiting) fds.push_back({link->fd, POLLOUT, 0});
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(left, 0))) <= 0) return;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
        waiting[i]->outbox.clear();
      } else if (fds[i].revents != 0) {
        Send(*waiting[i], "");
      }
    }
  }
}

// Queues `bytes` on the link and writes what its socket takes now, so that
// a fence's parts leave at once rather than at the next poll.
void FenceTree::Send(Link& link, std::string_view bytes) {
  link.outbox += bytes;
  while (link.secured && link.fd >= 0 && !link.outbox.empty()) {
    const tls::TlsSession::Step sent = link.tls->Write(link.outbox);
    if (sent.bytes <= 0) {
      // Full (the poll waits for room), or closed (the next read says so).
      if (sent.wait != 0) link.wait = sent.wait;
      return;
    }
    link.outbox.erase(0, static_cast<std::size_t>(sent.bytes));
  }
}

// What other threads handed over: the addresses, this node's parts.
void FenceTree::Take() {
  std::optional<absl::StatusOr<std::vector<std::string>>> addresses;
  std::vector<std::pair<int, std::string>> contributed;
  std::vector<std::tuple<int, std::string, Reply>> asking;
  std::vector<std::tuple<std::uint64_t, int, absl::StatusOr<std::string>>> answered;
  {
    const std::lock_guard lock(mutex_);
    addresses.swap(addresses_);
    contributed.swap(contributed_);
    asking.swap(asking_);
  }
  {
    const std::lock_guard lock(replies_->mutex);
    answered.swap(replies_->answered);
  }
  if (addresses) {
    const int parent = (options_.node_index - 1) / options_.width;
    if (!addresses->ok()) {
      Broke(std::string(addresses->status().message()));
    } else if (addresses->value().size() != options_.nodes.size()) {
      Broke(fmt::format("the step's fence tree: {} addresses for {} nodes",
                        addresses->value().size(), options_.nodes.size()));
    } else {
      known_ = addresses->value();
      if (options_.node_index > 0) {
        absl::StatusOr<std::unique_ptr<Link>> link = Dial(parent);
        if (!link.ok()) {
          Broke(fmt::format("{} for the step's fences", std::string(link.status().message())));
        } else {
          parent_ = *std::move(link);
          Send(*parent_, Encode(io::FrameKind::kHello, options_.node_index, ""));
          std::vector<int> open;
          for (const auto& [number, pending] : fences_) open.push_back(number);
          for (const int number : open) Advance(number);
        }
      }
    }
    // Questions asked before the addresses came go now, or fail as the
    // fences do.
    for (auto& [node, request, done] : unsent_) {
      if (known_.empty()) {
        done(broken_.ok() ? absl::UnavailableError("the step's addresses never came") : broken_);
      } else {
        SendAsk(node, std::move(request), std::move(done));
      }
    }
    unsent_.clear();
  }
  for (auto& [node, request, done] : asking) {
    if (known_.empty() && broken_.ok()) {
      unsent_.emplace_back(node, std::move(request), std::move(done));
    } else if (known_.empty()) {
      done(broken_);
    } else {
      SendAsk(node, std::move(request), std::move(done));
    }
  }
  for (auto& [serial, number, answer] : answered) {
    for (const auto& link : links_) {
      if (link->serial != serial || link->fd < 0) continue;
      Send(*link, Encode(io::FrameKind::kAnswer, number, io::EncodeFenceDone(answer)));
    }
  }
  for (auto& [fence, part] : contributed) {
    if (const auto failed = failed_.find(fence); failed != failed_.end()) {
      options_.done(fence, failed->second);
      continue;
    }
    if (fence < 0 || (!fences_.contains(fence) && fences_.size() >= kMaxOpenFences)) {
      options_.done(fence, absl::ResourceExhaustedError(
                               fmt::format("more than {} fences at once", kMaxOpenFences)));
      continue;
    }
    Pending& pending = fences_[fence];
    if (pending.own) continue;
    if (pending.parts.empty() && pending.children.empty()) pending.began = Clock::now();
    pending.own = true;
    pending.parts.emplace(options_.node_index, std::move(part));
    if (!broken_.ok()) {
      Fail(fence, broken_);
    } else {
      Advance(fence);
    }
  }
}

absl::StatusOr<std::unique_ptr<FenceTree::Link>> FenceTree::Dial(int node) {
  const std::string& address = known_[static_cast<std::size_t>(node)];
  const std::string& name = options_.nodes[static_cast<std::size_t>(node)];
  absl::StatusOr<int> fd = DialTcp(address, kDialWait);
  absl::StatusOr<std::unique_ptr<tls::TlsSession>> session =
      fd.ok() ? SecureWithKey(*fd, options_.key, kDialWait)
              : absl::StatusOr<std::unique_ptr<tls::TlsSession>>(fd.status());
  if (!session.ok()) {
    if (fd.ok()) ::close(*fd);
    return absl::UnavailableError(fmt::format("cannot reach {}'s cohort-stepd at {}: {}", name,
                                              address, std::string(session.status().message())));
  }
  return std::make_unique<Link>(Link{.fd = *fd,
                                     .tls = *std::move(session),
                                     .secured = true,
                                     .index = node,
                                     .serial = next_serial_++});
}

// Sends a question to `node`'s stepd on the link dialled to it, dialling
// it first when there is none.
void FenceTree::SendAsk(int node, std::string request, Reply done) {
  if (node < 0 || node >= static_cast<int>(options_.nodes.size()) || node == options_.node_index) {
    done(absl::InvalidArgumentError(fmt::format("no other node {} in the step", node)));
    return;
  }
  if (asked_.size() >= kMaxAsks) {
    done(absl::ResourceExhaustedError(fmt::format("more than {} questions at once", kMaxAsks)));
    return;
  }
  auto peer = peers_.find(node);
  if (peer == peers_.end()) {
    // Not waited for here: the node asked may be dialling this one at
    // the same time, and each must go on serving its listener.
    const std::string& address = known_[static_cast<std::size_t>(node)];
    absl::StatusOr<int> fd = BeginTcp(address);
    absl::StatusOr<std::unique_ptr<tls::TlsSession>> session =
        fd.ok() ? tls::TlsSession::StartPsk(*fd, tls::TlsSide::kClient, options_.key)
                : absl::StatusOr<std::unique_ptr<tls::TlsSession>>(fd.status());
    if (!session.ok()) {
      if (fd.ok()) ::close(*fd);
      done(absl::UnavailableError(fmt::format("cannot reach {}'s cohort-stepd at {}: {}",
                                              options_.nodes[static_cast<std::size_t>(node)],
                                              address, std::string(session.status().message()))));
      return;
    }
    auto link = std::make_unique<Link>(Link{.fd = *fd,
                                            .tls = *std::move(session),
                                            .wait = POLLOUT,  // connected: the handshake begins
                                            .index = node,
                                            .peer = true,
                                            .serial = next_serial_++});
    peer = peers_.emplace(node, std::move(link)).first;
    Send(*peer->second, Encode(io::FrameKind::kHello, options_.node_index, "ask"));
  }
  const int number = next_ask_++;
  asked_.emplace(number, Asked{.node = node, .done = std::move(done), .began = Clock::now()});
  Send(*peer->second, Encode(io::FrameKind::kAsk, number, std::move(request)));
}

// What a link of questions carries: asked of this node (an asker's), or
// answers to this node's (a peer's).
void FenceTree::HeardAsk(Link& link, int kind, int number, std::string data) {
  if (link.asker && kind == static_cast<int>(io::FrameKind::kAsk)) {
    if (!options_.answer) {
      Send(link, Encode(io::FrameKind::kAnswer, number,
                        io::EncodeFenceDone(absl::StatusOr<std::string>(
                            absl::FailedPreconditionError("this stepd answers no questions")))));
      return;
    }
    std::weak_ptr<Replies> replies = replies_;
    options_.answer(link.index, std::move(data),
                    [replies, serial = link.serial, number](absl::StatusOr<std::string> answer) {
                      const std::shared_ptr<Replies> to = replies.lock();
                      if (!to) return;
                      const std::lock_guard lock(to->mutex);
                      if (!to->open) return;
                      to->answered.emplace_back(serial, number, std::move(answer));
                      (void)::write(to->wake, "x", 1);
                    });
    return;
  }
  const auto asked = asked_.find(number);
  if (!link.peer || kind != static_cast<int>(io::FrameKind::kAnswer) || asked == asked_.end() ||
      asked->second.node != link.index) {
    link.Close();
    return;
  }
  absl::StatusOr<std::string> answer = io::ParseFenceDone(data);
  if (absl::IsInvalidArgument(answer.status())) {
    link.Close();
    return;
  }
  Reply done = std::move(asked->second.done);
  asked_.erase(asked);
  done(std::move(answer));
}

void FenceTree::Accept() {
  while (true) {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    absl::StatusOr<std::unique_ptr<tls::TlsSession>> session =
        tls::TlsSession::StartPsk(fd, tls::TlsSide::kServer, options_.key);
    if (!session.ok()) {
      ::close(fd);
      continue;
    }
    // A node hears its children and the nodes that ask it; anyone else who
    // dials is not heard past the handshake. When the links are at their
    // bound, the oldest that has not said who it is makes room, so that
    // strangers holding connections open cannot shut the step's stepds out.
    if (links_.size() >= children_.size() + options_.nodes.size() + kMaxOpenFences) {
      Link* stranger = nullptr;
      for (const auto& link : links_) {
        if (link->index < 0 && link->fd >= 0 &&
            (stranger == nullptr || link->since < stranger->since)) {
          stranger = link.get();
        }
      }
      if (stranger == nullptr) {
        ::close(fd);
        continue;
      }
      stranger->Close();
    }
    links_.push_back(std::make_unique<Link>(Link{
        .fd = fd, .tls = *std::move(session), .serial = next_serial_++, .since = Clock::now()}));
  }
}

void FenceTree::Step(Link& link) {
  bool close = false;
  link.wait = 0;
  if (!link.secured) {
    const tls::TlsSession::Step step = link.tls->Handshake();
    link.secured = step.bytes > 0;
    link.wait = step.wait;
    close = !link.secured && step.wait == 0;
  }
  if (link.secured && !close && !link.outbox.empty()) {
    const tls::TlsSession::Step sent = link.tls->Write(link.outbox);
    if (sent.bytes > 0) link.outbox.erase(0, static_cast<std::size_t>(sent.bytes));
    if (sent.wait != 0) link.wait = sent.wait;
    close = sent.bytes <= 0 && sent.wait == 0;
  }
  bool got = false;
  char buffer[kReadSize];
  while (link.secured && !close) {
    const tls::TlsSession::Step read = link.tls->Read(buffer, sizeof buffer);
    if (read.bytes <= 0) {
      close = read.wait == 0;
      if (read.wait == POLLOUT) link.wait = POLLOUT;
      break;
    }
    link.inbox.append(buffer, static_cast<std::size_t>(read.bytes));
    got = true;
  }
  if (got) {
    // Heard even when the peer has gone: its last frames (a fence's end,
    // sent as its ranks finished) came with the end.
    std::vector<io::Frame> frames;
    const bool garbled = !io::DecodeFrames(link.inbox, frames).ok();
    for (io::Frame& frame : frames) {
      if (link.fd < 0) break;  // refused by Heard
      Heard(link, static_cast<int>(frame.kind), frame.rank, std::move(frame.data));
    }
    close = close || garbled;
  }
  if (close) link.Close();
}

void FenceTree::Heard(Link& link, int kind, int fence, std::string data) {
  const auto refuse = [&link] { link.Close(); };
  if (link.asker || link.peer) return HeardAsk(link, kind, fence, std::move(data));
  if (&link != parent_.get() && link.index < 0) {
    // Who dialled says which node it is, first: a child, or a node that
    // will ask questions ("ask").
    if (kind != static_cast<int>(io::FrameKind::kHello)) return refuse();
    if (data == "ask") {
      if (fence < 0 || fence >= static_cast<int>(options_.nodes.size()) ||
          fence == options_.node_index) {
        return refuse();
      }
      link.asker = true;
      link.index = fence;
      return;
    }
    const bool known = std::find(children_.begin(), children_.end(), fence) != children_.end();
    const bool taken = std::any_of(links_.begin(), links_.end(), [fence](const auto& l) {
      return l->index == fence && !l->asker;
    });
    if (!known || taken) return refuse();
    link.index = fence;
    return;
  }
  if (kind == static_cast<int>(io::FrameKind::kFenceDone)) {
    absl::StatusOr<std::string> parts = io::ParseFenceDone(data);
    if (absl::IsInvalidArgument(parts.status())) return refuse();
    if (&link == parent_.get()) {
      if (fences_.contains(fence) || !failed_.contains(fence)) Finish(fence, parts);
      return;
    }
    // Up the tree, only a subtree's failure travels this way.
    if (parts.ok() || fence < 0 || (!fences_.contains(fence) && fences_.size() >= kMaxOpenFences)) {
      return refuse();
    }
    if (!failed_.contains(fence)) Fail(fence, parts.status());
    return;
  }
  if (kind != static_cast<int>(io::FrameKind::kFencePart) || &link == parent_.get() || fence < 0) {
    return refuse();
  }
  const int child = link.index;
  absl::StatusOr<std::map<int, std::string>> parts = ParseParts(data, [this, child](int n) {
    return n >= 0 && n < static_cast<int>(options_.nodes.size()) && InSubtree(child, n);
  });
  if (!parts.ok() || static_cast<int>(parts->size()) != SubtreeSize(child)) return refuse();
  if (failed_.contains(fence)) return;
  if (!fences_.contains(fence) && fences_.size() >= kMaxOpenFences) return refuse();
  Pending& pending = fences_[fence];
  if (pending.children.contains(child)) return refuse();
  if (pending.parts.empty() && pending.children.empty()) pending.began = Clock::now();
  pending.children.insert(child);
  pending.parts.merge(*parts);
  if (!broken_.ok()) {
    Fail(fence, broken_);
  } else {
    Advance(fence);
  }
}

void FenceTree::Advance(int fence) {
  const auto it = fences_.find(fence);
  if (it == fences_.end()) return;
  Pending& pending = it->second;
  if (!pending.own || pending.children.size() < children_.size() || pending.sent_up) return;
  if (options_.node_index > 0) {
    if (!parent_) return;  // sent once the node has joined
    Send(*parent_, Encode(io::FrameKind::kFencePart, fence, EncodeParts(pending.parts)));
    pending.sent_up = true;
    return;
  }
  std::size_t total = 0;
  for (const auto& [index, data] : pending.parts) total += data.size();
  if (pending.parts.size() != options_.nodes.size() || total + 1 > io::kMaxFenceData) {
    Finish(fence, absl::ResourceExhaustedError(fmt::format(
                      "the fence's data from {} nodes is {} bytes, more than the {} one fence "
                      "carries",
                      options_.nodes.size(), total, io::kMaxFenceData - 1)));
    return;
  }
  std::string all;
  all.reserve(total);
  for (const auto& [index, data] : pending.parts) all += data;
  Finish(fence, all);
}

void FenceTree::Fail(int fence, const absl::Status& why) {
  Pending& pending = fences_[fence];
  if (options_.node_index == 0 || !parent_) {
    Finish(fence, why);
    return;
  }
  if (pending.sent_up) return;
  // The root tells every node, so that all of them end the fence alike.
  Send(*parent_, Encode(io::FrameKind::kFenceDone, fence,
                        io::EncodeFenceDone(absl::StatusOr<std::string>(why))));
  pending.sent_up = true;
}

void FenceTree::Finish(int fence, const absl::StatusOr<std::string>& parts) {
  const std::string frame = Encode(io::FrameKind::kFenceDone, fence, io::EncodeFenceDone(parts));
  for (const auto& link : links_) {
    if (link->index >= 0 && link->fd >= 0) Send(*link, frame);
  }
  fences_.erase(fence);
  if (!parts.ok()) {
    failed_[fence] = parts.status();
    if (failed_.size() > kKeptFailures) failed_.erase(failed_.begin());
  }
  options_.done(fence, parts);
}

void FenceTree::Broke(const std::string& why) {
  if (!broken_.ok()) return;
  broken_ = absl::UnavailableError(why);
  std::vector<int> open;
  for (const auto& [number, pending] : fences_) open.push_back(number);
  for (const int number : open) Fail(number, broken_);
}

void FenceTree::Expire() {
  const Clock::time_point now = Clock::now();
  // A dialler that has not said who it is within kDialWait is no stepd of
  // the step (those say it with their handshake's first flight).
  for (const auto& link : links_) {
    if (link->index < 0 && link->fd >= 0 && now - link->since > kDialWait) link->Close();
  }
  for (auto ask = asked_.begin(); ask != asked_.end();) {
    if (now - ask->second.began < options_.timeout) {
      ++ask;
      continue;
    }
    Reply done = std::move(ask->second.done);
    const std::string& node = options_.nodes[static_cast<std::size_t>(ask->second.node)];
    ask = asked_.erase(ask);
    done(absl::DeadlineExceededError(
        fmt::format("{}'s cohort-stepd did not answer within {} s (SLURM_PMIX_TIMEOUT)", node,
                    options_.timeout.count())));
  }
  const auto limit = options_.timeout + kLevelGrace * Height();
  std::vector<std::pair<int, std::string>> expired;
  for (const auto& [number, pending] : fences_) {
    if (!pending.sent_up && now - pending.began >= limit) {
      expired.emplace_back(number, Missing(pending));
    }
  }
  for (const auto& [number, missing] : expired) {
    Fail(number, absl::DeadlineExceededError(fmt::format(
                     "PMIx fence {} timed out after {} s (SLURM_PMIX_TIMEOUT): {} never arrived",
                     number, options_.timeout.count(), missing)));
  }
}

}  // namespace cohort::step
