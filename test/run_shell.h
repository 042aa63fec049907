// Runs a shell command for the tests that drive the trainer binaries (CPU and GPU tests alike; no gtest here).
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <regex>
#include <string>

// `cmd` with stderr merged into stdout; returns the exit status (128 + signal when killed), the output in *out.
inline int run_shell(const std::string& cmd, std::string* out = nullptr) {
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return -1;
    std::string s;
    char buf[4096];
    while (size_t k = fread(buf, 1, sizeof buf, p)) s.append(buf, k);
    int status = pclose(p);
    if (out) *out = s;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Where `out` has the watchdog's line of `rank` for --watchdog `seconds` that goes on with `stuck_in` (npos: nowhere).
// The idle time it prints is measured: a loaded machine's late wake-up says "2 s" for --watchdog 1, so any count.
inline size_t watchdog_line_at(const std::string& out, int rank, int seconds, const std::string& stuck_in) {
    const std::regex line("rank " + std::to_string(rank) + ": no progress for [0-9]+ s \\(--watchdog " +
                          std::to_string(seconds) + "\\): stuck in the " + stuck_in);
    std::smatch m;
    return std::regex_search(out, m, line) ? (size_t)m.position(0) : std::string::npos;
}
