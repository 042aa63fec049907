#include "train/trainer.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>  // clock_gettime
#include <map>
#include <set>
#include <sstream>

#include "common/files.h"    // dir_of, probe_create, file_identity
#include "common/npy.h"      // file_starts_as_npy
#include "common/strings.h"  // join
#include "kernels/cuda_sizes.h"  // cuda_attention_takes_head_size
#include "train/planner.h"

#include "data/gpt2_tokenizer.h"
#include "data/spm_tokenizer.h"
#include "train/data_tokenizer.h"

volatile std::sig_atomic_t g_stop_signal = 0;

// The first stop signal asks for a clean stop at the next step boundary (a checkpoint, exit 128 + signal); the same
// signal again, 2 s or more later, while that is awaited (a step of many micro-batches, a long evaluation), ends the
// process at once: its default action, as without the handler. Not sooner: a terminal's Ctrl-C can reach a rank
// together with what its launcher forwards. Not another signal: a scheduler's SIGTERM at the time limit after its
// early SIGUSR1 must not cut the checkpoint that SIGUSR1 started. The first is acknowledged at once (the other ranks'
// stdout is /dev/null): with slow steps a user saw nothing and sent the second. clock_gettime, strlen, memcpy, write,
// signal and raise are async-signal-safe.
static volatile long long g_stop_signal_ms = 0;  // CLOCK_MONOTONIC milliseconds of the first
static volatile std::sig_atomic_t g_stop_at_end = 0;  // stop_signals_at_end(): past the last step
static void on_stop_signal(int sig) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const long long ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    if (!g_stop_signal) {
        g_stop_signal_ms = ms;
        g_stop_signal = sig;
        char line[400] = "\nnote: signal ";
        size_t n = std::strlen(line);
        if (sig >= 10) line[n++] = (char)('0' + sig / 10 % 10);
        line[n++] = (char)('0' + sig % 10);
        const char* rest =
            g_stop_at_end ? " caught: the run is past its last step: what it is doing finishes (an evaluation, --save; "
                            "--sample stops with the tokens so far), then it exits with 128 + the signal, unless the "
                            "launcher ends the job first (mpirun does when a rank dies); the same signal again, 2 s "
                            "or more from now, ends it at once\n"
                          : " caught: the run stops cleanly at the end of this step (with a checkpoint when "
                            "--ckpt-dir is given, unless the launcher ends the job first, as mpirun does when a rank "
                            "dies); the same signal again, 2 s or more from now, ends it at once, without one\n";
        const size_t r = std::min(std::strlen(rest), sizeof line - n);
        std::memcpy(line + n, rest, r);
        if (write(STDOUT_FILENO, line, n + r) < 0) {}  // (nothing to do about a closed stdout here)
    } else if (sig == g_stop_signal && ms - g_stop_signal_ms >= 2000) {
        std::signal(sig, SIG_DFL);
        std::raise(sig);
    }
}

void stop_signals_at_end() { g_stop_at_end = 1; }

// A signal the launcher set to be ignored stays ignored (nohup's SIGHUP, a script's background job's SIGINT: the
// job was meant to outlive them), as the POSIX convention for handlers is.
void install_stop_signals() {
    for (int sig : STOP_SIGNALS)
        if (std::signal(sig, on_stop_signal) == SIG_IGN) std::signal(sig, SIG_IGN);
}

static bool is_dir(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string builtin_data_dir() {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = 0;
        std::string dir(exe);
        dir = dir.substr(0, dir.rfind('/')) + "/data/builtin";
        if (is_dir(dir)) return dir;
    }
    std::string src = std::string(PRAC_SOURCE_DIR) + "/data/builtin";
    if (is_dir(src)) return src;
    fail("the built-in corpus is not found next to the binary nor in %s\n---> HINT: pass --train-data and "
         "--val-data, or run the binary from the repository it was built in", src.c_str());
}

void refuse_sharded_checkpoint(const std::string& dir) {
    const std::string index = dir + "/model.safetensors.index.json";
    if (is_dir(dir) && access((dir + "/model.safetensors").c_str(), F_OK) != 0 && access(index.c_str(), F_OK) == 0)
        fail("--init-from %s holds a sharded checkpoint (%s and its shards), which is not supported\n---> HINT: "
             "save it as one file: transformers' save_pretrained(DIR, max_shard_size=\"1000GB\")", dir.c_str(),
             index.c_str());
}

std::string resolve_weights_path(const std::string& path) {
    if (is_dir(path)) return path + "/model.safetensors";
    return path;
}

void verify_init_from_checkpoint(const std::string& path) {
    std::string why;
    // the checkpoint's directory, or its weights file named alone (a finite corruption of it loaded with exit 0)
    const bool given_dir = is_dir(path);
    const std::string dir = given_dir ? path : dir_of(path);
    const bool of_checkpoint = given_dir || std::filesystem::path(path).filename() == CKPT_MODEL_FILE;
    if (of_checkpoint && access((dir + "/" + CKPT_COMPLETE_FILE).c_str(), F_OK) == 0 && !checkpoint_verify(dir, &why))
        fail("--init-from %s: this checkpoint is damaged: %s\n---> HINT: start from another checkpoint of the run "
             "(--resume --ckpt-dir DIR picks the newest intact one)", path.c_str(), why.c_str());
    else if (is_dir(path) && access((path + "/" + CKPT_STATE_FILE).c_str(), F_OK) == 0 &&
             access((path + "/" + CKPT_COMPLETE_FILE).c_str(), F_OK) != 0)  // copied in part, or its marker removed
        std::printf("notice: --init-from %s holds a checkpoint's %s but no %s marker: its files are not verified\n",
                    path.c_str(), CKPT_STATE_FILE, CKPT_COMPLETE_FILE);
}

