// See checkpoint.h for the layout and the guarantees.
#include "train/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "common/error.h"
#include "common/files.h"  // write_all, host_tag, pid_alive
#include "common/kill_point.h"
#include "common/safetensors.h"
#include "common/strings.h"  // join, split_at
#include "data/byte_bpe.h"    // utf8_escape_invalid

namespace fs = std::filesystem;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "state tensors are copied as little-endian bytes");

static const char* const STATE_FORMAT = "prac-train-state";
static const char* const RESERVED_PREFIX = "ckpt.";

// ----------------------------------------------------------------------------
// names

std::string checkpoint_dir_name(int64_t step) { return format("step_%08lld", (long long)step); }

std::string checkpoint_path(const std::string& dir, int64_t step) { return dir + "/" + checkpoint_dir_name(step); }

// Digits only, and canonical (what %08lld prints), so step_1 and step_000000001 are not taken for step 1.
static bool parse_step_digits(const std::string& s, int64_t* step) {
    if (s.size() < 8 || s.size() > 18) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    long long v = std::strtoll(s.c_str(), nullptr, 10);
    if (format("%08lld", v) != s) return false;
    *step = v;
    return true;
}


static bool parse_step_name(const std::string& name, int64_t* step) {
    return name.compare(0, 5, "step_") == 0 && parse_step_digits(name.substr(5), step);
}

// A leftover of a writer: .tmp_step_N_HOST_PID, .old_step_N_HOST_PID or .del_step_N_HOST_PID.
struct DotDir {
    std::string kind;  // "tmp", "old" or "del"
    int64_t step = 0;
    std::string host;
    long pid = 0;
};

static std::string dot_dir_name(const char* kind, int64_t step) {
    return format(".%s_step_%08lld_%s_%ld", kind, (long long)step, host_tag().c_str(), (long)getpid());
}

static bool parse_dot_dir(const std::string& name, DotDir* out) {
    static const char* const kinds[] = {"tmp", "old", "del"};
    for (const char* k : kinds) {
        std::string prefix = format(".%s_step_", k);
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        std::string rest = name.substr(prefix.size());
        size_t a = rest.find('_'), b = rest.rfind('_');
        if (a == std::string::npos || b == a) return false;
        std::string pid = rest.substr(b + 1);
        if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) return false;
        if (!parse_step_digits(rest.substr(0, a), &out->step)) return false;
        out->kind = k;
        out->host = rest.substr(a + 1, b - a - 1);
        out->pid = std::strtol(pid.c_str(), nullptr, 10);
        return !out->host.empty() && out->pid > 0;
    }
    return false;
}

bool is_checkpoint_folder_name(const std::string& name) {
    int64_t step;
    DotDir dot;
    return parse_step_name(name, &step) || parse_dot_dir(name, &dot);
}

// A leftover we may remove: ours (this host) and its writer is gone. Another host's: we cannot tell, keep it.
static bool dot_dir_is_stale(const DotDir& d) { return d.host == host_tag() && !pid_alive(d.pid); }

static std::string parent_of(const std::string& path) {
    fs::path p = fs::path(path).lexically_normal();
    if (!p.has_filename()) p = p.parent_path();  // "a/b/" -> "a/b"
    fs::path parent = p.parent_path();
    return parent.empty() ? "." : parent.string();
}

static std::string base_of(const std::string& path) {
    fs::path p = fs::path(path).lexically_normal();
    if (!p.has_filename()) p = p.parent_path();
    return p.filename().string();
}

// ----------------------------------------------------------------------------
// durable file system operations

// fsync a file or directory. For directories some filesystems refuse (EINVAL): nothing more we can do there.
static void fsync_path(const std::string& path, bool is_dir) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | (is_dir ? O_DIRECTORY : 0));
    if (fd < 0) fail("cannot open %s to flush it to disk: %s", path.c_str(), strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0 && !(is_dir && (err == EINVAL || err == EROFS)))
        fail("cannot flush %s to disk: %s\n---> HINT: check the disk (space, I/O errors) and write the checkpoint "
             "again", path.c_str(), strerror(err));
}

static void write_file_synced(const std::string& path, const std::string& content) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail("cannot create %s: %s", path.c_str(), strerror(errno));
    if (const int err = write_all(fd, content.data(), content.size())) {
        close(fd);
        fail("cannot write %s: %s\n---> HINT: check that the disk has space", path.c_str(), strerror(err));
    }
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0) fail("cannot flush %s to disk: %s", path.c_str(), strerror(err));
}

static void rename_or_fail(const std::string& from, const std::string& to) {
    if (rename(from.c_str(), to.c_str()) != 0) {
        int err = errno;
        fail("cannot rename %s to %s: %s%s", from.c_str(), to.c_str(), strerror(err),
             err == EXDEV ? "\n---> HINT: both must be on the same filesystem (checkpoint_begin makes the temp "
                            "directory inside the checkpoint directory)" : "");
    }
}

// Best-effort recursive removal: a failure is reported, not thrown (the checkpoint itself is fine, and a dead
// writer's leftover is retried by the next cleanup).
static bool remove_tree(const std::string& path) {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) {
        std::fprintf(stderr, "warning: cannot remove %s: %s\n", path.c_str(), ec.message().c_str());
        return false;
    }
    return true;
}

// ----------------------------------------------------------------------------
// completeness

// file_checksum as the COMPLETE marker and the --overwrite mark write it: 16 hex digits
static std::string checksum_hex(const std::string& path) { return format("%016" PRIx64, file_checksum(path)); }

// Reads and checks the COMPLETE marker of path and the sizes of the files it lists; *marker gets its JSON.
static bool read_marker(const std::string& path, nlohmann::json* marker, std::string* why) {
    auto no = [&](const std::string& reason) {
        if (why) *why = reason;
        return false;
    };
    std::string file = path + "/" + CKPT_COMPLETE_FILE;
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return no(format("it has no %s marker", CKPT_COMPLETE_FILE));
    nlohmann::json& j = *marker;
    try {
        std::FILE* f = std::fopen(file.c_str(), "rb");
        if (!f) return no(format("cannot read %s: %s", file.c_str(), strerror(errno)));
        std::string text;
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
        std::fclose(f);
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        return no(format("its %s marker is not valid JSON (%s)", CKPT_COMPLETE_FILE, e.what()));
    }
    if (!j.is_object() || !j.contains("files") || !j["files"].is_object() || !j.contains("format_version") ||
        !j["format_version"].is_number_integer())
        return no(format("its %s marker lacks \"files\" or \"format_version\"", CKPT_COMPLETE_FILE));
    const int64_t version = j["format_version"].get<int64_t>();
    if (version < 1 || version > CHECKPOINT_FORMAT_VERSION)
        return no(format("its %s marker has format version %lld; this build reads versions 1 to %d (resume with the "
                         "build that wrote it)", CKPT_COMPLETE_FILE, (long long)version, CHECKPOINT_FORMAT_VERSION));
    // a step directory holds the step its name says: a copy under another step's name would resume from its own
    // step while ordered as the other (the newest found would not be the newest written)
    int64_t named = -1;
    if (parse_step_name(base_of(path), &named) &&
        (!j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() != named))
        return no(format("its %s marker says step %s, not the step %lld of its name", CKPT_COMPLETE_FILE,
                         j.contains("step") ? j["step"].dump().c_str() : "(none)", (long long)named));
    for (auto it = j["files"].begin(); it != j["files"].end(); ++it) {
        const std::string& name = it.key();
        if (!it.value().is_number_unsigned()) return no(format("its %s marker has a bad size for %s", CKPT_COMPLETE_FILE,
                                                               name.c_str()));
        uint64_t want = it.value().get<uint64_t>();
        struct stat st;
        std::string f = path + "/" + name;
        if (stat(f.c_str(), &st) != 0)
            return no(errno == ENOENT ? format("%s is missing", name.c_str())
                                      : format("%s cannot be read (%s)", name.c_str(), std::strerror(errno)));
        if (!S_ISREG(st.st_mode))
            return no(format("%s is %s, not a file", name.c_str(), S_ISDIR(st.st_mode) ? "a directory" : "a special file"));
        if ((uint64_t)st.st_size != want)
            return no(format("%s is %llu bytes but was %llu bytes when the checkpoint was written", name.c_str(),
                             (unsigned long long)st.st_size, (unsigned long long)want));
    }
    return true;
}

