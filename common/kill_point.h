// Crash points for tests. Code that must survive a crash anywhere (checkpoints, prep_data's shards) names the
// moments between its durable steps with kill_point("..."); a test sets PRAC_TEST_KILL_AT=<name>[@<n>] and the
// process kills itself with SIGKILL the n-th time (default: the first) it passes that point, so the test knows the
// crash happened exactly there instead of hoping a timed kill landed in the window. Unset, a point costs a getenv.
#pragma once
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

inline void kill_point(const char* name) {
    const char* want = std::getenv("PRAC_TEST_KILL_AT");
    if (!want) return;
    const char* at = std::strchr(want, '@');
    size_t len = at ? (size_t)(at - want) : std::strlen(want);
    if (std::strlen(name) != len || std::strncmp(want, name, len) != 0) return;
    static std::atomic<long> passes{0};  // one name is watched per process: a count of its passes is enough
    if (++passes < (at ? std::atol(at + 1) : 1)) return;
    kill(getpid(), SIGKILL);
    pause();  // SIGKILL is not delivered synchronously on every system; never go on past the point
}
