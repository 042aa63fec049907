// Crash points for tests. Code that must survive a crash anywhere (checkpoints, prep_data's shards) names the
// moments between its durable steps with kill_point("..."); a test sets PRAC_TEST_KILL_AT=<name>[@<n>] and the
// process kills itself with SIGKILL the n-th time (default: the first) it passes that point, so the test knows the
// crash happened exactly there instead of hoping a timed kill landed in the window. <name>[@<n>]:<signal> sends that
// signal instead and goes on (a user's Ctrl-C: 2, or a scheduler's SIGTERM: 15, arriving exactly there), for the
// code that must stop cleanly on one. <name>[@<n>]:error throws a UserError there instead: an error that only the
// process given the variable meets (one rank of a job), for the code that must still say it. <name>[@<n>]:hang stops
// the calling thread there for good (a hung rank, for the watchdog). Unset, a point costs a getenv.
#pragma once
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

inline void kill_point(const char* name) {
    const char* want = std::getenv("PRAC_TEST_KILL_AT");
    if (!want) return;
    size_t len = std::strcspn(want, "@:");
    if (std::strlen(name) != len || std::strncmp(want, name, len) != 0) return;
    const char* count = std::strchr(want, '@');
    const char* sig = std::strchr(want, ':');
    static std::atomic<long> passes{0};  // one name is watched per process: a count of its passes is enough
    if (++passes != (count && std::atol(count + 1) > 0 ? std::atol(count + 1) : 1)) return;
    if (sig && std::strcmp(sig + 1, "error") == 0) fail("test: an error at %s (PRAC_TEST_KILL_AT=%s)", name, want);
    if (sig && std::strcmp(sig + 1, "hang") == 0)
        for (;;) pause();
    if (sig) {
        raise(std::atoi(sig + 1));  // delivered before raise returns, to this thread
        return;
    }
    kill(getpid(), SIGKILL);
    pause();  // SIGKILL is not delivered synchronously on every system; never go on past the point
}