bool checkpoint_is_complete(const std::string& path, std::string* why) {
    nlohmann::json marker;
    return read_marker(path, &marker, why);
}

bool checkpoint_verify(const std::string& path, std::string* why) {
    nlohmann::json marker;
    if (!read_marker(path, &marker, why)) return false;
    auto no = [&](const std::string& reason) {
        if (why) *why = reason;
        return false;
    };
    // every marker this format version writes has them: without, nothing vouches for the files' content (a flipped
    // bit in the key let a corrupted model.safetensors resume with exit 0)
    if (!marker.contains("checksums"))
        return no(format("its %s marker has no checksums (damaged, or written by a build older than checksums: "
                         "resume it with that build)", CKPT_COMPLETE_FILE));
    const nlohmann::json& sums = marker["checksums"];
    if (!sums.is_object()) return no(format("its %s marker has bad checksums", CKPT_COMPLETE_FILE));
    for (auto it = marker["files"].begin(); it != marker["files"].end(); ++it) {
        const std::string& name = it.key();
        if (!sums.contains(name) || !sums[name].is_string())
            return no(format("its %s marker has no checksum for %s", CKPT_COMPLETE_FILE, name.c_str()));
        std::string got = checksum_hex(path + "/" + name);
        if (got != sums[name].get<std::string>())
            return no(format("%s does not match its checksum (the file changed after the checkpoint was written)",
                             name.c_str()));
    }
    return true;
}

std::vector<int64_t> checkpoint_steps(const std::string& dir) {
    std::vector<int64_t> steps;
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    if (ec) return steps;  // missing or unreadable: no checkpoints
    for (; it != end; it.increment(ec)) {
        if (ec) break;
        int64_t step;
        std::string name = it->path().filename().string();
        if (!parse_step_name(name, &step)) continue;
        if (checkpoint_is_complete(dir + "/" + name)) steps.push_back(step);
    }
    std::sort(steps.begin(), steps.end());
    return steps;
}

std::string checkpoint_latest(const std::string& dir) {
    std::vector<int64_t> steps = checkpoint_steps(dir);
    return steps.empty() ? "" : checkpoint_path(dir, steps.back());
}

// ----------------------------------------------------------------------------
// writing, rotation, cleanup

// A file under `dir` that is not a checkpoint's (`files`: a marker's list), when `dir` has no marker: someone's
// folder under a checkpoint's name (a --save of another run, notes); "" when none.
static std::string foreign_file(const std::string& dir, const nlohmann::json& files) {
    std::error_code ec;
    if (fs::exists(dir + "/" + CKPT_COMPLETE_FILE, ec)) return "";
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code e2;
        const std::string rel = it->path().lexically_relative(dir).string();
        if (!fs::is_directory(it->symlink_status(e2)) && !files.contains(rel)) return rel;
    }
    return "";
}

// What a step's name held before a checkpoint was published there, moved aside to `aside`: an earlier checkpoint (or
// its damaged remains: only files a checkpoint has, `files`) goes; a folder of other files, or anything but a folder
// (a file, a link, a FIFO), stays beside as final_dir.kept, and is said (they were deleted with no word). `files`
// null: the new checkpoint's marker cannot be read, and what it replaced stays whatever it is.
static void set_aside_replaced(const std::string& aside, const std::string& final_dir, const nlohmann::json* files) {
    std::error_code ec;
    const fs::file_status held = fs::symlink_status(aside, ec);
    const bool a_folder = fs::is_directory(held);
    const std::string foreign = a_folder && files ? foreign_file(aside, *files) : "";
    if (a_folder && files && foreign.empty()) {
        remove_tree(aside);
        return;
    }
    std::string kept = final_dir + ".kept";
    for (int i = 2; fs::exists(kept, ec) || fs::is_symlink(kept, ec); i++) kept = final_dir + format(".kept%d", i);
    rename_or_fail(aside, kept);
    const char* what = fs::is_symlink(held)        ? "a symbolic link"
                       : fs::is_regular_file(held) ? "a file"
                                                   : "a special file";
    std::printf("notice: %s %s: moved to %s, and the checkpoint written in its place\n", final_dir.c_str(),
                !a_folder ? format("was %s, not a checkpoint's folder", what).c_str()
                : files   ? format("held files that are not a checkpoint's (%s)", foreign.c_str()).c_str()
                          : "held a folder that its new checkpoint replaced, kept whole (that checkpoint's marker "
                            "cannot be read)",
                kept.c_str());
}

int checkpoint_cleanup(const std::string& dir) {
    std::vector<std::pair<std::string, DotDir>> found;
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    if (ec) return 0;
    for (; it != end; it.increment(ec)) {
        if (ec) break;
        DotDir d;
        std::string name = it->path().filename().string();
        if (parse_dot_dir(name, &d) && dot_dir_is_stale(d)) found.push_back({name, d});
    }
    // Moved-aside directories first: one whose step directory is gone goes back in its place.
    std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
        return (a.second.kind == "old") > (b.second.kind == "old");
    });
    int handled = 0;
    for (const auto& f : found) {
        std::string path = dir + "/" + f.first;
        if (f.second.kind == "old") {
            std::string step_dir = checkpoint_path(dir, f.second.step);
            if (!fs::exists(step_dir, ec) && !fs::is_symlink(step_dir, ec)) {  // the step's only copy: never removed
                if (rename(path.c_str(), step_dir.c_str()) == 0) {
                    std::fprintf(stderr, "notice: restored %s (a replacement of it was interrupted)\n",
                                 step_dir.c_str());
                    handled++;
                } else {
                    std::fprintf(stderr, "warning: cannot restore %s from %s (%s): left as it is\n", step_dir.c_str(),
                                 path.c_str(), std::strerror(errno));
                }
                continue;
            }
            // the replacement was published, and the process died before it dealt with what it replaced: dealt with
            // as the commit would (this deleted it, whatever it was); kept whole when the new marker cannot be read
            nlohmann::json marker;
            std::string why;
            try {
                set_aside_replaced(path, step_dir,
                                   read_marker(step_dir, &marker, &why) ? &marker.at("files") : nullptr);
                handled++;
            } catch (const UserError& e) {  // (a cleanup's failure is no run's end: the item stays where it is)
                std::fprintf(stderr, "warning: %s: left as it is\n", e.what());
            }
            continue;
        }
        if (remove_tree(path)) handled++;
    }
    return handled;
}

