// JSONL metrics: one object per optimizer step and per evaluation, appended line by line (one write each) so a
// killed run keeps everything it logged. Non-finite numbers are written as null (JSON has no NaN).
#pragma once
#include <fcntl.h>
#include <sys/file.h>  // flock
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>  // atoi
#include <cstring>
#include <exception>  // uncaught_exceptions
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/files.h"  // write_all, made_output_dirs

// A non-empty --log must be one of these trainers' logs: its first line starts as every record does ({"type":).
// Another file (notes, a CSV) is never appended to, truncated by --overwrite, or counted as an earlier run's log.
inline void check_is_metrics_log(const std::string& path) {
    // (O_NONBLOCK: a named pipe's open for reading waited for a writer, and the trainer is its writer: a hang)
    const int rd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (rd < 0) return;  // (missing: a new log; unreadable: said when it is opened for appending)
    struct stat st;
    const std::string start = "{\"type\":";
    std::string head(start.size(), '\0');
    const bool regular = fstat(rd, &st) == 0 && S_ISREG(st.st_mode);
    const ssize_t n = regular && st.st_size > 0 ? pread(rd, head.data(), head.size(), 0) : -1;
    ::close(rd);
    if (n < 0) return;  // empty, or a device or pipe (never ours to check)
    head.resize((size_t)n);
    if (head != start.substr(0, head.size()))  // (a shorter file: a first record cut short, find_unfinished_line's)
        fail("--log %s is not a metrics log of these trainers (its first line is not one of their records); it is "
             "left as it is\n---> HINT: choose another --log", path.c_str());
}

