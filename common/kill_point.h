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
    // what follows the name, read strictly: a test that misspells it would otherwise pass without the crash it asked
    // for (":SIGTERM" was raise(0), nothing)
    const char* rest = want + len;
    char* end = nullptr;
    long at = 1;
    if (*rest == '@') {
        at = std::strtol(rest + 1, &end, 10);
        if (end == rest + 1 || at < 1) fail("PRAC_TEST_KILL_AT=%s: after '@' comes a pass count of 1 or more", want);
        rest = end;
    }
    const char* sig = *rest == ':' ? rest + 1 : nullptr;
    long signo = 0;
    if (sig && std::strcmp(sig, "error") != 0 && std::strcmp(sig, "hang") != 0) {
        signo = std::strtol(sig, &end, 10);
        if (end == sig || *end || signo < 1 || signo >= NSIG)
            fail("PRAC_TEST_KILL_AT=%s: after ':' comes a signal number, error or hang", want);
    }
    if (*rest && !sig) fail("PRAC_TEST_KILL_AT=%s: expected <name>[@<n>][:<signal>|error|hang]", want);
    static std::atomic<long> passes{0};  // one name is watched per process: a count of its passes is enough
    if (++passes != at) return;
    if (sig && std::strcmp(sig, "error") == 0) fail("test: an error at %s (PRAC_TEST_KILL_AT=%s)", name, want);
    if (sig && std::strcmp(sig, "hang") == 0)
        for (;;) pause();
    if (sig) {
        raise((int)signo);  // delivered before raise returns, to this thread
        return;
    }
    kill(getpid(), SIGKILL);
    pause();  // SIGKILL is not delivered synchronously on every system; never go on past the point
}