std::string checkpoint_begin(const std::string& dir, int64_t step) {
    CHECK_USER(step >= 0, "cannot save a checkpoint for step %lld: steps are >= 0", (long long)step);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
        fail("cannot create the checkpoint directory %s: %s\n---> HINT: pass a writable path for checkpoints",
             dir.c_str(), ec ? ec.message().c_str() : "it exists and is not a directory");
    checkpoint_cleanup(dir);
    std::string tmp = dir + "/" + dot_dir_name("tmp", step);
    if (fs::exists(tmp, ec)) remove_tree(tmp);  // ours, from an earlier attempt in this process that never ended
    if (mkdir(tmp.c_str(), 0755) != 0)
        fail("cannot create %s: %s\n---> HINT: check that the checkpoint directory is writable and has space",
             tmp.c_str(), strerror(errno));
    return tmp;
}

void checkpoint_abort(const std::string& tmpdir) { remove_tree(tmpdir); }

void checkpoint_commit(const std::string& tmpdir, const std::string& final_dir, bool replaces_earlier_run) {
    std::error_code ec;
    if (!fs::is_directory(tmpdir, ec)) fail("cannot commit checkpoint %s: %s is not a directory", final_dir.c_str(),
                                            tmpdir.c_str());
    int64_t step;
    std::string final_name = base_of(final_dir), parent = parent_of(final_dir);
    if (!parse_step_name(final_name, &step))
        fail("cannot commit checkpoint to %s: the name must be %s-style (checkpoint_path)", final_dir.c_str(),
             checkpoint_dir_name(0).c_str());

    // 1. Every file's data on disk, and its size and checksum in the marker.
    nlohmann::json files = nlohmann::json::object(), sums = nlohmann::json::object();
    std::vector<std::string> subdirs;
    for (fs::recursive_directory_iterator it(tmpdir, ec), end; !ec && it != end; it.increment(ec)) {
        std::string rel = it->path().lexically_relative(tmpdir).string();
        if (rel == CKPT_COMPLETE_FILE) continue;  // ours to write, last
        std::error_code e2;
        fs::file_status st = it->symlink_status(e2);
        if (fs::is_directory(st)) {
            subdirs.push_back(it->path().string());
        } else if (fs::is_regular_file(st)) {
            fsync_path(it->path().string(), false);
            files[rel] = (uint64_t)fs::file_size(it->path(), e2);
            if (e2) fail("cannot read the size of %s: %s", it->path().c_str(), e2.message().c_str());
            sums[rel] = checksum_hex(it->path().string());
        } else {
            fail("cannot commit checkpoint %s: %s is neither a file nor a directory", final_dir.c_str(), rel.c_str());
        }
    }
    if (ec) fail("cannot list %s: %s", tmpdir.c_str(), ec.message().c_str());
    kill_point("checkpoint.files_synced");

    // 2. The marker, then the directories' entries.
    nlohmann::json marker = {{"format_version", CHECKPOINT_FORMAT_VERSION}, {"step", step}, {"files", files},
                             {"checksums", sums}};
    write_file_synced(tmpdir + "/" + CKPT_COMPLETE_FILE, marker.dump(2) + "\n");
    for (const std::string& d : subdirs) fsync_path(d, true);
    fsync_path(tmpdir, true);
    kill_point("checkpoint.marker_written");
    if (replaces_earlier_run) {  // the mark of an --overwrite run's first checkpoint (finish_replacing reads it)
        write_file_atomic(parent + "/" + CKPT_REPLACING_FILE,
                          format("%lld %s\n", (long long)step,
                                 checksum_hex(tmpdir + "/" + CKPT_COMPLETE_FILE).c_str()));
        fsync_path(parent, true);
        kill_point("checkpoint.replacing_marked");
    }

    // 3. Publish with one rename. An existing step directory goes aside first (rename cannot replace a
    // non-empty directory) and is removed only once the new one is in place; a crash in between leaves the
    // aside copy, which checkpoint_cleanup renames back (or, the new one published, removes or keeps as this would).
    std::string aside;
    if (fs::exists(final_dir, ec) || fs::is_symlink(final_dir, ec)) {
        aside = parent + "/" + dot_dir_name("old", step);
        rename_or_fail(final_dir, aside);
        kill_point("checkpoint.moved_aside");
    }
    if (rename(tmpdir.c_str(), final_dir.c_str()) != 0) {
        int err = errno;
        if (!aside.empty()) rename(aside.c_str(), final_dir.c_str());  // put the old one back
        fail("cannot rename %s to %s: %s", tmpdir.c_str(), final_dir.c_str(), strerror(err));
    }
    fsync_path(parent, true);
    kill_point("checkpoint.published");
    if (aside.empty()) return;
    set_aside_replaced(aside, final_dir, &files);
}

CheckpointWriter::CheckpointWriter(const std::string& d, int64_t s) : dir(d), step(s) {
    tmpdir = checkpoint_begin(dir, step);
}

CheckpointWriter::~CheckpointWriter() {
    if (!committed) checkpoint_abort(tmpdir);
}

std::string CheckpointWriter::commit(bool replaces_earlier_run) {
    std::string final_dir = checkpoint_path(dir, step);
    checkpoint_commit(tmpdir, final_dir, replaces_earlier_run);
    committed = true;
    return final_dir;
}

// The step of a stopped --overwrite run's first checkpoint (its marker's), -1 without a marker, -2 for one unreadable;
// *complete_sum: the checksum of that checkpoint's COMPLETE marker the mark names ("" in a mark of builds before it).
static int64_t replacing_step(const std::string& dir, std::string* complete_sum = nullptr) {
    std::ifstream f(dir + "/" + CKPT_REPLACING_FILE);
    if (!f) return -1;
    long long step = -2;
    if (!(f >> step) || step < 0) return -2;
    std::string sum;
    f >> sum;
    if (complete_sum) *complete_sum = sum;
    return (int64_t)step;
}

