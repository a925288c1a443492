// A signal that a library call may raise, turned into the error return it comes with.
//
// Design note. Two signals are raised by system calls the kernel cache makes, and their default
// action ends the process: SIGPIPE, when hiredis writes to a socket the Redis server has closed
// (runtime/remote_cache.cpp), and SIGXFSZ, when a cache entry written to disk would pass the
// process's file-size limit (RLIMIT_FSIZE, `ulimit -f`; runtime/disk_cache.cpp). In both cases
// the call also fails with an error (EPIPE, EFBIG) that the cache handles: the layer is skipped,
// the entry not stored, the run goes on. A library must not change the host process's
// disposition of a signal (sigaction is process-wide: it would silence the application's own
// handler, or another thread's legitimate SIGXFSZ), so instead, for the duration of the call:
//   - the signal is blocked on this thread only (pthread_sigmask), so the one the call raises
//     (both are sent to the thread that made the call) stays pending instead of acting;
//   - before unblocking, a pending instance is consumed (sigtimedwait with a zero timeout), unless
//     one was already pending when the guard began: that one was not ours to take.
// The process's dispositions and every other thread's mask are untouched. What is lost: a
// process-directed instance of the same signal sent by someone else (kill) while the guard is
// up, which is consumed with ours; both signals are only ever sent that way by a person.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <cerrno>

namespace stitch {

class SignalGuard {
 public:
  explicit SignalGuard(int signo) {
    sigemptyset(&set_);
    sigaddset(&set_, signo);
    sigset_t pending;
    sigemptyset(&pending);
    wasPending_ = sigpending(&pending) == 0 && sigismember(&pending, signo) == 1;
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~SignalGuard() {
    // The guarded call's errno is what its caller reads next; sigtimedwait's EAGAIN is not.
    const int savedErrno = errno;
    if (!wasPending_) {
      const struct timespec zero {};
      while (sigtimedwait(&set_, nullptr, &zero) > 0) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = savedErrno;
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  sigset_t set_{}, old_{};
  bool wasPending_ = false;
};

}  // namespace stitch
