// Errors that reach the user. Library code throws; each main catches, prints and exits non-zero.
// Exceptions (not exit()) so tests can assert the message of every bad-input path.
#pragma once
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

// How an internal error that cannot be thrown (a failed CUDA call: common/cuda_check.h) ends the process: exit, or,
// with several ranks, whatever the communicator installed (train/comm.cpp: MPI_Abort, after ncclCommAbort under
// NCCL), which ends every rank. A plain exit would leave the other ranks waiting in a collective until the job's
// time limit wherever the launcher does not kill a job when one rank exits (Slurm's srun by default).
inline void (*fatal_exit_hook)(int code) = nullptr;

// An error caused by the user's input (flags, files, configs). `what()` is the whole message,
// possibly several lines, the last ones starting with "---> HINT:" saying what to do next.
struct UserError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline std::string vformat(const char* fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = std::vsnprintf(nullptr, 0, fmt, ap2);
    va_end(ap2);
    std::string s(n > 0 ? (size_t)n : 0, '\0');
    if (n > 0) std::vsnprintf(s.data(), (size_t)n + 1, fmt, ap);
    return s;
}

inline std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string format(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

// fail("cannot open %s", path): throws UserError with the formatted message.
[[noreturn]] inline void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] inline void fail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    throw UserError(s);
}

// For programs whose result is what they print (--plan, prac_analyze, --help): output that never reached the file
// (a full disk, /dev/full) is an error, not exit 0.
inline void check_stdout_written(const char* what) {
    if (std::fflush(stdout) != 0 || std::ferror(stdout))
        fail("cannot write %s to the standard output (%s)", what, std::strerror(errno));
}

// check(cond, "...") for user-facing preconditions.
#define CHECK_USER(cond, ...)                  \
    do {                                       \
        if (!(cond)) fail(__VA_ARGS__);        \
    } while (0)
