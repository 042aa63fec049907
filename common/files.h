// Whole files: read into a string, and written without ever leaving a half-written file behind (a temporary file
// beside the target, fsync, then rename over it; the safetensors and .npy writers do the same for their formats).
// A directory of files written as one (StagedDir: --save's model directory).
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>  // flock
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>  // mkstemp
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>  // pair
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

// An input named by the user must be a file: a FIFO's open() waits for a writer forever (the program hung, silent),
// and a device or socket is no input file either. Fails naming `what` (e.g. "model config") and the path when the
// path exists and is one of those; a missing path or a directory is left to the caller's own message.
inline void refuse_special_file(const std::string& path, const char* what) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return;
    const char* kind = S_ISFIFO(st.st_mode) ? "a named pipe (FIFO)" : S_ISCHR(st.st_mode) ? "a character device"
                       : S_ISBLK(st.st_mode) ? "a block device" : S_ISSOCK(st.st_mode) ? "a socket" : "no regular file";
    fail("%s %s is %s, not a file\n---> HINT: give a regular file (a named pipe would be read only once a writer "
         "opened it: the program would wait for it without a word)", what, path.c_str(), kind);
}

inline std::string read_file_bytes(const std::string& path) {
    refuse_special_file(path, "input");
    std::ifstream f(path, std::ios::binary);
    CHECK_USER(f, "cannot read %s: %s", path.c_str(), std::strerror(errno));
    std::stringstream ss;
    ss << f.rdbuf();
    CHECK_USER(!f.bad(), "cannot read %s", path.c_str());
    return ss.str();
}

// The directory a path names a file in: "." for a bare name, "/" for "/x" (to fsync after a rename, to see it exists).
inline std::string dir_of(const std::string& path) {
    size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

// The file a path names, as "device:inode": hard links and symbolic links to one file share it, where their paths
// (even canonical ones) differ. A path that cannot be stat'ed is its own identity (its reader reports that).
inline std::string file_identity(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return "path " + path;
    return std::to_string((unsigned long long)st.st_dev) + ":" + std::to_string((unsigned long long)st.st_ino);
}

// 0 when a file can be created in dir (one is made and removed at once), else the errno that stopped it: mode bits
// (access(W_OK)) say yes to root where the filesystem says no (/proc, /sys), so an output checked at the start is
// checked by doing it.
inline int probe_create(const std::string& dir) {
    std::string probe = dir + "/.prac_probe.XXXXXX";
    const int fd = mkstemp(probe.data());
    if (fd < 0) return errno;
    close(fd);
    unlink(probe.c_str());
    return 0;
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

// Where a symbolic link at path points when that is not a directory (nothing there, or a file), "" otherwise: an
// output directory's error names it (a dangling link was called "a file").
inline std::string link_target_that_is_not_a_dir(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(path, ec)) || fs::is_directory(path, ec)) return "";
    const fs::path target = fs::read_symlink(path, ec);
    return ec ? "?" : target.string();
}

// This machine's name as temp directory names carry it: [A-Za-z0-9.-] only (the names are split at '_'), so that a
// leftover is known as this host's (its writer can be checked) or another's (it cannot: kept).
inline std::string host_tag() {
    char buf[256] = {0};
    if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
    std::string s(buf);
    if (s.size() > 64) s.resize(64);
    for (char& c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-'))
            c = '-';
    return s;
}

// A file-size limit (ulimit -f) ends a process with SIGXFSZ at the write that crosses it, silently and between
// two bytes of a record. Ignored, that write fails with EFBIG ("File too large"), which our writers report as they
// report a full disk. Called first thing by the trainers, finetune_roberta, prep_data, prac_analyze and bench_gpu.
inline void file_size_limit_as_error() { signal(SIGXFSZ, SIG_IGN); }

// A closed standard output (the reader of `| tee` or `| head` gone: a Ctrl-C reaches the whole pipeline) ends a
// process with SIGPIPE at its next print, silently, before the stop checkpoint that the Ctrl-C asked for (exit 141,
// the run since the last checkpoint lost). Ignored, the print fails with EPIPE: the run goes on (its --log, metrics
// and checkpoints are files), stops as a signal asks, and check_stdout_written reports the lost output at its end.
// Called by the programs that run long and save state (the trainers, finetune_roberta, prep_data) once their
// --help and --plan are past: those, prac_analyze and the benchmarks keep a filter's convention (`| head` ends them
// quietly).
inline void closed_stdout_as_error() { signal(SIGPIPE, SIG_IGN); }

// The output directories this process made (parents first) and the files it locked (lock_until_exit: device and
// inode): a run that fails before it writes an output removes what it made (remove_made_output_dirs_left_empty, on
// the error path of main), so that a refused run leaves no empty folder behind. A directory that holds anything
// else, or that was there before, stays; so does a lock file there that another run holds, or a folder it locked
// (two runs started at once, this one made the folder, the other locked it first: removing its lock and the folder
// would let a third run in beside it).
struct MadeOutputDirs {
    std::vector<std::string> dirs;
    std::vector<std::pair<dev_t, ino_t>> locked;
};
inline MadeOutputDirs& made_output_dirs() {
    static MadeOutputDirs made;
    return made;
}

// An exclusive flock on PATH (a file created when missing, never removed but with a directory this process made and
// leaves empty: a lock file that stays has no race between a remover and a waiter; or a directory, which locks
// itself and gains no file), held until this process ends, however it ends (the kernel drops it with the
// descriptor, which is kept open for that). 0 when held; EWOULDBLOCK when another process holds it; another errno
// where it cannot be had (a file system without locks: ENOLCK).
inline int lock_until_exit(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EISDIR) fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    struct stat st;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return err;
    }
    made_output_dirs().locked.emplace_back(st.st_dev, st.st_ino);
    return 0;
}

