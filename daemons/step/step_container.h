// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "image_pull.h"
#include "launch_file.h"
#include "run_as.h"
#include "step_events.h"

/// A step's container on one node (docs/containers.md): its image from the
/// node's cache, a root made of it, and one mount namespace, held by a small
/// child of the stepd, that every local rank of the step enters. All of a
/// step's ranks on a node share it, so CUDA IPC and NCCL's shared memory
/// work between them as on the host.
namespace cohort::step {

/// What a rank needs to enter the container (rank_spawner.h).
struct ContainerEntry {
  int namespace_fd = -1;    ///< the holder's mount namespace, for setns
  std::string work_dir;     ///< inside the container
  std::string search_path;  ///< the PATH a bare program name is looked up in, inside
  bool remap_root = false;  ///< the rank runs as root in a user namespace of its own
};

/// The rank's environment inside a container of `image`: the image's
/// variables over the host's (pyxis's rule), except those named by
/// --container-env (`keep`), which keep their host values. Pure.
void MergeImageEnvironment(std::vector<std::string>& env, const std::vector<std::string>& image,
                           const std::vector<std::string>& keep);

class StepContainer {
 public:
  /// A named container that another step of the job runs on the node is
  /// joined instead (--container-name's auto, exec and no_create): no pull
  /// and no holder, the ranks enter that step's container as it is.
  /// Otherwise: pulls the step's image into the node's cache (cohort-image, next to
  /// this program; a later step of the job on this node takes the digest
  /// its first one pinned, from the cache, without it), then starts the
  /// holder that builds the container, and returns while it works: Ready
  /// waits for it. The holder makes the root (an overlay over the image,
  /// writable unless --container-readonly; a named container's changes kept
  /// under its state folder), mounts /proc, /sys, a /dev with only the basic
  /// devices and the step's GPUs, the user's mounts, the home when asked,
  /// /etc/hosts and resolv.conf, and the launch's PMIx folder, and pivots
  /// into it. `folder` is the launch's spool folder. Call while the stepd is
  /// single-threaded. Errors name the node and say what failed in the
  /// registry's or the system's words: NotFound (no such image, or named
  /// container), FailedPrecondition (the stepd is not root, the named
  /// container is busy), Unavailable (the registry), Internal.
  /// `on_image` hears how the image was had (for the agent's metrics).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<StepContainer>> Start(
      const LaunchFile& file, const std::string& folder, const std::optional<Account>& owner,
      const std::function<void(const ImageEvent&)>& on_image);

  /// Waits for the holder: OK once the container is made, else why not
  /// (FailedPrecondition: a mount source missing or out of the owner's
  /// reach, a symbolic link where a mount goes, ...). Then adjusts each rank
  /// of `file` (the image's variables, the entrypoint before the command
  /// when asked) and fills Entry().
  [[nodiscard]] absl::Status Ready(LaunchFile& file);

  StepContainer(const StepContainer&) = delete;
  StepContainer& operator=(const StepContainer&) = delete;
  /// Ends the holder: the namespace, and every mount in it, goes with it
  /// once the ranks are gone.
  ~StepContainer();

  [[nodiscard]] const ContainerEntry& Entry() const { return entry_; }
  /// What the step's user should be told (options ignored when joining a
  /// running container); empty: nothing.
  [[nodiscard]] const std::string& Notice() const { return notice_; }

  /// --container-save: makes `path` (relative: to `work_dir`) a squashfs
  /// file of the container's root as the ranks left it, with mksquashfs
  /// (squashfs-tools) over the holder's root, crossing into no mount (the
  /// user's, /proc, /sys, /dev: their mount points stay, empty). The file
  /// is created as `owner`, where they may write; root reads the container.
  /// Call once the ranks have ended, before this goes. FailedPrecondition
  /// with mksquashfs's or the system's words, the node's name first.
  [[nodiscard]] absl::Status Save(const std::string& path, const std::string& work_dir,
                                  const std::optional<Account>& owner,
                                  const std::string& node) const;

 private:
  StepContainer() = default;

  /// The process whose root and mount namespace are the container's: this
  /// step's holder, or the one it joined.
  [[nodiscard]] pid_t RootPid() const { return holder_ > 0 ? holder_ : joined_; }

  ContainerEntry entry_;
  pid_t holder_ = -1;
  /// Another step's holder whose container this step joined (pyxis's
  /// exec), and its start time; -1: none. Not this step's to end.
  pid_t joined_ = -1;
  std::int64_t joined_since_ = 0;
  std::string notice_;
  int lock_fd_ = -1;    ///< the named container's, held while the step runs
  int in_use_fd_ = -1;  ///< the image's in-use lock until the holder has its own
  int report_fd_ = -1;  ///< the holder's word: closed empty once the container is made
  ImageInfo image_;
  std::vector<std::string> keep_;  ///< --container-env
};

}  // namespace cohort::step
