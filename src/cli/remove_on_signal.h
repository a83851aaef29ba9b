// A command's output written as OUT.tmp and renamed over OUT (quantize, make-model): the path
// checked before any work, the temporary file created exclusively, and removed when a signal
// ends the process.
#pragma once

#include <signal.h>

#include <string>

#include "common/status.h"

namespace llmserve::cli {

/// Checks, before any work, a path that `command` (quantize, make-model) will write as OUT.tmp
/// and rename over: not empty, and not an existing non-regular file (renaming over a directory
/// fails only after all the work; over /dev/null or a FIFO it would replace the node itself).
/// Errors: InvalidArgument naming `flag` or the path.
Status check_output_path(const std::string& out, const char* command, const char* flag);

/// Creates `tmp` (a command's temporary output, OUT.tmp) empty, refusing one that already
/// exists (O_EXCL): it may be a file of the user's or an earlier run killed with SIGKILL, and is
/// not overwritten. Errors: InvalidArgument naming the file when it exists, NotFound ("PATH:
/// cannot create file: strerror", as GgufWriter says) when it cannot be created.
Status create_temp_file(const std::string& tmp);

/// While alive, SIGINT (Ctrl-C), SIGTERM, SIGHUP and SIGPIPE (stdout piped to a reader that
/// quit, e.g. `| head`) first remove `path` (unlink is async-signal-safe) and then end the
/// process as the signal would have, so an interrupted `quantize` or `make-model` leaves no
/// partial OUT.tmp behind. A signal the process was started with ignored (nohup, a shell's
/// background job) stays ignored. One at a time; a path too long for the buffer (4 KiB) is
/// not registered.
class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(const std::string& path);
  ~RemoveOnSignal();
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;

 private:
  static constexpr int kCount = 4;
  struct sigaction old_[kCount] {};
  bool armed_ = false;
};

}  // namespace llmserve::cli
