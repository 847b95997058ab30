#include "profiler/stop_signal.h"

#include <csignal>

namespace hetplan::profiler {
namespace {

volatile std::sig_atomic_t g_stop = 0;
struct sigaction g_old_int {};
struct sigaction g_old_term {};

extern "C" void on_stop_signal(int sig) {
  if (g_stop) {
    // Second signal: default action now.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_stop = 1;
}

}  // namespace

StopSignalGuard::StopSignalGuard() {
  g_stop = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignalGuard::~StopSignalGuard() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

bool StopSignalGuard::requested() { return g_stop != 0; }

void StopSignalGuard::request() { g_stop = 1; }

}  // namespace hetplan::profiler
