// Whole files: read into a string, and written without ever leaving a half-written file behind (a temporary file
// beside the target, fsync, then rename over it; the safetensors and .npy writers do the same for their formats).
// A directory of files written as one (StagedDir: --save's model directory).
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// An output directory whose files are replaced together (--save: weights, config, tokenizer). The files are written
// into DIR/.staged_PID (file()), then commit() removes DIR's files that `stale` names and the new set lacks (an
// earlier model's tokenizer.json, which loaders would prefer to the new tokenizer), moves the new ones into DIR with
// `last` (the weights) moved last, and fsyncs DIR. A failure while writing (a full disk) removes the staging
// directory and leaves DIR as it was: no weights beside another model's config. Renames do not fail for space.
struct StagedDir {
    std::string dir, tmp;
    bool committed = false;

    explicit StagedDir(const std::string& d) : dir(d), tmp(d + "/.staged_" + std::to_string((long long)getpid())) {
        std::error_code ec;
        std::filesystem::remove_all(tmp, ec);  // a dead process of the same pid's leftover
        std::filesystem::create_directories(tmp, ec);
        CHECK_USER(!ec, "cannot create directory %s: %s", tmp.c_str(), ec.message().c_str());
    }
    ~StagedDir() {
        std::error_code ec;
        if (!committed) std::filesystem::remove_all(tmp, ec);
    }
    StagedDir(const StagedDir&) = delete;
    StagedDir& operator=(const StagedDir&) = delete;

    std::string file(const std::string& name) const { return tmp + "/" + name; }

    void commit(const std::string& last, bool (*stale)(const std::string& name) = nullptr) {
        std::vector<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(tmp)) {
            std::string name = e.path().filename().string();
            if (name != last) names.push_back(name);
        }
        names.push_back(last);
        for (const auto& e : std::filesystem::directory_iterator(dir)) {
            const std::string name = e.path().filename().string();
            const bool in_new_set = std::find(names.begin(), names.end(), name) != names.end();
            if (stale && e.is_regular_file() && stale(name) && !in_new_set)
                CHECK_USER(std::remove(e.path().c_str()) == 0, "cannot remove the earlier %s: %s", e.path().c_str(),
                           std::strerror(errno));
        }
        for (const std::string& name : names) {
            std::string from = file(name), to = dir + "/" + name;
            CHECK_USER(std::rename(from.c_str(), to.c_str()) == 0, "cannot move %s to %s: %s", from.c_str(),
                       to.c_str(), std::strerror(errno));
        }
        committed = true;
        std::error_code ec;
        std::filesystem::remove(tmp, ec);
        int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
        if (fd >= 0) {
            ::fsync(fd);
            ::close(fd);
        }
    }
};
