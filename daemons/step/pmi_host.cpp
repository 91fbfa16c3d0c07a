// SPDX-License-Identifier: Apache-2.0
#include "pmi_host.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>

#include <fmt/format.h>

namespace cohort::step {
namespace {

// What one rank may send and keep: MPICH's own limits (PMI_KVS_Get_*_length_max)
// and bounds past anything an MPI library puts.
constexpr std::size_t kKvsNameMax = 256;
constexpr std::size_t kKeyMax = 256;
constexpr std::size_t kValueMax = 4096;
constexpr std::size_t kLineMax = 16 * 1024;
constexpr std::size_t kNodePutBytes = 16U << 20;  // a node's puts between two barriers
// PMI-2: a message's length field, and the longest message (PMII_MAX_COMMAND_LEN).
constexpr std::size_t kPmi2LengthField = 6;
constexpr std::size_t kPmi2MessageMax = 64 * 1024;
// PMI-2's node attributes: how many, and their bytes, a node keeps.
constexpr std::size_t kNodeAttrs = 1024;

// "cmd=put kvsname=x key=k value=v": the words after `cmd=`, by name.
std::map<std::string_view, std::string_view> Words(std::string_view line) {
  std::map<std::string_view, std::string_view> words;
  while (!line.empty()) {
    const std::size_t space = line.find(' ');
    const std::string_view word = line.substr(0, space);
    line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    if (word.empty()) continue;
    const std::size_t equals = word.find('=');
    if (equals == std::string_view::npos) {
      words.emplace(word, std::string_view());
    } else {
      words.emplace(word.substr(0, equals), word.substr(equals + 1));
    }
  }
  return words;
}

// A PMI-1 refusal: `reply`'s command, rc=-1 and why, in one word (the
// protocol's messages hold no spaces: they become underscores).
std::string Refusal(std::string_view reply, std::string_view why) {
  std::string msg(why);
  std::replace(msg.begin(), msg.end(), ' ', '_');
  return fmt::format("cmd={} rc=-1 msg={}\n", reply, msg);
}

// A PMI-2 message: the body's length in a 6-byte field, then
// "cmd=NAME;KEY=VALUE;...", a ';' inside a value doubled.
using Pairs = std::vector<std::pair<std::string_view, std::string_view>>;
std::string Pmi2Message(std::string_view cmd, const Pairs& pairs) {
  std::string body = fmt::format("cmd={};", cmd);
  for (const auto& [key, value] : pairs) {
    body += key;
    body += '=';
    for (const char c : value) {
      if (c == ';') body += ';';
      body += c;
    }
    body += ';';
  }
  return fmt::format("{:<6}", body.size()) + body;
}

// A PMI-2 refusal: the command's response, rc=1 and why.
std::string Pmi2Refusal(std::string_view cmd, std::string_view why) {
  return Pmi2Message(fmt::format("{}-response", cmd), {{"rc", "1"}, {"errmsg", why}});
}

// A PMI-2 body's pairs, in order: InvalidArgument unless each is KEY=VALUE;
// with a key of no ';' or '=' and a value's ';' doubled.
absl::StatusOr<std::map<std::string, std::string>> ParsePmi2(std::string_view body) {
  std::map<std::string, std::string> pairs;
  while (!body.empty()) {
    const std::size_t equals = body.find('=');
    const std::string_view key = body.substr(0, equals);
    if (equals == std::string_view::npos || key.empty() || key.find(';') != key.npos ||
        key.size() > kKeyMax) {
      return absl::InvalidArgumentError("not KEY=VALUE; pairs");
    }
    std::string value;
    std::size_t at = equals + 1;
    bool ended = false;
    while (at < body.size()) {
      if (body[at] == ';') {
        if (at + 1 < body.size() && body[at + 1] == ';') {
          value += ';';
          at += 2;
          continue;
        }
        ended = true;
        break;
      }
      value += body[at++];
    }
    if (!ended) return absl::InvalidArgumentError("a pair does not end in ';'");
    pairs.emplace(std::string(key), std::move(value));
    body.remove_prefix(at + 1);
  }
  return pairs;
}

// MPICH's PMI_process_mapping: blocks of (first node, nodes, ranks per node)
// for ranks numbered node by node: "(vector,(0,2,4))", or with uneven nodes
// "(vector,(0,2,4),(2,1,3))".
std::string ProcessMapping(const std::vector<int>& tasks) {
  std::string out = "(vector";
  for (std::size_t i = 0; i < tasks.size();) {
    std::size_t run = 1;
    while (i + run < tasks.size() && tasks[i + run] == tasks[i]) ++run;
    out += fmt::format(",({},{},{})", i, run, tasks[i]);
    i += run;
  }
  return out + ")";
}

}  // namespace

struct PmiHost::Client {
  int fd = -1;     ///< the stepd's end
  int child = -1;  ///< the rank's end, until it has it
  int rank = 0;    ///< the step's
  std::string inbox{};
  int version = 1;  ///< the wire protocol it asked for at init: 1 or 2
  bool in_barrier = false;
  bool gone = false;
  std::optional<std::string> awaited_attr{};  ///< PMI-2: a node attribute it waits for
};

absl::StatusOr<std::unique_ptr<PmiHost>> PmiHost::Start(std::int64_t job_id, int step_id,
                                                        MpiSetup layout,
                                                        std::vector<int> local_ranks,
                                                        SendPart send_part, OnAbort on_abort) {
  std::unique_ptr<PmiHost> self(new PmiHost());
  self->job_id_ = job_id;
  self->step_id_ = step_id;
  self->layout_ = std::move(layout);
  for (const int tasks : self->layout_.tasks) self->size_ += tasks;
  self->kvsname_ = fmt::format("cohort.{}.{}", job_id, step_id);
  self->process_mapping_ = ProcessMapping(self->layout_.tasks);
  self->send_part_ = std::move(send_part);
  self->on_abort_ = std::move(on_abort);
  for (const int rank : local_ranks) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      return absl::Status(
          absl::ErrnoToStatusCode(errno),
          fmt::format("--mpi=pmi2: cannot make a socket: {}", std::strerror(errno)));
    }
    self->clients_.push_back(
        std::make_unique<Client>(Client{.fd = fds[0], .child = fds[1], .rank = rank}));
  }
  if (::pipe2(self->wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        fmt::format("--mpi=pmi2: cannot make a pipe: {}", std::strerror(errno)));
  }
  self->thread_ = std::thread([s = self.get()] { s->Serve(); });
  return self;
}