// A run started with --overwrite and stopped while it replaced the earlier run's checkpoints: the mark is written
// just before its first checkpoint is published (checkpoint_commit; that replaces any earlier run's of that step),
// naming it by its COMPLETE marker's checksum. When that one is in place and intact the removal is finished;
// otherwise the ones left are the earlier run's: refused.
static void finish_replacing(const std::string& dir) {
    std::string sum;
    const int64_t w = replacing_step(dir, &sum);
    if (w == -1) return;
    const std::string mark = dir + "/" + CKPT_REPLACING_FILE;
    std::string why = "it is not there";
    const bool usable = w >= 0 && checkpoint_verify(checkpoint_path(dir, w), &why);
    if (usable && !sum.empty() &&
        checksum_hex(checkpoint_path(dir, w) + "/" + CKPT_COMPLETE_FILE) != sum)
        fail("cannot resume from %s: a run started there with --overwrite was stopped before its first checkpoint "
             "(%s) was in place, so the checkpoints there are the earlier run's\n---> HINT: start over with "
             "--overwrite (without --resume); to continue the earlier run instead, remove %s", dir.c_str(),
             checkpoint_dir_name(w).c_str(), mark.c_str());
    if (!usable)
        fail("cannot resume from %s: a run started there with --overwrite was stopped while it replaced the earlier "
             "run's checkpoints, and its own first checkpoint%s is not usable (%s), so those left are the earlier "
             "run's\n---> HINT: start over with --overwrite (without --resume); to continue the earlier run instead, "
             "remove %s", dir.c_str(), w < 0 ? "" : (" (" + checkpoint_dir_name(w) + ")").c_str(),
             w < 0 ? "unreadable marker" : why.c_str(), mark.c_str());
    std::printf("notice: a run started in %s with --overwrite was stopped while it removed the earlier run's "
                "checkpoints; finishing that (its own: %s)\n", dir.c_str(), checkpoint_dir_name(w).c_str());
    checkpoint_rotate(dir, 0, w, /*replaces_earlier_run=*/true);
}

void checkpoint_rotate(const std::string& dir, int keep_last, int64_t written, bool replaces_earlier_run) {
    checkpoint_cleanup(dir);
    auto remove = [&](int64_t step) {
        // Out of the committed name first, so a crash mid-deletion leaves no half-deleted step directory.
        std::string del = dir + "/" + dot_dir_name("del", step);
        rename_or_fail(checkpoint_path(dir, step), del);
        kill_point("checkpoint.rotate_moved");
        remove_tree(del);
    };
    std::vector<int64_t> steps = checkpoint_steps(dir);
    if (replaces_earlier_run) {  // every other one is the replaced run's, which --resume would otherwise continue
        // the mark that a kill midway leaves for --resume (finish_replacing): checkpoint_commit's, written before
        // it published `written`; here when the commit did not (a stopped replacement finished, tests)
        const std::string marker = dir + "/" + CKPT_REPLACING_FILE;
        if (replacing_step(dir) != written) {
            write_file_atomic(marker, format("%lld\n", (long long)written));
            fsync_path(dir, true);
        }
        for (int64_t s : steps)
            if (s != written) {
                remove(s);
                std::printf("removed %s: the earlier run's (--overwrite)\n", checkpoint_path(dir, s).c_str());
            }
        if (std::remove(marker.c_str()) != 0 && errno != ENOENT)
            fail("cannot remove %s: %s (a --resume would take it for a stopped --overwrite)", marker.c_str(),
                 std::strerror(errno));
        fsync_path(dir, true);
        steps = {written};
    }
    if (keep_last <= 0) return;
    // the newest keep_last up to this run's own; newer ones (damaged ones the resume skipped: their steps are still
    // to come in this run) stay and do not count, or a damaged newest would leave one intact checkpoint fewer, and
    // with --ckpt-keep 1 none at all
    std::vector<int64_t> upto;
    for (int64_t s : steps)
        if (s <= written) upto.push_back(s);
    for (size_t i = 0; i + (size_t)keep_last < upto.size(); i++) remove(upto[i]);
}

// The directory holding a step directory, however spelled ("DIR/step_N/.", "." inside it): absolute.
static std::string run_dir_above(const std::string& step_dir) {
    std::error_code ec;
    fs::path p = fs::absolute(step_dir, ec).lexically_normal();
    if (!p.has_filename()) p = p.parent_path();
    return p.parent_path().string();
}

std::string checkpoint_run_dir(const std::string& path_arg, bool resume) {
    std::error_code ec;
    // "DIR/step_N/." or "." inside a checkpoint: the directory itself, whatever the spelling
    fs::path p = fs::absolute(path_arg, ec).lexically_normal();
    if (!p.has_filename()) p = p.parent_path();
    const std::string path = p.string();
    if (!fs::exists(path + "/" + CKPT_COMPLETE_FILE, ec)) return path_arg;  // not one checkpoint
    int64_t step = 0;
    const bool named = parse_step_name(base_of(path), &step);  // a renamed one: its order is unknown
    const std::string above = p.parent_path().string();
    if (!resume)
        fail("--ckpt-dir %s is one checkpoint, not a run's checkpoint directory: this run would write its checkpoints "
             "inside it\n---> HINT: add --resume to continue from it, pass --init-from %s to start a new run from its "
             "weights, or choose another --ckpt-dir (its parent %s holds the run's checkpoints)", path_arg.c_str(),
             path_arg.c_str(), above.c_str());
    // newer intact checkpoints there: the continued run's would mix with them (damaged ones are no run to continue;
    // those beside a stopped --overwrite's own checkpoint are the earlier run's, which checkpoint_resolve removes)
    if (named && replacing_step(above) == step) return above;
    for (int64_t s : checkpoint_steps(above))
        if ((!named || s > step) && checkpoint_verify(checkpoint_path(above, s)))
            fail("cannot continue %s in %s: that directory holds a newer checkpoint (after step %lld), which the "
                 "continued run's would mix with\n---> HINT: copy it into a new directory (NEW/%s) and resume there "
                 "(--ckpt-dir NEW --resume), or remove the newer checkpoints", path_arg.c_str(),
                 above.c_str(), (long long)s, base_of(path).c_str());
    return above;
}

std::string checkpoint_resolve(const std::string& path_arg) {
    std::string path = path_arg;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    std::error_code ec;
    if (!fs::exists(path, ec))
        fail("no checkpoint in %s: it does not exist\n---> HINT: pass the checkpoint directory of the run to resume, "
             "or drop --resume to start from scratch", path.c_str());
    if (!fs::is_directory(path, ec))
        fail("cannot resume from %s: it is not a directory\n---> HINT: pass a checkpoint directory or one of its "
             "step_NNNNNNNN subdirectories", path.c_str());
    std::string name = base_of(path), why;
    int64_t step;
    DotDir d;
    bool is_step = parse_step_name(name, &step) || parse_dot_dir(name, &d);
    if (fs::exists(path + "/" + CKPT_COMPLETE_FILE, ec) || is_step) {
        // one checkpoint of a directory that a stopped --overwrite left: only that run's own is this run's
        const std::string above = run_dir_above(path);
        const int64_t w = replacing_step(above);
        if (w != -1 && !(parse_step_name(name, &step) && step == w))
            fail("cannot resume from %s: a run started in %s with --overwrite was stopped while it removed the "
                 "earlier run's checkpoints, and this one may be the earlier run's\n---> HINT: resume from that run's "
                 "own (--ckpt-dir %s --resume), or start over with --overwrite", path.c_str(), above.c_str(),
                 above.c_str());
        if (w != -1) finish_replacing(above);
        const char* hint = "---> HINT: pass the checkpoint directory above it to use its newest intact checkpoint, or "
                           "an older step_NNNNNNNN";
        if (!checkpoint_is_complete(path, &why))
            fail("cannot resume from %s: it is not a complete checkpoint (%s)\n%s", path.c_str(), why.c_str(), hint);
        if (!checkpoint_verify(path, &why))
            fail("cannot resume from %s: it is damaged (%s)\n%s", path.c_str(), why.c_str(), hint);
        return path;
    }
    finish_replacing(path);
    checkpoint_cleanup(path);
    // newest first: the newest step directory that is complete and intact; each newer one that is not is reported
    std::vector<std::pair<int64_t, std::string>> dirs;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
        if (parse_step_name(it->path().filename().string(), &step)) dirs.push_back({step, it->path().string()});
    std::sort(dirs.rbegin(), dirs.rend());
    std::string damaged;
    for (const auto& [s, dir] : dirs) {
        if (checkpoint_verify(dir, &why)) {
            if (!damaged.empty())
                std::printf("warning: newer checkpoints in %s cannot be used:%s\n         resuming from the newest intact "
                            "one, %s; this run writes its own checkpoints of those steps in their place as it reaches "
                            "them (copy them elsewhere to keep them)\n", path.c_str(), damaged.c_str(),
                            base_of(dir).c_str());
            return dir;
        }
        damaged += format("\n           %s: %s", base_of(dir).c_str(), why.c_str());
    }
    if (!damaged.empty())
        fail("no usable checkpoint in %s:%s\n---> HINT: drop --resume to start from scratch (with --overwrite), or "
             "restore an intact copy of one of these", path.c_str(), damaged.c_str());
    fail("no checkpoint in %s\n---> HINT: checkpoints are its step_NNNNNNNN subdirectories (with a %s marker); "
         "drop --resume to start from scratch", path.c_str(), CKPT_COMPLETE_FILE);
}