inline void remove_made_output_dirs_left_empty() {
    MadeOutputDirs& made = made_output_dirs();
    auto locked_here = [&](const std::string& f) {
        struct stat st;
        return ::lstat(f.c_str(), &st) == 0 && std::find(made.locked.begin(), made.locked.end(),
                                                         std::make_pair(st.st_dev, st.st_ino)) != made.locked.end();
    };
    auto locked_by_another = [](const std::string& dir) {  // a --save folder locks itself (claim_save_dir)
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        const bool held = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        if (fd >= 0) ::close(fd);  // (and with it the lock, where this took it)
        return held;
    };
    for (auto d = made.dirs.rbegin(); d != made.dirs.rend(); ++d) {  // children first
        if (!locked_here(*d) && locked_by_another(*d)) continue;
        std::error_code ec;
        std::vector<std::string> own;
        bool only_own = true;
        for (const auto& e : std::filesystem::directory_iterator(*d, ec)) {
            if (!locked_here(e.path().string())) only_own = false;
            own.push_back(e.path().string());
        }
        if (ec || !only_own) continue;
        for (const std::string& f : own) std::remove(f.c_str());
        ::rmdir(d->c_str());
    }
    made.dirs.clear();
}

// A process we can see and that exists (EPERM: it exists but belongs to someone else).
inline bool pid_alive(long pid) { return kill((pid_t)pid, 0) == 0 || errno == EPERM; }

// The process id a leftover's name ends with (".staged_HOST_PID", "NAME.tmp.PID"): digits, no leading zero, at most
// 9 of them; -1 for anything else (not ours to judge).
inline long pid_in_name(const std::string& digits) {
    if (digits.empty() || digits.size() > 9 || digits[0] == '0' ||
        digits.find_first_not_of("0123456789") != std::string::npos)
        return -1;
    return std::stol(digits);
}

// An output directory whose files are replaced together (--save: weights, config, tokenizer). The files are written
// into DIR/.staged_HOST_PID (file()); commit() checks that each can take its place, moves them into DIR with `last`
// (the weights) moved last, then removes DIR's files that `stale` names and the new set lacks (an earlier model's
// tokenizer.json, which loaders would read before the new tokenizer), returning their names sorted, and fsyncs DIR. A
// failure while writing (a full disk) removes the staging directory and leaves DIR as it was; a move that fails
// keeps the staging directory, whose name the error gives (renames do not fail for space: a directory in a file's
// place, permissions). A staging directory of a dead process of this host is removed when the next one begins.
struct StagedDir {
    std::string dir, tmp;
    bool keep = false;  // committed, or a failed move: the files are in DIR or must stay in tmp

    explicit StagedDir(const std::string& d)
        : dir(d), tmp(d + "/.staged_" + host_tag() + "_" + std::to_string((long long)getpid())) {
        std::error_code ec;
        const std::string mine = ".staged_" + host_tag() + "_";
        for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {  // leftovers of killed saves
            const std::string name = e.path().filename().string();
            const long pid = name.compare(0, mine.size(), mine) == 0 ? pid_in_name(name.substr(mine.size())) : -1;
            if (pid > 0 && !pid_alive(pid)) std::filesystem::remove_all(e.path(), ec);
        }
        std::filesystem::remove_all(tmp, ec);  // (this pid's own, from a process that had it before)
        std::filesystem::create_directories(tmp, ec);
        CHECK_USER(!ec, "cannot create directory %s: %s", tmp.c_str(), ec.message().c_str());
    }
    ~StagedDir() {
        std::error_code ec;
        if (!keep) std::filesystem::remove_all(tmp, ec);
    }
    StagedDir(const StagedDir&) = delete;
    StagedDir& operator=(const StagedDir&) = delete;

    std::string file(const std::string& name) const { return tmp + "/" + name; }

    std::vector<std::string> commit(const std::string& last, bool (*stale)(const std::string& name) = nullptr) {
        std::vector<std::string> names, removed;
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(tmp, ec))
            if (e.path().filename() != last) names.push_back(e.path().filename().string());
        CHECK_USER(!ec, "cannot list %s: %s", tmp.c_str(), ec.message().c_str());
        names.push_back(last);
        for (const std::string& name : names)  // before anything moves: DIR stays as it was
            CHECK_USER(!std::filesystem::is_directory(dir + "/" + name, ec), "cannot save %s: %s/%s is a directory",
                       name.c_str(), dir.c_str(), name.c_str());
        for (const std::string& name : names) {
            const std::string from = file(name), to = dir + "/" + name;
            if (std::rename(from.c_str(), to.c_str()) != 0) {
                keep = true;  // the new files not yet moved stay there
                fail("cannot move %s to %s: %s\n---> HINT: the files not moved yet are in %s", from.c_str(),
                     to.c_str(), std::strerror(errno), tmp.c_str());
            }
        }
        keep = true;
        std::filesystem::remove(tmp, ec);
        for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
            const std::string name = e.path().filename().string();
            const bool in_new_set = std::find(names.begin(), names.end(), name) != names.end();
            if (stale && e.is_regular_file() && stale(name) && !in_new_set && std::remove(e.path().c_str()) == 0)
                removed.push_back(name);
        }
        int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
        if (fd >= 0) {
            ::fsync(fd);
            ::close(fd);
        }
        std::sort(removed.begin(), removed.end());
        return removed;
    }
};