void prepare_output_dir(const std::string& dir, const char* flag) {
    struct stat st;
    if (stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
        fail("%s %s: that is a file, not a directory\n---> HINT: pass a directory (created if it does not exist)",
             flag, dir.c_str());
    std::string partial;
    for (size_t i = 0; i <= dir.size(); i++) {
        if (i == dir.size() || dir[i] == '/') {
            if (!partial.empty() && !is_dir(partial)) {
                if (mkdir(partial.c_str(), 0755) == 0) made_output_dirs().dirs.push_back(partial);
                else if (errno != EEXIST)
                    fail("%s: cannot create directory %s (%s)", flag, partial.c_str(), std::strerror(errno));
            }
            const std::string target = partial.empty() ? "" : link_target_that_is_not_a_dir(partial);
            if (!target.empty())
                fail("%s %s: %s is a symbolic link to %s, which is not a directory (or does not exist)\n---> HINT: "
                     "create the link's target directory, or pass another path", flag, dir.c_str(), partial.c_str(),
                     target.c_str());
            if (!partial.empty() && !is_dir(partial))
                fail("%s %s: %s is a file, not a directory\n---> HINT: pass a path whose parents are directories",
                     flag, dir.c_str(), partial.c_str());
        }
        if (i < dir.size()) partial += dir[i];
    }
    if (access(dir.c_str(), W_OK) != 0)
        fail("%s: directory %s is not writable (%s)\n---> HINT: pass a directory you can write to (a writable file "
             "system)", flag, dir.c_str(), std::strerror(errno));
}

std::string claim_checkpoint_dir(const std::string& ckpt_dir, bool resume, bool writes) {
    const std::string run_dir = ckpt_dir.empty() ? "" : checkpoint_run_dir(ckpt_dir, resume);
    if (run_dir.empty() || !writes || (resume && !is_dir(run_dir))) return run_dir;
    prepare_output_dir(run_dir, "--ckpt-dir");
    lock_checkpoint_dir(run_dir);
    // a stopped --overwrite's mark where no checkpoint is left (removed by hand): it would name this run's own step
    const std::string marker = run_dir + "/" + CKPT_REPLACING_FILE;
    if (!resume && checkpoint_steps(run_dir).empty() && std::remove(marker.c_str()) != 0 && errno != ENOENT)
        fail("cannot remove %s: %s", marker.c_str(), std::strerror(errno));
    return run_dir;
}

// Holds `lock` (a lock file, or the directory itself) until exit for the run writing `flag dir`, or fails saying
// what two runs there would do (`clash`) and what to do (`hint`); a file system without locks is warned about.
static void lock_run_output(const std::string& lock, const char* flag, const std::string& dir, const char* clash,
                            const char* hint) {
    const int err = lock_until_exit(lock);
    if (err == EWOULDBLOCK)
        fail("%s %s is in use by another run (it holds %s): %s\n---> HINT: %s", flag, dir.c_str(),
             lock == dir ? "the directory's lock" : lock.c_str(), clash, hint);
    if (err)
        std::fprintf(stderr, "warning: cannot lock %s (%s): another run on this %s would not be refused\n",
                     lock.c_str(), std::strerror(err), flag);
}

void lock_checkpoint_dir(const std::string& dir) {
    lock_run_output(dir + "/" + CKPT_LOCK_FILE, "--ckpt-dir", dir,
                    "two runs there would replace each other's checkpoints",
                    "wait for that run to end (then --resume it or start over with --overwrite), or choose another "
                    "--ckpt-dir");
}

void claim_save_dir(const std::string& dir) {
    prepare_output_dir(dir, "--save");
    lock_run_output(dir, "--save", dir, "the later of two runs saving there would replace the other's model",
                    "wait for that run to end, or choose another --save");
}

// This run's --ckpt-dir (run_dir; empty: none): a directory output that is the folder itself or one of its step
// folders, or any output inside a step folder. Other paths inside it are left alone: nothing of the run touches them.
static void refuse_output_in_this_runs_checkpoints(const std::string& path, const char* flag,
                                                   const std::string& ckpt_dir, bool is_dir_output) {
    if (path.empty() || ckpt_dir.empty()) return;
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path rel = fs::weakly_canonical(path, ec).lexically_relative(fs::weakly_canonical(ckpt_dir, ec));
    if (rel.empty() || *rel.begin() == "..") return;  // outside it
    const std::string first = rel.begin()->string();
    if (first == "." && is_dir_output)
        fail("%s %s is --ckpt-dir itself\n---> HINT: pass a %s beside it, or in a folder of its own inside it", flag,
             path.c_str(), flag);
    if (std::distance(rel.begin(), rel.end()) > 1 && is_checkpoint_folder_name(first))
        fail("%s %s is inside %s, a checkpoint of --ckpt-dir %s (replaced or removed as the run goes on, and checked "
             "file by file on resume: a model saved into one broke it)\n---> HINT: pass a %s outside the run's "
             "checkpoints (beside --ckpt-dir, say)", flag, path.c_str(), first.c_str(), ckpt_dir.c_str(), flag);
    if (is_dir_output && is_checkpoint_folder_name(first))
        fail("%s %s is a checkpoint's folder of --ckpt-dir %s (replaced or removed as the run goes on)\n---> HINT: "
             "pass a %s outside the run's checkpoints (beside --ckpt-dir, say)", flag, path.c_str(), ckpt_dir.c_str(),
             flag);
}

// Another run's: a directory that holds checkpoints or a run's lock, as a directory output, or a step folder of one.
static void refuse_output_in_another_runs_checkpoints(const std::string& path, const char* flag, bool is_dir_output) {
    if (path.empty()) return;
    namespace fs = std::filesystem;
    std::error_code ec;
    auto is_run_dir = [](const std::string& dir) {
        return !checkpoint_steps(dir).empty() || access((dir + "/" + CKPT_LOCK_FILE).c_str(), F_OK) == 0;
    };
    // the path itself or any of its parents (by the canonical path: "x/../ck/step_N/.", links)
    const fs::path target = fs::weakly_canonical(path, ec);
    if (is_dir_output && is_run_dir(target.string())) {
        const bool steps = !checkpoint_steps(target.string()).empty();
        fail("%s %s is a run's checkpoint directory (it holds %s%s): the files written there would lie among that "
             "run's step folders%s\n---> HINT: pass a %s of its own (a new folder, beside it or inside it)", flag,
             path.c_str(), steps ? "checkpoints" : "its lock ", steps ? "" : CKPT_LOCK_FILE,
             std::string(flag) == "--save"
                 ? format(", and --init-from %s would load them, not the run's checkpoints", path.c_str()).c_str()
                 : "",
             flag);
    }
    for (fs::path p = target; p.has_filename(); p = p.parent_path()) {
        const std::string parent = p.parent_path().string();
        if (is_checkpoint_folder_name(p.filename().string()) && is_run_dir(parent))
            fail("%s %s is %s%s, a checkpoint's folder of %s, a run's checkpoint directory (that run replaces or "
                 "removes its step folders as it goes)\n---> HINT: pass a %s outside it", flag, path.c_str(),
                 p == target ? "" : "inside ", p.string().c_str(), parent.c_str(), flag);
    }
}

void refuse_output_in_checkpoints(const std::string& path, const char* flag, const std::string& run_dir,
                                  bool is_dir_output) {
    refuse_output_in_this_runs_checkpoints(path, flag, run_dir, is_dir_output);
    refuse_output_in_another_runs_checkpoints(path, flag, is_dir_output);
}

bool save_writes_name(const std::string& name) {
    return is_hf_model_file(name) || name.rfind(".staged_", 0) == 0;
}

void refuse_colliding_outputs(const std::vector<RunOutput>& outputs) {
    namespace fs = std::filesystem;
    for (const RunOutput& a : outputs)
        for (const RunOutput& b : outputs) {
            if (&a == &b || a.path.empty() || b.path.empty() || a.writes_name) continue;  // a: a file output
            std::error_code ea, eb;
            const fs::path pa = fs::weakly_canonical(a.path, ea), pb = fs::weakly_canonical(b.path, eb);
            if (ea || eb) continue;  // (a path that cannot be examined is said where it is opened)
            if (!b.writes_name && pa == pb && &a < &b)
                fail("%s %s and %s %s are one path: one output of the run would replace the other\n---> HINT: give "
                     "each its own path", a.flag, a.path.c_str(), b.flag, b.path.c_str());
            if (b.writes_name && pa == pb)  // (--save made the directory first: the log's open said "Is a directory")
                fail("%s %s is the directory %s %s writes: one output of the run would replace the other\n---> HINT: "
                     "pass another %s (a file outside %s)", a.flag, a.path.c_str(), b.flag, b.path.c_str(), a.flag,
                     b.path.c_str());
            if (b.writes_name && pa.parent_path() == pb && b.writes_name(pa.filename().string()))
                fail("%s %s is one of the files %s %s writes: one output of the run would replace the other\n---> "
                     "HINT: pass another %s (another name, or outside %s)", a.flag, a.path.c_str(), b.flag,
                     b.path.c_str(), a.flag, b.path.c_str());
        }
}

void refuse_outputs_among_inputs(const std::vector<RunOutput>& outputs,
                                 const std::vector<std::pair<std::string, const char*>>& inputs) {
    for (const RunOutput& out : outputs) {
        if (out.path.empty()) continue;
        const std::string id = file_identity(out.path);  // (one not there yet can only be an input of that name)
        for (const auto& [in, flag] : inputs)
            if (file_identity(in) == id)
                fail("%s %s is %s%s, an input of this run: writing it would destroy it\n---> HINT: pass another %s",
                     out.flag, out.path.c_str(), in == out.path ? "" : (in + ", ").c_str(), flag, out.flag);
    }
}

void check_output_file(const std::string& path, const char* flag, bool may_replace, bool may_replace_npy) {
    struct stat st;
    const bool exists = stat(path.c_str(), &st) == 0;
    if (exists && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        fail("%s %s is not a regular file (a pipe or a device): the run writes a file and renames it there, which "
             "would replace it\n---> HINT: pass a file path", flag, path.c_str());
    if (exists && S_ISREG(st.st_mode) && !may_replace && !(may_replace_npy && file_starts_as_npy(path)))
        fail("%s %s already exists (%s); this run would replace it\n---> HINT: pass another %s, or --overwrite to "
             "replace it", flag, path.c_str(), may_replace_npy ? "not an .npy file: not the dump a resumed run "
             "replaces" : "an earlier run's?", flag);
    if (is_dir(path))
        fail("%s %s: that is a directory\n---> HINT: pass a file path (e.g. %s/out.npy)", flag, path.c_str(),
             path.c_str());
    const std::string parent = dir_of(path);
    const int err = is_dir(parent) ? probe_create(parent) : ENOENT;
    if (err != 0)
        fail("%s %s: cannot write into %s (%s)\n---> HINT: pass a path in an existing, writable directory", flag,
             path.c_str(), parent.c_str(),
             is_dir(parent) ? format("creating a file there failed: %s", std::strerror(err)).c_str()
                            : "no such directory");
}

double free_space(const std::string& dir) {
    std::string d = dir.empty() ? "." : dir;
    struct statvfs fs;
    while (statvfs(d.c_str(), &fs) != 0) {  // not there yet: the nearest existing parent holds it
        size_t slash = d.find_last_of('/');
        if (errno != ENOENT || d == "/" || d == ".") return -1;
        d = slash == std::string::npos ? "." : slash == 0 ? "/" : d.substr(0, slash);
    }
    return fs.f_frsize > 0 ? (double)fs.f_bavail * (double)fs.f_frsize : -1;
}

void check_free_space(const std::string& dir, double bytes, const char* what) {
    const double free_bytes = free_space(dir);
    if (free_bytes >= 0 && free_bytes < bytes)
        fail("%s needs %.1f MiB in %s, but its filesystem has %.1f MiB free\n---> HINT: free some space or choose "
             "a directory on another filesystem", what, bytes / 1048576.0, dir.c_str(), free_bytes / 1048576.0);
}

int checkpoints_at_once(int existing, int written, int keep) {
    const int all = existing + written;
    return all <= keep ? all : keep + 1;  // rotation removes the oldest only once the newest is complete
}

int checkpoints_from(int first, int steps, int every) {
    if (first > steps) return 0;
    return (every > 0 && steps - 1 >= first ? (steps - 1) / every - (first - 1) / every : 0) + 1;
}

std::vector<std::string> data_files_of(const std::string& pattern, const char* flag) {
    const std::vector<std::string> files = expand_data_pattern(pattern);  // as the data loader reads them
    if (files.empty())
        fail("no files match the data pattern \"%s\" (%s)\n---> HINT: check the path; quote the pattern so the "
             "shell does not expand it, e.g. %s 'data/fineweb_%s_*.bin'", pattern.c_str(), flag, flag,
             std::strcmp(flag, "--val-data") == 0 ? "val" : "train");
    std::map<std::string, std::string> seen;  // file_identity -> the first name matched
    for (const std::string& f : files) {
        auto [it, fresh] = seen.emplace(file_identity(f), f);
        if (!fresh)
            fail("the data pattern \"%s\" (%s) matches one file twice: %s and %s are hard or symbolic links to it, "
                 "and its tokens would be read twice in each epoch\n---> HINT: remove the link, or narrow the pattern",
                 pattern.c_str(), flag, it->second.c_str(), f.c_str());
    }
    return files;
}

std::string shared_data_files_warning(const std::vector<std::string>& train, const std::vector<std::string>& val) {
    std::set<std::string> trained;  // file_identity: a hard or symbolic link is the file it links to
    for (const std::string& f : train) trained.insert(file_identity(f));
    std::vector<std::string> both;
    for (const std::string& f : val)
        if (trained.count(file_identity(f))) both.push_back(f);
    if (both.empty()) return "";
    return format("warning: %zu of the %zu validation file(s) are also training data (%s%s): the validation loss then "
                  "measures tokens the model trains on, not held-out text\n", both.size(), val.size(),
                  both[0].c_str(), both.size() > 1 ? ", ..." : "");
}

std::string shard_layouts_warning(const ShardInfo& train, const ShardInfo& val) {
    auto layout = [](const ShardInfo& s) {
        return s.layout == SHARD_LAYOUT_ROWS ? format("rows of %d tokens padded with %d", s.row_len, s.pad_id)
                                             : std::string(shard_layout_name(s.layout));
    };
    const std::string t = layout(train), v = layout(val);
    if (t == v) return "";
    return format("warning: the validation shards are %s, the training shards %s: the validation loss measures other "
                  "samples than the training sees (flat: windows across documents; rows: one document per row, its "
                  "pads not counted); prepare both with one prep_data run\n", v.c_str(), t.c_str());
}

std::string data_fingerprint(const std::vector<std::string>& files, bool checksums) {
    std::string id;
    for (const std::string& f : files) {
        struct stat st;
        if (stat(f.c_str(), &st) != 0) fail("cannot read %s: %s", f.c_str(), std::strerror(errno));
        id += format("%s%lld", id.empty() ? "" : ";", (long long)st.st_size);
        if (checksums) id += format(":%016llx", (unsigned long long)file_checksum(f));
    }
    return id;
}

std::vector<std::string> fingerprint_entries(const std::string& fingerprint) {
    std::vector<std::string> v;
    for (size_t a = 0, b; a <= fingerprint.size(); a = b + 1) {
        b = std::min(fingerprint.find(';', a), fingerprint.size());
        v.push_back(fingerprint.substr(a, b - a));
    }
    return v;
}

long long cpu_eval_tokens(size_t parameters, int B, int T, long long tokens) {
    // 1e11 FLOPs: 5-20 s on one to four busy cores (measured: 5 GFLOP/s per core in OpenBLAS sgemm at these sizes)
    const double flops = 1e11;
    const long long batch = (long long)B * T;
    long long fit = (long long)(flops / (2.0 * (double)std::max<size_t>(parameters, 1)));
    fit = std::min(fit, tokens) / batch * batch;
    return std::max(fit, batch);
}

void check_no_earlier_run(const TrainOptions& opts) {
    if (opts.overwrite || opts.eval_only) return;
    if (!opts.resume && !opts.ckpt_dir.empty()) {
        std::vector<int64_t> steps = checkpoint_steps(opts.ckpt_dir);
        if (!steps.empty())
            fail("--ckpt-dir %s holds %zu checkpoint(s) of an earlier run (the newest after step %lld); this run would "
                 "replace them\n---> HINT: pass --resume to continue that run, --overwrite to start over in that "
                 "directory, or choose another --ckpt-dir", opts.ckpt_dir.c_str(), steps.size(),
                 (long long)steps.back());
    }
    // a training run appends to --log: after an earlier run's records its own would read as one run with both (with
    // checkpoints to continue, the refusal above named --resume)
    if (!opts.resume && !opts.log.empty()) {
        check_is_metrics_log(opts.log);  // (not an earlier run's records: another file)
        struct stat st;
        if (stat(opts.log.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
            fail("--log %s holds an earlier run's records (%lld bytes); this run would append its own to them\n"
                 "---> HINT: pass --overwrite to start the log over, or choose another --log", opts.log.c_str(),
                 (long long)st.st_size);
    }
    // any file of a model (an older download's pytorch_model.bin, a tokenizer.model): --save replaces them all
    const std::vector<std::string> model =
        opts.save.empty() ? std::vector<std::string>() : hf_model_files_in(opts.save);
    if (!opts.resume && !model.empty()) {
        const std::string names = join(model);
        fail("--save %s already holds a model's files (%s); this run would replace them\n---> HINT: pass --overwrite "
             "to replace them, or choose another --save directory", opts.save.c_str(), names.c_str());
    }
}

void print_table(const char* title, const std::vector<std::pair<std::string, std::string>>& rows) {
    size_t w1 = std::strlen(title), w2 = 0;
    for (const auto& r : rows) {
        w1 = std::max(w1, r.first.size());
        w2 = std::max(w2, r.second.size());
    }
    std::string line = "+" + std::string(w1 + 2, '-') + "+" + std::string(w2 + 2, '-') + "+";
    std::printf("%s\n| %-*s | %-*s |\n%s\n", line.c_str(), (int)w1, title, (int)w2, "", line.c_str());
    for (const auto& r : rows) std::printf("| %-*s | %-*s |\n", (int)w1, r.first.c_str(), (int)w2, r.second.c_str());
    std::printf("%s\n", line.c_str());
}

// What else takes bytes off a plan: the settings of this one that have a leaner choice, each named once.
static std::string plan_savings_hint(const TrainOptions& opts) {
    // (only what combines with this run's settings: --recompute 2 recomputes the norm outputs PRAC compresses, and
    // 8-bit moments do not shard over ZeRO-1's ranks yet)
    std::vector<std::string> ways;
    if (opts.prac == "none" && opts.recompute < 2)
        ways.push_back("--prac prac (README: 37-45% less in all at the paper's sizes)");
    if (opts.recompute < (opts.prac == "none" ? 2 : 1))
        ways.push_back(format("--recompute %d (recomputes more in backward)", opts.recompute + 1));
    if (opts.recompute_attention == 0) ways.push_back("--recompute-attention 1");
    if (opts.optimizer == "adamw" && opts.optimizer_states == "fp32" && opts.zero == 0)
        ways.push_back("--optimizer-states 8bit (AdamW's moments in 2 bytes a parameter instead of 8), or --zero 1 over "
                       "several GPUs (--plan-ranks N plans one of N; not with 8-bit moments)");
    ways.push_back("a shorter --seq-len, or a GPU with more memory");
    return join(ways, "; ");
}

int print_plan(const TrainOptions& opts, const ModelConfig& cfg, const PracOptions& prac) {
    PlanTarget target = opts.device == "cpu"      ? PlanTarget::CPU_FP32
                        : opts.precision == "fp32" ? PlanTarget::CUDA_FP32
                                                   : PlanTarget::CUDA_BF16;
    // a plan of a CUDA run the CUDA backend would refuse (CudaBackend::check_attention_shape) is refused as it
    CHECK_USER(target == PlanTarget::CPU_FP32 || cuda_attention_takes_head_size(cfg.head_dim()),
               "head size %d (width %d / %d heads): the CUDA backend's attention takes head sizes 16, 32, 48, 64, "
               "80, 96, 112 and 128, so a CUDA run of this model is refused\n---> HINT: pick a width and head count "
               "that give one of those, or plan the CPU backend's run (--plan --device cpu), which takes any head size",
               cfg.head_dim(), cfg.channels, cfg.num_heads);
    OptimizerChoice optim = optimizer_choice_from(opts);
    MemoryPlan p = plan_memory(cfg, prac, opts.batch_size, opts.seq_len, target, &optim, opts.recompute_options());
    check_prac_compresses(p.compressed_sites, prac.mode, opts.prac, opts.prac_classes, opts.recompute);  // as a run
    // what the plan leaves out and a GPU needs anyway: the CUDA context and allocator slack
    const size_t reserve = 1ull << 30;
    int max_b = opts.gpu_mem_gib > 0 ? plan_max_batch(cfg, prac, opts.seq_len, target,
                                                       (size_t)(opts.gpu_mem_gib * 1073741824.0), reserve, &optim,
                                                       opts.recompute_options())
                                     : -1;
    if (opts.json) {
        std::string j = plan_json(p);
        if (max_b >= 0) {
            j.pop_back();  // reopen the object: add the fit result
            while (!j.empty() && (j.back() == '\n' || j.back() == ' ')) j.pop_back();
            j += format(",\n  \"gpu_mem_gib\": %g,\n  \"reserve_bytes\": %zu,\n  \"max_batch_size\": %d,\n"
                        "  \"max_batch_size_is_search_limit\": %s\n}", opts.gpu_mem_gib, reserve, max_b,
                        max_b == PLAN_MAX_BATCH_LIMIT ? "true" : "false");
        }
        std::printf("%s\n", j.c_str());
        check_stdout_written("the plan");
        return 0;
    }
    std::printf("%s", plan_table(p).c_str());
    if (max_b >= 0) {
        if (max_b == 0) {
            const MemoryPlan one = plan_memory(cfg, prac, 1, opts.seq_len, target, &optim, opts.recompute_options());
            std::printf("does not fit in %g GiB even at micro-batch 1 (%.2f GiB planned, and a %.0f GiB reserve for "
                        "the CUDA context)\n---> HINT: %s\n", opts.gpu_mem_gib, one.total / 1073741824.0,
                        reserve / 1073741824.0, plan_savings_hint(opts).c_str());
        } else {
            std::printf("largest micro-batch that fits in %g GiB at T=%d: %s%d (keeping %.0f GiB for the CUDA context "
                        "and allocator slack)\n", opts.gpu_mem_gib, opts.seq_len,
                        max_b == PLAN_MAX_BATCH_LIMIT ? "at least " : "", max_b, reserve / 1073741824.0);
            if (max_b < opts.batch_size) {  // (said: the line read as an answer about another batch)
                int k = (opts.batch_size + max_b - 1) / max_b;  // the fewest micro-batches of equal size that fit
                while (opts.batch_size % k) k++;
                std::printf("so --batch-size %d does not fit\n---> HINT: --batch-size %d or less, with --grad-accum "
                            "to keep the step's %d sequences (--batch-size %d --grad-accum %d); or %s\n",
                            opts.batch_size, max_b, opts.batch_size * opts.grad_accum, opts.batch_size / k,
                            k * opts.grad_accum, plan_savings_hint(opts).c_str());
            }
        }
    }
    check_stdout_written("the plan");
    return 0;
}

std::unique_ptr<Tokenizer> data_tokenizer(Arch arch, const TrainOptions& opts) {
    // check_data_tokenizer found the file that made the shards (or stopped the run before it trained)
    std::string file = data_tokenizer_file(arch, opts, builtin_data_dir());
    if (arch == Arch::GPT2) return std::make_unique<Gpt2Tokenizer>(file);
    return std::make_unique<SpmTokenizer>(file);
}

std::unique_ptr<Tokenizer> sample_decoder(Arch arch, const TrainOptions& opts) {
    try {
        return data_tokenizer(arch, opts);
    } catch (const UserError& e) {
        std::printf("note: cannot load a tokenizer to decode the sample (%s)\n", e.what());
        return nullptr;
    }
}

std::string sample_text(const Tokenizer& tok, const std::vector<int32_t>& ids) {
    std::string text;
    for (size_t i = 0; i <= ids.size();) {
        size_t end = i;  // the next EOS or the end
        while (end < ids.size() && (uint32_t)ids[end] != tok.eos_id()) end++;
        const std::vector<uint32_t> doc(ids.begin() + i, ids.begin() + end);
        text += utf8_replace_invalid(tok.decode(doc.data(), doc.size()));
        if (end < ids.size()) text += tok.eos_text();
        i = end + 1;
    }
    return text;
}

std::vector<uint32_t> prompt_ids(const Tokenizer& tok, const std::string& prompt) {
    const std::string eos = tok.eos_text();
    std::vector<uint32_t> ids;
    if (eos.empty()) return tok.encode(prompt, ids), ids;  // (no text to find)
    for (size_t i = 0;;) {
        const size_t at = prompt.find(eos, i);
        tok.encode(std::string_view(prompt).substr(i, at == std::string::npos ? std::string::npos : at - i), ids);
        if (at == std::string::npos) return ids;
        ids.push_back(tok.eos_id());
        i = at + eos.size();
    }
}

// Every rank must run the same command: the same program, and no rank with other flags (an MPMD launch, a wrapper
// script that adds one)
// would train other models or batches and meet in collectives of other sizes (a hang, a crash, or a wrong result
// with exit 0). The flags are compared as the parser reads them, flag -> its last value (order, repeats and
// --flag=value vs --flag value do not matter); fails on every rank, naming the first rank that differs and each
// flag that differs with both ranks' values.
static void check_same_arguments(Comm& comm, const char* program, int argc, char** argv) {
    if (comm.size() < 2) return;
    // an MPMD launch of two programs (train_gpt2 : train_llama) failed later inside MPI (a truncated message)
    const std::vector<std::string> programs = all_gather_string(comm, program);
    for (int r = 1; r < comm.size(); r++)
        if (programs[r] != programs[0])
            fail("rank %d runs %s, rank 0 %s\n---> HINT: every rank must run the same command: launch one for all "
                 "(mpirun -np N %s ...)", r, programs[r].c_str(), programs[0].c_str(), programs[0].c_str());
    std::string mine;
    for (int i = 1; i < argc; i++) mine += std::string(argv[i]) + '\n';
    const std::vector<std::string> all = all_gather_string(comm, mine);
    auto flags = [](const std::string& text) {  // flag -> its last value ("" for a flag without one)
        std::vector<std::string> w;
        std::istringstream lines(text);
        for (std::string t; std::getline(lines, t);) w.push_back(t);
        std::map<std::string, std::string> m;
        for (size_t i = 0; i < w.size(); i++) {
            const size_t eq = w[i].find('=');
            if (w[i].rfind("--", 0) == 0 && eq != std::string::npos) m[w[i].substr(0, eq)] = w[i].substr(eq + 1);
            else if (w[i].rfind("--", 0) == 0) {
                const bool valued = i + 1 < w.size() && w[i + 1].rfind("--", 0) != 0;
                m[w[i]] = valued ? w[i + 1] : "";
                i += valued;
            }
            else m[""] += " " + w[i];  // stray words (the parser refuses them)
        }
        return m;
    };
    const auto first = flags(all[0]);
    for (int r = 1; r < (int)all.size(); r++) {
        const auto other = flags(all[r]);
        if (other == first) continue;
        auto shown = [](const std::map<std::string, std::string>& m, const std::string& k) {
            auto it = m.find(k);
            return it == m.end() ? std::string("absent") : it->second.empty() ? "given" : "\"" + it->second + "\"";
        };
        std::set<std::string> names;
        for (const auto* m : {&first, &other})
            for (const auto& kv : *m) names.insert(kv.first);
        std::string diff;
        for (const std::string& k : names)
            if (shown(first, k) != shown(other, k))
                diff += format("\n  %s: rank %d %s, rank 0 %s", k.empty() ? "(words that are no flag's value)" : k.c_str(),
                               r, shown(other, k).c_str(), shown(first, k).c_str());
        fail("rank %d was started with other arguments than rank 0:%s\n---> HINT: every rank must run the same "
             "command: launch one for all (mpirun -np N %s ...)", r, diff.c_str(), argc > 0 ? argv[0] : "");
    }
}

bool make_run_setup(RunSetup& s, Arch arch, const char* program, int argc, char** argv, Comm& comm, int* exit_code) {
    s.comm = &comm;
    s.program = program;
    TrainOptions& opts = s.opts;
    parse_train_options(opts, argc, argv);
    check_same_arguments(comm, program, argc, argv);
    const int rank = comm.rank();
    // only rank 0 reports: the other ranks' stdout goes nowhere (their errors still reach stderr)
    if (rank != 0 && !std::freopen("/dev/null", "w", stdout)) fail("cannot silence the output of rank %d", rank);
    if (opts.help) {
        std::printf("%s", train_options_help(arch, program).c_str());
        check_stdout_written("the help");
        *exit_code = 0;
        return false;
    }

    // ---- config ----
    // --init-from DIR with a config.json (a Hugging Face directory, or what --save writes): the model is that one.
    // A --model beside it must agree on what changes the arithmetic (its rope_theta and eps were used silently).
    // --init-from FILE without --model: the config.json beside the file (the default model was taken, and failed on
    // a tensor's shape); with --model, that one (a directory may hold several models' weights and one config).
    const bool init_is_dir = is_dir(opts.init_from);
    CHECK_USER(init_is_dir || opts.init_from.size() < 5 || opts.init_from.compare(opts.init_from.size() - 5, 5, ".json"),
               "--init-from %s is a JSON file, not weights\n---> HINT: pass the directory that holds it and its "
               "model.safetensors (--init-from DIR), or --model %s for a new model of that config",
               opts.init_from.c_str(), opts.init_from.c_str());
    struct stat init_st;
    const bool init_is_file = stat(opts.init_from.c_str(), &init_st) == 0 && S_ISREG(init_st.st_mode);
    // a checkpoint's state file beside its weights: it failed as a model "not of this architecture" (no weights in it)
    const std::string init_dir = dir_of(opts.init_from);
    CHECK_USER(!init_is_file || std::filesystem::path(opts.init_from).filename() != CKPT_STATE_FILE ||
                   access((init_dir + "/" + CKPT_MODEL_FILE).c_str(), F_OK) != 0,
               "--init-from %s is a checkpoint's training state (optimizer, step, data position), not its weights\n"
               "---> HINT: pass its step directory, --init-from %s (or %s/%s)", opts.init_from.c_str(),
               init_dir.c_str(), init_dir.c_str(), CKPT_MODEL_FILE);
    const std::string init_config = init_is_dir                          ? opts.init_from + "/config.json"
                                    : init_is_file && opts.model.empty() ? init_dir + "/config.json"
                                                                         : "";
    const bool has_init_config = !init_config.empty() && access(init_config.c_str(), R_OK) == 0;
    const int config_errno = errno;  // (why not, when not)
    // (without either, the default model was taken, and a directory of another model's weights failed on a tensor's
    // shape with no word of the missing config.json)
    if (init_is_dir && !has_init_config && !opts.resume) {
        const std::string latest = checkpoint_latest(opts.init_from);  // a run's --ckpt-dir, not one checkpoint
        CHECK_USER(latest.empty(), "--init-from %s is a run's checkpoint directory, not one checkpoint\n---> HINT: "
                   "pass one of its step directories, e.g. the newest, --init-from %s", opts.init_from.c_str(),
                   latest.c_str());
        CHECK_USER(!opts.model.empty(), "--init-from %s has no config.json (%s), which would say which model its "
                   "weights are\n---> HINT: pass --model NAME or --model CONFIG.json for them, or --init-from a "
                   "directory with its config.json", opts.init_from.c_str(), std::strerror(config_errno));
    }
    // a weights file alone: its directory's config.json says the model, and without one so must --model (the
    // default model was taken, and failed on a tensor's shape)
    CHECK_USER(!(init_is_file && opts.model.empty() && !has_init_config && !opts.resume),
               "--init-from %s has no config.json beside it (%s: %s), which would say which model its weights are\n"
               "---> HINT: pass --model NAME or --model CONFIG.json for them", opts.init_from.c_str(),
               init_config.c_str(), std::strerror(config_errno));
    if (opts.model.empty())
        opts.model = has_init_config ? init_config : arch == Arch::GPT2 ? "gpt2-124m" : "llama-130m";
    s.cfg = model_config_load(arch, opts.model);
    // where --model and a config.json of --init-from's differ ("" where they agree)
    auto differences = [&](const std::string& config) {
        const ModelConfig d = model_config_load(arch, config);
        std::string differ;
        auto cmp = [&](const char* what, double a, double b) {
            const int digits = format("%g", a) == format("%g", b) ? 9 : 6;  // as many as tell them apart
            if (a != b)
                differ += format("%s %s %.*g, %s's %.*g; ", what, opts.model.c_str(), digits, a, config.c_str(),
                                 digits, b);
        };
        cmp("layers", s.cfg.num_layers, d.num_layers);
        cmp("heads", s.cfg.num_heads, d.num_heads);
        cmp("width", s.cfg.channels, d.channels);
        cmp("MLP width", s.cfg.hidden, d.hidden);
        cmp("vocabulary", s.cfg.vocab_size, d.vocab_size);
        cmp("norm eps", s.cfg.norm_eps, d.norm_eps);
        if (arch == Arch::LLAMA) cmp("rope_theta", s.cfg.rope_theta, d.rope_theta);
        if (arch == Arch::GPT2) cmp("positions", s.cfg.max_seq_len, d.max_seq_len);  // (GPT-2's wpe has a row each)
        return differ.substr(0, differ.size() - 2);
    };
    const std::string beside = init_dir + "/config.json";
    if (has_init_config && opts.model != init_config) {
        const std::string differ = differences(init_config);
        CHECK_USER(differ.empty(), "--model %s is not the model of --init-from %s: %s\n---> HINT: drop --model (the "
                   "directory's config.json is used), or pass --model %s", opts.model.c_str(), opts.init_from.c_str(),
                   differ.c_str(), init_config.c_str());
    } else if (init_is_file && init_config.empty() && !opts.resume && access(beside.c_str(), R_OK) == 0 &&
               opts.model != beside) {
        // a weights file with --model: --model says the model (a directory may hold several models' weights and
        // one config), but a config beside it that differs is said (rope_theta read otherwise, without a word)
        std::string differ;
        try {
            differ = differences(beside);
        } catch (const UserError&) {  // (not a config of this trainer's models: nothing to compare)
        }
        if (!differ.empty() && comm.rank() == 0)  // (--plan --json: stdout is the plan alone)
            std::fprintf(opts.json ? stderr : stdout, "notice: --model %s differs from %s beside --init-from %s (%s): "
                         "the weights are read as --model's model\n", opts.model.c_str(), beside.c_str(),
                         opts.init_from.c_str(), differ.c_str());
    }
    // a config's dropout trains nothing here (transformers' GPT2Config sets 0.1 where the keys are absent): said, as
    // finetune_roberta says it
    if (s.cfg.config_dropout > 0 && options_train(opts) && !opts.plan && comm.rank() == 0)
        std::printf("notice: %s sets dropout (up to %g); this trainer has none, so this run trains without it\n",
                    opts.model.c_str(), s.cfg.config_dropout);
    CHECK_USER(opts.hidden_align == 1 || arch == Arch::LLAMA,
               "--hidden-align pads LLaMA's (N, F) activations; %s's MLP width is 4C, already a multiple of 8 at every "
               "named size\n---> HINT: drop --hidden-align", arch_name(arch));
    s.cfg.hidden_align = opts.hidden_align;
    const ModelConfig& cfg = s.cfg;
    if (opts.seq_len == 0) opts.seq_len = std::min(arch == Arch::GPT2 ? 1024 : 256, cfg.max_seq_len);
    CHECK_USER(opts.seq_len <= cfg.max_seq_len, "sequence length %d (--seq-len) exceeds the model's %d positions\n"
               "---> HINT: use --seq-len %d or less", opts.seq_len, cfg.max_seq_len, cfg.max_seq_len);
    if (opts.warmup < 0) opts.warmup = opts.steps / 10;
    s.builtin = opts.train_data.empty() && opts.val_data.empty();
    if (s.builtin) {
        std::string dir = builtin_data_dir(), tag = arch == Arch::GPT2 ? "gpt2" : "llama";
        opts.train_data = dir + "/austen_" + tag + "_train.bin";
        opts.val_data = dir + "/austen_" + tag + "_val.bin";
    }
    check_data_tokenizer(arch, opts,
                         s.builtin || opts.sample > 0 || !opts.save.empty() || !opts.init_from.empty() ||
                                 choice_file_is_text(opts.hellaswag)
                             ? builtin_data_dir()
                             : "",
                         cfg.vocab_size);
    s.prac = prac_options_from(opts);
    PracOptions& prac = s.prac;
    if (opts.optimizer == "rso") {  // the linear sites store X·P with the optimizer's P (train/optim_rso.h)
        opts.rso_rank = rso_rank_for(opts.rso_rank, cfg);
        if (opts.rso_activations == "projected") prac.rso_rank = opts.rso_rank;
    }
    // --eval-only saves no activations: no compressed sites, buffers or refreshes (the flags' notice says so)
    if (opts.eval_only) prac.mode = PracMode::NONE, prac.rso_rank = 0;
    // --global-batch: the micro-batches per step on this job's ranks (a plan's: --plan-ranks when given)
    resolve_global_batch(opts, opts.plan && opts.was_given("--plan-ranks") ? opts.plan_ranks : comm.size());
    if (opts.plan) {
        // under mpirun, --zero 1 plans one of the job's ranks (it planned one rank alone; --plan-ranks still says)
        if (opts.zero == 1 && !opts.was_given("--plan-ranks")) opts.plan_ranks = comm.size();
        // what the run would say first: a missing --init-from (the default model was planned, exit 0) and the flags
        // that change nothing (on stderr with --json, whose stdout is the plan alone)
        CHECK_USER(opts.init_from.empty() || access(opts.init_from.c_str(), F_OK) == 0, "--init-from %s: %s",
                   opts.init_from.c_str(), std::strerror(errno));
        if (comm.rank() == 0) std::fputs(unused_flags_notice(opts, comm.size()).c_str(), opts.json ? stderr : stdout);
        if (comm.rank() == 0 && comm.size() > 1 && opts.zero == 1 && opts.plan_ranks != comm.size())
            std::fprintf(opts.json ? stderr : stdout, "notice: this job has %d ranks; the plan is one of --plan-ranks "
                         "%d's, as asked\n", comm.size(), opts.plan_ranks);
        *exit_code = print_plan(opts, cfg, prac);
        return false;
    }
    // PRAC subspaces are per rank by default: each rank's estimator is unbiased on its own data, and independent
    // draws make the averaged gradient's noise shrink with the number of ranks. The shared option all-reduces the
    // Gram matrix and draws with the same seed, so every rank holds the same bases.
    if (!opts.prac_shared) prac.seed += 1000003ull * (uint64_t)rank;
    return true;
}

std::vector<SafeTensorWrite> broadcast_tensor_list(Comm& comm, const std::vector<SafeTensorWrite>& mine, int root) {
    std::string text;  // one line per tensor: name, dtype, dimensions
    if (comm.rank() == root)
        for (const SafeTensorWrite& t : mine) {
            text += t.name + " " + t.dtype;
            for (int64_t d : t.shape) text += " " + std::to_string(d);
            text += "\n";
        }
    broadcast_string(comm, text, root);
    if (comm.rank() == root) return mine;
    std::vector<SafeTensorWrite> list;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        SafeTensorWrite t{"", "", {}, nullptr};
        fields >> t.name >> t.dtype;
        for (int64_t d; fields >> d;) t.shape.push_back(d);
        list.push_back(t);
    }
    return list;
}