// ----------------------------------------------------------------------------
// checksum: four independent lanes of xor-multiply-xorshift over 8-byte words. Each step is a bijection of the
// lane for a fixed word, so any change confined to one word always changes the result; the lanes keep the
// multiplier latency off the critical path (several GB/s).

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

uint64_t state_checksum(const void* data, size_t nbytes) {
    const uint64_t K = 0x9e3779b97f4a7c15ULL;
    uint64_t lane[4] = {1, 2, 3, 4};
    const unsigned char* p = (const unsigned char*)data;
    size_t i = 0;
    for (; i + 32 <= nbytes; i += 32) {
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            std::memcpy(&w, p + i + 8 * k, 8);
            lane[k] = (lane[k] ^ w) * K;
            lane[k] ^= lane[k] >> 29;
        }
    }
    for (int k = 0; i < nbytes; k++) {  // the tail, one (zero-padded) word per lane
        uint64_t w = 0;
        size_t n = std::min<size_t>(8, nbytes - i);
        std::memcpy(&w, p + i, n);
        lane[k] = (lane[k] ^ w) * K;
        lane[k] ^= lane[k] >> 29;
        i += n;
    }
    uint64_t h = mix64(nbytes);
    for (int k = 0; k < 4; k++) h = mix64(h ^ lane[k]) + K;
    return h;
}

// state_checksum of a whole file (read through mmap).
uint64_t file_checksum(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot read %s: %s", path.c_str(), strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        fail("cannot read %s: %s", path.c_str(), strerror(err));
    }
    size_t n = (size_t)st.st_size;
    void* p = n ? mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
    close(fd);
    if (n && p == MAP_FAILED) fail("cannot read %s: %s", path.c_str(), strerror(errno));
    uint64_t h = state_checksum(p, n);
    if (n) munmap(p, n);
    return h;
}

// ----------------------------------------------------------------------------
// TrainState

static size_t state_dtype_size(const std::string& dtype) {
    if (dtype == "F32") return 4;
    if (dtype == "I64") return 8;
    if (dtype == "U8") return 1;
    return 0;
}

size_t StateTensor::numel() const {
    size_t n = 1;
    for (int64_t d : shape) n *= (size_t)d;
    return n;
}

size_t StateTensor::nbytes() const { return numel() * state_dtype_size(dtype); }

static std::string state_where(const TrainState& s) { return s.path.empty() ? "the training state" : s.path; }

static std::string shape_string(const std::vector<int64_t>& shape) {
    return "[" + join(shape) + "]";
}

static StateTensor& add_tensor(TrainState& s, const std::string& name, const char* dtype,
                               const std::vector<int64_t>& shape) {
    CHECK_USER(!name.empty(), "training state: a tensor needs a name");
    CHECK_USER(!s.has(name), "training state: tensor '%s' added twice", name.c_str());
    for (int64_t d : shape)
        CHECK_USER(d >= 0, "training state: tensor '%s' has a negative dimension in %s", name.c_str(),
                   shape_string(shape).c_str());
    StateTensor& t = s.tensors[name];
    t.dtype = dtype;
    t.shape = shape;
    t.bytes.assign(t.nbytes(), 0);
    return t;
}

void TrainState::add_f32(const std::string& name, const float* data, const std::vector<int64_t>& shape) {
    StateTensor& t = add_tensor(*this, name, "F32", shape);
    if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
}

void TrainState::add_i64(const std::string& name, const int64_t* data, const std::vector<int64_t>& shape) {
    StateTensor& t = add_tensor(*this, name, "I64", shape);
    if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
}

void TrainState::add_u8(const std::string& name, const uint8_t* data, const std::vector<int64_t>& shape) {
    StateTensor& t = add_tensor(*this, name, "U8", shape);
    if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
}

float* TrainState::alloc_f32(const std::string& name, const std::vector<int64_t>& shape) {
    return (float*)add_tensor(*this, name, "F32", shape).bytes.data();
}

int64_t* TrainState::alloc_i64(const std::string& name, const std::vector<int64_t>& shape) {
    return (int64_t*)add_tensor(*this, name, "I64", shape).bytes.data();
}

const StateTensor& TrainState::tensor(const std::string& name) const {
    auto it = tensors.find(name);
    if (it == tensors.end())
        fail("%s has no tensor '%s' (it has %zu tensors)\n---> HINT: the checkpoint was written by a run with other "
             "settings or by another version; resume with the settings of the run that wrote it",
             state_where(*this).c_str(), name.c_str(), tensors.size());
    return it->second;
}

// Copies tensor `name` into dst after checking dtype and element count; reads (and checks) it from the file
// when it has not been loaded.
static void get_tensor(const TrainState& s, const std::string& name, const char* dtype, void* dst, size_t n) {
    const StateTensor& t = s.tensor(name);
    if (t.dtype != dtype)
        fail("%s: tensor '%s' is %s but %s was expected", state_where(s).c_str(), name.c_str(), t.dtype.c_str(), dtype);
    if (t.numel() != n)
        fail("%s: tensor '%s' has shape %s (%zu elements) but %zu elements were expected\n---> HINT: the checkpoint "
             "does not match this run (model, batch size, number of ranks, PRAC ranks); resume with the settings of "
             "the run that wrote it", state_where(s).c_str(), name.c_str(), shape_string(t.shape).c_str(), t.numel(),
             n);
    size_t nbytes = t.nbytes();
    if (nbytes == 0) return;
    if (!t.in_file) {
        std::memcpy(dst, t.bytes.data(), nbytes);
        return;
    }
    CHECK_USER(s.file != nullptr, "%s: tensor '%s' is not loaded and the file is closed", state_where(s).c_str(),
               name.c_str());
    s.file->read_raw(name, dst, nbytes);
    if (state_checksum(dst, nbytes) != t.checksum)
        fail("corrupt checkpoint state %s: tensor '%s' does not match its checksum (the file changed after it was "
             "written)\n---> HINT: resume from an older checkpoint (pass its step_NNNNNNNN directory)",
             state_where(s).c_str(), name.c_str());
}

