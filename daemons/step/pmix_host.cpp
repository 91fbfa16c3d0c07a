// SPDX-License-Identifier: Apache-2.0
#include "pmix_host.h"

#include <dlfcn.h>
#include <pmix.h>
#include <pmix_server.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace cohort::step {
namespace {

// OpenPMIx, loaded when a step asks for it. cohort-stepd starts once per
// launch and most launches need no PMIx: linked, libpmix and what it
// links (libevent, hwloc, udev) cost every start about 1 ms of loading.
struct PmixApi {
  decltype(&PMIx_Error_string) error_string = nullptr;
  decltype(&PMIx_Info_list_start) info_list_start = nullptr;
  decltype(&PMIx_Info_list_add) info_list_add = nullptr;
  decltype(&PMIx_Info_list_convert) info_list_convert = nullptr;
  decltype(&PMIx_Info_list_release) info_list_release = nullptr;
  decltype(&PMIx_Data_array_destruct) data_array_destruct = nullptr;
  decltype(&PMIx_generate_regex) generate_regex = nullptr;
  decltype(&PMIx_generate_ppn) generate_ppn = nullptr;
  decltype(&PMIx_server_init) server_init = nullptr;
  decltype(&PMIx_server_finalize) server_finalize = nullptr;
  decltype(&PMIx_server_register_nspace) register_nspace = nullptr;
  decltype(&PMIx_server_deregister_nspace) deregister_nspace = nullptr;
  decltype(&PMIx_server_register_client) register_client = nullptr;
  decltype(&PMIx_server_setup_fork) setup_fork = nullptr;
  decltype(&PMIx_server_dmodex_request) dmodex_request = nullptr;
};
PmixApi pmix;

absl::Status LoadPmix() {
  static const absl::Status loaded = []() -> absl::Status {
    void* library = ::dlopen(COHORT_PMIX_LIBRARY, RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) {
      return absl::FailedPreconditionError(fmt::format(
          "--mpi=pmix: cannot load OpenPMIx ({}); install libpmix2 on the node", ::dlerror()));
    }
    bool all = true;
    const auto find = [&]<typename F>(F& function, const char* name) {
      function = reinterpret_cast<F>(::dlsym(library, name));
      all = all && function != nullptr;
    };
    find(pmix.error_string, "PMIx_Error_string");
    find(pmix.info_list_start, "PMIx_Info_list_start");
    find(pmix.info_list_add, "PMIx_Info_list_add");
    find(pmix.info_list_convert, "PMIx_Info_list_convert");
    find(pmix.info_list_release, "PMIx_Info_list_release");
    find(pmix.data_array_destruct, "PMIx_Data_array_destruct");
    find(pmix.generate_regex, "PMIx_generate_regex");
    find(pmix.generate_ppn, "PMIx_generate_ppn");
    find(pmix.server_init, "PMIx_server_init");
    find(pmix.server_finalize, "PMIx_server_finalize");
    find(pmix.register_nspace, "PMIx_server_register_nspace");
    find(pmix.deregister_nspace, "PMIx_server_deregister_nspace");
    find(pmix.register_client, "PMIx_server_register_client");
    find(pmix.setup_fork, "PMIx_server_setup_fork");
    find(pmix.dmodex_request, "PMIx_server_dmodex_request");
    if (!all) {
      return absl::FailedPreconditionError(fmt::format(
          "--mpi=pmix: {} lacks a function of OpenPMIx 4's server; install libpmix2 4.x",
          COHORT_PMIX_LIBRARY));
    }
    return absl::OkStatus();
  }();
  return loaded;
}

// OpenPMIx hosts one server per process; its callbacks find it here.
std::mutex server_mutex;
PmixHost* server = nullptr;

absl::Status PmixError(std::string_view what, pmix_status_t status) {
  return absl::InternalError(fmt::format("--mpi=pmix: {}: {}", what, pmix.error_string(status)));
}

// A list of keys and values for OpenPMIx (its Info_list), as one array.
class InfoList {
 public:
  InfoList() : list_(pmix.info_list_start()) {}
  ~InfoList() {
    if (converted_) pmix.data_array_destruct(&array_);
    pmix.info_list_release(list_);
  }
  InfoList(const InfoList&) = delete;
  InfoList& operator=(const InfoList&) = delete;

