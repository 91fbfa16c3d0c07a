// SPDX-License-Identifier: Apache-2.0
#include "job_submit_policy.h"

// Debian's liblua5.4-c++: Lua built as C++, whose errors unwind as
// exceptions through C++ frames (the C build's longjmp would skip their
// destructors). Its functions have C++ linkage: no extern "C" here.
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

namespace cohort::policy {
namespace {

// Slurm's sentinels, as job_submit.lua scripts compare with them.
constexpr lua_Integer kNoVal = 0xfffffffe;
constexpr lua_Integer kInfinite = kUnlimitedMinutes;
// Instructions between two looks at the clock.
constexpr int kHookEvery = 10'000;

// The `slurm` table and print, set up by the sandbox's first chunk with the
// C functions it is handed: its locals keep them out of the script's reach.
constexpr std::string_view kPrelude = R"lua(
local user, line, format, concat, pack, tostring = ...
slurm = {
  SUCCESS = 0, ERROR = -1, FAILURE = -1,
  NO_VAL = 4294967294, NO_VAL16 = 65534, NO_VAL64 = 18446744073709551614,
  INFINITE = 4294967295, INFINITE16 = 65535,
  ESLURM_INVALID_PARTITION_NAME = 2000, ESLURM_INVALID_NODE_COUNT = 2006,
  ESLURM_ACCESS_DENIED = 2015, ESLURM_INVALID_ACCOUNT = 2045,
  ESLURM_INVALID_TIME_LIMIT = 2051, ESLURM_INVALID_QOS = 2066,
  ESLURM_INVALID_GRES = 2072,
}
function slurm.log_user(f, ...) user(format(f, ...)) end
function slurm.log_error(f, ...) line(3, format(f, ...)) end
function slurm.log_info(f, ...) line(2, format(f, ...)) end
function slurm.log_verbose(f, ...) line(1, format(f, ...)) end
function slurm.log_debug(f, ...) line(0, format(f, ...)) end
slurm.log_debug2, slurm.log_debug3, slurm.log_debug4 = slurm.log_debug, slurm.log_debug, slurm.log_debug
function print(...)
  local args = pack(...)
  for i = 1, args.n do args[i] = tostring(args[i]) end
  line(2, concat(args, "\t", 1, args.n))
end
-- Lua runs finalizers with hooks off, so one that loops could not be
-- stopped: a metatable with __gc is refused (Lua marks a table for
-- finalization only when its metatable has __gc as it is set).
local setmetatable, rawget, error = setmetatable, rawget, error
_G.setmetatable = function(t, mt)
  if mt ~= nil and rawget(mt, "__gc") ~= nil then
    error("__gc finalizers are not allowed in a submit policy", 2)
  end
  return setmetatable(t, mt)
end
)lua";

// The job_desc fields, by whether the script may change them.
constexpr std::array<std::string_view, 14> kWritable = {
    "name",       "partition", "account",         "qos",           "comment",       "wckey",
    "time_limit", "min_nodes", "ntasks_per_node", "cpus_per_task", "pn_min_memory", "gpus_per_node",
    "features",   "requeue"};
constexpr std::array<std::string_view, 8> kReadOnly = {"user_name", "user_id",      "work_dir",
                                                       "array_inx", "dependency",   "script",
                                                       "num_tasks", "tres_per_node"};

template <std::size_t N>
bool Lists(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::ranges::find(names, name) != names.end();
}

// Pushes table[key] without metamethods: the script may have given job_desc
// a metatable, whose __index (or a value's __tostring) would run outside
// the call's time bound. The value's type.
int RawField(lua_State* L, int table, const char* key) {
  lua_pushstring(L, key);
  return lua_rawget(L, table);
}

// The policy a C function of the sandbox belongs to.
JobSubmitPolicy* Self(lua_State* L) {
  return static_cast<JobSubmitPolicy*>(lua_touserdata(L, lua_upvalueindex(1)));
}

void SetString(lua_State* L, const char* key, const std::string& value) {
  if (value.empty()) return;  // nil, as Slurm leaves an unset string
  lua_pushlstring(L, value.data(), value.size());
  lua_setfield(L, -2, key);
}

void SetInteger(lua_State* L, const char* key, lua_Integer value) {
  lua_pushinteger(L, value);
  lua_setfield(L, -2, key);
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

// Reads back what the script left in job_desc (at `table`). The fault, as
// "job_desc.FIELD: ...", when a field has the wrong type or range.
std::optional<std::string> ReadBack(lua_State* L, int table, SubmitFields& job) {
  const auto text = [&](const char* key, std::string& out) -> std::optional<std::string> {
    RawField(L, table, key);
    std::optional<std::string> fault;
    if (lua_isnil(L, -1)) {
      out.clear();
    } else if (lua_type(L, -1) == LUA_TSTRING) {
      std::size_t size = 0;
      const char* data = lua_tolstring(L, -1, &size);
      out.assign(data, size);
    } else {
      fault =
          fmt::format("job_desc.{} must be a string or nil, not a {}", key, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return fault;
  };
  const auto number = [&](const char* key, lua_Integer low, lua_Integer high,
                          std::optional<lua_Integer>& out) -> std::optional<std::string> {
    RawField(L, table, key);
    std::optional<std::string> fault;
    int whole = 0;
    const lua_Integer value = lua_tointegerx(L, -1, &whole);
    if (lua_isnil(L, -1) || (whole != 0 && value == kNoVal)) {
      out.reset();
    } else if (whole == 0 || value < low || value > high) {
      fault = fmt::format("job_desc.{} must be a whole number from {} to {}", key, low, high);
    } else {
      out = value;
    }
    lua_pop(L, 1);
    return fault;
  };
  for (auto [key, field] : {std::pair{"name", &job.name}, std::pair{"partition", &job.partition},
                            std::pair{"account", &job.account}, std::pair{"qos", &job.qos},
                            std::pair{"comment", &job.comment}, std::pair{"wckey", &job.wckey}}) {
    if (std::optional<std::string> fault = text(key, *field)) return fault;
  }
  std::optional<lua_Integer> value;
  if (auto fault = number("time_limit", 0, kInfinite, value)) return fault;
  job.time_limit_min = value;
  constexpr lua_Integer kMostCount = 1'000'000;
  for (auto [key, field] :
       {std::pair{"min_nodes", &job.nodes}, std::pair{"ntasks_per_node", &job.tasks_per_node},
        std::pair{"cpus_per_task", &job.cpus_per_task}}) {
    if (auto fault = number(key, 1, kMostCount, value)) return fault;
    if (value) *field = static_cast<int>(*value);
  }
  if (auto fault = number("gpus_per_node", 0, kMostCount, value)) return fault;
  job.gpus_per_node = static_cast<int>(value.value_or(0));
  if (auto fault = number("pn_min_memory", 0, std::numeric_limits<std::int32_t>::max(), value)) {
    return fault;
  }
  job.memory_mb = value.value_or(0);
  std::string features;
  if (auto fault = text("features", features)) return fault;
  job.features.clear();
  std::stringstream words(features);
  for (std::string word; std::getline(words, word, ',');) {
    if (!word.empty()) job.features.push_back(word);
  }
  RawField(L, table, "requeue");
  if (lua_isnil(L, -1)) {
    // left as it was
  } else if (lua_isboolean(L, -1)) {
    job.requeue = lua_toboolean(L, -1) != 0;
  } else {
    int whole = 0;
    const lua_Integer requeue = lua_tointegerx(L, -1, &whole);
    if (whole == 0 || (requeue != 0 && requeue != 1)) {
      lua_pop(L, 1);
      return std::string("job_desc.requeue must be 0 or 1");
    }
    job.requeue = requeue == 1;
  }
  lua_pop(L, 1);
  return std::nullopt;
}

// The derived read-only fields, as job_desc shows them.
lua_Integer NumTasks(const SubmitFields& job) {
  return static_cast<lua_Integer>(job.nodes) * job.tasks_per_node;
}
std::string TresPerNode(const SubmitFields& job) {
  return job.gpus_per_node > 0 ? fmt::format("gres/gpu:{}", job.gpus_per_node) : "";
}

// The job_desc table of `job`, left on the stack.
void PushJobDesc(lua_State* L, const SubmitFields& job) {
  lua_createtable(L, 0, 24);
  SetString(L, "name", job.name);
  SetString(L, "partition", job.partition);
  SetString(L, "account", job.account);
  SetString(L, "qos", job.qos);
  SetString(L, "comment", job.comment);
  SetString(L, "wckey", job.wckey);
  SetInteger(L, "time_limit", job.time_limit_min.value_or(kNoVal));
  SetInteger(L, "min_nodes", job.nodes);
  SetInteger(L, "ntasks_per_node", job.tasks_per_node);
  SetInteger(L, "cpus_per_task", job.cpus_per_task);
  SetInteger(L, "pn_min_memory", job.memory_mb);
  SetInteger(L, "gpus_per_node", job.gpus_per_node);
  SetString(L, "features", Joined(job.features));
  SetInteger(L, "requeue", job.requeue ? 1 : 0);
  SetString(L, "user_name", job.user_name);
  SetInteger(L, "user_id", job.user_id);
  SetString(L, "work_dir", job.work_dir);
  SetString(L, "array_inx", job.array);
  SetString(L, "dependency", job.dependency);
  SetString(L, "script", job.script);
  SetInteger(L, "num_tasks", NumTasks(job));
  SetString(L, "tres_per_node", TresPerNode(job));
}

// part_list: one table per partition, as an array.
void PushPartitions(lua_State* L, const std::vector<PartitionFields>& parts) {
  lua_createtable(L, static_cast<int>(parts.size()), 0);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const PartitionFields& p = parts[i];
    lua_createtable(L, 0, 8);
    SetString(L, "name", p.name);
    SetString(L, "nodes", p.nodes);
    SetString(L, "state", p.state);
    lua_pushboolean(L, p.is_default ? 1 : 0);
    lua_setfield(L, -2, "flag_default");
    SetInteger(L, "max_time", p.max_time_min.value_or(kInfinite));
    SetInteger(L, "default_time", p.default_time_min.value_or(kNoVal));
    SetInteger(L, "max_nodes", p.max_nodes > 0 ? p.max_nodes : kInfinite);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
}

// What the script did to job_desc (at `table`) that it may not: a field
// Cohort does not know, or a read-only one changed.
std::optional<std::string> Trespass(lua_State* L, int table, const SubmitFields& before) {
  lua_pushnil(L);
  while (lua_next(L, table) != 0) {
    lua_pop(L, 1);  // the value
    if (lua_type(L, -1) != LUA_TSTRING) {
      lua_pop(L, 1);
      return std::string("job_desc has a key that is not a name");
    }
    const std::string key = lua_tostring(L, -1);
    if (!Lists(kWritable, key) && !Lists(kReadOnly, key)) {
      lua_pop(L, 1);
      return fmt::format("job_desc.{} is not a field Cohort knows; the writable ones: {}", key,
                         fmt::join(kWritable, ", "));
    }
  }
  for (const std::string_view key : kReadOnly) {
    const int type = RawField(L, table, std::string(key).c_str());
    std::string seen;
    if (type == LUA_TSTRING) {
      seen = lua_tostring(L, -1);
    } else if (lua_isinteger(L, -1) != 0) {
      seen = std::to_string(lua_tointeger(L, -1));
    } else if (type != LUA_TNIL) {
      seen = fmt::format("a {}", lua_typename(L, type));  // never what it was
    }
    lua_pop(L, 1);
    std::string was;
    if (key == "user_name") was = before.user_name;
    if (key == "user_id") was = std::to_string(before.user_id);
    if (key == "work_dir") was = before.work_dir;
    if (key == "array_inx") was = before.array;
    if (key == "dependency") was = before.dependency;
    if (key == "script") was = before.script;
    if (key == "num_tasks") was = std::to_string(NumTasks(before));
    if (key == "tres_per_node") was = TresPerNode(before);
    if (seen != was) return fmt::format("job_desc.{} cannot be changed by the policy", key);
  }
  return std::nullopt;
}

}  // namespace

void* JobSubmitPolicy::Allocate(void* ud, void* ptr, std::size_t osize, std::size_t nsize) {
  auto* memory = static_cast<Memory*>(ud);
  const std::size_t old = ptr == nullptr ? 0 : osize;
  if (nsize == 0) {
    std::free(ptr);
    memory->used -= old;
    return nullptr;
  }
  constexpr std::size_t kOwnHeadroom = 8 * 1024 * 1024;
  const std::size_t limit = memory->limit + (memory->in_call ? 0 : kOwnHeadroom);
  if (nsize > old && memory->used - old + nsize > limit) return nullptr;
  void* grown = std::realloc(ptr, nsize);
  if (grown != nullptr) memory->used = memory->used - old + nsize;
  return grown;
}

void JobSubmitPolicy::Hook(lua_State* L, lua_Debug* /*ar*/) {
  JobSubmitPolicy* self = nullptr;
  std::memcpy(&self, lua_getextraspace(L), sizeof(self));
  if (std::chrono::steady_clock::now() > self->deadline_) {
    luaL_error(L, "ran past %d ms", static_cast<int>(kPolicyCallLimit.count()));
  }
}

int JobSubmitPolicy::LogUser(lua_State* L) {
  JobSubmitPolicy* self = Self(L);
  std::size_t size = 0;
  const char* text = luaL_checklstring(L, 1, &size);
  constexpr std::size_t kMostUserMessage = 4096;  // what a reply carries of it
  if (self->user_message_.size() < kMostUserMessage) {
    if (!self->user_message_.empty()) self->user_message_ += "; ";
    self->user_message_.append(text, std::min(size, kMostUserMessage));
  }
  return 0;
}

int JobSubmitPolicy::LogLine(lua_State* L) {
  JobSubmitPolicy* self = Self(L);
  const auto level = static_cast<int>(luaL_checkinteger(L, 1));
  std::size_t size = 0;
  const char* text = luaL_checklstring(L, 2, &size);
  if (self->log_) self->log_(level, std::string_view(text, std::min<std::size_t>(size, 4096)));
  return 0;
}

std::optional<std::string> JobSubmitPolicy::CallBounded(int args, int results) {
  // The hook stays set (Load sets it), for whatever of the script runs
  // in the policy's own calls too. (Finalizers, which Lua runs with hooks
  // off, the sandbox refuses.)
  deadline_ = std::chrono::steady_clock::now() + kPolicyCallLimit;
  memory_.in_call = true;
  const int status = lua_pcall(L_, args, results, 0);
  memory_.in_call = false;
  if (status == LUA_OK) return std::nullopt;
  std::string message = status == LUA_ERRMEM ? fmt::format("used more than {} MiB of memory",
                                                           kPolicyMemoryLimit / (1024 * 1024))
                        : lua_type(L_, -1) == LUA_TSTRING ? lua_tostring(L_, -1)
                                                          : "failed with an error that is not text";
  lua_pop(L_, 1);
  lua_gc(L_, LUA_GCCOLLECT);
  return message;
}

absl::Status JobSubmitPolicy::Failure(std::string_view what) const {
  return absl::FailedPreconditionError(fmt::format(
      "the site's submit policy ({}) failed, so the job was not queued: {}; tell the cluster's "
      "operators",
      name_, what));
}

absl::StatusOr<std::unique_ptr<JobSubmitPolicy>> JobSubmitPolicy::Load(const std::string& path,
                                                                       Logger log) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: cannot be read; write the site's submit policy there, or leave JobSubmitPlugins=lua "
        "out",
        path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  constexpr std::size_t kMostScript = 1024 * 1024;
  if (text.str().size() > kMostScript) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: {} bytes, more than the 1 MiB a policy script may have", path, text.str().size()));
  }
  std::unique_ptr<JobSubmitPolicy> policy(new JobSubmitPolicy());
  policy->name_ = std::filesystem::path(path).filename().string();
  policy->log_ = std::move(log);
  lua_State* L = lua_newstate(&JobSubmitPolicy::Allocate, &policy->memory_);
  if (L == nullptr) return absl::ResourceExhaustedError("cannot make a Lua state");
  policy->L_ = L;
  JobSubmitPolicy* self = policy.get();
  std::memcpy(lua_getextraspace(L), &self, sizeof(self));
  policy->deadline_ = std::chrono::steady_clock::now() + kPolicyCallLimit;
  lua_sethook(L, &JobSubmitPolicy::Hook, LUA_MASKCOUNT, kHookEvery);
  // The sandbox: no os, io, package or debug; no way to load code.
  for (const auto& [name, open] :
       {std::pair{"_G", &luaopen_base}, std::pair{LUA_TABLIBNAME, &luaopen_table},
        std::pair{LUA_STRLIBNAME, &luaopen_string}, std::pair{LUA_MATHLIBNAME, &luaopen_math},
        std::pair{LUA_UTF8LIBNAME, &luaopen_utf8}}) {
    luaL_requiref(L, name, open, 1);
    lua_pop(L, 1);
  }
  for (const char* name : {"dofile", "loadfile", "load", "require", "collectgarbage"}) {
    lua_pushnil(L);
    lua_setglobal(L, name);
  }
  lua_getglobal(L, LUA_STRLIBNAME);
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");
  lua_pop(L, 1);
  if (luaL_loadbufferx(L, kPrelude.data(), kPrelude.size(), "=prelude", "t") != LUA_OK) {
    return absl::InternalError(fmt::format("the policy's prelude: {}", lua_tostring(L, -1)));
  }
  lua_pushlightuserdata(L, self);
  lua_pushcclosure(L, &JobSubmitPolicy::LogUser, 1);
  lua_pushlightuserdata(L, self);
  lua_pushcclosure(L, &JobSubmitPolicy::LogLine, 1);
  lua_getglobal(L, LUA_STRLIBNAME);
  lua_getfield(L, -1, "format");
  lua_remove(L, -2);
  lua_getglobal(L, LUA_TABLIBNAME);
  lua_getfield(L, -1, "concat");
  lua_getfield(L, -2, "pack");
  lua_remove(L, -3);
  lua_getglobal(L, "tostring");
  if (std::optional<std::string> fault = policy->CallBounded(6, 0)) {
    return absl::InternalError(fmt::format("the policy's prelude: {}", *fault));
  }
  // The script itself, as text only (a precompiled chunk could break the
  // interpreter), its top level bounded as each call is.
  const std::string chunk = "@" + policy->name_;
  if (luaL_loadbufferx(L, text.str().data(), text.str().size(), chunk.c_str(), "t") != LUA_OK) {
    std::string fault = lua_tostring(L, -1);
    return absl::InvalidArgumentError(
        fmt::format("{}: {}; fix the script (luac5.4 -p checks it)", path, fault));
  }
  if (std::optional<std::string> fault = policy->CallBounded(0, 0)) {
    return absl::InvalidArgumentError(fmt::format("{}: its top level failed: {}", path, *fault));
  }
  lua_getglobal(L, "slurm_job_submit");
  const bool defined = lua_isfunction(L, -1);
  lua_pop(L, 1);
  if (!defined) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: defines no function slurm_job_submit(job_desc, part_list, submit_uid)", path));
  }
  return policy;
}

