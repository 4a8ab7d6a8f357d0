// pollend: the Pollen node daemon. See node/runtime/daemon.h.
#include "node/runtime/daemon.h"

int main(int argc, char** argv) { return pollen::runtime::RunDaemon(argc, argv); }
