// RunDaemon: pollend's main(). Parses the configuration (exit 2 with a message
// naming the option on a bad value), loads the secret and the persisted state,
// starts the driver, the RESP server and the HTTP server, then waits for a
// signal: SIGUSR1 writes a snapshot; SIGTERM/SIGINT stop accepting clients,
// flush the add log, write a final snapshot, leave the cluster and return 0.
#pragma once

namespace pollen::runtime {

// The project's version (CMakeLists.txt's project(VERSION)), as the package's.
inline constexpr char kPollenVersion[] = POLLEN_VERSION;

int RunDaemon(int argc, char** argv);

}  // namespace pollen::runtime