  void Add(const char* key, const void* value, pmix_data_type_t type) {
    (void)pmix.info_list_add(list_, key, value, type);
  }
  void Add(const char* key, const std::string& value) { Add(key, value.c_str(), PMIX_STRING); }
  void AddUint32(const char* key, std::uint32_t value) { Add(key, &value, PMIX_UINT32); }
  void AddUint16(const char* key, std::uint16_t value) { Add(key, &value, PMIX_UINT16); }
  /// The list as one info array (for a PMIX_DATA_ARRAY value, or a call).
  pmix_data_array_t* Array() {
    if (!converted_) {
      array_.type = PMIX_INFO;
      array_.size = 0;
      array_.array = nullptr;
      (void)pmix.info_list_convert(list_, &array_);
      converted_ = true;
    }
    return &array_;
  }
  pmix_info_t* Infos() { return static_cast<pmix_info_t*>(Array()->array); }
  std::size_t Size() { return Array()->size; }

 private:
  void* list_;
  pmix_data_array_t array_{};
  bool converted_ = false;
};

// A regular expression OpenPMIx makes of a comma list (nodes, or ranks by
// node separated by ';'), freed with free().
std::string Regex(const std::string& input, bool ranks) {
  char* regex = nullptr;
  const pmix_status_t status =
      ranks ? pmix.generate_ppn(input.c_str(), &regex) : pmix.generate_regex(input.c_str(), &regex);
  if (status != PMIX_SUCCESS || regex == nullptr) return {};
  // The regex may hold NULs past its text only in raw form; OpenPMIx's
  // parsers take the string up to its first NUL.
  std::string out(regex);
  std::free(regex);
  return out;
}

// Rank `rank` of namespace `nspace` (shorter than PMIX_MAX_NSLEN).
pmix_proc_t Proc(const std::string& nspace, int rank) {
  pmix_proc_t proc{};
  std::memcpy(proc.nspace, nspace.c_str(), std::min(nspace.size(), std::size_t{PMIX_MAX_NSLEN}));
  proc.rank = static_cast<pmix_rank_t>(rank);
  return proc;
}

std::string Join(const std::vector<int>& numbers, std::string_view separator) {
  std::string out;
  for (const int n : numbers) {
    if (!out.empty()) out += separator;
    out += std::to_string(n);
  }
  return out;
}

// --- the callbacks OpenPMIx calls, on its thread -----------------------------

pmix_status_t ClientConnected(const pmix_proc_t* /*proc*/, void* /*object*/,
                              pmix_op_cbfunc_t /*done*/, void* /*data*/) {
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t ClientFinalized(const pmix_proc_t* /*proc*/, void* /*object*/,
                              pmix_op_cbfunc_t /*done*/, void* /*data*/) {
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t Abort(const pmix_proc_t* proc, void* /*object*/, int status, const char message[],
                    pmix_proc_t /*procs*/[], size_t /*nprocs*/, pmix_op_cbfunc_t /*done*/,
                    void* /*data*/) {
  const std::lock_guard lock(server_mutex);
  if (server != nullptr) {
    server->Abort(static_cast<int>(proc->rank), status, message != nullptr ? message : "");
  }
  return PMIX_OPERATION_SUCCEEDED;
}

// Hands OpenPMIx the bytes of a fence or a direct-modex get, or `failed`
// with none. OpenPMIx reads the bytes after `done` returns, and frees them
// through the release function.
void Deliver(pmix_modex_cbfunc_t done, void* done_data, const absl::StatusOr<std::string>& bytes,
             pmix_status_t failed) {
  if (done == nullptr) return;
  if (!bytes.ok()) {
    done(failed, nullptr, 0, done_data, nullptr, nullptr);
    return;
  }
  char* copy = static_cast<char*>(std::malloc(std::max<std::size_t>(bytes->size(), 1)));
  if (copy == nullptr) {
    done(PMIX_ERR_NOMEM, nullptr, 0, done_data, nullptr, nullptr);
    return;
  }
  std::memcpy(copy, bytes->data(), bytes->size());
  done(
      PMIX_SUCCESS, copy, bytes->size(), done_data, [](void* p) { std::free(p); }, copy);
}

// A fence is the step's whole namespace (what MPI_Init and MPI_Finalize
// ask: the namespace's wildcard, or every rank by name); its data is each
// node's part, as OpenPMIx packed it, handed back whole to every node's
// server. A fence over some ranks only is refused.
pmix_status_t FenceNb(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t /*info*/[],
                      size_t /*ninfo*/, char* data, size_t size, pmix_modex_cbfunc_t done,
                      void* done_data) {
  const std::lock_guard lock(server_mutex);
  if (server == nullptr) return PMIX_ERR_INIT;
  if (!server->WholeStep(procs, nprocs)) return PMIX_ERR_NOT_SUPPORTED;
  server->Fence(std::string(data, size), [done, done_data](absl::StatusOr<std::string> parts) {
    Deliver(done, done_data, parts, PMIX_ERROR);
  });
  return PMIX_SUCCESS;
}

// A local rank's get of a remote rank's data that no fence brought: asked
// of the node that holds the rank.
pmix_status_t DirectModex(const pmix_proc_t* proc, const pmix_info_t /*info*/[], size_t /*ninfo*/,
                          pmix_modex_cbfunc_t done, void* done_data) {
  const std::lock_guard lock(server_mutex);
  if (server == nullptr) return PMIX_ERR_INIT;
  if (!server->Ours(*proc)) return PMIX_ERR_NOT_FOUND;
  server->Modex(static_cast<int>(proc->rank), [done, done_data](absl::StatusOr<std::string> data) {
    Deliver(done, done_data, data, PMIX_ERR_NOT_FOUND);
  });
  return PMIX_SUCCESS;
}

// OpenPMIx's answer to a direct-modex request of another node: the rank's
// committed data, to the reply the request carried.
void ModexAnswered(pmix_status_t status, char* data, size_t size, void* context) {
  std::unique_ptr<PmixHost::ModexEnd> reply(static_cast<PmixHost::ModexEnd*>(context));
  if (status == PMIX_SUCCESS) {
    (*reply)(std::string(data != nullptr ? data : "", data != nullptr ? size : 0));
  } else {
    (*reply)(
        absl::NotFoundError(fmt::format("no data of the rank: {}", pmix.error_string(status))));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<PmixHost>> PmixHost::Start(PmixStep step, SendPart send_part,
                                                          AskNode ask_node, OnAbort on_abort) {
  if (absl::Status loaded = LoadPmix(); !loaded.ok()) return loaded;
  std::unique_ptr<PmixHost> self(new PmixHost(std::move(step)));
  const PmixStep& s = self->step_;
  const MpiSetup& layout = s.layout;
  if (layout.nodes.empty() || layout.nodes.size() != layout.tasks.size() || layout.node_index < 0 ||
      static_cast<std::size_t>(layout.node_index) >= layout.nodes.size()) {
    return absl::InvalidArgumentError("--mpi=pmix: the step's layout does not hold together");
  }
  self->send_part_ = std::move(send_part);
  self->ask_node_ = std::move(ask_node);
  self->on_abort_ = std::move(on_abort);
  self->nspace_ = fmt::format("cohort.{}.{}", s.job_id, s.step_id);
  if (self->nspace_.size() >= PMIX_MAX_NSLEN) {
    return absl::InvalidArgumentError(
        fmt::format("--mpi=pmix: namespace {} is too long", self->nspace_));
  }
  // The server's rendezvous and shared-memory files: the ranks' owner's.
  if (::mkdir(s.tmpdir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(
        fmt::format("--mpi=pmix: cannot make {}: {}", s.tmpdir, std::strerror(errno)));
  }
  if (::chown(s.tmpdir.c_str(), s.uid, s.gid) != 0 && ::geteuid() == 0) {
    return absl::InternalError(fmt::format("--mpi=pmix: cannot give {} to uid {}: {}", s.tmpdir,
                                           s.uid, std::strerror(errno)));
  }
  {
    const std::lock_guard lock(server_mutex);
    if (server != nullptr) return absl::InternalError("--mpi=pmix: a server runs already");
    server = self.get();
  }
  static pmix_server_module_t module = [] {
    pmix_server_module_t m{};
    m.client_connected = ClientConnected;
    m.client_finalized = ClientFinalized;
    m.abort = step::Abort;
    m.fence_nb = FenceNb;
    m.direct_modex = DirectModex;
    return m;
  }();
  // The machine as the agent found it, when it wrote it down: OpenPMIx's
  // hwloc reads it (THISSYSTEM: it is this machine) in place of
  // discovering the machine and probing its display, OpenCL and PCI
  // plugins, about 16 ms of the server's start (docs/performance.md). Only
  // this process's environment: the ranks get theirs from the launch.
  if (!layout.topology_file.empty() && ::access(layout.topology_file.c_str(), R_OK) == 0) {
    ::setenv("HWLOC_XMLFILE", layout.topology_file.c_str(), 1);
    ::setenv("HWLOC_THISSYSTEM", "1", 1);
    ::setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_opencl,hwloc_pci,hwloc_xml_libxml", 1);
  }
  InfoList init;
  init.Add(PMIX_SERVER_TMPDIR, s.tmpdir);
  init.Add(PMIX_SYSTEM_TMPDIR, s.tmpdir);
  init.AddUint32(PMIX_USERID, s.uid);
  init.AddUint32(PMIX_GRPID, s.gid);
  if (const pmix_status_t status = pmix.server_init(&module, init.Infos(), init.Size());
      status != PMIX_SUCCESS) {
    const std::lock_guard lock(server_mutex);
    server = nullptr;
    return PmixError("cannot start the PMIx server", status);
  }
  self->started_ = true;

  // The step's shape: nodes in order, ranks numbered node by node.
  std::string hosts;
  std::string ranks_by_node;
  std::vector<int> first_rank(layout.nodes.size(), 0);
  int total = 0;
  for (std::size_t n = 0; n < layout.nodes.size(); ++n) {
    if (n > 0) {
      hosts += ',';
      ranks_by_node += ';';
    }
    hosts += layout.nodes[n];
    first_rank[n] = total;
    std::vector<int> ranks;
    for (int t = 0; t < layout.tasks[n]; ++t) ranks.push_back(total + t);
    ranks_by_node += Join(ranks, ",");
    total += layout.tasks[n];
  }
  const auto here = static_cast<std::size_t>(layout.node_index);
  InfoList job;
  job.AddUint32(PMIX_UNIV_SIZE, static_cast<std::uint32_t>(total));
  job.AddUint32(PMIX_JOB_SIZE, static_cast<std::uint32_t>(total));
  job.AddUint32(PMIX_MAX_PROCS, static_cast<std::uint32_t>(total));
  job.AddUint32(PMIX_LOCAL_SIZE, static_cast<std::uint32_t>(s.local_ranks.size()));
  job.AddUint32(PMIX_NUM_NODES, static_cast<std::uint32_t>(layout.nodes.size()));
  job.AddUint32(PMIX_APPNUM, 0);
  job.Add(PMIX_JOBID, fmt::format("{}.{}", s.job_id, s.step_id));
  job.Add(PMIX_NODE_MAP, Regex(hosts, false).c_str(), PMIX_REGEX);
  job.Add(PMIX_PROC_MAP, Regex(ranks_by_node, true).c_str(), PMIX_REGEX);
  job.Add(PMIX_LOCAL_PEERS, Join(s.local_ranks, ","));
  job.AddUint32(PMIX_LOCALLDR,
                s.local_ranks.empty() ? 0 : static_cast<std::uint32_t>(s.local_ranks.front()));
  job.Add(PMIX_HOSTNAME, layout.nodes[here]);
  job.AddUint32(PMIX_NODEID, static_cast<std::uint32_t>(layout.node_index));
  job.Add(PMIX_TMPDIR, s.tmpdir);
  for (std::size_t n = 0; n < layout.nodes.size(); ++n) {
    for (int t = 0; t < layout.tasks[n]; ++t) {
      InfoList proc;
      const pmix_rank_t rank = static_cast<pmix_rank_t>(first_rank[n] + t);
      proc.Add(PMIX_RANK, &rank, PMIX_PROC_RANK);
      proc.AddUint16(PMIX_LOCAL_RANK, static_cast<std::uint16_t>(t));
      proc.AddUint16(PMIX_NODE_RANK, static_cast<std::uint16_t>(t));
      proc.AddUint32(PMIX_NODEID, static_cast<std::uint32_t>(n));
      proc.AddUint32(PMIX_APPNUM, 0);
      proc.Add(PMIX_HOSTNAME, layout.nodes[n]);
      job.Add(PMIX_PROC_DATA, proc.Array(), PMIX_DATA_ARRAY);
    }
  }
  if (const pmix_status_t status =
          pmix.register_nspace(self->nspace_.c_str(), static_cast<int>(s.local_ranks.size()),
                               job.Infos(), job.Size(), nullptr, nullptr);
      status != PMIX_SUCCESS && status != PMIX_OPERATION_SUCCEEDED) {
    return PmixError(fmt::format("cannot register namespace {}", self->nspace_), status);
  }
  for (const int rank : s.local_ranks) {
    const pmix_proc_t proc = Proc(self->nspace_, rank);
    if (const pmix_status_t status =
            pmix.register_client(&proc, s.uid, s.gid, nullptr, nullptr, nullptr);
        status != PMIX_SUCCESS && status != PMIX_OPERATION_SUCCEEDED) {
      return PmixError(fmt::format("cannot register rank {}", rank), status);
    }
  }
  return self;
}

PmixHost::~PmixHost() {
  if (started_) {
    pmix.deregister_nspace(nspace_.c_str(), nullptr, nullptr);
    pmix.server_finalize();
  }
  {
    const std::lock_guard lock(server_mutex);
    if (server == this) server = nullptr;
  }
  // Fences never ended (a rank died in one): nobody waits for them now.
  std::error_code ignored;
  std::filesystem::remove_all(step_.tmpdir, ignored);
}

absl::StatusOr<std::vector<std::string>> PmixHost::Environment(int rank) const {
  const pmix_proc_t proc = Proc(nspace_, rank);
  char** env = nullptr;
  if (const pmix_status_t status = pmix.setup_fork(&proc, &env); status != PMIX_SUCCESS) {
    return PmixError(fmt::format("cannot set up rank {}", rank), status);
  }
  std::vector<std::string> out;
  for (char** e = env; e != nullptr && *e != nullptr; ++e) {
    out.emplace_back(*e);
    std::free(*e);
  }
  std::free(env);
  return out;
}

void PmixHost::Fence(std::string part, FenceEnd end) {
  if (step_.layout.nodes.size() == 1) {  // every rank is here
    end(std::move(part));
    return;
  }
  int fence = 0;
  {
    const std::lock_guard lock(mutex_);
    fence = next_fence_++;
    fences_.emplace(fence, std::move(end));
  }
  send_part_(fence, std::move(part));
}

void PmixHost::FenceDone(int fence, absl::StatusOr<std::string> parts) {
  FenceEnd end;
  {
    const std::lock_guard lock(mutex_);
    const auto it = fences_.find(fence);
    if (it == fences_.end()) return;
    end = std::move(it->second);
    fences_.erase(it);
  }
  end(std::move(parts));
}

void PmixHost::Abort(int rank, int status, const std::string& message) const {
  on_abort_(rank, status, message);
}

bool PmixHost::Ours(const pmix_proc_t& proc) const {
  return std::strncmp(proc.nspace, nspace_.c_str(), PMIX_MAX_NSLEN) == 0;
}

bool PmixHost::WholeStep(const pmix_proc_t procs[], std::size_t count) const {
  int size = 0;
  for (const int tasks : step_.layout.tasks) size += tasks;
  std::vector<bool> named(static_cast<std::size_t>(size), false);
  std::size_t distinct = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (!Ours(procs[i])) return false;
    if (procs[i].rank == PMIX_RANK_WILDCARD) return true;
    if (procs[i].rank >= static_cast<pmix_rank_t>(size)) return false;
    if (!named[procs[i].rank]) {
      named[procs[i].rank] = true;
      ++distinct;
    }
  }
  return distinct == static_cast<std::size_t>(size);
}

void PmixHost::Modex(int rank, ModexEnd end) const {
  int node = 0;
  for (int first = 0; node < static_cast<int>(step_.layout.tasks.size()); ++node) {
    first += step_.layout.tasks[static_cast<std::size_t>(node)];
    if (rank < first) break;
  }
  if (rank < 0 || node >= static_cast<int>(step_.layout.tasks.size()) ||
      node == step_.layout.node_index) {
    // A rank of this node is this server's to know; none is out of the step.
    end(absl::NotFoundError(fmt::format("rank {} is no remote rank of the step", rank)));
    return;
  }
  ask_node_(node, std::to_string(rank), std::move(end));
}

void PmixHost::AnswerModex(std::string_view request, ModexEnd reply) const {
  int rank = -1;
  const auto [end, error] = std::from_chars(request.data(), request.data() + request.size(), rank);
  if (error != std::errc() || end != request.data() + request.size() ||
      std::find(step_.local_ranks.begin(), step_.local_ranks.end(), rank) ==
          step_.local_ranks.end()) {
    reply(absl::NotFoundError(fmt::format("{:?} is no rank of this node", request)));
    return;
  }
  const pmix_proc_t proc = Proc(nspace_, rank);
  auto context = std::make_unique<ModexEnd>(std::move(reply));
  if (const pmix_status_t status = pmix.dmodex_request(&proc, ModexAnswered, context.get());
      status != PMIX_SUCCESS) {
    (*context)(absl::NotFoundError(
        fmt::format("no data of rank {}: {}", rank, pmix.error_string(status))));
    return;
  }
  (void)context.release();  // ModexAnswered owns it now
}

}  // namespace cohort::step