PmiHost::~PmiHost() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  if (wake_[1] >= 0) (void)::write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  CloseChildEnds();
  for (const auto& client : clients_) {
    if (client->fd >= 0) ::close(client->fd);
  }
  for (const int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

int PmiHost::ChildEnd(int rank) const {
  for (const auto& client : clients_) {
    if (client->rank == rank) return client->child;
  }
  return -1;
}

std::vector<std::string> PmiHost::Environment(int rank) const {
  return {fmt::format("PMI_FD={}", kPmiFd), fmt::format("PMI_RANK={}", rank),
          fmt::format("PMI_SIZE={}", size_), fmt::format("PMI_JOBID={}", kvsname_)};
}

void PmiHost::CloseChildEnds() {
  for (const auto& client : clients_) {
    if (client->child >= 0) ::close(client->child);
    client->child = -1;
  }
}

void PmiHost::FenceDone(int fence, absl::StatusOr<std::string> parts) {
  {
    const std::lock_guard lock(mutex_);
    done_.emplace_back(fence, std::move(parts));
  }
  (void)::write(wake_[1], "d", 1);
}

void PmiHost::Send(Client& client, std::string_view text) {
  while (!text.empty() && !client.gone) {
    // Never blocking: a rank that asks without reading the answers (its
    // socket's buffer full) is no longer served, and the others still are.
    const ssize_t wrote = ::send(client.fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) {
      client.gone = true;  // it exited (its exit is the stepd's to report), or stopped reading
      ::shutdown(client.fd, SHUT_RDWR);
      return;
    }
    text.remove_prefix(static_cast<std::size_t>(wrote));
  }
}

std::string PmiHost::Handle(Client& client, std::string_view message) {
  if (client.version == 2) return HandlePmi2(client, message);
  const auto words = Words(message);
  const auto word = [&](std::string_view name) {
    const auto it = words.find(name);
    return it == words.end() ? std::string_view() : it->second;
  };
  const std::string_view cmd = word("cmd");
  if (cmd == "init") {
    // PMI-2's clients say so here, in PMI-1's words, then speak PMI-2.
    if (word("pmi_version") == "2") {
      client.version = 2;
      return "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n";
    }
    if (word("pmi_version") != "1") {
      return "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n";
    }
    return "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n";
  }
  if (cmd == "get_maxes") {
    return fmt::format("cmd=maxes kvsname_max={} keylen_max={} vallen_max={} rc=0\n", kKvsNameMax,
                       kKeyMax, kValueMax);
  }
  if (cmd == "get_appnum") return "cmd=appnum appnum=0 rc=0\n";
  if (cmd == "get_my_kvsname") return fmt::format("cmd=my_kvsname kvsname={} rc=0\n", kvsname_);
  if (cmd == "get_universe_size") return fmt::format("cmd=universe_size size={} rc=0\n", size_);
  if (cmd == "put") {
    const std::string_view key = word("key");
    const std::string_view value = word("value");
    if (word("kvsname") != kvsname_) return Refusal("put_result", "no such kvsname");
    if (key.empty() || key.size() > kKeyMax || value.size() > kValueMax) {
      return Refusal("put_result",
                     fmt::format("keys take 1 to {} bytes, values at most {}", kKeyMax, kValueMax));
    }
    if (put_bytes_ + key.size() + value.size() > kNodePutBytes) {
      return Refusal("put_result", "too much put on this node since the last barrier");
    }
    put_bytes_ += key.size() + value.size();
    puts_[std::string(key)] = std::string(value);
    return "cmd=put_result rc=0\n";
  }
  if (cmd == "get") {
    const std::string key(word("key"));
    if (word("kvsname") != kvsname_) return Refusal("get_result", "no such kvsname");
    if (key == "PMI_process_mapping") {
      return fmt::format("cmd=get_result rc=0 value={}\n", process_mapping_);
    }
    for (const auto* space : {&puts_, &kvs_}) {
      if (const auto it = space->find(key); it != space->end()) {
        return fmt::format("cmd=get_result rc=0 value={}\n", it->second);
      }
    }
    return Refusal("get_result", fmt::format("key {} not found", key.substr(0, kKeyMax)));
  }
  if (cmd == "barrier_in") return Barrier(client);
  if (cmd == "finalize") return "cmd=finalize_ack rc=0\n";
  if (cmd == "abort") {
    int code = 1;
    const std::string_view text = word("exitcode");
    (void)std::from_chars(text.data(), text.data() + text.size(), code);
    on_abort_(client.rank, code, std::string(word("message")));
    // A PMI-1 client waits to be ended by its process manager (Hydra kills
    // it): the end of its socket lets MPICH's PMI_Abort exit with the code.
    ::shutdown(client.fd, SHUT_RDWR);
    client.gone = true;
    return {};
  }
  if (cmd == "publish_name" || cmd == "unpublish_name" || cmd == "lookup_name" || cmd == "spawn") {
    return Refusal(fmt::format("{}_result", cmd), "not served by cohort-stepd");
  }
  // A line no PMI-1 client sends: said to the rank, and the others are
  // served as before.
  return Refusal(cmd.empty() ? std::string_view("error") : cmd,
                 fmt::format("cohort-stepd serves PMI-1; this line is none of its commands"));
}

std::string PmiHost::HandlePmi2(Client& client, std::string_view body) {
  absl::StatusOr<std::map<std::string, std::string>> pairs = ParsePmi2(body);
  if (!pairs.ok() || !pairs->contains("cmd")) {
    // Said to the rank, which is served as before, as are the others.
    return Pmi2Refusal("error", fmt::format("cohort-stepd: a PMI-2 message that is not "
                                            "cmd=NAME;KEY=VALUE;...: {}",
                                            pairs.ok() ? std::string("no cmd")
                                                       : std::string(pairs.status().message())));
  }
  const auto word = [&](std::string_view name) -> std::string_view {
    const auto it = pairs->find(std::string(name));
    return it == pairs->end() ? std::string_view() : std::string_view(it->second);
  };
  const std::string cmd((*pairs)["cmd"]);
  const auto answer = [&cmd](const Pairs& more) {
    Pairs all = {{"rc", "0"}};
    all.insert(all.end(), more.begin(), more.end());
    return Pmi2Message(fmt::format("{}-response", cmd), all);
  };
  if (cmd == "fullinit") {
    const std::string_view asked = word("pmirank");
    if (!asked.empty() && asked != std::to_string(client.rank)) {
      return Pmi2Refusal(
          cmd, fmt::format("pmirank={} is not this socket's rank {}", asked, client.rank));
    }
    const std::string rank = std::to_string(client.rank);
    const std::string size = std::to_string(size_);
    return answer({{"pmi-version", "2"},
                   {"pmi-subversion", "0"},
                   {"rank", rank},
                   {"size", size},
                   {"appnum", "0"},
                   {"debugged", "FALSE"},
                   {"pmiverbose", "FALSE"}});
  }
  if (cmd == "job-getid") return answer({{"jobid", kvsname_}});
  if (cmd == "info-getjobattr") {
    const std::string_view key = word("key");
    if (key == "PMI_process_mapping") {
      return answer({{"found", "TRUE"}, {"value", process_mapping_}});
    }
    if (key == "universeSize") {
      const std::string size = std::to_string(size_);
      return answer({{"found", "TRUE"}, {"value", size}});
    }
    return answer({{"found", "FALSE"}});
  }
  if (cmd == "kvs-put" || cmd == "info-putnodeattr") {
    const std::string_view key = word("key");
    const std::string_view value = word("value");
    if (key.empty() || key.size() > kKeyMax || value.size() > kValueMax ||
        value.find('\n') != value.npos) {
      return Pmi2Refusal(cmd, fmt::format("keys take 1 to {} bytes, values at most {} and no "
                                          "newline",
                                          kKeyMax, kValueMax));
    }
    if (cmd == "info-putnodeattr") {
      if (node_attrs_.size() >= kNodeAttrs && !node_attrs_.contains(std::string(key))) {
        return Pmi2Refusal(cmd, fmt::format("more than {} node attributes", kNodeAttrs));
      }
      node_attrs_[std::string(key)] = std::string(value);
      // The node's ranks that wait for it have it now.
      for (const auto& other : clients_) {
        if (other->awaited_attr != key || other.get() == &client) continue;
        other->awaited_attr.reset();
        Send(*other, Pmi2Message("info-getnodeattr-response",
                                 {{"rc", "0"}, {"found", "TRUE"}, {"value", value}}));
      }
      return answer({});
    }
    if (put_bytes_ + key.size() + value.size() > kNodePutBytes) {
      return Pmi2Refusal(cmd, "too much put on this node since the last fence");
    }
    put_bytes_ += key.size() + value.size();
    puts_[std::string(key)] = std::string(value);
    return answer({});
  }
  if (cmd == "info-getnodeattr") {
    const std::string key(word("key"));
    if (const auto it = node_attrs_.find(key); it != node_attrs_.end()) {
      return answer({{"found", "TRUE"}, {"value", it->second}});
    }
    if (word("wait") == "TRUE") {
      client.awaited_attr = key;
      return {};
    }
    return answer({{"found", "FALSE"}});
  }
  if (cmd == "kvs-get") {
    const std::string key(word("key"));
    for (const auto* space : {&puts_, &kvs_}) {
      if (const auto it = space->find(key); it != space->end()) {
        return answer({{"found", "TRUE"}, {"value", it->second}});
      }
    }
    return answer({{"found", "FALSE"}});
  }
  if (cmd == "kvs-fence") return Barrier(client);
  if (cmd == "finalize") return answer({});
  if (cmd == "abort") {
    on_abort_(client.rank, 1, std::string(word("msg")));
    ::shutdown(client.fd, SHUT_RDWR);
    client.gone = true;
    return {};
  }
  // Spawning, name service, job connections, a command no client sends:
  // refused, and the rank and the others are served as before.
  return Pmi2Refusal(cmd, fmt::format("{} is not served by cohort-stepd", cmd));
}

// A local rank enters the barrier (PMI-1's barrier_in, PMI-2's kvs-fence);
// the last one sends the node's puts to every other node.
std::string PmiHost::Barrier(Client& client) {
  if (!client.in_barrier) {
    client.in_barrier = true;
    ++waiting_;
  }
  if (waiting_ < static_cast<int>(clients_.size())) return {};
  std::string part;
  for (const auto& [key, value] : puts_) part += fmt::format("{}={}\n", key, value);
  if (layout_.nodes.size() == 1) {
    EndBarrier(part);
  } else {
    send_part_(next_fence_++, std::move(part));
  }
  return {};
}

void PmiHost::EndBarrier(const absl::StatusOr<std::string>& parts) {
  if (parts.ok()) {
    std::string_view rest = *parts;
    while (!rest.empty()) {
      const std::size_t newline = rest.find('\n');
      const std::string_view entry = rest.substr(0, newline);
      rest = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
      const std::size_t equals = entry.find('=');
      if (equals == std::string_view::npos) continue;
      kvs_[std::string(entry.substr(0, equals))] = std::string(entry.substr(equals + 1));
    }
    for (const auto& [key, value] : puts_) kvs_[key] = value;
  }
  puts_.clear();
  put_bytes_ = 0;
  waiting_ = 0;
  const std::string why(parts.ok() ? "" : parts.status().message());
  const std::string reply_v1 =
      parts.ok() ? std::string("cmd=barrier_out rc=0\n") : Refusal("barrier_out", why);
  const std::string reply_v2 =
      parts.ok() ? Pmi2Message("kvs-fence-response", {{"rc", "0"}}) : Pmi2Refusal("kvs-fence", why);
  for (const auto& client : clients_) {
    if (!client->in_barrier) continue;
    client->in_barrier = false;
    Send(*client, client->version == 2 ? reply_v2 : reply_v1);
  }
}

void PmiHost::Serve() {
  char buffer[4096];
  while (true) {
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}};
    for (const auto& client : clients_) {
      if (!client->gone) fds.push_back({client->fd, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    std::vector<std::pair<int, absl::StatusOr<std::string>>> done;
    {
      const std::lock_guard lock(mutex_);
      if (stop_) return;
      done.swap(done_);
    }
    if ((fds[0].revents & POLLIN) != 0) {
      while (::read(wake_[0], buffer, sizeof buffer) > 0) {
      }
    }
    for (auto& [fence, parts] : done) EndBarrier(parts);
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto it = std::find_if(clients_.begin(), clients_.end(),
                             [&](const auto& c) { return c->fd == fds[i].fd; });
      if (it == clients_.end()) continue;
      Client& client = **it;
      const ssize_t got = ::read(client.fd, buffer, sizeof buffer);
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        client.gone = true;
        continue;
      }
      client.inbox.append(buffer, static_cast<std::size_t>(got));
      Drain(client);
    }
  }
}