void TrainState::get_f32(const std::string& name, float* dst, size_t n) const { get_tensor(*this, name, "F32", dst, n); }
void TrainState::get_i64(const std::string& name, int64_t* dst, size_t n) const { get_tensor(*this, name, "I64", dst, n); }
void TrainState::get_u8(const std::string& name, uint8_t* dst, size_t n) const { get_tensor(*this, name, "U8", dst, n); }

static bool is_reserved(const std::string& key) { return key.compare(0, std::strlen(RESERVED_PREFIX), RESERVED_PREFIX) == 0; }

void TrainState::set(const std::string& key, const std::string& value) {
    CHECK_USER(!key.empty() && !is_reserved(key), "training state: metadata key '%s' is empty or reserved (%s*)",
               key.c_str(), RESERVED_PREFIX);
    meta[key] = utf8_escape_invalid(value);  // metadata is JSON text: a file name's stray bytes as \xNN
}
void TrainState::set_i64(const std::string& key, int64_t value) { set(key, std::to_string((long long)value)); }
void TrainState::set_u64(const std::string& key, uint64_t value) { set(key, std::to_string((unsigned long long)value)); }
void TrainState::set_f64(const std::string& key, double value) { set(key, format("%.17g", value)); }

const std::string& TrainState::get(const std::string& key) const {
    auto it = meta.find(key);
    if (it == meta.end())
        fail("%s does not record '%s'\n---> HINT: it was written by another version or by a run with other "
             "settings; resume with the build and settings that wrote it", state_where(*this).c_str(), key.c_str());
    return it->second;
}

// Whole-string number parsing: "12abc", "" and out-of-range values are errors naming the key.
template <class T, class F>
static T parse_number(const TrainState& s, const std::string& key, const std::string& v, F parse, const char* what,
                      bool is_unsigned = false) {
    errno = 0;
    char* end = nullptr;
    T x = parse(v.c_str(), &end);
    // ERANGE only for integers: strtod flags exact subnormals too, and never overflows on what set_f64 wrote
    bool range = errno == ERANGE && !std::is_floating_point<T>::value;
    if (v.empty() || end != v.c_str() + v.size() || range || (is_unsigned && v[0] == '-'))
        fail("%s: metadata '%s' = \"%s\" is not %s", state_where(s).c_str(), key.c_str(),
             v.c_str(), what);
    return x;
}

int64_t TrainState::get_i64(const std::string& key) const {
    return parse_number<int64_t>(*this, key, get(key), [](const char* c, char** e) { return (int64_t)std::strtoll(c, e, 10); },
                                 "an integer");
}
uint64_t TrainState::get_u64(const std::string& key) const {
    return parse_number<uint64_t>(*this, key, get(key), [](const char* c, char** e) { return (uint64_t)std::strtoull(c, e, 10); },
                                  "an unsigned integer", true);
}
double TrainState::get_f64(const std::string& key) const {
    return parse_number<double>(*this, key, get(key), [](const char* c, char** e) { return std::strtod(c, e); }, "a number");
}

void write_state(const std::string& path, const TrainState& state) {
    std::map<std::string, std::string> meta;
    for (const auto& kv : state.meta) {
        CHECK_USER(!is_reserved(kv.first), "cannot save %s: metadata key '%s' is reserved (%s*)", path.c_str(),
                   kv.first.c_str(), RESERVED_PREFIX);
        meta[kv.first] = kv.second;
    }
    std::vector<SafeTensorWrite> writes;
    std::vector<std::vector<uint8_t>> loaded;  // tensors of a state read from a file, rewritten
    loaded.reserve(state.tensors.size());
    nlohmann::json sums = nlohmann::json::object();
    for (const auto& kv : state.tensors) {
        const StateTensor& t = kv.second;
        CHECK_USER(state_dtype_size(t.dtype) != 0, "cannot save %s: tensor '%s' has dtype %s (F32, I64 or U8 only)",
                   path.c_str(), kv.first.c_str(), t.dtype.c_str());
        const uint8_t* data = t.bytes.data();
        if (t.in_file) {
            loaded.emplace_back(t.nbytes());
            get_tensor(state, kv.first, t.dtype.c_str(), loaded.back().data(), t.numel());
            data = loaded.back().data();
        } else {
            CHECK_USER(t.bytes.size() == t.nbytes(), "cannot save %s: tensor '%s' holds %zu bytes, its shape %s needs "
                       "%zu", path.c_str(), kv.first.c_str(), t.bytes.size(), shape_string(t.shape).c_str(), t.nbytes());
        }
        writes.push_back({kv.first, t.dtype, t.shape, data});
        sums[kv.first] = format("%016" PRIx64, state_checksum(data, t.nbytes()));
    }
    meta["ckpt.format"] = STATE_FORMAT;
    meta["ckpt.format_version"] = std::to_string(CHECKPOINT_FORMAT_VERSION);
    meta["ckpt.step"] = std::to_string((long long)state.step);
    meta["ckpt.adam_t"] = std::to_string((long long)state.adam_t);
    meta["ckpt.checksums"] = sums.dump();
    safetensors_write(path, writes, meta);
}