struct MetricsLog {
    int fd = -1;
    std::string path;
    // start_over: an earlier run's records are dropped (--overwrite), at this run's first record (a run refused
    // before it leaves them); otherwise records are appended (a resumed run's log goes on; --eval-only adds its
    // evaluation)
    bool truncate_first = false;
    // A log a killed run left ending in a line cut short: whole records up to `tail_at`; the fix applied at this run's
    // first record (a run refused before it leaves the log as it was)
    off_t tail_at = -1;
    bool tail_is_record = false;  // a whole record without its newline (it gets one), else one cut short (dropped)
    std::string unfinished_record;  // that record (tail_is_record)
    // The first step record this process writes gets "startup":true: that step carries the process's one-time setup
    // (allocations, library plans, a first refresh), a resume's first step too, so timing summaries leave it out
    bool step_written = false;
    // The log file this process created, while no record is in it: a run refused after it opened the log (a
    // --resume's settings, --grad-accum past the data) removes it as its error unwinds, and main's error path the
    // directories made for it (remove_made_output_dirs_left_empty), leaving no empty log behind. Cleared at the first
    // record.
    bool made_empty = false;
    // A trainer with a --ckpt-dir keeps a failed write (a full disk) instead of ending the run at once: the record and
    // every later one wait in `unwritten`, the run stops at its next step with a checkpoint that holds them, and a
    // --resume writes them first (nothing of the run is lost: it failed on the spot, losing the steps since the last
    // checkpoint). Without one, a failed write ends the run.
    bool keep_failed_records = false;
    std::string write_error;              // the failed write's error ("" while every write succeeded)
    std::vector<std::string> unwritten;   // the record it failed on and the ones after it, in order
    size_t unwritten_saved = 0;           // how many of them a checkpoint holds (or a resume redoes)
    int records_tried = 0;                // (PRAC_TEST_LOG_FULL_AT)
    MetricsLog(const std::string& path, bool start_over) : path(path), truncate_first(start_over) {
        if (path.empty()) return;
        // its directory is made, as --save's and --ckpt-dir's are, and recorded as theirs are (made_output_dirs)
        std::vector<std::filesystem::path> missing;  // innermost first
        std::error_code ec;
        for (auto d = std::filesystem::path(path).parent_path(); !d.empty() && !std::filesystem::exists(d, ec);
             d = d.parent_path())
            missing.push_back(d);
        for (auto d = missing.rbegin(); d != missing.rend(); ++d)
            if (std::filesystem::create_directory(*d, ec)) made_output_dirs().dirs.push_back(d->string());
        fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
        made_empty = fd >= 0;
        if (fd < 0 && errno == EEXIST) fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) fail("cannot open the metrics log %s for appending: %s", path.c_str(), std::strerror(errno));
        // a file, not a device or pipe (--log /dev/stdout: shared with everything there, never ours to lock or cut)
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
        // two runs on one log interleaved their records into one that reads as a single run
        if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
            fail("another run is writing the metrics log %s (it holds its lock)\n---> HINT: wait for that run to end, "
                 "or choose another --log", path.c_str());
        check_is_metrics_log(path);
        if (!truncate_first) find_unfinished_line(st.st_size);
    }
    // A record cut short (a run killed mid-write, as a file-size limit did) would have this run's first record appended
    // to it, and the log no longer parse. A last line that is not one of ours is another file's, or a hand's: refused,
    // not cut (appended after, the log no longer reads as a run: plot_runs.py and the repro tables refuse it).
    void find_unfinished_line(off_t size) {
        if (size == 0) return;
        const int rd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (rd < 0) return;
        const off_t from = std::max<off_t>(0, size - (1 << 20));  // a record is far shorter than that
        std::string tail((size_t)(size - from), '\0');
        const ssize_t n = pread(rd, tail.data(), tail.size(), from);
        ::close(rd);
        if (n != (ssize_t)tail.size()) return;  // (unreadable: appended to as it is)
        const std::string start = "{\"type\":";
        // zero bytes past the last whole line: what a crash or power loss while the file grew leaves (not a record)
        const size_t zeros_at = tail.find_last_not_of('\0') + 1;  // (npos + 1 = 0: all zero)
        if (zeros_at < tail.size() && (zeros_at == 0 || tail[zeros_at - 1] == '\n'))
            fail("--log %s ends in %zu zero bytes after its last whole line (left by a crash or a power loss while the "
                 "file grew)\n---> HINT: cut them off: truncate -s %lld %s", path.c_str(), tail.size() - zeros_at,
                 (long long)(from + (off_t)zeros_at), path.c_str());
        if (tail.back() == '\n') {  // its last line whole: one of our records, or another hand's line
            const size_t nl = tail.rfind('\n', tail.size() - 2);
            const std::string last = tail.substr(nl == std::string::npos ? 0 : nl + 1, std::string::npos);
            if (tail.size() >= 2 && (nl != std::string::npos || from == 0) && last != "\n" &&
                last.rfind(start, 0) != 0)
                fail("--log %s ends with a line that is not a record of these trainers' logs (\"%.40s\"); appended to, "
                     "the log would not read as one run\n---> HINT: remove that line (plot_runs.py and the repro tables "
                     "refuse the log as it is), or choose another --log", path.c_str(),
                     last.substr(0, last.size() - 1).c_str());
            return;
        }
        const size_t nl = tail.rfind('\n');
        if (nl == std::string::npos && from > 0)
            fail("--log %s ends in over 1 MiB without a newline: not a metrics log\n---> HINT: choose another --log",
                 path.c_str());
        const std::string last = nl == std::string::npos ? tail : tail.substr(nl + 1);
        tail_at = size - (off_t)last.size();
        // ours: {"type":..., a flat object (a '}' only at its end), whole when the cut fell just before its newline
        const bool ours = last.rfind(start, 0) == 0 || start.rfind(last, 0) == 0;  // (or cut within those bytes)
        tail_is_record = ours && last.back() == '}';
        if (tail_is_record) unfinished_record = last;
        if (!ours)
            fail("--log %s does not end with a whole line, and its last line is not a record of these trainers' logs: "
                 "not a metrics log?\n---> HINT: choose another --log", path.c_str());
    }
    ~MetricsLog() {
        // another error that ends the run before the stop that would checkpoint them (a divergence, a replica
        // mismatch): said, not lost without a word
        if (unwritten.size() > unwritten_saved && std::uncaught_exceptions() > 0)
            std::fprintf(stderr, "note: the metrics log %s could not be written (%s): its last %zu record(s) are "
                         "lost with the error below\n", path.c_str(), write_error.c_str(),
                         unwritten.size() - unwritten_saved);
        if (fd >= 0) ::close(fd);
        if (made_empty && std::uncaught_exceptions() > 0) ::remove(path.c_str());  // (a run ending normally keeps it)
    }
    MetricsLog(const MetricsLog&) = delete;
    MetricsLog& operator=(const MetricsLog&) = delete;

    static std::string num(double x) { return std::isfinite(x) ? format("%.9g", x) : "null"; }

    // A resume from a checkpoint after `step` steps appends to this log. One whose last step record is before that
    // step is not the log of the run that wrote the checkpoint: an --overwrite run stopped before its first checkpoint
    // has emptied the earlier run's log and left that run's checkpoints, and appending spliced two runs into one
    // curve (with exit 0).
    // One that goes past it must have that step's record as the checkpoint's run wrote it (`logged_loss`: its loss,
    // "" when the checkpoint does not say): another run's log of that length was appended to, the curves spliced.
    void check_resume_at(int step, const std::string& checkpoint, const std::string& logged_loss = "") const {
        const int last = last_step_record();
        if (last >= 0 && last < step)
            fail("--log %s ends at step %d, before step %d of the checkpoint %s: it lacks the steps after %d of the run "
                 "that wrote the checkpoint (a resume without --log?), or is another run's (an --overwrite run stopped "
                 "before its first checkpoint empties the earlier run's log and leaves that run's checkpoints); "
                 "appended to, it would join the two\n---> HINT: resume with a new --log file for the steps from %d "
                 "on (for one curve of a run's own logs: cat OLD NEW > joined.jsonl; plot_runs.py shows two files as "
                 "two runs)", path.c_str(), last, step, checkpoint.c_str(), last, step + 1);
        const std::string logged = logged_loss.empty() ? "" : loss_record_of(step);
        if (!logged.empty() && logged != logged_loss)
            fail("--log %s says step %d's loss was %s, but the run that wrote the checkpoint %s logged %s: the log is "
                 "another run's (one that reused its name)\n---> HINT: resume with another --log, or start over with "
                 "--overwrite", path.c_str(), step, logged.c_str(), checkpoint.c_str(), logged_loss.c_str());
    }

    // The records a run stopped by a failed write kept with its checkpoint (keep_failed_records), before any other;
    // not again where a resume of that checkpoint wrote them already (its process killed later: the log goes on
    // as a resume's replayed steps do)
    void write_kept(const std::vector<std::string>& records) {
        for (const std::string& r : records) write_unless_in_tail(r);
    }

    // skipped: --on-nonfinite skip left this step's update out ("skipped":true; absent otherwise); padding: every
    // micro-batch was padding, no update ("padding":true, the loss null)
    void step(int step, float loss, float lr, float grad_norm, double tokens_per_s, double ms, size_t mem_bytes,
              bool skipped = false, bool padding = false) {
        write_line(format("{\"type\":\"step\",\"step\":%d,\"loss\":%s,\"lr\":%s,\"grad_norm\":%s,"
                          "\"tokens_per_s\":%s,\"ms_per_step\":%s,\"mem_peak_bytes\":%zu%s%s%s}",
                          step, num(loss).c_str(), num(lr).c_str(), num(grad_norm).c_str(),
                          num(tokens_per_s).c_str(), num(ms).c_str(), mem_bytes, skipped ? ",\"skipped\":true" : "",
                          padding ? ",\"padding\":true" : "", step_written ? "" : ",\"startup\":true"));
        step_written = true;
    }
    // eval_only: --eval-only's evaluation of loaded weights (step 0 of no training; plot_runs.py keeps it off the
    // curves of a training log it is appended to)
    // more: further fields of the evaluation (",\"hellaswag_acc_norm\":0.3,..."), "" for none
    void eval(int step, float val_loss, long long tokens, bool eval_only = false, const std::string& more = "") {
        write_line(eval_record(step, val_loss, tokens, eval_only, more));
    }
    static std::string eval_record(int step, float val_loss, long long tokens, bool eval_only = false,
                                   const std::string& more = "") {
        return format("{\"type\":\"eval\",\"step\":%d,\"val_loss\":%s,\"val_ppl\":%s,\"val_tokens\":%lld%s%s}", step,
                      num(val_loss).c_str(), num(std::exp((double)val_loss)).c_str(), tokens, more.c_str(),
                      eval_only ? ",\"eval_only\":true" : "");
    }
    // Whether the log's last whole line is `record` (a resume of a finished run evaluates again: the same final
    // record is not appended a second time)
    bool ends_with(const std::string& record) const {
        if (tail_is_record) return unfinished_record == record;  // (the last line, its newline cut off)
        const std::string tail = whole_lines_of_tail();
        if (tail.size() <= record.size()) return false;
        const size_t at = tail.size() - record.size() - 1;  // where the last line starts if it is `record` + '\n'
        return tail.compare(at, record.size(), record) == 0 && (at == 0 || tail[at - 1] == '\n');
    }
    // Any other record: {"type":TYPE, then the numbers and strings in order} (finetune_roberta's glue_eval, memory
    // and final records), and "eval_only":true when eval_only (as eval()'s). Names and strings are plain words here;
    // quotes and backslashes are escaped anyway.
    void record(const std::string& type, const std::vector<std::pair<std::string, double>>& numbers,
                const std::vector<std::pair<std::string, std::string>>& strings = {}, bool eval_only = false) {
        write_line(record_line(type, numbers, strings, eval_only));
    }
    // record(), unless the log's last MiB holds the same record (a resumed run that redoes an evaluation the stopped
    // one logged: finetune_roberta's, resumed at an epoch's end; the same numbers are the same evaluation, and so is
    // --eval-only of the same weights into the same log)
    void record_once(const std::string& type, const std::vector<std::pair<std::string, double>>& numbers,
                     const std::vector<std::pair<std::string, std::string>>& strings = {}, bool eval_only = false) {
        write_unless_in_tail(record_line(type, numbers, strings, eval_only));
    }
    static std::string record_line(const std::string& type, const std::vector<std::pair<std::string, double>>& numbers,
                                   const std::vector<std::pair<std::string, std::string>>& strings, bool eval_only) {
        auto quote = [](const std::string& s) {
            std::string q = "\"";
            for (char c : s) q += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
            return q + "\"";
        };
        std::string line = "{\"type\":" + quote(type);
        for (const auto& [k, v] : strings) line += "," + quote(k) + ":" + quote(v);
        for (const auto& [k, v] : numbers) line += "," + quote(k) + ":" + num(v);
        return line + (eval_only ? ",\"eval_only\":true}" : "}");
    }

  private:
    void write_unless_in_tail(const std::string& line) {
        const std::string tail = "\n" + whole_lines_of_tail();
        if (tail.find("\n" + line + "\n") == std::string::npos) write_line(line);
    }

    // The log's last MiB, whole lines only ("" without a log, or one --overwrite empties): a record cut short
    // ("step":1 of a cut "step":12) is no record. (A step's record is about 200 bytes: some 5000 steps.)
    std::string whole_lines_of_tail() const {
        if (fd < 0 || truncate_first) return "";
        const int rd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // (a pipe: never waited on)
        if (rd < 0) return "";
        struct stat st;
        std::string tail;
        if (fstat(rd, &st) == 0 && S_ISREG(st.st_mode)) {
            const off_t from = std::max<off_t>(0, st.st_size - (1 << 20));
            tail.resize((size_t)(st.st_size - from));
            if (pread(rd, tail.data(), tail.size(), from) != (ssize_t)tail.size()) tail.clear();
        }
        ::close(rd);
        return tail.substr(0, tail.rfind('\n') + 1);  // (npos + 1 = 0: nothing)
    }

    // The loss of the newest step record of `step` in the log's last MiB, as written ("" when there is none): a
    // resumed run appends, so the newest is the one of the lineage that reached the step last.
    std::string loss_record_of(int step) const {
        const std::string tail = whole_lines_of_tail();
        const std::string key = format("{\"type\":\"step\",\"step\":%d,\"loss\":", step);
        for (size_t at = tail.rfind(key); at != std::string::npos; at = at ? tail.rfind(key, at - 1) : std::string::npos)
            if (at == 0 || tail[at - 1] == '\n') {
                const size_t from = at + key.size(), to = tail.find(',', from);
                return to == std::string::npos ? "" : tail.substr(from, to - from);
            }
        return "";
    }

    // The step of the log's last step record, -1 without one (in its last MiB: a step record is every step's)
    int last_step_record() const {
        const std::string tail = whole_lines_of_tail();
        const std::string key = "{\"type\":\"step\",\"step\":";
        for (size_t at = tail.rfind(key); at != std::string::npos; at = at ? tail.rfind(key, at - 1) : std::string::npos)
            if (at == 0 || tail[at - 1] == '\n') return std::atoi(tail.c_str() + at + key.size());
        return -1;
    }

    // One record, one line, written through at once (a killed run keeps every record before it). A failed write (a
    // full disk) ends the run with an error, the partial line cut off so the log stays valid JSONL for a resume to
    // append to: records lost with exit 0 were what a full disk used to cost.
    void write_line(std::string line) {
        if (fd < 0) return;
        if (!write_error.empty()) {  // (after a failed record, never one past the gap)
            unwritten.push_back(std::move(line));
            return;
        }
        made_empty = false;
        if (truncate_first) {  // --overwrite: the earlier run's records go at this run's first record
            truncate_first = false;
            if (ftruncate(fd, 0) != 0)
                fail("cannot empty the metrics log %s for --overwrite: %s", path.c_str(), std::strerror(errno));
        }
        if (tail_at >= 0) {  // the last line a killed run left unfinished (find_unfinished_line)
            const off_t at = tail_at;
            tail_at = -1;
            if (tail_is_record) {
                line.insert(0, "\n");
            } else {
                struct stat st;
                const long long cut = fstat(fd, &st) == 0 ? (long long)(st.st_size - at) : -1;
                if (ftruncate(fd, at) != 0)
                    fail("cannot drop the cut-short last record of the metrics log %s: %s", path.c_str(),
                         std::strerror(errno));
                std::printf("notice: the metrics log %s ended in a record cut short (%lld bytes, a run killed while "
                            "writing it): dropped\n", path.c_str(), cut);
            }
        }
        line += '\n';
        struct stat st;
        const off_t before = fstat(fd, &st) == 0 ? st.st_size : -1;
        // tests: PRAC_TEST_LOG_FULL_AT=n fails this process's n-th record and every later one, as a full disk does
        const char* full_at = std::getenv("PRAC_TEST_LOG_FULL_AT");
        const bool test_full = full_at && ++records_tried >= std::atoi(full_at);
        if (const int err = test_full ? ENOSPC : write_all(fd, line.data(), line.size())) {
            if (before >= 0) (void)!ftruncate(fd, before);  // cut the partial line off (where the file allows it)
            if (keep_failed_records) {
                write_error = std::strerror(err);
                line.pop_back();
                if (line[0] == '\n') line.erase(0, 1);  // (the newline of a whole record a killed run left unended)
                unwritten.push_back(std::move(line));
                return;
            }
            fail("cannot write the metrics log %s: %s\n---> HINT: free space there (its records so far are kept; "
                 "--resume from a checkpoint appends to it), or log elsewhere", path.c_str(), std::strerror(err));
        }
    }
};