JobSubmitPolicy::~JobSubmitPolicy() {
  if (L_ != nullptr) lua_close(L_);
}

absl::Status JobSubmitPolicy::Verdict(int args) {
  if (std::optional<std::string> fault = CallBounded(args, 1)) return Failure(*fault);
  int whole = 0;
  const lua_Integer code = lua_tointegerx(L_, -1, &whole);
  lua_pop(L_, 1);
  if (whole == 0) {
    return Failure("the hook returned no number; return slurm.SUCCESS, or an error code");
  }
  if (code == 0) return absl::OkStatus();
  return absl::PermissionDeniedError(
      user_message_.empty()
          ? fmt::format("the site's submit policy refused the job (code {})", code)
          : user_message_);
}

absl::Status JobSubmitPolicy::Submit(SubmitFields& job, const std::vector<PartitionFields>& parts,
                                     std::uint32_t submit_uid) {
  deadline_ = std::chrono::steady_clock::now() + kPolicyCallLimit;
  user_message_.clear();
  lua_settop(L_, 0);
  lua_getglobal(L_, "slurm_job_submit");
  if (!lua_isfunction(L_, -1)) {
    lua_settop(L_, 0);
    return Failure("slurm_job_submit is no longer a function");
  }
  PushJobDesc(L_, job);
  lua_pushvalue(L_, -1);
  const int table = 1;  // job_desc, kept below the call
  lua_insert(L_, table);
  PushPartitions(L_, parts);
  lua_pushinteger(L_, submit_uid);
  if (absl::Status verdict = Verdict(3); !verdict.ok()) {
    lua_settop(L_, 0);
    return verdict;
  }
  if (std::optional<std::string> fault = Trespass(L_, table, job)) {
    lua_settop(L_, 0);
    return Failure(*fault);
  }
  SubmitFields changed = job;
  std::optional<std::string> fault = ReadBack(L_, table, changed);
  lua_settop(L_, 0);
  if (fault) return Failure(*fault);
  job = std::move(changed);
  return absl::OkStatus();
}