TrainState read_state(const std::string& path) {
    const char* p = path.c_str();
    const char* hint = "\n---> HINT: resume from an older checkpoint (pass its step_NNNNNNNN directory)";
    struct stat st;
    if (stat(p, &st) != 0)
        fail("cannot read checkpoint state %s: %s\n---> HINT: a checkpoint directory holds %s; pass a complete one",
             p, strerror(errno), CKPT_STATE_FILE);
    SafeTensorsFile f;
    try {
        f = safetensors_open(path);
    } catch (const UserError& e) {
        fail("corrupt checkpoint state %s: %s%s", p, e.what(), hint);
    }
    auto meta_of = [&](const char* key) -> std::string {
        auto it = f.metadata.find(key);
        if (it == f.metadata.end()) fail("corrupt checkpoint state %s: no '%s' in its metadata%s", p, key, hint);
        return it->second;
    };
    auto int_of = [&](const char* key) -> int64_t {
        std::string v = meta_of(key);
        char* end = nullptr;
        errno = 0;
        long long x = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0' || errno == ERANGE)
            fail("corrupt checkpoint state %s: metadata '%s' = \"%s\" is not an integer%s", p, key, v.c_str(), hint);
        return x;
    };
    auto it = f.metadata.find("ckpt.format");
    if (it == f.metadata.end() || it->second != STATE_FORMAT)
        fail("%s is not a training state file (its metadata has no ckpt.format = %s)\n---> HINT: pass a checkpoint "
             "directory written by this trainer", p, STATE_FORMAT);
    int64_t version = int_of("ckpt.format_version");
    if (version > CHECKPOINT_FORMAT_VERSION || version < 1)
        fail("%s has checkpoint format version %lld, this build reads versions 1 to %d\n---> HINT: resume with the "
             "build that wrote it", p, (long long)version, CHECKPOINT_FORMAT_VERSION);

    TrainState s;
    s.path = path;
    s.step = int_of("ckpt.step");
    s.adam_t = int_of("ckpt.adam_t");
    // the trainer counts steps in int: a count outside [0, 2^31) is damage, not a step to continue from
    if (s.step < 0 || s.step > INT32_MAX || s.adam_t < 0 || s.adam_t > INT32_MAX)
        fail("corrupt checkpoint state %s: step %lld / optimizer step %lld is not a count in [0, 2^31)%s", p,
             (long long)s.step, (long long)s.adam_t, hint);
    // in a step_NNNNNNNN directory, the step it names (a state of another step would resume the schedule elsewhere)
    int64_t dir_step = -1;
    const std::string dir_name = std::filesystem::path(path).parent_path().filename().string();
    if (parse_step_name(dir_name, &dir_step) && dir_step != s.step)
        fail("corrupt checkpoint state %s: it holds step %lld, but its directory %s names step %lld%s", p,
             (long long)s.step, dir_name.c_str(), (long long)dir_step, hint);
    nlohmann::json sums;
    try {
        sums = nlohmann::json::parse(meta_of("ckpt.checksums"));
    } catch (const nlohmann::json::exception& e) {
        fail("corrupt checkpoint state %s: its checksums are not valid JSON (%s)%s", p, e.what(), hint);
    }
    if (!sums.is_object()) fail("corrupt checkpoint state %s: its checksums are not a JSON object%s", p, hint);
    for (const auto& kv : f.metadata)
        if (!is_reserved(kv.first)) s.meta[kv.first] = kv.second;
    for (const SafeTensor& t : f.tensors) {
        if (state_dtype_size(t.dtype) == 0)
            fail("corrupt checkpoint state %s: tensor '%s' has dtype %s (a state holds F32, I64 or U8)%s", p,
                 t.name.c_str(), t.dtype.c_str(), hint);
        auto c = sums.find(t.name);
        std::string hex = c != sums.end() && c->is_string() ? c->get<std::string>() : "";
        char* end = nullptr;
        uint64_t sum = std::strtoull(hex.c_str(), &end, 16);
        if (hex.size() != 16 || *end != '\0')
            fail("corrupt checkpoint state %s: no valid checksum for tensor '%s'%s", p, t.name.c_str(), hint);
        StateTensor& entry = s.tensors[t.name];
        entry.dtype = t.dtype;
        entry.shape = t.shape;
        entry.in_file = true;
        entry.checksum = sum;
    }
    for (auto c = sums.begin(); c != sums.end(); ++c)
        if (!s.has(c.key()))
            fail("corrupt checkpoint state %s: tensor '%s' is listed in its checksums but missing%s", p,
                 c.key().c_str(), hint);
    s.file = std::make_shared<const SafeTensorsFile>(std::move(f));
    return s;
}

// For settings stored as one line of words ("adamw wd 0.1 b1 0.9 ..."): " (the difference: saved `a b` where this
// run has `a c`)", each differing word with the word before it (its name), when both have the same number of words
// and more than two; with other numbers of words, the stretch between what they begin and end with alike ("states
// 8bit" where this run has nothing); "" for short values and values with no common end (they need no help).
static std::string words_that_differ(const std::string& saved, const std::string& now) {
    auto split = [](const std::string& s) {
        std::vector<std::string> v;
        std::istringstream in(s);
        for (std::string w; in >> w;) v.push_back(w);
        return v;
    };
    const std::vector<std::string> a = split(saved), b = split(now);
    if (std::max(a.size(), b.size()) <= 2) return "";
    if (a.size() != b.size()) {
        size_t head = 0, tail = 0;
        while (head < a.size() && head < b.size() && a[head] == b[head]) head++;
        while (tail < a.size() - head && tail < b.size() - head && a[a.size() - 1 - tail] == b[b.size() - 1 - tail])
            tail++;
        if (head == 0 && tail == 0) return "";  // nothing alike: the two values, printed whole, say it
        auto stretch = [&](const std::vector<std::string>& v) {
            std::string s;
            for (size_t i = head; i < v.size() - tail; i++) s += (s.empty() ? "" : " ") + v[i];
            return s.empty() ? std::string("nothing there") : "`" + s + "`";
        };
        return " (the difference: saved " + stretch(a) + " where this run has " + stretch(b) + ")";
    }
    std::string was, is;
    for (size_t i = 0; i < a.size(); i++)
        if (a[i] != b[i]) {
            const std::string name = i > 0 && a[i - 1] == b[i - 1] ? a[i - 1] + " " : "";
            was += (was.empty() ? "" : ", ") + name + a[i];
            is += (is.empty() ? "" : ", ") + name + b[i];
        }
    return " (the difference: saved `" + was + "` where this run has `" + is + "`)";
}

// A float as stored in a key ("0.100000001": the float's nine digits) in its shortest spelling that is the same
// float ("0.1"); an integer (a seed, a step count: not a float, which would round it) and anything else as it is.
static std::string shortest_float(const std::string& v) {
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || v.find_first_of(".eE") == std::string::npos) return v;
    for (int digits = 1; digits <= 9; digits++) {
        std::string s = format("%.*g", digits, d);
        if ((float)std::strtod(s.c_str(), nullptr) == (float)d) return s;
    }
    return v;
}

