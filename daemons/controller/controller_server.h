// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <functional>
#include <string>

namespace cohort::controller {

/// What cohort-controller is told on its command line.
struct ServerFlags {
  std::string config_path;
  std::string listen;  ///< empty: the ControllerAddr entry that names this host
  int port = -1;       ///< -1: ControllerPort; 0: any free port
  std::string state_dir;
  std::string port_file;  ///< where to write the TCP port listened on
  int http_port = -1;
  std::string http_port_file;
  std::string log_level = "info";
  bool check_state = false;  ///< check the state database, summarise it, exit
  /// With PostgreSQL: wait until the state database answers rather than
  /// exit (a controller that lost its lease starts again with it: what cut
  /// it from the lease may still cut it from the database).
  bool wait_for_database = false;
};

/// How a run ended: an exit status; or `again_because` set, and the
/// program is to execute itself again listening on `port` and `http_port`
/// (a valid reload of cohort.conf, or a lost lease: it waits as a standby).
struct ServerExit {
  int status = 0;
  std::string again_because;
  int port = 0;
  int http_port = -1;
  bool wait_for_database = false;  ///< executed again with --wait-for-database
};

/// Ends the process, or executes it again, as `end` says, and does not
/// return. Run calls it from inside itself when a failed commit or a lost
/// lease left the servers running: their streams may still call into the
/// controller, so nothing may be destroyed before the process goes.
using LeaveNow = std::function<void(const ServerExit& end)>;

/// The controller service as a whole: reads the configuration, waits as a
/// standby while another controller holds the lease (PostgreSQL), loads
/// the state, serves the TCP port, the local socket and the HTTP port until
/// SIGINT or SIGTERM (SIGHUP rereads cohort.conf, SIGUSR2 reopens LogFile),
/// Stop(), a failed commit or a lost lease, then stops in order.
/// cohort-controller's main parses the flags and runs one; a test runs one
/// on port 0 in a thread of its own.
class ControllerServer {
 public:
  /// `leave_now` is called only where Run cannot return (see LeaveNow);
  /// should it return, the process ends with status 1.
  ControllerServer(ServerFlags flags, LeaveNow leave_now);

  /// Runs to the end; errors that keep it from starting are said on stderr.
  ServerExit Run();
  /// Any thread: the serving stops, as at SIGTERM (within 100 ms).
  void Stop();
  /// The TCP port once it serves; 0 before.
  [[nodiscard]] int Port() const { return serving_port_; }

 private:
  ServerFlags flags_;
  LeaveNow leave_now_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<int> serving_port_{0};
};

}  // namespace cohort::controller
