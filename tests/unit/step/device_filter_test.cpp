// SPDX-License-Identifier: Apache-2.0
#include "device_filter.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

namespace cohort::step {
namespace {

TEST(DeviceFilterTest, OneBlockPerDeniedDeviceThenAllow) {
  const std::vector<dev_t> denied = {makedev(195, 1), makedev(195, 3)};
  const std::vector<bpf_insn> program = DenyDevicesProgram(denied);
  ASSERT_EQ(program.size(), 5U + 4U * denied.size() + 2U);
  // A device that is no character device jumps past every block to allow.
  EXPECT_EQ(program[4].code, BPF_JMP | BPF_JNE | BPF_K);
  EXPECT_EQ(program[4].imm, BPF_DEVCG_DEV_CHAR);
  EXPECT_EQ(5 + program[4].off, static_cast<int>(program.size()) - 2);
  EXPECT_EQ(program[5].imm, 195);
  EXPECT_EQ(program[6].imm, 1);
  EXPECT_EQ(program[9].imm, 195);
  EXPECT_EQ(program[10].imm, 3);
  EXPECT_EQ(program[11].imm, 0) << "refuse";
  EXPECT_EQ(program.end()[-2].imm, 1) << "allow";
  EXPECT_EQ(program.back().code, BPF_JMP | BPF_EXIT);
}

// Where a cgroup v2 hierarchy is mounted: /sys/fs/cgroup on a v2 system,
// /sys/fs/cgroup/unified on a hybrid one; empty when neither.
std::string UnifiedMount() {
  for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    struct statfs info {};
    if (::statfs(mount, &info) == 0 && info.f_type == CGROUP2_SUPER_MAGIC) return mount;
  }
  return "";
}

// What opening `path` for reading says in a process of the cgroup `folder`:
// 0 for success, else the errno.
int OpenErrorIn(const std::string& folder, const std::string& path) {
  const pid_t child = ::fork();
  if (child == 0) {
    const int procs = ::open((folder + "/cgroup.procs").c_str(), O_WRONLY);
    if (procs < 0 || ::write(procs, "0", 1) != 1) ::_exit(250);
    const int fd = ::open(path.c_str(), O_RDONLY);
    ::_exit(fd >= 0 ? 0 : errno);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 251;
}

// The filter in a real cgroup v2: the denied GPU's device file cannot be
// opened (EPERM), the other one can (ENXIO: no driver behind 195:N here).
TEST(DeviceFilterTest, ACgroupOpensOnlyTheDevicesNotDenied) {
  const std::string mount = UnifiedMount();
  if (::geteuid() != 0 || mount.empty()) {
    GTEST_SKIP() << "needs root and a cgroup v2 hierarchy";
  }
  char dir_template[] = "/tmp/cohort-devices.XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  const std::string own = dir + "/nvidia0";
  const std::string other = dir + "/nvidia1";
  if (::mknod(own.c_str(), S_IFCHR | 0666, makedev(195, 0)) != 0 ||
      ::mknod(other.c_str(), S_IFCHR | 0666, makedev(195, 1)) != 0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "cannot mknod in " << dir;
  }
  const std::string folder = mount + "/cohort-device-test-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0) << std::strerror(errno);
  const std::vector<dev_t> denied = {makedev(195, 1)};
  const absl::Status attached = AttachDeviceFilter(folder, denied);
  const int own_error = OpenErrorIn(folder, own);
  const int other_error = OpenErrorIn(folder, other);
  ::rmdir(folder.c_str());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(attached.ok()) << attached;
  EXPECT_EQ(own_error, ENXIO) << std::strerror(own_error);
  EXPECT_EQ(other_error, EPERM) << std::strerror(other_error);
  EXPECT_TRUE(AttachDeviceFilter(folder, {}).ok()) << "nothing to deny: nothing attached";
}

}  // namespace
}  // namespace cohort::step