// A setting stored as one line of words (run.schedule, run.optimizer, run.prac, run.prac_refresh) or one flag's
// value (run.recompute, run.batch_size, ...) spelled as the flags that give it: "adamw wd 0.100000001 ..." is {--optimizer adamw, --weight-decay 0.1, ...};
// a word of several flags ("galore 256/200/0.25") is each of them. false for a key or a word it does not know
// (a checkpoint of an earlier spelling: its refusal keeps the words). `unsaid_shape`: the --lr-schedule of a
// run.schedule without a shape (the trainers' cosine; finetune_roberta's linear).
static bool setting_as_flags(const std::string& key, const std::string& value, const char* unsaid_shape,
                             std::vector<std::pair<std::string, std::string>>* flags) {
    static const std::map<std::string, std::pair<const char*, std::map<std::string, const char*>>> KEYS = {
        {"run.schedule",
         {nullptr,
          {{"lr", "--lr"}, {"warmup", "--warmup"}, {"min", "--min-lr-frac"}, {"shape", "--lr-schedule"},
           {"cooldown", "--cooldown-frac"}}}},
        {"run.optimizer",
         {"--optimizer",
          {{"wd", "--weight-decay"}, {"b1", "--beta1"}, {"b2", "--beta2"}, {"eps", "--adam-eps"},
           {"clip", "--grad-clip"}, {"muon", "--muon-momentum"}, {"states", "--optimizer-states"},
           {"galore", "--galore-rank/--galore-gap/--galore-scale"},
           {"rso", "--rso-rank/--rso-gap/--rso-prox/--rso-activations"}}}},
        {"run.prac",
         {"--prac",
          {{"lin", "--prac-linear"}, {"nonlin", "--prac-nonlinear"}, {"t1", "--prac-t1"}, {"t2", "--prac-t2"},
           {"k", "--prac-k-mult"}, {"storage", "--prac-storage"}}}},
        // one flag's value each
        {"run.recompute", {"--recompute", {}}},  {"run.batch_size", {"--batch-size", {}}},
        {"run.seq_len", {"--seq-len", {}}},      {"run.grad_accum", {"--grad-accum", {}}},
        {"run.seed", {"--seed", {}}},
    };
    std::vector<std::string> words;
    std::istringstream in(value);
    for (std::string w; in >> w;) words.push_back(w);
    flags->clear();
    if (key == "run.shuffle") {  // "0": --no-shuffle, "1": without it
        if (words.size() != 1 || (words[0] != "0" && words[0] != "1")) return false;
        if (words[0] == "0") flags->push_back({"--no-shuffle", ""});
        return true;
    }
    if (key == "run.prac_refresh") {  // spelled as flags already ("--prac-refresh exact --prac-initial-spread 0 ...")
        if (words == std::vector<std::string>{"none"}) return true;
        for (size_t i = 0; i + 1 < words.size(); i += 2) {
            if (words[i].rfind("--", 0) != 0) return false;
            flags->push_back({words[i], words[i + 1]});
        }
        return words.size() % 2 == 0;
    }
    auto known = KEYS.find(key);
    if (known == KEYS.end() || words.empty()) return false;
    const auto& [head, names] = known->second;
    size_t i = 0;
    if (head) flags->push_back({head, words[i++]});
    for (; i < words.size(); i += 2) {
        auto name = names.find(words[i]);
        if (name == names.end() || i + 1 >= words.size()) return false;
        std::string value = words[i + 1], flag = name->second;
        if (flag == "--prac-linear" || flag == "--prac-nonlinear") {  // fractions "0.300000012,0.3", ranks "r6,r16"
            std::vector<std::string> ranks = split_at(value, ',');
            if (ranks.size() != 2 || ranks[0].empty() || ranks[1].empty()) return false;
            const bool absolute = ranks[0][0] == 'r';
            for (std::string& r : ranks) r = absolute && r[0] == 'r' ? r.substr(1) : shortest_float(r);
            flags->push_back({flag + (absolute ? "-ranks" : ""), ranks[0] + "," + ranks[1]});
            continue;
        }
        std::vector<std::string> sub_flags = split_at(flag, '/'), values = split_at(value, '/');
        if (sub_flags.size() != values.size()) return false;
        for (size_t f = 0; f < sub_flags.size(); f++) flags->push_back({sub_flags[f], shortest_float(values[f])});
    }
    if (key == "run.schedule" && std::find(words.begin(), words.end(), "shape") == words.end())
        flags->push_back({"--lr-schedule", unsaid_shape});  // (the default schedule's key names no shape)
    if (key == "run.prac" && words[0] != "none") {  // the classes compressed: the key holds the ranks of those alone
        auto has = [&](const char* w) { return std::find(words.begin(), words.end(), w) != words.end(); };
        const bool lin = has("lin"), nonlin = has("nonlin");
        flags->push_back({"--prac-classes", lin && nonlin ? "linear,nonlinear" : lin ? "linear" : "nonlinear"});
        if (!has("storage")) flags->push_back({"--prac-storage", "act"});
    }
    return true;
}

// Removes from `flags` a flag at its default that `other` does not name at all (another optimizer's): it goes without
// saying, and finetune_roberta, which has no --rso-prox or --rso-activations (fixed at these), was told to pass them.
static void drop_unsaid_defaults(std::vector<std::pair<std::string, std::string>>& flags,
                                 const std::vector<std::pair<std::string, std::string>>& other) {
    static const std::map<std::string, std::string> DEFAULTS = {{"--rso-prox", "0"},
                                                                 {"--rso-activations", "projected"}};
    auto named_in_other = [&](const std::string& flag) {
        return std::any_of(other.begin(), other.end(), [&](const auto& f) { return f.first == flag; });
    };
    flags.erase(std::remove_if(flags.begin(), flags.end(), [&](const auto& f) {
                    auto d = DEFAULTS.find(f.first);
                    return d != DEFAULTS.end() && d->second == f.second && !named_in_other(f.first);
                }), flags.end());
}

// " --a 1 --b 2" of the flags in `of` whose value `other` lacks or differs in.
static std::string flags_not_in(const std::vector<std::pair<std::string, std::string>>& of,
                                const std::vector<std::pair<std::string, std::string>>& other) {
    std::string s;
    for (const auto& f : of)
        if (std::find(other.begin(), other.end(), f) == other.end())
            s += " " + f.first + (f.second.empty() ? "" : " " + f.second);  // (a switch: no value)
    return s;
}

void check_compatible(const TrainState& state, const std::string& key, const std::string& expected) {
    const char* where = state.path.empty() ? "the checkpoint" : state.path.c_str();
    auto it = state.meta.find(key);
    if (it == state.meta.end())
        fail("cannot resume from %s: it does not record %s (this run has %s = %s)\n---> HINT: it was written by "
             "another version; resume with the build that wrote it, or start a new run in another checkpoint "
             "directory", where, key.c_str(), key.c_str(), expected.c_str());
    if (it->second == expected || it->second == utf8_escape_invalid(expected)) return;  // (as TrainState::set wrote it)
    // said as the flags that give it ("--grad-accum 2", not "run.grad_accum = 2")
    std::vector<std::pair<std::string, std::string>> saved_flags, run_flags;
    const char* unsaid_shape = state.has_meta("run.task") ? "linear" : "cosine";  // a fine-tuning run's: linear
    if (setting_as_flags(key, it->second, unsaid_shape, &saved_flags) &&
        setting_as_flags(key, expected, unsaid_shape, &run_flags)) {
        drop_unsaid_defaults(saved_flags, run_flags);
        drop_unsaid_defaults(run_flags, saved_flags);
        const std::string saved = flags_not_in(saved_flags, run_flags), run = flags_not_in(run_flags, saved_flags);
        const std::string difference = saved.empty() ? "without" + run + ", which this run has"
                                       : run.empty() ? "with" + saved + ", which this run lacks"
                                                     : "with" + saved + ", this run has" + run;
        if (!saved.empty() || !run.empty())  // (differently spelled, the same flags: the words below say it)
            fail("cannot resume from %s: it was written %s\n---> HINT: resume with the settings of the run that wrote "
                 "it (%s), or start a new run in another checkpoint directory", where, difference.c_str(),
                 saved.empty() ? ("without" + run).c_str() : saved.substr(1).c_str());
    }
    fail("cannot resume from %s: it was written with %s = %s, this run has %s = %s%s\n---> HINT: resume with the "
         "settings of the run that wrote it (%s = %s), or start a new run in another checkpoint directory",
         where, key.c_str(), it->second.c_str(), key.c_str(), expected.c_str(),
         words_that_differ(it->second, expected).c_str(), key.c_str(), it->second.c_str());
}

void check_compatible(const TrainState& state, const std::string& key, int64_t expected) {
    check_compatible(state, key, std::to_string((long long)expected));
}
