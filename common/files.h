// Whole files: read into a string, and written without ever leaving a half-written file behind (a temporary file
// beside the target, fsync, then rename over it; the safetensors and .npy writers do the same for their formats).
#pragma once
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"

// Writes all of [src, src + n) to fd, through short writes and EINTR. 0, or the errno that stopped it (EIO for a
// write that wrote nothing); the caller's message names the file.
inline int write_all(int fd, const void* src, size_t n) {
    const char* p = (const char*)src;
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

inline std::string read_file_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    CHECK_USER(f, "cannot read %s: %s", path.c_str(), std::strerror(errno));
    std::stringstream ss;
    ss << f.rdbuf();
    CHECK_USER(!f.bad(), "cannot read %s", path.c_str());
    return ss.str();
}

inline void write_file_atomic(const std::string& path, const std::string& bytes) {
    std::string tmp = path + ".tmp." + std::to_string((long long)getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    CHECK_USER(f, "cannot create %s: %s", tmp.c_str(), std::strerror(errno));
    bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok = ok && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
        if (ok) err = errno;
        std::remove(tmp.c_str());
        fail("cannot write %s: %s\n---> HINT: is the disk full?", path.c_str(), std::strerror(err));
    }
}
