// prep_data's output and the run itself (Prep, in the main thread): the tokenizer and the layout, the
// encoded batches taken back in order and laid into shards (each written atomically), the resume state
// PREFIX_prep.json after each shard and a resume from it, the progress line and the summary.
#include <fcntl.h>
#include <glob.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "common/files.h"  // write_file_atomic, read_file_bytes, pid_in_name, pid_alive
#include "common/error.h"
#include "common/kill_point.h"
#include "common/strings.h"  // with_commas, human_duration
#include "data/byte_bpe.h"    // utf8_escape_invalid
#include "data/dataloader.h"  // stream_samples
#include "data/gpt2_tokenizer.h"
#include "data/shard.h"
#include "data/spm_tokenizer.h"
#include "data/tokenizer.h"
#include "data/tokenizer_id.h"
#include "tools/prep_data/prep_data.h"

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace prep {

volatile std::sig_atomic_t g_resumable = 0;
namespace {

// ---------------------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------------------

const char* const SPLIT_NAME[2] = {"train", "val"};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string human_si(double v) {  // 12.3M
    const char* units[] = {"", "K", "M", "G", "T"};
    int u = 0;
    while (std::fabs(v) >= 1000 && u < 4) v /= 1000, u++;
    return u == 0 ? format("%.0f", v) : format(v < 10 ? "%.2f%s" : v < 100 ? "%.1f%s" : "%.0f%s", v, units[u]);
}

std::string human_bytes(double b) {  // decimal units, like the download sizes people quote
    const char* units[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (b >= 1000 && u < 4) b /= 1000, u++;
    return u == 0 ? format("%.0f B", b) : format(b < 10 ? "%.2f %s" : b < 100 ? "%.1f %s" : "%.0f %s", b, units[u]);
}

// A checksum of a shard's tokens (what --resume checks each shard by): 64-bit words, multiply-xorshift.
uint64_t hash_tokens(const uint16_t* t, size_t n) {
    const unsigned char* p = (const unsigned char*)t;
    size_t nb = n * sizeof(uint16_t), i = 0;
    uint64_t h = 0x6A09E667F3BCC909ULL ^ (uint64_t)n;
    for (; i + 8 <= nb; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001B3ULL;
        h ^= h >> 29;
    }
    for (; i < nb; i++) h = (h ^ p[i]) * 0x100000001B3ULL;
    return mix64(h);
}

std::string hex64(uint64_t v) { return format("%016" PRIx64, v); }

// 'text' for a POSIX shell: single quotes, each ' written as '\''.
std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// ---------------------------------------------------------------------------------------------------------
// Output: shards, the resume state, progress
// ---------------------------------------------------------------------------------------------------------

struct SplitStats {
    int64_t docs = 0, tokens = 0, truncated = 0, real_tokens = 0, repaired = 0;
    json to_json() const {
        return {{"docs", docs}, {"tokens", tokens}, {"truncated", truncated}, {"real_tokens", real_tokens},
                {"repaired", repaired}};
    }
    void from_json(const json& j) {
        docs = j.at("docs");
        tokens = j.at("tokens");
        truncated = j.at("truncated");
        real_tokens = j.at("real_tokens");
        repaired = j.at("repaired");
    }
};

struct SplitOut {
    std::vector<uint16_t> buf;
    int64_t shards = 0;            // shards written
    int64_t pending_doc = 0;       // the document whose tokens start buf (when buf is not empty)
    int64_t pending_skip = 0;      // how many of its tokens are in earlier shards
    bool closed = false;           // no more documents will come (its last shard is written)
    SplitStats st;
    std::vector<std::pair<int64_t, uint64_t>> written;  // (tokens, hash) of each shard
};

struct StopRun {};  // --max-shards reached

struct Progress {
    bool enabled = true, tty = false;
    double interval = 10;
    uint64_t total_bytes = 0;
    Clock::time_point start = Clock::now(), last = Clock::now();
    uint64_t bytes0 = 0;
    int64_t tokens0 = 0;
    bool drawn = false;

    void clear() {
        if (tty && drawn) std::fprintf(stderr, "\r\033[K");
        drawn = false;
    }
    void message(const std::string& s) {
        clear();
        std::fprintf(stderr, "%s\n", s.c_str());
    }
    void tick(uint64_t bytes, int64_t docs, int64_t tokens, bool force) {
        if (!enabled) return;
        double since = std::chrono::duration<double>(Clock::now() - last).count();
        if (!force && since < (tty ? 0.25 : interval)) return;
        if (!tty && interval <= 0) return;  // (--progress-interval 0: none, the last line too; the summary says it)
        last = Clock::now();
        double el = seconds_since(start);
        double bps = el > 0 ? (double)(bytes - bytes0) / el : 0, tps = el > 0 ? (double)(tokens - tokens0) / el : 0;
        double frac = total_bytes ? std::min(1.0, (double)bytes / (double)total_bytes) : 0;
        std::string eta = "?";
        if (bps > 0 && el >= 1) eta = human_duration((double)(total_bytes - std::min(bytes, total_bytes)) / bps);
        const int W = 24;
        int fill = (int)(frac * W);
        std::string bar = std::string(fill, '#') + std::string(W - fill, '.');
        std::string s = format("[%s] %5.1f%% %s/%s | %s docs | %s tokens | %s/s %s tok/s | %s %s", bar.c_str(),
                               100 * frac, human_bytes((double)bytes).c_str(), human_bytes((double)total_bytes).c_str(),
                               with_commas(docs).c_str(), human_si((double)tokens).c_str(), human_bytes(bps).c_str(),
                               human_si(tps).c_str(), force ? "elapsed" : "ETA",
                               force ? human_duration(el).c_str() : eta.c_str());
        if (tty) {
            std::fprintf(stderr, "\r\033[K%s%s", s.c_str(), force ? "\n" : "");
            drawn = !force;
        } else {
            std::fprintf(stderr, "%s\n", s.c_str());
        }
        std::fflush(stderr);
    }
};

struct Prep {
    Options& o;
    std::vector<InputFile> files;
    std::unique_ptr<Tokenizer> tok;
    Layout lay;
    ShardInfo info;
    std::string state_path;
    json config;  // what the output depends on
    SplitOut sp[2];
    int64_t next_doc = 0;            // records below are done (in the stats, their tokens appended)
    int64_t empty = 0, bad_json = 0, records = 0;
    std::vector<json> checkpoints;
    int64_t shards_this_run = 0;
    int appending = -1;              // the split append() is adding a document to
    // Resume: documents below replay_below are replayed (tokens appended, not counted); the first
    // resume_skip[s] tokens of document resume_doc[s] are already in split s's shards.
    int64_t replay_below = 0, resume_doc[2] = {-1, -1}, resume_skip[2] = {0, 0};
    Progress prog;
    Counters ctr;

    explicit Prep(Options& opt) : o(opt) {}

    std::string shard_path(int s, int64_t k) const {
        return format("%s_%s_%06lld.bin", o.out.c_str(), SPLIT_NAME[s], (long long)k);
    }

    std::string tokenizer_copy_path() const { return o.out + "_tokenizer.model"; }

    // The path from the root, without ./ and ../ (lexically: "link/.." is ".")
    static std::string absolute_path(const std::string& path) {
        std::error_code ec;
        const fs::path a = fs::absolute(path, ec);
        return ec ? path : a.lexically_normal().string();
    }
    // Whether an input of the interrupted run's state is this run's: the same split, and the same file however it is
    // spelled (./corp/a.jsonl for corp/a.jsonl, a relative path from another folder, a path through a link; were
    // refused): its absolute path ("abs"), or the file it names. A state without "abs" (an earlier prep_data's) is
    // compared by its path as written, also made absolute from this folder.
    static bool same_input(const json& was, const InputFile& now) {
        if (was.at("split") != SPLIT_NAME[now.split_src]) return false;
        const std::string abs = utf8_escape_invalid(absolute_path(now.path));
        std::error_code ec;
        if (was.contains("abs"))  // (the same spelling from another folder is another file)
            return was["abs"] == abs || fs::equivalent(was["abs"].get<std::string>(), now.path, ec);
        return was.at("path") == utf8_escape_invalid(now.path) ||
               absolute_path(was.at("path").get<std::string>()) == abs;
    }
    // how this build reads text: the state's "text_reading" (a resume of another build's state is refused)
    static constexpr const char* TEXT_READING = "universal newlines, utf-8-sig; JSON lines' invalid UTF-8 replaced";
    // Whether a setting of the interrupted run's state is this run's: the tokenizer copy's path by its name alone
    // (beside the shards, whose prefix found the state: --out ./d/x is d/x)
    static bool same_setting(const std::string& key, const json& was, const json& now) {
        // --skip-bad-json added to a resume of a run stopped at a bad line: the lines before were all good, and a
        // skipped line keeps its place in the numbering, so the shards are those of a run with it from the start
        // (turned off, the lines it skipped would have stopped the run instead: refused)
        if (key == "skip_bad_json" && now == true) return true;
        if (key == "tokenizer_copy" && was.is_string() && now.is_string())
            return fs::path(was.get<std::string>()).filename() == fs::path(now.get<std::string>()).filename();
        return was == now;
    }

    // The tokenizer travels with the data: a SentencePiece model is trained (--spm-vocab) or copied to
    // PREFIX_tokenizer.model, next to the shards, where the trainers look for it. A --spm-model's copy is written by
    // write_tokenizer_copy, once the run goes ahead: on --resume this writes nothing (a refused resume leaves the
    // earlier run's copy as it was).
    void make_tokenizer() {
        std::string copy = tokenizer_copy_path();
        std::string made_from = o.spm_model;  // the file whose name the shards record
        if (o.spm_vocab > 0) {
            if (o.resume) {
                // (no state file: nothing ran under this prefix, which load_resume's message says)
                if (access(state_path.c_str(), F_OK) != 0) return;
                CHECK_USER(access(copy.c_str(), F_OK) == 0,
                           "--resume: %s, the SentencePiece model the interrupted run trained, is missing\n"
                           "---> HINT: start again with --overwrite", copy.c_str());
            } else {
                train_spm_model(o, files, copy);
            }
            o.spm_model = made_from = copy;
        } else if (o.tokenizer == "spm") {
            SpmTokenizer check(o.spm_model);  // a file that is no model fails here, before anything is written
        }
        if (o.tokenizer == "gpt2") tok = std::make_unique<Gpt2Tokenizer>(o.gpt2_ranks);
        else tok = std::make_unique<SpmTokenizer>(o.spm_model);
        CHECK_USER(tok->vocab_size() <= 65536,
                   "the tokenizer has %d ids, but shards store uint16 tokens (at most 65536 ids)\n"
                   "---> HINT: T5's spiece.model (32000) and GPT-2 (50257) fit",
                   tok->vocab_size());
        lay.rows = o.rows();
        lay.row_len = o.rows() ? o.row_len : 0;
        lay.eos = tok->eos_id();
        lay.eos_before = tok->kind() == TOKENIZER_GPT2;
        if (o.rows()) {
            int pad = o.pad_id;
            if (pad < 0) {
                auto* spm = dynamic_cast<SpmTokenizer*>(tok.get());
                pad = spm ? spm->pad_id() : -1;
                CHECK_USER(pad >= 0, "--layout rows needs a pad id, and the %s tokenizer has none\n"
                           "---> HINT: give --pad-id N (the pads after each row's EOS are ignored by the loss)",
                           o.tokenizer.c_str());
            }
            CHECK_USER(pad < tok->vocab_size(), "--pad-id %d is outside the vocabulary (%d ids)", pad,
                       tok->vocab_size());
            lay.pad = (uint32_t)pad;  // EOS or a token of the text: the loader ignores only the pads after EOS
        }
        info.vocab_size = tok->vocab_size();
        info.layout = o.rows() ? SHARD_LAYOUT_ROWS : SHARD_LAYOUT_FLAT;
        info.row_len = lay.row_len;
        info.tokenizer = tok->kind();
        info.pad_id = o.rows() ? (int32_t)lay.pad : 0;
        info.eos_id = (int32_t)lay.eos;
        std::string tok_file = o.tokenizer == "gpt2" ? o.gpt2_ranks : o.spm_model;
        std::string sha = sha256_file_hex(tok_file);
        info.tokenizer_hash = tokenizer_hash_of_sha256(sha);
        info.tokenizer_name = tokenizer_file_base_name(o.tokenizer == "gpt2" ? o.gpt2_ranks : made_from);

        json val = {{"mode", !o.val_inputs.empty() ? "val-input" : o.val_docs > 0 ? "val-docs"
                                                       : o.val_fraction > 0   ? "val-fraction"
                                                                              : "none"}};
        if (o.val_docs > 0) val["docs"] = o.val_docs;
        if (o.val_fraction > 0) val["fraction"] = o.val_fraction, val["seed"] = o.val_seed;
        config = {{"tokenizer", o.tokenizer},
                  {"tokenizer_name", utf8_escape_invalid(info.tokenizer_name)},
                  {"tokenizer_sha256", sha},
                  {"tokenizer_copy", o.tokenizer == "spm" ? json(utf8_escape_invalid(copy)) : json(nullptr)},
                  {"spm_vocab", o.spm_vocab},
                  {"spm_train_lines", o.spm_vocab > 0 ? json(o.spm_train_lines) : json(nullptr)},
                  {"vocab_size", info.vocab_size},
                  {"layout", o.layout},
                  {"row_len", info.row_len},
                  {"pad_id", info.pad_id},
                  {"eos_id", info.eos_id},
                  {"shard_tokens", o.shard_tokens},
                  {"val", val},
                  {"text_field", utf8_escape_invalid(o.text_field)},
                  {"doc_sep", o.doc_sep},
                  {"owt_clean", o.owt_clean},
                  {"skip_bad_json", o.skip_bad_json},
                  // how text is read (lone CR lines, a dropped BOM; JSON lines' invalid UTF-8 repaired since
                  // 2026-12-04): a state with another value, or none, was an earlier build's
                  {"text_reading", TEXT_READING},
                  {"max_docs", o.max_docs}};
    }

    // --spm-model's copy, PREFIX_tokenizer.model: called once the run goes ahead (after --resume's checks), and
    // written only when its bytes differ from the model's (a resume with the same model leaves it alone).
    void write_tokenizer_copy() const {
        if (o.tokenizer != "spm" || o.spm_vocab > 0) return;  // --spm-vocab: the model is the copy itself
        const std::string copy = tokenizer_copy_path();
        std::error_code ec;
        if (fs::equivalent(o.spm_model, copy, ec)) return;  // --spm-model names the copy (an earlier run's)
        const std::string bytes = read_file_bytes(o.spm_model);
        if (fs::is_regular_file(copy, ec) && fs::file_size(copy, ec) == (std::uintmax_t)bytes.size() && !ec &&
            read_file_bytes(copy) == bytes)
            return;
        write_file_atomic(copy, bytes);
    }

    // ---- state ----
    json inputs_json() const {
        json a = json::array();
        for (const auto& f : files) {
            json e = {{"path", utf8_escape_invalid(f.path)}, {"abs", utf8_escape_invalid(absolute_path(f.path))},
                      {"size", f.size}, {"split", SPLIT_NAME[f.split_src]}};
            e["first_doc"] = f.first_doc >= 0 ? json(f.first_doc) : json(nullptr);
            a.push_back(e);
        }
        return a;
    }
    json checkpoint_json(bool done) const {
        json pend = json::array();
        for (int s = 0; s < 2; s++) {
            // An empty buffer means nothing pending, except for the document being appended (a shard filled
            // in its middle; the rest of it is not in the buffer yet).
            bool none = sp[s].buf.empty() && s != appending;
            pend.push_back({none ? next_doc : sp[s].pending_doc, none ? 0 : sp[s].pending_skip});
        }
        return {{"shards", {sp[TRAIN].shards, sp[VAL].shards}},
                {"next_doc", next_doc},
                {"pending", pend},
                {"val_closed", sp[VAL].closed},
                {"done", done},
                {"stats", {sp[TRAIN].st.to_json(), sp[VAL].st.to_json()}},
                {"empty", empty},
                {"bad_json", bad_json},
                {"records", records}};
    }
    void save_state() const {
        json shards = json::array();
        for (int s = 0; s < 2; s++) {
            json a = json::array();
            for (auto& [n, h] : sp[s].written) a.push_back({{"tokens", n}, {"hash", hex64(h)}});
            shards.push_back(a);
        }
        json st = {{"tool", "prep_data"}, {"version", 1},       {"config", config},
                   {"inputs", inputs_json()}, {"shards", shards}, {"checkpoints", checkpoints}};
        write_file_atomic(state_path, st.dump(1) + "\n");
    }
    // A resume takes the newest checkpoint whose shards check out. The state file keeps the newest 8 and, before them,
    // those at a power-of-two count of shards: a damaged early shard still goes back at most half the way, and the
    // file rewritten after every shard grows by a few lines a shard (with one checkpoint a shard it grew
    // quadratically in time: 2 MB and minutes at 4,000 shards).
    void checkpoint(bool done = false) {
        checkpoints.push_back(checkpoint_json(done));
        constexpr size_t newest = 8;
        if (checkpoints.size() > newest) {
            const json& c = checkpoints[checkpoints.size() - newest - 1];  // leaves the newest 8 now
            const int64_t n = c.at("shards").at(0).get<int64_t>() + c.at("shards").at(1).get<int64_t>();
            if (n > 0 && (n & (n - 1)) != 0) checkpoints.erase(checkpoints.end() - newest - 1);
        }
        save_state();
        g_resumable = 1;
        kill_point("prep_data.state_saved");
    }

    // ---- shards ----
    void write_buf(int s) {
        SplitOut& so = sp[s];
        std::string path = shard_path(s, so.shards);
        write_shard(path, so.buf, info);
        if (!g_resumable) g_resumable = 2;
        kill_point("prep_data.shard_written");  // the shard is in place, the state file does not list it yet
        so.written.push_back({(int64_t)so.buf.size(), hash_tokens(so.buf.data(), so.buf.size())});
        so.shards++;
        shards_this_run++;
        if (!o.quiet)
            prog.message(format("wrote %s: %s tokens", path.c_str(), with_commas((long long)so.buf.size()).c_str()));
        so.buf.clear();
    }
    void after_write(bool done = false) {
        checkpoint(done);
        if (o.max_shards > 0 && shards_this_run >= o.max_shards && !done) throw StopRun();
    }

    // Appends document idx's laid-out tokens t[skip..n) to split s, writing every full shard.
    void append(int s, int64_t idx, const uint16_t* t, size_t n, size_t skip) {
        SplitOut& so = sp[s];
        size_t done = skip;
        if (so.buf.empty()) so.pending_doc = idx, so.pending_skip = (int64_t)done;
        if (so.buf.capacity() == 0) so.buf.reserve((size_t)o.shard_tokens);  // no doubling to twice the shard
        appending = s;
        while (done < n) {
            size_t room = (size_t)o.shard_tokens - so.buf.size();
            size_t take = std::min(room, n - done);
            so.buf.insert(so.buf.end(), t + done, t + done + take);
            done += take;
            if (so.buf.size() == (size_t)o.shard_tokens) {
                write_buf(s);
                // The rest of this document, if any, starts the next shard.
                if (done < n) so.pending_doc = idx, so.pending_skip = (int64_t)done;
                else so.pending_doc = idx + 1, so.pending_skip = 0;
                after_write();
            }
        }
        appending = -1;
    }

    // The split gets no more documents: write what is left as its last shard.
    void close_split(int s) {
        SplitOut& so = sp[s];
        if (so.closed) return;
        if (s == VAL && !o.val_inputs.empty())
            CHECK_USER(so.st.docs > 0, "the --val-input files hold no documents\n"
                       "---> HINT: check the files and --text-field");
        so.closed = true;
        if (!so.buf.empty()) {
            write_buf(s);
            after_write();
        }
    }

    void consume(Batch& b) {
        for (const auto& [fi, first] : b.file_starts) files[(size_t)fi].first_doc = first;
        if (!b.error.empty()) {
            // Records before the bad one are written first, so a resume continues right there.
            for (size_t j = 0; j + 1 < b.off.size(); j++) consume_record(b, j);
            throw UserError(b.error);
        }
        for (size_t j = 0; j < b.recs.size(); j++) consume_record(b, j);
    }

    void consume_record(const Batch& b, size_t j) {
        const Record& r = b.recs[j];
        int s = r.split;
        bool replay = r.index < replay_below;
        uint8_t fl = b.flags[j];
        const uint16_t* t = b.tokens.data() + b.off[j];
        size_t n = b.off[j + 1] - b.off[j];
        // The validation split comes first in the input in these modes: the first training document closes it.
        if (s == TRAIN && !sp[VAL].closed && (!o.val_inputs.empty() || o.val_docs > 0)) close_split(VAL);
        next_doc = r.index + 1;
        if (!replay) {
            records++;
            if (fl & F_BAD_JSON) bad_json++;
            else if (fl & F_EMPTY) empty++;
            if (fl & F_REPAIRED) sp[s].st.repaired++;
            if (!(fl & (F_BAD_JSON | F_EMPTY))) {
                SplitStats& st = sp[s].st;
                st.docs++;
                st.tokens += (int64_t)n;
                if (fl & F_TRUNCATED) st.truncated++;
                if (lay.rows) {
                    // the row is the document's ids, EOS, then the pads the encoder counted (not told by their
                    // value: --pad-id may be EOS, or an id of the text)
                    const size_t pads = j < b.pads.size() ? (size_t)b.pads[j] : 0;
                    st.real_tokens += (int64_t)(n - std::min(n, pads));
                } else {
                    st.real_tokens += (int64_t)n;
                }
            }
        }
        if (n == 0) return;
        size_t skip = r.index == resume_doc[s] ? (size_t)resume_skip[s] : 0;
        append(s, r.index, t, n, skip);
    }

    // ---- resume ----
    // The checksum the state records for shard k of split s, refused unless 16 hex digits (one that was no number
    // ended the run with "internal error: stoull")
    std::string recorded_hash(int s, int64_t k, const json& rec) const {
        const std::string hash = rec.at("hash").get<std::string>();
        CHECK_USER(hash.size() == 16 && hash.find_first_not_of("0123456789abcdef") == std::string::npos,
                   "--resume: %s is damaged (the checksum of %s is \"%s\", not 16 hex digits)\n---> HINT: start "
                   "again with --overwrite", state_path.c_str(), shard_path(s, k).c_str(), hash.c_str());
        return hash;
    }

    // Validity of shard k of split s as state `st` describes it: its header, token count and the checksum of its
    // tokens (every shard's: a damaged earlier shard, same size, passed when only the last was summed).
    std::string check_shard(int s, int64_t k, const json& rec) const {
        std::string path = shard_path(s, k);
        const std::string want = recorded_hash(s, k, rec);  // (a damaged state is refused, not read as shard damage)
        try {
            ShardInfo h = read_shard_header(path);
            if (h.vocab_size != info.vocab_size || h.layout != info.layout || h.row_len != info.row_len ||
                h.tokenizer != info.tokenizer || h.pad_id != info.pad_id || h.eos_id != info.eos_id ||
                h.tokenizer_hash != info.tokenizer_hash || h.tokenizer_name != info.tokenizer_name)
                return "its header does not match these options";
            if (h.num_tokens != rec.at("tokens").get<int64_t>())
                return format("%lld tokens, the state says %lld", (long long)h.num_tokens,
                              (long long)rec.at("tokens").get<int64_t>());
            auto toks = read_shard(path);
            if (hex64(hash_tokens(toks.data(), toks.size())) != want)
                return "its tokens differ from what was written (checksum)";
        } catch (const UserError& e) {
            std::string m = e.what();
            m = m.substr(0, m.find('\n'));
            return m.rfind(path + ": ", 0) == 0 ? m.substr(path.size() + 2) : m;  // the caller names the file
        }
        return "";
    }

    // Loads PREFIX_prep.json, picks the last checkpoint whose shards are all good, and sets everything up
    // to continue from it. Returns false when the run was already complete.
    bool load_resume(Reader& rd) {
        std::FILE* f = std::fopen(state_path.c_str(), "rb");
        CHECK_USER(f, "--resume: there is no %s, so there is nothing to resume\n"
                   "---> HINT: run without --resume to start (shards of an earlier run without a state file need "
                   "--overwrite)", state_path.c_str());
        std::string text;
        char buf[1 << 16];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
        std::fclose(f);
        json st;
        try {
            st = json::parse(text);
        } catch (const std::exception& e) {
            fail("--resume: %s is damaged (%s)\n---> HINT: start again with --overwrite", state_path.c_str(), e.what());
        }
        try {
            // Options.
            const json& old = st.at("config");
            std::string diffs;
            for (auto& [k, v] : config.items())
                if (!old.contains(k) || !same_setting(k, old[k], v))
                    diffs += format("\n  %s: was %s, now %s", k.c_str(), old.contains(k) ? old[k].dump().c_str() : "-",
                                    v.dump().c_str());
            const bool tokenizer_changed = old.contains("tokenizer_sha256") &&
                                           old["tokenizer_sha256"] != config["tokenizer_sha256"];
            const bool earlier_build = !old.contains("text_reading") || old["text_reading"] != TEXT_READING;
            CHECK_USER(diffs.empty(), "--resume: the options differ from the interrupted run's:%s\n---> HINT: %s, or "
                       "start again with --overwrite", diffs.c_str(),
                       !old.contains("text_reading")
                           ? "the interrupted run was an earlier prep_data's, which read text files otherwise (a lone "
                             "CR did not end a line; a byte order mark was text): its shards cannot be continued by "
                             "this one"
                       : earlier_build ? "the interrupted run was an earlier prep_data's, which refused a JSON line "
                                         "holding invalid UTF-8 (or skipped it, --skip-bad-json) where this one "
                                         "repairs it: its shards cannot be continued by this one"
                       : tokenizer_changed ? "the tokenizer file's content is not the one the interrupted run read "
                                             "(tokenizer_sha256): resume with that file"
                                           : "resume with the same command line");
            // Input files: same list; sizes checked below up to the resume point.
            const json& in = st.at("inputs");
            for (size_t i = 0; i < std::max(in.size(), files.size()); i++) {
                auto name = [](const std::string& path, const std::string& split) {
                    return path + (split == SPLIT_NAME[TRAIN] ? "" : " (" + split + ")");
                };
                if (i < in.size() && i < files.size() && same_input(in[i], files[i])) continue;
                const std::string was = i < in.size() ? name(in[i].at("path").get<std::string>(),
                                                             in[i].at("split").get<std::string>())
                                                      : "none";
                const std::string now = i < files.size() ? name(utf8_escape_invalid(files[i].path),
                                                                SPLIT_NAME[files[i].split_src])
                                                         : "none";
                fail("--resume: the input files are not those of the interrupted run (%zu files then, %zu now; "
                     "file %zu was %s, now %s)\n---> HINT: resume with the same --input/--val-input, or start again "
                     "with --overwrite", in.size(), files.size(), i + 1, was.c_str(), now.c_str());
            }
            for (size_t i = 0; i < files.size(); i++)
                if (!in[i].at("first_doc").is_null()) files[i].first_doc = in[i].at("first_doc");

            // Shards and checkpoints.
            const json& shards = st.at("shards");
            std::vector<json> cks = st.at("checkpoints").get<std::vector<json>>();
            std::map<std::pair<int, int64_t>, std::string> verdict;  // (split, k) -> problem ("" = good)
            if (!o.quiet && !cks.empty()) {  // (every shard is read: at disk speed, said where that takes a while)
                double bytes = 0;
                for (int s = 0; s < 2; s++)
                    for (int64_t k = 0; k < cks.back().at("shards").at(s).get<int64_t>(); k++)
                        if (k < (int64_t)shards.at(s).size())
                            bytes += 1024.0 + 2.0 * shards.at(s).at((size_t)k).at("tokens").get<double>();
                if (bytes >= 1e9)
                    prog.message(format("resume: checking the checksums of the shards written (%s)",
                                        human_bytes(bytes).c_str()));
            }
            auto good = [&](int s, int64_t k) {
                auto key = std::make_pair(s, k);
                auto it = verdict.find(key);
                if (it == verdict.end()) {
                    const json& recs = shards.at(s);
                    std::string why = k < (int64_t)recs.size() ? check_shard(s, k, recs[(size_t)k])
                                                              : "not in the state file";
                    it = verdict.emplace(key, why).first;
                    if (!why.empty() && !o.quiet)
                        prog.message(format("resume: %s: %s; it will be written again", shard_path(s, k).c_str(),
                                            why.c_str()));
                }
                return it->second.empty();
            };
            int chosen = -1;
            for (int c = (int)cks.size() - 1; c >= 0 && chosen < 0; c--) {
                bool ok = true;
                for (int s = 0; s < 2 && ok; s++) {
                    int64_t cnt = cks[(size_t)c].at("shards").at(s);
                    for (int64_t k = 0; k < cnt && ok; k++) ok = good(s, k);
                }
                if (ok) chosen = c;
            }
            checkpoints.assign(cks.begin(), cks.begin() + (chosen + 1));
            if (chosen < 0) {
                if (!o.quiet) prog.message("resume: no complete shard to keep; starting from the beginning");
                for (auto& fl : files) fl.first_doc = -1;
                return true;
            }
            const json& ck = cks[(size_t)chosen];
            g_resumable = 1;  // (its state lists shards it keeps)
            for (int s = 0; s < 2; s++) {
                sp[s].shards = ck.at("shards").at(s);
                for (int64_t k = 0; k < sp[s].shards; k++) {
                    const json& r = shards.at(s).at((size_t)k);
                    sp[s].written.push_back({r.at("tokens").get<int64_t>(),
                                             std::stoull(recorded_hash(s, k, r), nullptr, 16)});
                }
                sp[s].st.from_json(ck.at("stats").at(s));
                resume_doc[s] = ck.at("pending").at(s).at(0);
                resume_skip[s] = ck.at("pending").at(s).at(1);
            }
            sp[VAL].closed = ck.at("val_closed");
            next_doc = replay_below = ck.at("next_doc");
            empty = ck.at("empty");
            bad_json = ck.at("bad_json");
            records = ck.at("records");
            if (ck.at("done").get<bool>()) return false;

            // Where the reader starts: the file holding the first document still needed.
            int64_t r = resume_doc[TRAIN];
            if (!sp[VAL].closed) r = std::min(r, resume_doc[VAL]);
            size_t start = 0;
            for (size_t i = 0; i < files.size(); i++)
                if (files[i].first_doc >= 0 && files[i].first_doc <= r) start = i;
            // Every file holding a document already in the shards must be as it was: those up to the later split's
            // resume point (with a pending val split, the train documents between its first pending one and the
            // train resume point were checked by no one: a file there changed, the resumed shards held other
            // documents, some in both splits, exit 0).
            int64_t last = resume_doc[TRAIN];
            if (!sp[VAL].closed) last = std::max(last, resume_doc[VAL]);
            size_t written_to = 0;
            for (size_t i = 0; i < files.size(); i++)
                if (files[i].first_doc >= 0 && files[i].first_doc <= last) written_to = i;
            for (size_t i = 0; i <= written_to; i++)
                CHECK_USER(in[i].at("size").get<int64_t>() == files[i].size,
                           "--resume: %s has %lld bytes, but %lld when the interrupted run read it\n"
                           "---> HINT: its documents are already in the shards; restore that file, or start again "
                           "with --overwrite",
                           files[i].path.c_str(), (long long)files[i].size,
                           (long long)in[i].at("size").get<int64_t>());
            for (size_t i = start + 1; i < files.size(); i++) files[i].first_doc = -1;
            rd.start_file = start;
            rd.start_index = files[start].first_doc >= 0 ? files[start].first_doc : 0;
            rd.emit_from = r;
            rd.want_from[TRAIN] = resume_doc[TRAIN];
            rd.want_from[VAL] = sp[VAL].closed ? INT64_MAX : resume_doc[VAL];
            for (size_t i = 0; i < files.size(); i++)
                if (files[i].split_src == TRAIN) {
                    rd.src_base[TRAIN] = i <= start ? files[i].first_doc : -1;
                    break;
                }
            if (!o.quiet)
                prog.message(format("resume: keeping %lld train + %lld val shards; continuing at document %s "
                                    "(reading from %s, file %zu of %zu)",
                                    (long long)sp[TRAIN].shards, (long long)sp[VAL].shards,
                                    with_commas(next_doc).c_str(), files[start].path.c_str(), start + 1,
                                    files.size()));
            return true;
        } catch (const json::exception& e) {
            fail("--resume: %s is damaged (%s)\n---> HINT: start again with --overwrite", state_path.c_str(), e.what());
        }
    }

    // --out as a glob(3) pattern that matches itself: "run[1]/d" would match "run1/d_..." (another run's files,
    // which the cleanups below would delete), not itself; the trainers' --train-data patterns take it too.
    std::string out_glob() const {
        std::string p;
        for (char c : o.out) p += std::strchr("*?[]\\", c) ? std::string("\\") + c : std::string(1, c);
        return p;
    }

    // Existing output of an earlier run: refuse, or delete with --overwrite.
    std::vector<std::string> existing_outputs() const {
        std::vector<std::string> found;
        for (const char* pat : {"_train_[0-9][0-9][0-9][0-9][0-9][0-9].bin", "_val_[0-9][0-9][0-9][0-9][0-9][0-9].bin",
                                "_prep.json", "_tokenizer.model"}) {
            glob_t g;
            std::string p = out_glob() + pat;
            if (glob(p.c_str(), 0, nullptr, &g) == 0)
                for (size_t i = 0; i < g.gl_pathc; i++) found.push_back(g.gl_pathv[i]);
            globfree(&g);
        }
        return found;
    }
    // The temporaries this tool writes for this --out, by exact shape: PREFIX_train_NNNNNN.bin and
    // PREFIX_val_NNNNNN.bin (write_shard), PREFIX_tokenizer.model and PREFIX_prep.json (write_file_atomic), each +
    // ".tmp.PID". `base` is the name between "PREFIX_" and ".tmp.PID". (A longer --out's files do not match:
    // "d_small_train_000003.bin.tmp.7" is not "d_" + one of these.)
    static bool temporary_base(const std::string& base) {
        if (base == "tokenizer.model" || base == "prep.json") return true;
        for (const char* sp_name : {"train_", "val_"}) {
            const std::string split = sp_name;
            if (base.size() == split.size() + 10 && base.compare(0, split.size(), split) == 0 &&
                base.compare(split.size() + 6, 4, ".bin") == 0 &&
                std::all_of(base.begin() + (long)split.size(), base.begin() + (long)split.size() + 6,
                            [](char c) { return c >= '0' && c <= '9'; }))
                return true;
        }
        return false;
    }
    // Removes the temporaries of this --out left by killed runs: those of the shapes above whose writer (the PID in
    // the name) is no longer alive (or is this process: a leftover of an earlier process with our pid, as nothing is
    // written yet). Another prefix's files, other names and a live process's temporaries are left alone. The names
    // carry no host, so only while this run holds the --out's lock (no other run can be writing them); without one (a
    // file system without locks, shared between hosts) nothing is removed.
    void remove_temporaries() const {
        if (!lock_held) return;
        const fs::path out(o.out);
        const std::string mine = out.filename().string() + "_";
        const fs::path d = out.parent_path().empty() ? fs::path(".") : out.parent_path();
        std::vector<fs::path> dead;
        std::error_code ec;
        for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (name.size() <= mine.size() || name.compare(0, mine.size(), mine) != 0) continue;
            const std::string rest = name.substr(mine.size());
            const size_t t = rest.rfind(".tmp.");
            if (t == std::string::npos || !temporary_base(rest.substr(0, t))) continue;
            const long p = pid_in_name(rest.substr(t + 5));
            if (p < 0 || (p != (long)getpid() && pid_alive(p))) continue;
            dead.push_back(it->path());
        }
        for (const auto& p : dead) std::remove(p.c_str());
    }

    // One run writes a PREFIX at a time: two (a second terminal, a job started twice) interleave their shards into a
    // set that matches the trainer's pattern and holds parts of both. An flock on PREFIX_prep.lock, held until
    // exit (the kernel drops it when the process ends, however it ends); the file is removed at the end, a failed
    // run's too (the destructor), and never by a run that did not get the lock.
    int lock_fd = -1;
    bool lock_held = false;
    std::string lock_path() const { return o.out + "_prep.lock"; }
    void lock_prefix() {
        for (;;) {
            lock_fd = ::open(lock_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
            CHECK_USER(lock_fd >= 0, "cannot create %s: %s", lock_path().c_str(), std::strerror(errno));
            const int err = flock(lock_fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
            if (err == EWOULDBLOCK) {
                char pid[32] = {};
                ssize_t n = ::read(lock_fd, pid, sizeof pid - 1);
                fail("another prep_data is writing --out %s (%s holds its lock%s)\n---> HINT: wait for it to finish, "
                     "or stop it and continue its work with --resume; or choose another --out", o.out.c_str(),
                     lock_path().c_str(), n > 0 ? format(": pid %s", pid).c_str() : "");
            }
            if (err) {  // a file system without locks (NFS without lockd: ENOLCK; some FUSE mounts): said, not refused
                std::fprintf(stderr, "warning: cannot lock %s (%s): another prep_data on this --out would not be "
                             "refused\n", lock_path().c_str(), std::strerror(err));
                break;
            }
            // the file may have been removed (by the run that held it, at its end) between our open and lock: ours
            // is then a lock on a name nobody else sees; open the file that is there now
            struct stat held, now;
            if (fstat(lock_fd, &held) == 0 && stat(lock_path().c_str(), &now) == 0 && held.st_ino == now.st_ino &&
                held.st_dev == now.st_dev) {
                lock_held = true;
                break;
            }
            ::close(lock_fd);
        }
        std::string pid = std::to_string((long)getpid());  // for the other run's message only
        if (ftruncate(lock_fd, 0) == 0) {
            ssize_t written = pwrite(lock_fd, pid.data(), pid.size(), 0);
            (void)written;
        }
    }
    void unlock_prefix() {
        if (lock_fd < 0) return;
        if (lock_held) std::remove(lock_path().c_str());  // while held: a waiting run sees another inode, opens again
        ::close(lock_fd);
        lock_fd = -1;
        lock_held = false;
    }
    ~Prep() { unlock_prefix(); }

    // Shards past this run's count in a split (another run's, written with another --shard-tokens): the trainer's
    // pattern would read them with ours. Removed at the end of a complete run, each named.
    void remove_stale_shards() {
        for (int s = 0; s < 2; s++) {
            glob_t g;
            std::string p = out_glob() + "_" + SPLIT_NAME[s] + "_[0-9][0-9][0-9][0-9][0-9][0-9].bin";
            if (glob(p.c_str(), 0, nullptr, &g) == 0)
                for (size_t i = 0; i < g.gl_pathc; i++) {
                    std::string f = g.gl_pathv[i];
                    long long k = std::atoll(f.c_str() + f.size() - 10);  // NNNNNN.bin
                    if (k < sp[s].shards) continue;
                    std::remove(f.c_str());
                    prog.message(format("removed %s: not one of this run's %lld %s shards (another run's)", f.c_str(),
                                        (long long)sp[s].shards, SPLIT_NAME[s]));
                }
            globfree(&g);
        }
    }

    void summary(double secs, bool complete) {
        prog.clear();
        int64_t docs = sp[TRAIN].st.docs + sp[VAL].st.docs, toks = sp[TRAIN].st.tokens + sp[VAL].st.tokens;
        std::fprintf(stderr, "%s %s documents, %s tokens in %s\n", complete ? "done:" : "so far:",
                     with_commas(docs).c_str(), with_commas(toks).c_str(), human_duration(secs).c_str());
        for (int s = 0; s < 2; s++) {
            const SplitOut& so = sp[s];
            if (s == VAL && !o.has_val()) continue;
            std::string extra;
            if (lay.rows)
                extra = format(", %s truncated to %d, %s tokens not pad", with_commas(so.st.truncated).c_str(),
                               o.row_len - 1, with_commas(so.st.real_tokens).c_str());
            if (so.st.repaired) extra += format(", %s with invalid UTF-8 repaired", with_commas(so.st.repaired).c_str());
            if (!complete) {  // (the counts include what was read but not yet written: the resume writes it again)
                int64_t in_shards = 0;
                for (const auto& w : so.written) in_shards += w.first;
                extra += format(" (%s of them in its shards)", with_commas(in_shards).c_str());
            }
            std::fprintf(stderr, "  %-5s %5lld shard%s %14s docs %16s tokens%s\n", SPLIT_NAME[s], (long long)so.shards,
                         so.shards == 1 ? " " : "s", with_commas(so.st.docs).c_str(),
                         with_commas(so.st.tokens).c_str(), extra.c_str());
        }
        if (empty)
            std::fprintf(stderr, "  skipped %s empty document%s\n", with_commas(empty).c_str(), empty == 1 ? "" : "s");
        if (bad_json)
            std::fprintf(stderr, "  skipped %s bad JSON line%s (--skip-bad-json)\n", with_commas(bad_json).c_str(),
                         bad_json == 1 ? "" : "s");
        if (ctr.entries_skipped)
            std::fprintf(stderr, "  skipped %s archive entries that are not .txt/.json(l) or archives\n",
                         with_commas(ctr.entries_skipped.load()).c_str());
        if (!complete) return;
        bool gpt2 = o.tokenizer == "gpt2";
        // The trainer takes windows of --seq-len + 1 tokens at stride --seq-len from each shard and needs a batch of
        // them (its default --batch-size, 4) in each split: a small text gets the largest power-of-two --seq-len
        // that gives both, so the printed command runs as it is.
        const int trainer_batch = 4;  // train/cli.h: TrainOptions::batch_size
        int seq_len = lay.rows ? o.row_len : gpt2 ? 1024 : 256;  // the trainers' defaults
        std::string seq_note, batch_flag;
        if (lay.rows) {  // a row is a sample: a split of fewer rows than a batch gets the command a smaller --batch-size
            int64_t fewest = trainer_batch;
            for (int s = 0; s < 2; s++)
                if (sp[s].shards > 0) fewest = std::min<int64_t>(fewest, sp[s].st.docs);
            if (fewest < trainer_batch) {
                batch_flag = format(" --batch-size %lld", (long long)fewest);
                seq_note = format("  (--batch-size %lld: a split has only %lld row%s, fewer than the default batch of "
                                  "%d)\n", (long long)fewest, (long long)fewest, fewest == 1 ? "" : "s", trainer_batch);
            }
        } else {
            auto short_split = [&](int T) {  // the first split without a batch of windows at T, or -1
                for (int s = 0; s < 2; s++) {
                    int64_t samples = 0;
                    for (auto& w : sp[s].written) samples += stream_samples(w.first, T);
                    if (sp[s].shards > 0 && samples < trainer_batch) return s;
                }
                return -1;
            };
            auto fits = [&](int T) { return short_split(T) < 0; };
            if (!fits(seq_len)) {
                int p = seq_len;
                while (p >= 16 && !fits(p)) p /= 2;
                if (p < 16) {
                    const int s = short_split(16);
                    int64_t tokens = 0;
                    for (auto& w : sp[s].written) tokens += w.first;
                    // a window lies within one shard: text enough for a batch, cut into shards too small to hold
                    // one, needs larger shards, not more text
                    const bool shards_too_small = tokens >= (int64_t)trainer_batch * 17;
                    std::fprintf(stderr, "  warning: the %s split holds fewer than %d windows of 17 tokens, too few to "
                                 "%s; %s\n", SPLIT_NAME[s], trainer_batch, s == VAL ? "evaluate on" : "train on",
                                 shards_too_small
                                     ? format("its %s tokens are in shards of --shard-tokens %lld, and a window lies "
                                              "within one shard: give a larger --shard-tokens",
                                              with_commas(tokens).c_str(), (long long)o.shard_tokens).c_str()
                                 : s == VAL ? "give more text, or a larger --val-fraction or --val-docs"
                                            : "give more text");
                } else {
                    seq_len = p;
                    seq_note = format("  (--seq-len %d: the longest that gives this little data a batch of %d in "
                                      "each split; the default is %d)\n", p, trainer_batch, gpt2 ? 1024 : 256);
                }
            }
        }
        bool text_inputs = std::any_of(files.begin(), files.end(),
                                       [&](const auto& f) { return classify(f.path).kind == KIND_TEXT; });
        if (sp[TRAIN].st.docs == 1 && o.doc_sep == "file" && text_inputs)  // (a JSON line is one document anyway)
            std::fprintf(stderr, "  warning: the training split is a single document (one file, --doc-sep file); "
                         "--doc-sep blank makes its paragraphs the documents\n");
        // Pasted into a shell from the directory prep_data ran in: the patterns quoted for the shell, so the
        // trainer (not the shell) expands them, whatever characters --out holds.
        // six characters for the shard number: "PREFIX_val_*" also matched the shards of an --out PREFIX_val
        std::string train_pat = out_glob() + "_train_??????.bin", val_pat = out_glob() + "_val_??????.bin";
        std::fprintf(stderr, "train with: ./%s --train-data %s%s%s\n", gpt2 ? "train_gpt2" : "train_llama",
                     shell_quote(train_pat).c_str(),
                     sp[VAL].shards > 0 ? (" --val-data " + shell_quote(val_pat)).c_str() : "",
                     (lay.rows || !seq_note.empty() ? format(" --seq-len %d", seq_len) + batch_flag : "").c_str());
        std::fputs(seq_note.c_str(), stderr);
        if (sp[VAL].shards == 0)
            std::fprintf(stderr, "  (no validation shards: add --val-data with shards of the same tokenizer)\n");
    }

    // --doc-sep auto: one plain text file given by name is a book or a dump of notes, whose paragraphs are the
    // documents (and so is a --val-input of one such file beside it: a book for validation); anything else (several
    // files, a directory, archives) is a corpus of one document per file.
    void resolve_doc_sep() {
        if (o.doc_sep != "auto") return;
        int text_files[2] = {0, 0}, other = 0;
        for (const auto& f : files) classify(f.path).kind == KIND_TEXT ? text_files[f.split_src]++ : other++;
        std::error_code ec;
        auto one_text_file = [&](const std::vector<std::string>& given, int split) {
            return given.size() == 1 && !fs::is_directory(given[0], ec) && text_files[split] == 1;
        };
        bool one_file = other == 0 && one_text_file(o.inputs, TRAIN) &&
                        (o.val_inputs.empty() || one_text_file(o.val_inputs, VAL));
        o.doc_sep = one_file ? "blank" : "file";
        if (!o.quiet && text_files[TRAIN] + text_files[VAL] > 0)
            std::fprintf(stderr, "documents: %s (--doc-sep auto; --doc-sep file|blank chooses)\n",
                         !one_file                ? "one per text file"
                         : o.val_inputs.empty() ? "the blank-line separated paragraphs of the one text file"
                                                  : "the blank-line separated paragraphs of each split's text file");
    }

    int run() {
        auto t0 = Clock::now();
        files = expand_inputs(o);
        // options that no input reads are said, not ignored without a word (an archive may hold either kind)
        auto some_input = [&](Kind kind) {
            return std::any_of(files.begin(), files.end(), [&](const InputFile& f) {
                const Kind k = classify(f.path).kind;
                return k == kind || k == KIND_TAR;
            });
        };
        if (o.given.count("--doc-sep") && !some_input(KIND_TEXT))
            std::fprintf(stderr, "notice: --doc-sep changes nothing here: no input is a text file or an archive (a "
                         "JSON line is one document)\n");
        if (o.given.count("--text-field") && !some_input(KIND_JSONL))
            std::fprintf(stderr, "notice: --text-field changes nothing here: no input is JSON lines or an archive\n");
        uint64_t total = 0;
        for (auto& f : files) total += (uint64_t)f.size;
        resolve_doc_sep();
        prog.enabled = !o.quiet;
        prog.tty = isatty(fileno(stderr));
        prog.interval = o.progress_interval;
        prog.total_bytes = total;

        fs::path parent = fs::path(o.out).parent_path();
        if (!parent.empty()) {
            std::error_code ec;
            fs::create_directories(parent, ec);
            CHECK_USER(!ec, "cannot create the output directory %s: %s", parent.c_str(), ec.message().c_str());
        }
        state_path = o.out + "_prep.json";
        lock_prefix();
        // an input under one of --out's names (its state file, a shard): --overwrite deleted it, a resume read it
        for (const std::string& p : existing_outputs())
            for (const InputFile& f : files) {
                std::error_code ec;
                if (fs::equivalent(p, f.path, ec))
                    fail("%s %s is one of the files --out %s writes (%s): --overwrite would delete it, a run replace "
                         "it\n---> HINT: pass another --out, or move the input elsewhere",
                         f.split_src == VAL ? "--val-input" : "--input", f.path.c_str(), o.out.c_str(),
                         p == state_path                ? "its state file"
                         : p == tokenizer_copy_path() ? "its tokenizer copy"
                                                      : "a shard");
            }
        Reader rd(o, files, ctr);
        if (o.resume) {
            // nothing is written (nor removed) before load_resume's checks pass: a refused resume leaves the earlier
            // run's files, its tokenizer copy too, as they were
            make_tokenizer();
            const bool more = load_resume(rd);
            remove_temporaries();
            write_tokenizer_copy();
            if (!more) {
                std::fprintf(stderr, "--resume: %s is complete and its shards check out (headers, sizes, token "
                             "counts, checksums); nothing to do\n",
                             state_path.c_str());
                remove_stale_shards();
                summary(0, true);
                unlock_prefix();
                return 0;
            }
        } else {
            auto found = existing_outputs();
            // a tokenizer copy alone is what a run that failed before its first shard left: ours to replace
            if (found.size() == 1 && found[0] == tokenizer_copy_path()) found.clear();
            if (!found.empty() && !o.overwrite)
                fail("%s already exists (%s of an earlier run with --out %s)\n---> HINT: %s", found[0].c_str(),
                     found.size() == 1   ? "a file"
                     : found.size() == 2 ? "and 1 more file"
                                         : format("and %zu more files", found.size() - 1).c_str(),
                     o.out.c_str(),
                     access(state_path.c_str(), F_OK) == 0
                         ? "--resume continues an interrupted run; --overwrite deletes them and starts again"
                         : "that run saved no state file (it failed before its first), so nothing can be resumed: "
                           "--overwrite deletes them and starts again");
            make_tokenizer();  // before deleting anything: a --spm-model that cannot be read leaves the run as it was
            for (auto& p : found) {
                std::error_code ec;  // the model given to --spm-model may be an earlier run's copy: keep it
                if (!o.spm_model.empty() && fs::equivalent(p, o.spm_model, ec)) continue;
                std::remove(p.c_str());
            }
            remove_temporaries();
            write_tokenizer_copy();
        }

        int nval = 0;
        for (auto& f : files) nval += f.split_src == VAL;
        std::string valdesc = !o.val_inputs.empty() ? format("val: %d --val-input files", nval)
                              : o.val_docs > 0      ? format("val: the first %lld documents", (long long)o.val_docs)
                              : o.val_fraction > 0  ? format("val: fraction %g (seed %llu)", o.val_fraction,
                                                             (unsigned long long)o.val_seed)
                                                    : std::string("no val split");
        if (!o.quiet) {
            std::fprintf(stderr, "prep_data: %zu input file%s, %s -> %s_train_NNNNNN.bin%s\n", files.size(),
                         files.size() == 1 ? "" : "s", human_bytes((double)total).c_str(), o.out.c_str(),
                         o.has_val() ? format(", %s_val_NNNNNN.bin", o.out.c_str()).c_str() : "");
            std::fprintf(stderr, "  tokenizer %s; layout %s; %s tokens per shard; %s; %d thread%s\n",
                         tok->name().c_str(),
                         lay.rows ? format("rows of %d (ids[:%d] + EOS %u + pad %u)", o.row_len, o.row_len - 1,
                                           lay.eos, lay.pad).c_str()
                                  : format("flat (EOS %u %s each document)", lay.eos,
                                           lay.eos_before ? "before" : "after").c_str(),
                         with_commas(o.shard_tokens).c_str(), valdesc.c_str(), o.threads, o.threads == 1 ? "" : "s");
        }
        if (!o.resume) checkpoints.clear();

        Encoder enc{o, *tok, lay};
        prog.start = prog.last = Clock::now();
        // What a resume skips is not part of the speed.
        for (size_t i = 0; i < rd.start_file; i++) prog.bytes0 += (uint64_t)files[i].size;
        prog.tokens0 = sp[TRAIN].st.tokens + sp[VAL].st.tokens;
        bool stopped = false;
        try {
            Pipeline pipe(
                o.threads, 2 * o.threads + 2, [&](Batch& b) { enc.process(b); }, [&](Pipeline& p) { rd.run(p); });
            while (true) {
                bool timed_out;
                auto b = pipe.next(0.25, &timed_out);
                if (!b && !timed_out) break;
                if (b) consume(*b);
                prog.tick(ctr.bytes_read.load(), sp[0].st.docs + sp[1].st.docs, sp[0].st.tokens + sp[1].st.tokens,
                          false);
            }
            // End of the input: refuse an empty result before writing anything more, then the last shards.
            if (sp[TRAIN].st.docs == 0) {
                // (with --val-input no document of --input goes to validation: those hold none)
                CHECK_USER(o.val_inputs.empty() || sp[VAL].st.docs == 0, "the --input files hold no documents (the "
                           "--val-input files hold %lld)\n---> HINT: check the --input files, --text-field and "
                           "--doc-sep", (long long)sp[VAL].st.docs);
                if (sp[VAL].st.docs > 0)
                    fail("all %lld documents went to the validation split: nothing is left for training\n"
                         "---> HINT: lower --val-docs / --val-fraction", (long long)sp[VAL].st.docs);
                fail("no documents in the input (%zu files, %lld records, %lld of them empty%s)\n"
                     "---> HINT: check the --input files, --text-field and --doc-sep",
                     files.size(), (long long)records, (long long)empty,
                     bad_json ? format(", %lld bad JSON", (long long)bad_json).c_str() : "");
            }
            if (o.has_val()) close_split(VAL);
            sp[TRAIN].closed = true;
            if (!sp[TRAIN].buf.empty()) write_buf(TRAIN);
        } catch (const StopRun&) {
            stopped = true;
        }
        if (stopped) {
            summary(seconds_since(t0), false);
            std::fprintf(stderr, "stopped after %lld shard%s (--max-shards); continue with the same command and "
                         "--resume (without --overwrite)\n",
                         (long long)shards_this_run, shards_this_run == 1 ? "" : "s");
            unlock_prefix();
            return 0;
        }
        if (o.has_val() && sp[VAL].st.docs == 0)
            prog.message("warning: no document fell in the validation split, so no val shard was written");
        after_write(true);
        prog.tick(ctr.bytes_read.load(), sp[0].st.docs + sp[1].st.docs, sp[0].st.tokens + sp[1].st.tokens, true);
        remove_stale_shards();
        summary(seconds_since(t0), true);
        unlock_prefix();
        return 0;
    }
};

}  // namespace

int run(Options& o) {
    Prep prep(o);
    return prep.run();
}

}  // namespace prep
