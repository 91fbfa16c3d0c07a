// SPDX-License-Identifier: Apache-2.0
#include "device_filter.h"

#include "absl/status/statusor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace cohort::step {
namespace {

// The few instructions the program needs, as linux/filter.h's macros
// build them (that header is the kernel's, not its user API).
constexpr bpf_insn LoadWord(std::uint8_t dst, std::uint8_t src, std::int16_t offset) {
  return {
      .code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = dst, .src_reg = src, .off = offset, .imm = 0};
}
constexpr bpf_insn AndImmediate(std::uint8_t dst, std::int32_t value) {
  return {.code = BPF_ALU | BPF_AND | BPF_K, .dst_reg = dst, .src_reg = 0, .off = 0, .imm = value};
}
constexpr bpf_insn JumpIfNotEqual(std::uint8_t dst, std::int32_t value, std::int16_t skip) {
  return {
      .code = BPF_JMP | BPF_JNE | BPF_K, .dst_reg = dst, .src_reg = 0, .off = skip, .imm = value};
}
constexpr bpf_insn MoveImmediate(std::uint8_t dst, std::int32_t value) {
  return {
      .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = dst, .src_reg = 0, .off = 0, .imm = value};
}
constexpr bpf_insn Exit() {
  return {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0};
}

long Bpf(int command, bpf_attr& attr) { return ::syscall(SYS_bpf, command, &attr, sizeof attr); }

}  // namespace

std::vector<bpf_insn> DenyDevicesProgram(std::span<const dev_t> denied) {
  // r1: struct bpf_cgroup_dev_ctx *. r2: the device type, r3: major, r4:
  // minor. One block of four per denied device: a device that is not it
  // skips to the next block; the last jump of all lands on "allow".
  constexpr std::uint8_t kContext = 1, kType = 2, kMajor = 3, kMinor = 4, kResult = 0;
  constexpr std::int16_t kBlock = 4;
  std::vector<bpf_insn> program = {
      LoadWord(kType, kContext, offsetof(bpf_cgroup_dev_ctx, access_type)),
      AndImmediate(kType, 0xffff),
      LoadWord(kMajor, kContext, offsetof(bpf_cgroup_dev_ctx, major)),
      LoadWord(kMinor, kContext, offsetof(bpf_cgroup_dev_ctx, minor)),
      JumpIfNotEqual(kType, BPF_DEVCG_DEV_CHAR,
                     static_cast<std::int16_t>(kBlock * static_cast<int>(denied.size()))),
  };
  for (const dev_t device : denied) {
    program.push_back(JumpIfNotEqual(kMajor, static_cast<std::int32_t>(major(device)), 3));
    program.push_back(JumpIfNotEqual(kMinor, static_cast<std::int32_t>(minor(device)), 2));
    program.push_back(MoveImmediate(kResult, 0));
    program.push_back(Exit());
  }
  program.push_back(MoveImmediate(kResult, 1));
  program.push_back(Exit());
  return program;
}

namespace {

// The program's descriptor, or the errno's status saying why the kernel
// refused it (with the verifier's log).
absl::StatusOr<int> Load(std::span<const dev_t> denied, const std::string& cgroup) {
  const std::vector<bpf_insn> program = DenyDevicesProgram(denied);
  static constexpr char kLicense[] = "Apache-2.0";
  char log[4096] = {};
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<std::uintptr_t>(program.data());
  load.insn_cnt = static_cast<std::uint32_t>(program.size());
  load.license = reinterpret_cast<std::uintptr_t>(kLicense);
  load.log_buf = reinterpret_cast<std::uintptr_t>(log);
  load.log_size = sizeof log;
  load.log_level = 1;
  const int program_fd = static_cast<int>(Bpf(BPF_PROG_LOAD, load));
  if (program_fd < 0) {
    const int error = errno;
    return absl::Status(
        absl::ErrnoToStatusCode(error),
        fmt::format("cannot load the device filter for {}: {}{}", cgroup, std::strerror(error),
                    log[0] != '\0' ? fmt::format(" ({})", log) : ""));
  }
  return program_fd;
}

}  // namespace

absl::Status CheckDeviceFilter() {
  const dev_t probe = makedev(195, 0);
  absl::StatusOr<int> loaded = Load(std::span<const dev_t>(&probe, 1), "a probe");
  if (!loaded.ok()) return loaded.status();
  ::close(*loaded);
  return absl::OkStatus();
}

absl::Status AttachDeviceFilter(const std::string& cgroup, std::span<const dev_t> denied) {
  if (denied.empty()) return absl::OkStatus();
  absl::StatusOr<int> loaded = Load(denied, cgroup);
  if (!loaded.ok()) return loaded.status();
  const int program_fd = *loaded;
  const int folder = ::open(cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int error = folder < 0 ? errno : 0;
  if (folder >= 0) {
    bpf_attr attach{};
    attach.target_fd = static_cast<std::uint32_t>(folder);
    attach.attach_bpf_fd = static_cast<std::uint32_t>(program_fd);
    attach.attach_type = BPF_CGROUP_DEVICE;
    attach.attach_flags = BPF_F_ALLOW_MULTI;
    if (Bpf(BPF_PROG_ATTACH, attach) != 0) error = errno;
    ::close(folder);
  }
  // The attachment holds the program now; this descriptor is not needed.
  ::close(program_fd);
  if (error != 0) {
    return absl::Status(
        absl::ErrnoToStatusCode(error),
        fmt::format("cannot attach the device filter to {}: {}", cgroup, std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace cohort::step
