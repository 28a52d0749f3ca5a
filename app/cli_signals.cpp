// SIGINT/SIGTERM handling of attnviz-cli (see cli_signals.hpp).
#include "app/cli_signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/io/atomic_file.hpp"

namespace attnviz::cli {

namespace {

// Only lock-free atomics and async-signal-safe calls in the handler.
std::atomic<int> g_mode{static_cast<int>(SignalMode::abort)};
std::atomic<int> g_first{0};   // the first SIGINT/SIGTERM
std::atomic<int> g_count{0};   // how many arrived
std::atomic<bool> g_told{false};

void say(const char* text) {
    const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
    (void)ignored;
}

extern "C" void on_signal(int sig) {
    const int saved_errno = errno;
    int none = 0;
    g_first.compare_exchange_strong(none, sig);
    const int before = g_count.fetch_add(1);
    const auto mode = static_cast<SignalMode>(g_mode.load());
    if (mode == SignalMode::defer) {
        if (!g_told.exchange(true)) say("\nattnviz-cli: writing the checkpoint first; exiting once it is saved\n");
        errno = saved_errno;
        return;
    }
    if (mode == SignalMode::graceful && before == 0) {  // the main thread turns it into session.stop()
        errno = saved_errno;
        return;
    }
    // Dying: no half-written temporary file may outlive the process.
    attnviz::remove_temporaries_in_progress();
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
    ::raise(sig);  // delivered as soon as this handler returns (the signal is blocked in it)
    errno = saved_errno;
}

}  // namespace

void install_signal_handlers() {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);  // one handler at a time, whichever of the two came
    sigaddset(&sa.sa_mask, SIGTERM);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::signal(SIGXFSZ, SIG_IGN);
}

void set_signal_mode(SignalMode mode) { g_mode.store(static_cast<int>(mode)); }

SignalScope::SignalScope(SignalMode mode)
    : m_previous(static_cast<SignalMode>(g_mode.exchange(static_cast<int>(mode)))) {}

SignalScope::~SignalScope() { g_mode.store(static_cast<int>(m_previous)); }

bool interrupted() { return g_first.load() != 0; }

int interrupt_signal() { return g_first.load(); }

int interrupt_exit_code() {
    const int sig = g_first.load();
    return sig == 0 ? 0 : 128 + sig;
}

}  // namespace attnviz::cli