absl::Status JobSubmitPolicy::Modify(UpdateFields& update, const SubmitFields& job,
                                     const std::vector<PartitionFields>& parts,
                                     std::uint32_t modify_uid) {
  deadline_ = std::chrono::steady_clock::now() + kPolicyCallLimit;
  user_message_.clear();
  lua_settop(L_, 0);
  lua_getglobal(L_, "slurm_job_modify");
  if (!lua_isfunction(L_, -1)) {  // none: updates are not the policy's
    lua_settop(L_, 0);
    return absl::OkStatus();
  }
  // job_desc: only what the update sets, as Slurm's.
  lua_createtable(L_, 0, 3);
  if (update.partition) SetString(L_, "partition", *update.partition);
  SetInteger(L_, "time_limit", update.time_limit_min.value_or(kNoVal));
  SetInteger(L_, "min_nodes", update.nodes ? lua_Integer{*update.nodes} : kNoVal);
  lua_pushvalue(L_, -1);
  const int table = 1;
  lua_insert(L_, table);
  PushJobDesc(L_, job);  // job_rec: a copy, read only
  PushPartitions(L_, parts);
  lua_pushinteger(L_, modify_uid);
  if (absl::Status verdict = Verdict(4); !verdict.ok()) {
    lua_settop(L_, 0);
    return verdict;
  }
  constexpr std::array<std::string_view, 3> kUpdatable = {"partition", "time_limit", "min_nodes"};
  lua_pushnil(L_);
  while (lua_next(L_, table) != 0) {
    lua_pop(L_, 1);
    const std::string key = lua_type(L_, -1) == LUA_TSTRING ? lua_tostring(L_, -1) : "?";
    if (!Lists(kUpdatable, key)) {
      lua_settop(L_, 0);
      return Failure(
          fmt::format("job_desc.{} cannot be set in an update; Cohort updates a "
                      "pending job's partition, time_limit and min_nodes",
                      key));
    }
  }
  SubmitFields read;  // ReadBack's reader, on the three fields an update has
  std::optional<std::string> fault = ReadBack(L_, table, read);
  UpdateFields changed;
  RawField(L_, table, "partition");
  if (!lua_isnil(L_, -1)) changed.partition = read.partition;
  lua_pop(L_, 1);
  changed.time_limit_min = read.time_limit_min;
  RawField(L_, table, "min_nodes");
  int whole = 0;
  if (lua_tointegerx(L_, -1, &whole) != kNoVal && whole != 0) changed.nodes = read.nodes;
  lua_settop(L_, 0);
  if (fault) return Failure(*fault);
  update = std::move(changed);
  return absl::OkStatus();
}

}  // namespace cohort::policy