// Answers what the rank's inbox holds whole: PMI-1's lines, or PMI-2's
// length-prefixed messages once it asked for PMI-2 at init.
void PmiHost::Drain(Client& client) {
  while (!client.gone) {
    if (client.version == 1) {
      const std::size_t newline = client.inbox.find('\n');
      if (newline == std::string::npos) {
        if (client.inbox.size() > kLineMax) {
          Send(client, fmt::format("cmd=error rc=-1 msg=a_line_over_{}_bytes\n", kLineMax));
          client.inbox.clear();
        }
        return;
      }
      const std::string line = client.inbox.substr(0, newline);
      client.inbox.erase(0, newline + 1);
      Send(client, Handle(client, line));
      continue;
    }
    if (client.inbox.size() < kPmi2LengthField) return;
    std::string_view field = std::string_view(client.inbox).substr(0, kPmi2LengthField);
    while (!field.empty() && field.back() == ' ') field.remove_suffix(1);
    while (!field.empty() && field.front() == ' ') field.remove_prefix(1);
    std::size_t length = 0;
    const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), length);
    if (field.empty() || error != std::errc() || end != field.data() + field.size() ||
        length > kPmi2MessageMax) {
      // No way to find the next message: the rank is told, then no longer
      // served (its library fails its call); the others are.
      Send(client, Pmi2Refusal("error", fmt::format("cohort-stepd: a PMI-2 message's length "
                                                    "field is not 0 to {} in 6 bytes",
                                                    kPmi2MessageMax)));
      ::shutdown(client.fd, SHUT_RDWR);
      client.gone = true;
      return;
    }
    if (client.inbox.size() < kPmi2LengthField + length) return;
    const std::string body = client.inbox.substr(kPmi2LengthField, length);
    client.inbox.erase(0, kPmi2LengthField + length);
    Send(client, Handle(client, body));
  }
}

}  // namespace cohort::step
