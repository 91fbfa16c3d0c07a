// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

/// The stream between a step's `cohort run` and the cohort-stepd of each of
/// the step's nodes, over which the ranks' output comes and stdin goes (as
/// srun's I/O connections with slurmstepd). cohort-stepd dials the address
/// `cohort run` listens on and, inside TLS keyed by the step's key
/// (daemons/common/tls_session.h), says who it is (Hello, with the key
/// again), then sends frames of output and, last, Done;
/// `cohort run` sends stdin for the rank that takes it. A frame is a 9-byte
/// header (kind: 1 byte; rank: int32; length: uint32; big-endian) and
/// `length` bytes. A step of `--mpi=pmix` or `pmi2` also starts its wire-up
/// here, once: each stepd sends the address of its end of the step's fence
/// tree (kFencePart), `cohort run` sends every node's back to every stepd
/// once all have come (kFenceDone). The tree's links (fence_tree.h) speak
/// the same frames, and kAsk and kAnswer.
/// The stepd links no protobuf, so the frame is this small
/// fixed header rather than a message. Pure; any thread.
namespace cohort::io {

enum class FrameKind : std::uint8_t {
  kHello = 1,     ///< stepd → run, first: EncodeHello's text
  kStdout = 2,    ///< stepd → run: bytes a rank wrote to stdout
  kStderr = 3,    ///< stepd → run: bytes a rank wrote to stderr
  kStdin = 4,     ///< run → stepd: bytes for the rank's stdin
  kStdinEnd = 5,  ///< run → stepd: the rank's stdin is at its end
  kDone = 6,      ///< stepd → run, last: every rank's output has been sent
  kWinsize = 7,   ///< run → stepd: the terminal's size, "ROWS COLS", for --pty
  /// stepd → run: this node's part of a fence (EncodeFencePart); `rank` is
  /// the fence's number, from 0. To `cohort run`, only the exchange of the
  /// fence tree's addresses (fence 0); up the tree, a subtree's parts.
  kFencePart = 8,
  /// run → stepd: every node's part of fence `rank`, in node order. Also
  /// between the stepds of a step's fence tree (fence_tree.h): down, the
  /// fence's end; up, a subtree's failure.
  kFenceDone = 9,
  /// stepd → stepd, on a link one stepd dials another by to ask it (a
  /// PMIx direct-modex get): request number `rank`, and the request.
  kAsk = 10,
  /// stepd → stepd: the answer to request `rank`, as EncodeFenceDone writes
  /// a fence's end ("0" and the data, or "1" and why not).
  kAnswer = 11,
};

struct Frame {
  FrameKind kind = FrameKind::kStdout;
  std::int32_t rank = -1;  ///< the step's rank; -1 for Hello and Done
  std::string data;
  friend bool operator==(const Frame&, const Frame&) = default;
};

inline constexpr std::size_t kFrameHeaderSize = 9;
/// The most bytes one frame carries; a longer one is refused as corrupt.
inline constexpr std::uint32_t kMaxFrameData = 1U << 20;
/// A fence's frames (and an answer's) carry ranks' published data: at most this.
inline constexpr std::uint32_t kMaxFenceData = 64U << 20;
/// kMaxFenceData for the kinds that carry ranks' data (kFencePart, kFenceDone,
/// kAnswer), kMaxFrameData for the others.
[[nodiscard]] std::uint32_t MaxFrameData(FrameKind kind);

/// The frame as bytes: header, then data (at most kMaxFrameData).
[[nodiscard]] std::string EncodeFrame(const Frame& frame);

/// Takes the frames complete at the front of `buffer` into `out` and removes
/// their bytes; an incomplete last frame stays for the next read.
/// InvalidArgument for an unknown kind or a length over kMaxFrameData: the
/// peer is not a cohort-stepd or `cohort run`, and the connection should be
/// closed.
[[nodiscard]] absl::Status DecodeFrames(std::string& buffer, std::vector<Frame>& out);

/// Who connects: the step's key, the step, the node and the ranks it runs.
struct Hello {
  std::string key;  ///< hex, from `cohort run`, through the controller
  std::int64_t job = 0;
  int step = 0;
  std::string node;
  int first_rank = 0;  ///< the step's rank of the node's first task
  int ranks = 0;       ///< tasks on the node
  friend bool operator==(const Hello&, const Hello&) = default;
};
/// "KEY JOB STEP NODE FIRST_RANK RANKS".
[[nodiscard]] std::string EncodeHello(const Hello& hello);
/// InvalidArgument naming what is missing or malformed.
[[nodiscard]] absl::StatusOr<Hello> ParseHello(std::string_view text);

/// One node's part of a fence: the node's index in the step, the step's
/// node count, and the bytes its PMIx server gave. "INDEX NODES\n" then the
/// bytes.
struct FencePart {
  int node_index = 0;
  int nodes = 0;
  std::string data;
  friend bool operator==(const FencePart&, const FencePart&) = default;
};
[[nodiscard]] std::string EncodeFencePart(const FencePart& part);
/// A fence's end: "0" and every node's part, or "1" and why it failed.
[[nodiscard]] std::string EncodeFenceDone(const absl::StatusOr<std::string>& all);
/// The parts, or Aborted with why the fence failed; InvalidArgument when
/// malformed.
[[nodiscard]] absl::StatusOr<std::string> ParseFenceDone(std::string_view text);
/// InvalidArgument for a malformed header or an index outside 0..nodes-1.
[[nodiscard]] absl::StatusOr<FencePart> ParseFencePart(std::string_view text);

/// Whether two keys are equal, in time that does not depend on where they
/// differ (a peer must not learn the key byte by byte).
[[nodiscard]] bool SameKey(std::string_view a, std::string_view b);

}  // namespace cohort::io
