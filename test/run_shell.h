// Runs a shell command for the tests that drive the trainer binaries (CPU and GPU tests alike; no gtest here).
#pragma once
#include <sys/wait.h>

#include <cstdio>
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
