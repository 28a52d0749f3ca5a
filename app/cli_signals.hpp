#pragma once
// SIGINT and SIGTERM in attnviz-cli. One handler, installed by main() before
// anything else, acting by mode:
//   abort     (default) the temporary files of writes in progress are removed
//             and the process dies of the signal as usual (exit status 128+N);
//   graceful  (while training) the first signal asks the session to stop after
//             the current batch (interrupted()); a second one aborts as above;
//   defer     (while the final checkpoint is written) signals are only noted:
//             the save finishes and the command exits with 130 (SIGINT) or
//             143 (SIGTERM) afterwards, so no save is ever cut in half.
// A SIGKILL cannot be handled: its temporary file stays until the next save to
// the same path removes it (core/io/atomic_file.hpp).
namespace attnviz::cli {

enum class SignalMode { abort, graceful, defer };

/// Installs the handler for SIGINT and SIGTERM and ignores SIGXFSZ (a file-size
/// limit then fails a write with "File too large" instead of killing the process).
void install_signal_handlers();

/// Sets the mode from now on (train, bench and compare: defer until the process ends,
/// so that a signal after the final save cannot turn exit code 130 into a death).
void set_signal_mode(SignalMode mode);

/// Sets the mode while alive; the previous mode comes back afterwards.
class SignalScope {
public:
    explicit SignalScope(SignalMode mode);
    ~SignalScope();
    SignalScope(const SignalScope&) = delete;
    SignalScope& operator=(const SignalScope&) = delete;

private:
    SignalMode m_previous;
};

/// True once a SIGINT or SIGTERM arrived (in graceful or defer mode).
bool interrupted();
/// The first of them: SIGINT or SIGTERM, 0 when none.
int interrupt_signal();
/// The exit code after an interruption: 130 (SIGINT) or 143 (SIGTERM); 0 when none came.
int interrupt_exit_code();

}  // namespace attnviz::cli
