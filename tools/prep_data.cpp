// prep_data: raw text -> token shards (data/shard.h) for ./train_gpt2 and ./train_llama. The options, the
// presets (c4, owt), the resume rules and where to download the corpora are in HELP below and in
// data/README.md.
//
// Pipeline. One reader thread decompresses the inputs and cuts them into records (one document's raw text,
// or one JSON line), numbered in input order, and hands them out in batches. N worker threads parse and
// encode batches. The main thread takes the results back in order, lays them out (flat stream or rows),
// writes the shards and the resume state, and draws the progress line. Memory is bounded by the number of
// batches in flight plus one shard buffer per split, whatever the input size, and the output depends only
// on the inputs and the options, never on the thread count or on timing.
#include <archive.h>
#include <archive_entry.h>
#include <glob.h>
#include <lzma.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "data/gpt2_tokenizer.h"
#include "data/shard.h"
#include "data/spm_tokenizer.h"
#include "data/tokenizer.h"

#ifndef PRAC_SOURCE_DIR
#define PRAC_SOURCE_DIR "."
#endif

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const char* HELP = R"HELP(usage: prep_data [c4|owt] --input PATH... --out PREFIX [options]

Tokenizes raw text into token shards for ./train_gpt2 and ./train_llama (format: data/README.md).
It streams the input (memory stays bounded whatever its size), encodes documents on all cores, writes
each shard atomically, and can resume an interrupted run.

Presets (options given explicitly override them):
  c4    GaLore's C4 protocol (the LLaMA runs): --tokenizer spm --layout rows --row-len 256: each document
        is its first 255 ids, EOS (1), then pad (0) up to 256 ids; the loss ignores pad targets.
        Validation from --val-input (C4's validation files). Needs --spm-model (T5's spiece.model).
        (GaLore streams C4 shuffled; here the trainer's loader shuffles rows and shards with its --seed.)
          prep_data c4 --input 'c4/en/c4-train.*.json.gz' --val-input 'c4/en/c4-validation.*.json.gz' \
                       --spm-model spiece.model --out c4_llama
  owt   nanoGPT / llm.c's GPT-2 OpenWebText protocol: --tokenizer gpt2 --layout flat (each document is EOT
        50256 then its tokens), --val-fraction 0.0005 --val-seed 2357, --owt-clean.
          prep_data owt --input openwebtext.tar.xz --out owt_gpt2

Input:
  --input PATH...       files, directories or glob patterns (quoted, or let the shell expand them: every
                        argument up to the next option is an input). Read in the order given; the matches of a
                        pattern and the files of a directory in name order. Formats, by file name:
                          *.txt                    one document per file (or see --doc-sep)
                          *.jsonl *.json *.ndjson  JSON lines: one object per line, the text in --text-field
                          *.tar                    a tar archive: .txt entries are documents, .jsonl entries JSON
                                                   lines, compressed entries nested tar archives (OpenWebText:
                                                   openwebtext/*_data.xz are xz-compressed tars of .txt files)
                          any of these + .gz .xz .zst (also .tgz .txz); a compressed file with no other known
                          extension is read as a tar archive
                        A directory stands for all its *.txt files (also .txt.gz/.xz/.zst), recursively.
                        Parquet is not read: convert it to JSON lines first (see below).
  --val-input PATH...   like --input, for the validation split only (read first)
  --text-field NAME     the JSON field holding the text (default "text")
  --doc-sep file|blank  in text files and .txt entries: one document per file (default), or documents
                        separated by blank lines (lines of only spaces/tabs); a document's lines are joined
                        with "\n"
  --owt-clean           clean each document like Hugging Face's openwebtext loader: \r\n and \r become \n,
                        runs of 3+ newlines become 2, leading and trailing whitespace is removed (owt: on)
  --skip-bad-json       skip (and count) JSON lines that do not parse or lack the text field, instead of
                        stopping with an error
  --max-docs N          read at most N documents from --input (and at most N from --val-input)
  Documents that are empty (after --owt-clean) are skipped and counted. Invalid UTF-8 in text files is
  replaced by U+FFFD (as Python's errors="replace"), and counted.

Tokenizer and layout:
  --tokenizer gpt2|spm  gpt2: GPT-2 r50k BPE (50257 ids, EOT 50256), as tiktoken's encode_ordinary;
                        spm: a SentencePiece model, no BOS
  --spm-model FILE      the SentencePiece .model (T5's spiece.model: 32000 ids, pad 0, EOS 1, unk 2)
  --gpt2-ranks FILE     GPT-2's ranks (default: data/gpt2/r50k_base.tiktoken of this source tree)
  --layout flat|rows    flat (default): one stream of documents separated by EOT/EOS; GPT-2 puts EOT
                        before each document (llm.c), SentencePiece puts EOS after it (T5). rows: one
                        document per row of --row-len ids: its first row-len - 1 ids, EOS, then pad ids
                        (the rest of a long document is dropped); the trainer's --seq-len must equal row-len
  --row-len N           the row length of --layout rows (default 256)
  --pad-id N            the pad id of --layout rows (default: the model's pad id; T5: 0)

Output:
  --out PREFIX          writes PREFIX_train_000000.bin, PREFIX_train_000001.bin, ..., PREFIX_val_000000.bin
                        and the run's state PREFIX_prep.json; missing directories in PREFIX are created
  --shard-tokens N      tokens per shard (default 100M; suffixes K, M, G = 10^3, 10^6, 10^9; rows: rounded
                        down to whole rows). Every shard but the last of each split has exactly N tokens; in
                        the flat layout a document may continue in the next shard (as llm.c's fineweb.py)
  --overwrite           delete the shards and state of an earlier run with this PREFIX, then start
  --resume              continue an interrupted run (see Resume)
  --max-shards N        stop (exit 0) after writing N shards in this invocation; continue with --resume

Validation split (one of these; default: no val split unless --val-input):
  --val-docs N          the first N documents of --input go to val
  --val-fraction F      each document goes to val with probability F, decided by its index i (from 0, in
                        input order) alone: val iff the i-th output of SplitMix64 seeded with --val-seed,
                        divided by 2^64, is below F. The same inputs give the same split on every machine,
                        whatever the thread count.
  --val-seed S          that seed (default 2357, nanoGPT's)

Speed and display:
  --threads N           encoding threads (default: all cores); one more thread reads and decompresses
  --batch-docs N        documents per encoding batch (default 256)
  --progress-interval S seconds between progress lines when stderr is not a terminal (default 10; 0: none).
                        On a terminal one line is redrawn: bytes read, documents, tokens, speed, ETA.
  --quiet               no progress lines
  -h, --help            this text
  Memory: about 2 bytes per --shard-tokens token for each split being filled, plus the batches in flight.
  Exit status: 0 done (also when --max-shards stopped it), 1 an error (the message names the file, and the
  line of a JSON line), 2 an internal error.

Resume:
  After each shard, PREFIX_prep.json records the options, the input files (path, size, index of their
  first document) and the position: for each split the first document not yet completely in its shards,
  and how many of its tokens are. --resume (with the same command line) checks that the options and the
  input file list are the same, checks every shard the state lists (header, file size, token count; the
  last one of each split also by a checksum of its tokens), and continues after the last good shard; later
  shards are written again. Input files before the resume point are not read at all; the file holding it
  is read from its beginning, and documents already in shards are skipped without being tokenized. The
  result is byte-identical to an uninterrupted run. Files from the resume point on may change (e.g. a
  corrupt download replaced). With --val-fraction the val shard is only written at the end, so a resume
  reads the input again from the first pending val document (tokenizing only val documents up to where
  it stopped). A finished run is recognized: --resume then only checks the shards.

Getting the data (needs internet; this tool does not download anything):
  C4 en (Hugging Face allenai/c4, ~305 GB of .json.gz; 1024 train files, 8 validation files):
      GIT_LFS_SKIP_SMUDGE=1 git clone https://huggingface.co/datasets/allenai/c4
      cd c4 && git lfs pull --include "en/*"
    (a first try: git lfs pull --include "en/c4-train.00000-of-01024.json.gz")
  T5's SentencePiece model (the tokenizer of the C4/LLaMA runs):
      huggingface-cli download google-t5/t5-base spiece.model --local-dir .
  OpenWebText (8,013,769 documents): openwebtext.tar.xz (12.9 GB) from Zenodo record 3834942
      (https://zenodo.org/records/3834942), or Hugging Face Skylion007/openwebtext, whose data/ folder is
      parquet: convert it to JSON lines first, e.g.
      python3 -c "import pandas as p,sys; p.read_parquet(sys.argv[1]).to_json(sys.argv[2], orient='records', lines=True)" in.parquet out.jsonl

Train on the result:
  ./train_gpt2 --train-data 'owt_gpt2_train_*.bin' --val-data 'owt_gpt2_val_*.bin'
  ./train_llama --train-data 'c4_llama_train_*.bin' --val-data 'c4_llama_val_*.bin' --seq-len 256
)HELP";

// ---------------------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------------------

constexpr int TRAIN = 0, VAL = 1;
const char* const SPLIT_NAME[2] = {"train", "val"};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string with_commas(long long v) {
    std::string s = std::to_string(v < 0 ? -v : v), out;
    for (size_t i = 0; i < s.size(); i++) {
        if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
        out += s[i];
    }
    return v < 0 ? "-" + out : out;
}

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

std::string human_duration(double s) {
    if (!(s >= 0) || s > 1e8) return "?";
    long long t = (long long)std::llround(s);
    if (t < 60) return format("%llds", t);
    if (t < 3600) return format("%lldm%02llds", t / 60, t % 60);
    return format("%lldh%02lldm", t / 3600, (t / 60) % 60);
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lower(std::string s) {
    for (auto& c : s) c = (char)std::tolower((unsigned char)c);
    return s;
}

// The SplitMix64 output function (Steele et al.); the i-th output of the generator seeded with s is
// mix64(s + (i + 1) * GOLDEN).
constexpr uint64_t GOLDEN = 0x9E3779B97F4A7C15ULL;
uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// A checksum of a shard's tokens (the resume check of the last shard): 64-bit words, multiply-xorshift.
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

uint64_t hash_file(const std::string& path) {  // identifies a tokenizer file in the resume state
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return 0;
    uint64_t h = 0x6A09E667F3BCC909ULL;
    std::vector<unsigned char> buf(1 << 16);
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0)
        for (size_t i = 0; i < n; i++) h = (h ^ buf[i]) * 0x100000001B3ULL;
    std::fclose(f);
    return mix64(h);
}

std::string hex64(uint64_t v) { return format("%016" PRIx64, v); }

// "100M", "1G", "12345". K/M/G are decimal.
int64_t parse_count(const std::string& flag, const std::string& v) {
    std::string s = v;
    int64_t mult = 1;
    if (!s.empty()) {
        char c = (char)std::toupper((unsigned char)s.back());
        if (c == 'K') mult = 1000;
        if (c == 'M') mult = 1000000;
        if (c == 'G') mult = 1000000000;
        if (mult != 1) s.pop_back();
    }
    char* end = nullptr;
    errno = 0;
    long long x = s.empty() ? 0 : std::strtoll(s.c_str(), &end, 10);
    CHECK_USER(!s.empty() && end && *end == '\0' && errno == 0 && x >= 0 && x <= INT64_MAX / mult,
               "%s: \"%s\" is not a non-negative whole number (suffixes K, M, G allowed)", flag.c_str(), v.c_str());
    return (int64_t)x * mult;
}

double parse_double(const std::string& flag, const std::string& v) {
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    CHECK_USER(!v.empty() && end && *end == '\0' && std::isfinite(x), "%s: \"%s\" is not a number", flag.c_str(),
               v.c_str());
    return x;
}

size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> d(b.size() + 1);
    for (size_t j = 0; j <= b.size(); j++) d[j] = j;
    for (size_t i = 1; i <= a.size(); i++) {
        size_t prev = d[0];
        d[0] = i;
        for (size_t j = 1; j <= b.size(); j++) {
            size_t cur = d[j];
            d[j] = std::min({d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1])});
            prev = cur;
        }
    }
    return d[b.size()];
}

// Writes `text` to `path` atomically (temporary file, fsync, rename), like write_shard.
void write_file_atomic(const std::string& path, const std::string& text) {
    std::string tmp = path + ".tmp." + std::to_string((long long)getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    CHECK_USER(f, "cannot create %s: %s", tmp.c_str(), std::strerror(errno));
    bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = ok && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
        if (ok) err = errno;
        std::remove(tmp.c_str());
        fail("cannot write %s: %s\n---> HINT: is the disk full?", path.c_str(), std::strerror(err));
    }
}

// ---------------------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------------------

struct Options {
    std::string preset;
    std::vector<std::string> inputs, val_inputs;
    std::string out;
    std::string tokenizer;  // gpt2 | spm
    std::string spm_model, gpt2_ranks;
    std::string layout = "flat";
    int row_len = 256;
    int pad_id = -1;  // -1: the model's
    int64_t shard_tokens = 100000000;
    int64_t val_docs = 0;
    double val_fraction = 0;
    uint64_t val_seed = 2357;
    std::string text_field = "text";
    std::string doc_sep = "file";
    bool owt_clean = false, skip_bad_json = false;
    int64_t max_docs = -1, max_shards = -1;
    bool resume = false, overwrite = false;
    int threads = 0, batch_docs = 256;
    double progress_interval = 10;
    bool quiet = false, help = false;
    std::set<std::string> given;  // options given on the command line (presets fill only the others)

    bool rows() const { return layout == "rows"; }
    bool has_val() const { return !val_inputs.empty() || val_docs > 0 || val_fraction > 0; }
};

const char* const VALUE_FLAGS[] = {"--out", "--tokenizer", "--spm-model", "--gpt2-ranks", "--layout",
                                   "--row-len", "--pad-id", "--shard-tokens", "--val-docs", "--val-fraction",
                                   "--val-seed", "--text-field", "--doc-sep", "--max-docs", "--max-shards",
                                   "--threads", "--batch-docs", "--progress-interval"};
const char* const BOOL_FLAGS[] = {"--owt-clean", "--skip-bad-json", "--resume", "--overwrite", "--quiet", "--help"};
const char* const LIST_FLAGS[] = {"--input", "--val-input"};

Options parse_args(int argc, char** argv) {
    Options o;
    std::vector<std::string> all;
    for (const char* f : VALUE_FLAGS) all.push_back(f);
    for (const char* f : BOOL_FLAGS) all.push_back(f);
    for (const char* f : LIST_FLAGS) all.push_back(f);
    auto is_in = [](const std::string& s, const auto& arr) {
        for (const char* f : arr)
            if (s == f) return true;
        return false;
    };
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (i == 1 && (a == "c4" || a == "owt")) {
            o.preset = a;
            continue;
        }
        if (a == "-h" || a == "--help") {
            o.help = true;
            continue;
        }
        std::string name = a, value;
        bool has_value = false;
        size_t eq = a.find('=');
        if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
            name = a.substr(0, eq);
            value = a.substr(eq + 1);
            has_value = true;
        }
        if (a.rfind("-", 0) != 0) {
            if (i == 1)
                fail("unknown preset \"%s\"; the presets are c4 and owt\n---> HINT: prep_data --help", a.c_str());
            fail("unexpected argument \"%s\"\n---> HINT: input files go after --input (or --val-input); "
                 "prep_data --help lists the options", a.c_str());
        }
        if (is_in(name, LIST_FLAGS)) {
            auto& list = name == "--input" ? o.inputs : o.val_inputs;
            if (has_value) list.push_back(value);
            // Every following argument up to the next option: lets the shell expand an unquoted pattern.
            while (i + 1 < argc && argv[i + 1][0] != '-') list.push_back(argv[++i]);
            CHECK_USER(!list.empty() || has_value, "%s needs at least one file, directory or pattern",
                       name.c_str());
            o.given.insert(name);
            continue;
        }
        if (is_in(name, BOOL_FLAGS)) {
            CHECK_USER(!has_value, "%s takes no value", name.c_str());
            o.given.insert(name);
            if (name == "--owt-clean") o.owt_clean = true;
            if (name == "--skip-bad-json") o.skip_bad_json = true;
            if (name == "--resume") o.resume = true;
            if (name == "--overwrite") o.overwrite = true;
            if (name == "--quiet") o.quiet = true;
            continue;
        }
        if (!is_in(name, VALUE_FLAGS)) {
            std::string best;
            size_t bd = 4;
            for (const auto& f : all) {
                size_t d = edit_distance(name, f);
                if (d < bd) bd = d, best = f;
            }
            fail("unknown option %s%s\n---> HINT: prep_data --help lists the options", name.c_str(),
                 best.empty() ? "" : format(" (did you mean %s?)", best.c_str()).c_str());
        }
        if (!has_value) {
            CHECK_USER(i + 1 < argc, "%s needs a value", name.c_str());
            value = argv[++i];
        }
        o.given.insert(name);
        if (name == "--out") o.out = value;
        else if (name == "--tokenizer") o.tokenizer = value;
        else if (name == "--spm-model") o.spm_model = value;
        else if (name == "--gpt2-ranks") o.gpt2_ranks = value;
        else if (name == "--layout") o.layout = value;
        else if (name == "--row-len") o.row_len = (int)std::min<int64_t>(parse_count(name, value), INT32_MAX);
        else if (name == "--pad-id") o.pad_id = (int)std::min<int64_t>(parse_count(name, value), INT32_MAX);
        else if (name == "--shard-tokens") o.shard_tokens = parse_count(name, value);
        else if (name == "--val-docs") o.val_docs = parse_count(name, value);
        else if (name == "--val-fraction") o.val_fraction = parse_double(name, value);
        else if (name == "--val-seed") o.val_seed = (uint64_t)parse_count(name, value);
        else if (name == "--text-field") o.text_field = value;
        else if (name == "--doc-sep") o.doc_sep = value;
        else if (name == "--max-docs") o.max_docs = parse_count(name, value);
        else if (name == "--max-shards") o.max_shards = parse_count(name, value);
        else if (name == "--threads") o.threads = (int)std::min<int64_t>(parse_count(name, value), 4096);
        else if (name == "--batch-docs") o.batch_docs = (int)std::min<int64_t>(parse_count(name, value), 1 << 20);
        else if (name == "--progress-interval") o.progress_interval = parse_double(name, value);
    }
    return o;
}

// Fills what the preset sets and the user did not, then checks the combination.
void finish_options(Options& o) {
    bool val_given = o.given.count("--val-docs") || o.given.count("--val-fraction") || o.given.count("--val-input");
    if (o.preset == "c4") {
        if (!o.given.count("--tokenizer")) o.tokenizer = "spm";
        if (!o.given.count("--layout")) o.layout = "rows";
        if (!o.given.count("--row-len")) o.row_len = 256;
        CHECK_USER(val_given,
                   "the c4 preset takes its validation split from C4's validation files, and no --val-input "
                   "was given\n---> HINT: add --val-input 'c4/en/c4-validation.*.json.gz' (or --val-docs N)");
    } else if (o.preset == "owt") {
        if (!o.given.count("--tokenizer")) o.tokenizer = "gpt2";
        if (!o.given.count("--layout")) o.layout = "flat";
        if (!val_given) o.val_fraction = 0.0005;
        if (!o.given.count("--val-seed")) o.val_seed = 2357;
        o.owt_clean = true;
    }
    CHECK_USER(!o.inputs.empty(), "no input: give --input PATH (files, directories or patterns)\n"
               "---> HINT: prep_data --help shows the formats and where to download C4 and OpenWebText");
    CHECK_USER(!o.out.empty(), "no output: give --out PREFIX (shards are written to PREFIX_train_000000.bin, ...)");
    CHECK_USER(!o.tokenizer.empty(), "no tokenizer: give --tokenizer gpt2 or --tokenizer spm --spm-model FILE "
               "(or a preset: prep_data c4 ... / prep_data owt ...)");
    CHECK_USER(o.tokenizer == "gpt2" || o.tokenizer == "spm", "--tokenizer must be gpt2 or spm, not \"%s\"",
               o.tokenizer.c_str());
    if (o.tokenizer == "spm")
        CHECK_USER(!o.spm_model.empty(),
                   "--tokenizer spm needs --spm-model FILE (T5's spiece.model for C4)\n"
                   "---> HINT: huggingface-cli download google-t5/t5-base spiece.model --local-dir . ; a small "
                   "test model is data/builtin/austen_spm8k.model");
    else
        CHECK_USER(o.spm_model.empty(), "--spm-model is for --tokenizer spm (the tokenizer is gpt2)");
    if (o.gpt2_ranks.empty()) o.gpt2_ranks = std::string(PRAC_SOURCE_DIR) + "/data/gpt2/r50k_base.tiktoken";
    CHECK_USER(o.layout == "flat" || o.layout == "rows", "--layout must be flat or rows, not \"%s\"",
               o.layout.c_str());
    if (o.rows()) {
        CHECK_USER(o.row_len >= 2 && o.row_len <= 1 << 20, "--row-len must be in 2..1048576, got %d", o.row_len);
    } else {
        CHECK_USER(!o.given.count("--row-len") && !o.given.count("--pad-id"),
                   "--row-len and --pad-id are for --layout rows (the layout is flat)");
    }
    CHECK_USER(o.doc_sep == "file" || o.doc_sep == "blank", "--doc-sep must be file or blank, not \"%s\"",
               o.doc_sep.c_str());
    CHECK_USER(!o.text_field.empty(), "--text-field must not be empty");
    int nval = (o.val_docs > 0) + (o.val_fraction > 0) + !o.val_inputs.empty();
    CHECK_USER(nval <= 1, "give at most one of --val-input, --val-docs, --val-fraction");
    CHECK_USER(o.val_fraction >= 0 && o.val_fraction < 1, "--val-fraction must be in [0, 1), got %g", o.val_fraction);
    CHECK_USER(o.shard_tokens > 0 && o.shard_tokens <= INT32_MAX,
               "--shard-tokens must be in 1..%d (the header's token count is an int32)", INT32_MAX);
    if (o.rows()) {
        int64_t rounded = o.shard_tokens / o.row_len * o.row_len;
        CHECK_USER(rounded > 0, "--shard-tokens %lld is less than one row of %d tokens", (long long)o.shard_tokens,
                   o.row_len);
        o.shard_tokens = rounded;
    }
    CHECK_USER(o.max_docs != 0, "--max-docs must be positive");
    CHECK_USER(o.max_shards != 0, "--max-shards must be positive");
    CHECK_USER(!(o.resume && o.overwrite), "--resume and --overwrite contradict each other: pick one");
    if (o.threads <= 0) o.threads = (int)std::max(1u, std::thread::hardware_concurrency());
    CHECK_USER(o.batch_docs > 0, "--batch-docs must be positive");
    CHECK_USER(o.progress_interval >= 0, "--progress-interval must be >= 0");
}

// ---------------------------------------------------------------------------------------------------------
// Input files
// ---------------------------------------------------------------------------------------------------------

enum Codec { CODEC_NONE, CODEC_GZIP, CODEC_XZ, CODEC_ZSTD };
enum Kind { KIND_UNKNOWN, KIND_TEXT, KIND_JSONL, KIND_TAR };
const char* const CODEC_NAME[] = {"none", "gzip", "xz", "zstd"};

struct FileType {
    Kind kind = KIND_UNKNOWN;
    Codec codec = CODEC_NONE;
};

FileType classify(const std::string& path) {
    std::string n = lower(fs::path(path).filename().string());
    FileType t;
    if (ends_with(n, ".tgz")) return {KIND_TAR, CODEC_GZIP};
    if (ends_with(n, ".txz")) return {KIND_TAR, CODEC_XZ};
    if (ends_with(n, ".tzst")) return {KIND_TAR, CODEC_ZSTD};
    const std::pair<const char*, Codec> codecs[] = {{".gz", CODEC_GZIP}, {".xz", CODEC_XZ}, {".zst", CODEC_ZSTD},
                                                   {".zstd", CODEC_ZSTD}};
    for (const auto& [ext, c] : codecs) {
        if (ends_with(n, ext)) {
            t.codec = c;
            n.resize(n.size() - std::strlen(ext));
            break;
        }
    }
    if (ends_with(n, ".txt") || ends_with(n, ".text")) t.kind = KIND_TEXT;
    else if (ends_with(n, ".jsonl") || ends_with(n, ".json") || ends_with(n, ".ndjson")) t.kind = KIND_JSONL;
    else if (ends_with(n, ".tar")) t.kind = KIND_TAR;
    else if (t.codec != CODEC_NONE) t.kind = KIND_TAR;  // OpenWebText's urlsf_subsetNN-M_data.xz
    return t;
}

// A top-level file we cannot read: say why and what to do.
[[noreturn]] void unsupported_file(const std::string& path) {
    std::string n = lower(path);
    if (ends_with(n, ".parquet"))
        fail("%s: parquet is not read by prep_data\n---> HINT: convert it to JSON lines first: python3 -c "
             "\"import pandas as p,sys; p.read_parquet(sys.argv[1]).to_json(sys.argv[2], orient='records', "
             "lines=True)\" %s out.jsonl", path.c_str(), path.c_str());
    if (ends_with(n, ".bz2") || ends_with(n, ".zip") || ends_with(n, ".lz4") || ends_with(n, ".7z"))
        fail("%s: this compression is not supported (gzip, xz and zstd are)\n---> HINT: recompress, e.g. "
             "bzip2 -dc FILE | zstd -o FILE.zst", path.c_str());
    fail("%s: unknown file type (by its name)\n---> HINT: prep_data reads *.txt, *.jsonl/*.json/*.ndjson and "
         "*.tar, each optionally .gz/.xz/.zst; rename the file if its content is one of these",
         path.c_str());
}

struct InputFile {
    std::string path;
    int64_t size = 0;
    int split_src = TRAIN;  // VAL for --val-input files
    int64_t first_doc = -1;  // index of its first document, once the reader got there
};

void add_dir(const std::string& dir, int src, std::vector<InputFile>& out) {
    std::vector<std::string> found;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file(ec) && classify(it->path().string()).kind == KIND_TEXT)
            found.push_back(it->path().string());
    }
    CHECK_USER(!ec, "cannot list directory %s: %s", dir.c_str(), ec.message().c_str());
    CHECK_USER(!found.empty(), "directory %s has no .txt files\n---> HINT: a directory input stands for its *.txt "
               "files; give JSON lines or archives by name or pattern", dir.c_str());
    std::sort(found.begin(), found.end());
    for (auto& p : found) out.push_back({p, (int64_t)fs::file_size(p), src, -1});
}

void add_input(const std::string& spec, int src, std::vector<InputFile>& out) {
    const char* flag = src == VAL ? "--val-input" : "--input";
    std::vector<std::string> paths;
    if (spec.find_first_of("*?[") != std::string::npos) {
        glob_t g;
        int rc = glob(spec.c_str(), 0, nullptr, &g);
        if (rc == GLOB_NOMATCH)
            fail("%s %s: no file matches this pattern\n---> HINT: check the path (relative to the current "
                 "directory %s); the corpora are downloaded separately (prep_data --help: Getting the data)",
                 flag, spec.c_str(), fs::current_path().c_str());
        CHECK_USER(rc == 0, "%s %s: cannot expand the pattern (glob error %d)", flag, spec.c_str(), rc);
        for (size_t i = 0; i < g.gl_pathc; i++) paths.push_back(g.gl_pathv[i]);  // sorted by glob
        globfree(&g);
    } else {
        paths.push_back(spec);
    }
    for (const auto& p : paths) {
        struct stat st;
        if (stat(p.c_str(), &st) != 0)
            fail("%s %s: %s", flag, p.c_str(), std::strerror(errno));
        if (S_ISDIR(st.st_mode)) {
            add_dir(p, src, out);
            continue;
        }
        CHECK_USER(S_ISREG(st.st_mode), "%s %s is not a regular file", flag, p.c_str());
        if (classify(p).kind == KIND_UNKNOWN) unsupported_file(p);
        out.push_back({p, (int64_t)st.st_size, src, -1});
    }
}

std::vector<InputFile> expand_inputs(const Options& o) {
    std::vector<InputFile> files;
    for (const auto& s : o.val_inputs) add_input(s, VAL, files);  // val first: it is closed before train starts
    for (const auto& s : o.inputs) add_input(s, TRAIN, files);
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < files.size(); i++) {
        std::error_code ec;
        std::string key = fs::weakly_canonical(files[i].path, ec).string();
        if (ec) key = files[i].path;
        auto [it, fresh] = seen.emplace(key, i);
        if (!fresh) {
            const auto& a = files[it->second];
            if (a.split_src != files[i].split_src)
                fail("%s is both a --val-input and an --input: validation documents would leak into training",
                     files[i].path.c_str());
            fail("%s is given twice (overlapping --input patterns?)", files[i].path.c_str());
        }
    }
    return files;
}

// ---------------------------------------------------------------------------------------------------------
// Byte sources: files, decompressors, tar entries. read() returns 0 only at the end, throws UserError on
// corrupt data naming the file.
// ---------------------------------------------------------------------------------------------------------

struct ByteSource {
    virtual ~ByteSource() = default;
    virtual size_t read(char* buf, size_t cap) = 0;
};

struct FileSource : ByteSource {
    FILE* f = nullptr;
    std::string path;
    std::atomic<uint64_t>* counter;
    FileSource(const std::string& p, std::atomic<uint64_t>* c) : path(p), counter(c) {
        f = std::fopen(p.c_str(), "rb");
        CHECK_USER(f, "cannot open %s: %s", p.c_str(), std::strerror(errno));
    }
    ~FileSource() override { std::fclose(f); }
    size_t read(char* buf, size_t cap) override {
        size_t n = std::fread(buf, 1, cap, f);
        if (n == 0 && std::ferror(f)) fail("error reading %s: %s", path.c_str(), std::strerror(errno));
        counter->fetch_add(n, std::memory_order_relaxed);
        return n;
    }
};

// Common input buffering of the decompressors.
struct Decoder : ByteSource {
    ByteSource& in;
    std::string name;
    std::vector<char> ibuf = std::vector<char>(1 << 17);
    bool eof = false;
    uint64_t total_in = 0;
    Decoder(ByteSource& i, const std::string& n) : in(i), name(n) {}
    size_t fill() {  // reads the next chunk of compressed bytes into ibuf; sets eof at the end
        size_t n = in.read(ibuf.data(), ibuf.size());
        if (n == 0) eof = true;
        total_in += n;
        return n;
    }
    [[noreturn]] void corrupt(const char* codec, const std::string& why) const {
        if (total_in == 0)
            fail("%s is empty (0 bytes), not %s data\n---> HINT: an interrupted download? fetch it again",
                 name.c_str(), codec);
        fail("%s: %s\n---> HINT: the file is damaged or cut short (an interrupted download?): test it with "
             "\"%s -t\" and fetch it again",
             name.c_str(), why.c_str(), std::strcmp(codec, "gzip") == 0 ? "gzip" : codec);
    }
};

struct GzipSource : Decoder {
    z_stream zs{};
    bool member_open = true, finished = false;
    GzipSource(ByteSource& i, const std::string& n) : Decoder(i, n) {
        CHECK_USER(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, "zlib: cannot initialize");
    }
    ~GzipSource() override { inflateEnd(&zs); }
    size_t read(char* buf, size_t cap) override {
        zs.next_out = (Bytef*)buf;
        zs.avail_out = (uInt)cap;
        while (zs.avail_out == cap && !finished) {
            if (zs.avail_in == 0 && !eof) {
                zs.avail_in = (uInt)fill();
                zs.next_in = (Bytef*)ibuf.data();
            }
            if (!member_open) {  // between gzip members (gzip allows several, and zero padding after)
                while (zs.avail_in > 0 && *zs.next_in == 0) zs.next_in++, zs.avail_in--;
                if (zs.avail_in == 0) {
                    if (eof) finished = true;
                    continue;
                }
                if (*zs.next_in != 0x1f) corrupt("gzip", "unexpected bytes after the end of the gzip data");
                inflateReset(&zs);
                member_open = true;
            }
            int ret = inflate(&zs, Z_NO_FLUSH);
            if (ret == Z_STREAM_END) {
                member_open = false;
            } else if (ret == Z_BUF_ERROR) {
                if (eof && zs.avail_in == 0) corrupt("gzip", "unexpected end of the gzip data (truncated)");
            } else if (ret != Z_OK) {
                corrupt("gzip", format("corrupt gzip data (zlib: %s)", zs.msg ? zs.msg : zError(ret)));
            }
        }
        return cap - zs.avail_out;
    }
};

struct XzSource : Decoder {
    lzma_stream xs = LZMA_STREAM_INIT;
    bool finished = false;
    XzSource(ByteSource& i, const std::string& n) : Decoder(i, n) {
        CHECK_USER(lzma_stream_decoder(&xs, UINT64_MAX, LZMA_CONCATENATED) == LZMA_OK, "liblzma: cannot initialize");
    }
    ~XzSource() override { lzma_end(&xs); }
    size_t read(char* buf, size_t cap) override {
        xs.next_out = (uint8_t*)buf;
        xs.avail_out = cap;
        while (xs.avail_out == cap && !finished) {
            if (xs.avail_in == 0 && !eof) {
                xs.avail_in = fill();
                xs.next_in = (const uint8_t*)ibuf.data();
            }
            if (eof && total_in == 0) corrupt("xz", "");
            lzma_ret ret = lzma_code(&xs, eof ? LZMA_FINISH : LZMA_RUN);
            if (ret == LZMA_STREAM_END) finished = true;
            else if (ret == LZMA_OK) continue;
            else if (ret == LZMA_FORMAT_ERROR) corrupt("xz", "not xz data (bad magic bytes)");
            else if (ret == LZMA_DATA_ERROR) corrupt("xz", "corrupt xz data");
            else if (ret == LZMA_BUF_ERROR) corrupt("xz", "unexpected end of the xz data (truncated)");
            else if (ret == LZMA_MEM_ERROR) fail("%s: out of memory decompressing xz", name.c_str());
            else if (ret == LZMA_OPTIONS_ERROR) corrupt("xz", "unsupported xz options");
            else corrupt("xz", format("xz error %d", (int)ret));
        }
        return cap - xs.avail_out;
    }
};

struct ZstdSource : Decoder {
    ZSTD_DStream* ds;
    ZSTD_inBuffer zin{nullptr, 0, 0};
    size_t last = 1;  // ZSTD_decompressStream's last result; 0 = a frame just ended
    ZstdSource(ByteSource& i, const std::string& n) : Decoder(i, n) {
        ds = ZSTD_createDStream();
        CHECK_USER(ds && !ZSTD_isError(ZSTD_initDStream(ds)), "libzstd: cannot initialize");
    }
    ~ZstdSource() override { ZSTD_freeDStream(ds); }
    size_t read(char* buf, size_t cap) override {
        ZSTD_outBuffer zout{buf, cap, 0};
        while (true) {
            if (zin.pos == zin.size && !eof) {
                zin.size = fill();
                zin.src = ibuf.data();
                zin.pos = 0;
            }
            if (eof && total_in == 0) corrupt("zstd", "");
            size_t before = zin.pos;
            size_t r = ZSTD_decompressStream(ds, &zout, &zin);
            if (ZSTD_isError(r)) corrupt("zstd", format("corrupt zstd data (%s)", ZSTD_getErrorName(r)));
            bool progress = zin.pos != before || zout.pos > 0;
            if (progress) last = r;  // a call with no input after a finished frame asks for the next header
            if (zout.pos > 0) return zout.pos;
            if (eof && zin.pos == zin.size && !progress) {
                if (last != 0) corrupt("zstd", "unexpected end of the zstd data (truncated)");
                return 0;
            }
        }
    }
};

std::unique_ptr<ByteSource> make_decoder(Codec c, ByteSource& in, const std::string& name) {
    switch (c) {
        case CODEC_GZIP: return std::make_unique<GzipSource>(in, name);
        case CODEC_XZ: return std::make_unique<XzSource>(in, name);
        case CODEC_ZSTD: return std::make_unique<ZstdSource>(in, name);
        default: return nullptr;
    }
}

// A tar archive read by libarchive from a ByteSource (we decompress ourselves, so nested archives and plain
// files share the decoders and their messages).
struct TarReader {
    archive* a;
    ByteSource& in;
    std::string name;
    std::vector<char> buf = std::vector<char>(1 << 17);
    std::exception_ptr err;  // an exception of `in`, carried across libarchive's C frames

    TarReader(ByteSource& i, const std::string& n) : in(i), name(n) {
        a = archive_read_new();
        CHECK_USER(a, "libarchive: out of memory");
        archive_read_support_format_tar(a);
        if (archive_read_open(a, this, nullptr, &TarReader::read_cb, nullptr) != ARCHIVE_OK) {
            try {
                raise("cannot open");
            } catch (...) {
                archive_read_free(a);
                throw;
            }
        }
    }
    ~TarReader() { archive_read_free(a); }
    static la_ssize_t read_cb(archive* ar, void* self_, const void** out) {
        auto* self = (TarReader*)self_;
        try {
            size_t n = self->in.read(self->buf.data(), self->buf.size());
            *out = self->buf.data();
            return (la_ssize_t)n;
        } catch (...) {
            self->err = std::current_exception();
            archive_set_error(ar, EIO, "read error");
            return -1;
        }
    }
    [[noreturn]] void raise(const char* what) {
        if (err) std::rethrow_exception(err);
        const char* e = archive_error_string(a);
        fail("%s: %s: %s\n---> HINT: the archive is damaged or cut short, or not a tar archive (test it with "
             "\"tar -tf\")", name.c_str(), what, e ? e : "unknown libarchive error");
    }
    // Next entry; false at the end.
    bool next(std::string* path, bool* regular) {
        archive_entry* e = nullptr;
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF) return false;
        if (r < ARCHIVE_WARN) raise("not a readable tar archive");
        const char* p = archive_entry_pathname(e);
        *path = p ? p : "";
        *regular = archive_entry_filetype(e) == AE_IFREG;
        return true;
    }
    void skip() {
        if (archive_read_data_skip(a) < ARCHIVE_WARN) raise("cannot skip an entry");
    }
};

struct EntrySource : ByteSource {
    TarReader& t;
    std::string name;
    EntrySource(TarReader& tr, const std::string& n) : t(tr), name(n) {}
    size_t read(char* buf, size_t cap) override {
        la_ssize_t n = archive_read_data(t.a, buf, cap);
        if (n < 0) t.raise(format("cannot read entry %s", name.c_str()).c_str());
        return (size_t)n;
    }
};

// Lines of a ByteSource, without their "\n".
struct LineReader {
    ByteSource& src;
    std::vector<char> buf = std::vector<char>(1 << 18);
    size_t pos = 0, end = 0;
    bool done = false;
    explicit LineReader(ByteSource& s) : src(s) {}
    bool next(std::string& line) {
        line.clear();
        while (true) {
            if (pos == end) {
                if (done) return !line.empty();
                end = src.read(buf.data(), buf.size());
                pos = 0;
                if (end == 0) {
                    done = true;
                    return !line.empty();
                }
            }
            const char* p = buf.data() + pos;
            const char* nl = (const char*)std::memchr(p, '\n', end - pos);
            if (nl) {
                line.append(p, nl);
                pos += (size_t)(nl - p) + 1;
                return true;
            }
            line.append(p, end - pos);
            pos = end;
            CHECK_USER(line.size() < (1ull << 31), "a line of more than 2 GB: is this really text?");
        }
    }
};

std::string read_all(ByteSource& s, const std::string& name) {
    std::string out;
    std::vector<char> buf(1 << 18);
    size_t n;
    while ((n = s.read(buf.data(), buf.size())) > 0) {
        out.append(buf.data(), n);
        CHECK_USER(out.size() < (1ull << 31),
                   "%s: a document of more than 2 GB\n---> HINT: --doc-sep blank splits text files at blank lines",
                   name.c_str());
    }
    return out;
}

bool is_blank(const std::string& s) {
    for (char c : s)
        if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v') return false;
    return true;
}

// ---------------------------------------------------------------------------------------------------------
// Records and batches
// ---------------------------------------------------------------------------------------------------------

using Where = std::shared_ptr<const std::string>;  // file, or archive:entry, a record came from

struct Record {
    int64_t index;  // position in the input (all files, val inputs first)
    int split;
    bool json;      // data is a JSON line (else the text itself)
    int64_t line;   // line number in its file (JSON lines), else 0
    Where where;
    std::string data;
};

enum : uint8_t { F_EMPTY = 1, F_TRUNCATED = 2, F_REPAIRED = 4, F_BAD_JSON = 8 };

struct Batch {
    int64_t seq = 0;
    std::vector<Record> recs;
    std::vector<std::pair<int, int64_t>> file_starts;  // (file, index of its first record)
    // Filled by a worker: the laid-out tokens of record j are tokens[off[j] .. off[j+1]).
    std::vector<uint16_t> tokens;
    std::vector<size_t> off;
    std::vector<uint8_t> flags;
    std::string error;  // the first bad record's error, if any
};

// Reader thread -> worker threads -> the main thread, in order, with a bound on the batches in flight.
class Pipeline {
   public:
    struct Stopped {};

    Pipeline(int workers, int max_inflight, std::function<void(Batch&)> work,
             std::function<void(Pipeline&)> read)
        : work_(std::move(work)), max_inflight_(max_inflight) {
        for (int i = 0; i < workers; i++) threads_.emplace_back([this] { worker(); });
        threads_.emplace_back([this, read] {
            try {
                read(*this);
            } catch (const Stopped&) {
            } catch (...) {
                std::lock_guard<std::mutex> lk(mu_);
                reader_error_ = std::current_exception();
            }
            std::lock_guard<std::mutex> lk(mu_);
            reader_done_ = true;
            final_seq_ = next_submit_;
            cv_done_.notify_all();
        });
    }
    ~Pipeline() {
        {
            std::lock_guard<std::mutex> lk(mu_);
            stop_ = true;
        }
        cv_work_.notify_all();
        cv_space_.notify_all();
        for (auto& t : threads_) t.join();
    }

    // Reader side: blocks while too many batches are in flight.
    void submit(std::unique_ptr<Batch> b) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_space_.wait(lk, [&] { return stop_ || inflight_ < max_inflight_; });
        if (stop_) throw Stopped();
        b->seq = next_submit_++;
        inflight_++;
        todo_.push_back(std::move(b));
        cv_work_.notify_one();
    }

    // Main thread: the next batch in order; nullptr at the end of the input, or (*timed_out) after
    // `timeout` seconds without one. Rethrows the reader's error in its place in the order.
    std::unique_ptr<Batch> next(double timeout, bool* timed_out) {
        std::unique_lock<std::mutex> lk(mu_);
        *timed_out = false;
        auto ready = [&] { return done_.count(next_take_) || (reader_done_ && next_take_ == final_seq_); };
        if (!cv_done_.wait_for(lk, std::chrono::duration<double>(timeout), ready)) {
            *timed_out = true;
            return nullptr;
        }
        auto it = done_.find(next_take_);
        if (it == done_.end()) {
            if (reader_error_) std::rethrow_exception(reader_error_);
            return nullptr;
        }
        auto b = std::move(it->second);
        done_.erase(it);
        next_take_++;
        inflight_--;
        cv_space_.notify_one();
        return b;
    }

   private:
    void worker() {
        while (true) {
            std::unique_ptr<Batch> b;
            {
                std::unique_lock<std::mutex> lk(mu_);
                cv_work_.wait(lk, [&] { return stop_ || !todo_.empty(); });
                if (stop_) return;
                b = std::move(todo_.front());
                todo_.pop_front();
            }
            try {
                work_(*b);
            } catch (const std::exception& e) {
                if (b->error.empty()) b->error = e.what();
            }
            std::lock_guard<std::mutex> lk(mu_);
            int64_t seq = b->seq;
            done_[seq] = std::move(b);
            cv_done_.notify_all();
        }
    }

    std::function<void(Batch&)> work_;
    int max_inflight_;
    std::mutex mu_;
    std::condition_variable cv_work_, cv_done_, cv_space_;
    std::deque<std::unique_ptr<Batch>> todo_;
    std::map<int64_t, std::unique_ptr<Batch>> done_;
    int64_t next_submit_ = 0, next_take_ = 0, final_seq_ = -1, inflight_ = 0;
    bool stop_ = false, reader_done_ = false;
    std::exception_ptr reader_error_;
    std::vector<std::thread> threads_;
};

// Which split the record with this index goes to. Deterministic: a function of the index and the options.
int split_of(const Options& o, int64_t index, int src) {
    if (!o.val_inputs.empty()) return src;
    if (o.val_docs > 0) return index < o.val_docs ? VAL : TRAIN;
    if (o.val_fraction > 0) {
        uint64_t h = mix64(o.val_seed + (uint64_t)(index + 1) * GOLDEN);
        return (double)(h >> 11) * 0x1.0p-53 < o.val_fraction ? VAL : TRAIN;
    }
    return TRAIN;
}

// ---------------------------------------------------------------------------------------------------------
// The reader: inputs -> records -> batches
// ---------------------------------------------------------------------------------------------------------

struct Counters {  // written by the reader, read by the progress line
    std::atomic<uint64_t> bytes_read{0};
    std::atomic<int64_t> entries_skipped{0};
};

struct Reader {
    const Options& o;
    const std::vector<InputFile>& files;
    Counters& ctr;
    Pipeline* pipe = nullptr;
    // Where to start (resume): file start_file, whose first record has index start_index; records below
    // emit_from, and records of split s below want_from[s], are counted but not handed out.
    size_t start_file = 0;
    int64_t start_index = 0, emit_from = 0;
    int64_t want_from[2] = {0, 0};
    int64_t src_base[2] = {-1, 0};  // index of the first record of the --input / --val-input files

    int64_t index = 0;
    std::unique_ptr<Batch> cur;
    size_t cur_bytes = 0;
    struct EndOfSource {};  // --max-docs reached for this source

    Reader(const Options& opt, const std::vector<InputFile>& f, Counters& c) : o(opt), files(f), ctr(c) {}

    void submit() {
        if (cur && (!cur->recs.empty() || !cur->file_starts.empty())) pipe->submit(std::move(cur));
        cur = std::make_unique<Batch>();
        cur_bytes = 0;
    }

    // Numbers the next record; false when it is not wanted (already in the shards of a resumed run).
    bool begin_record(int src, int64_t* idx, int* split) {
        if (o.max_docs > 0 && src_base[src] >= 0 && index - src_base[src] >= o.max_docs) throw EndOfSource();
        *idx = index++;
        *split = split_of(o, *idx, src);
        return *idx >= emit_from && *idx >= want_from[*split];
    }
    void emit(int64_t idx, int split, bool is_json, int64_t line, const Where& where, std::string&& data) {
        cur_bytes += data.size() + 64;
        cur->recs.push_back(Record{idx, split, is_json, line, where, std::move(data)});
        if ((int)cur->recs.size() >= o.batch_docs || cur_bytes >= (8u << 20)) submit();
    }

    void run(Pipeline& p) {
        pipe = &p;
        cur = std::make_unique<Batch>();
        index = start_index;
        try {
            for (size_t i = 0; i < files.size(); i++) {
                const InputFile& f = files[i];
                if (i < start_file) {
                    ctr.bytes_read += (uint64_t)f.size;
                    continue;
                }
                if (f.split_src == TRAIN && src_base[TRAIN] < 0) src_base[TRAIN] = index;
                if (o.max_docs > 0 && index - src_base[f.split_src] >= o.max_docs) {
                    ctr.bytes_read += (uint64_t)f.size;  // this source is full
                    continue;
                }
                cur->file_starts.push_back({(int)i, index});
                uint64_t before = ctr.bytes_read.load();
                try {
                    read_file(f);
                } catch (const EndOfSource&) {
                }
                // Account the whole file, also when --max-docs stopped early.
                uint64_t got = ctr.bytes_read.load() - before;
                if (got < (uint64_t)f.size) ctr.bytes_read += (uint64_t)f.size - got;
            }
        } catch (...) {
            submit();  // the records before the error are good: they are written before it is reported
            throw;
        }
        submit();
    }

    void read_file(const InputFile& f) {
        FileType t = classify(f.path);
        auto where = std::make_shared<const std::string>(f.path);
        if (t.kind == KIND_TEXT && o.doc_sep == "file") {
            int64_t idx;
            int split;
            if (!begin_record(f.split_src, &idx, &split)) return;  // not even opened
        }
        FileSource file(f.path, &ctr.bytes_read);
        auto dec = make_decoder(t.codec, file, f.path);
        ByteSource& src = dec ? *dec : file;
        read_kind(t.kind, src, where, f.split_src, 0);
    }

    // Reads one file or archive entry of a known kind.
    void read_kind(Kind k, ByteSource& src, const Where& where, int split_src, int depth) {
        if (k == KIND_TEXT) read_text(src, where, split_src);
        else if (k == KIND_JSONL) read_jsonl(src, where, split_src);
        else if (k == KIND_TAR) read_tar(src, where, split_src, depth);
    }

    void read_text(ByteSource& src, const Where& where, int split_src) {
        if (o.doc_sep == "file") {
            // The caller numbered this record (begin_record) before opening it, so that a record a resume
            // does not need is not even read; it is wanted.
            int64_t idx = index - 1;
            emit(idx, split_of(o, idx, split_src), false, 0, where, read_all(src, *where));
            return;
        }
        LineReader lines(src);
        std::string line, para;
        int64_t start_line = 0, n = 0;
        bool open = false;
        auto flush = [&] {
            if (!open) return;
            int64_t idx;
            int split;
            if (begin_record(split_src, &idx, &split)) emit(idx, split, false, start_line, where, std::move(para));
            para.clear();
            open = false;
        };
        while (lines.next(line)) {
            n++;
            if (is_blank(line)) {
                flush();
                continue;
            }
            if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files read like LF files
            if (open) para += '\n';
            else start_line = n, open = true;
            para += line;
        }
        flush();
    }

    void read_jsonl(ByteSource& src, const Where& where, int split_src) {
        LineReader lines(src);
        std::string line;
        int64_t n = 0;
        bool first = true;
        while (lines.next(line)) {
            n++;
            size_t p = line.find_first_not_of(" \t\r");
            if (p == std::string::npos) continue;  // blank lines are not records
            if (first && line[p] == '[')
                fail("%s: a JSON array, not JSON lines (one object per line)\n---> HINT: convert it: "
                     "jq -c '.[]' FILE > FILE.jsonl", where->c_str());
            first = false;
            int64_t idx;
            int split;
            if (begin_record(split_src, &idx, &split)) emit(idx, split, true, n, where, std::move(line));
        }
    }

    void read_tar(ByteSource& src, const Where& where, int split_src, int depth) {
        CHECK_USER(depth < 4, "%s: archives nested more than 4 deep", where->c_str());
        TarReader tar(src, *where);
        std::string path;
        bool regular;
        while (tar.next(&path, &regular)) {
            if (!regular) continue;
            FileType t = classify(path);
            if (t.kind == KIND_UNKNOWN) {
                ctr.entries_skipped++;
                tar.skip();
                continue;
            }
            auto w = std::make_shared<const std::string>(*where + ":" + path);
            if (t.kind == KIND_TEXT && o.doc_sep == "file") {
                int64_t idx;
                int split;
                if (!begin_record(split_src, &idx, &split)) {
                    tar.skip();  // already in the shards: not even decompressed
                    continue;
                }
            }
            EntrySource es(tar, *w);
            auto dec = make_decoder(t.codec, es, *w);
            read_kind(t.kind, dec ? *dec : es, w, split_src, depth + 1);
        }
    }
};

// ---------------------------------------------------------------------------------------------------------
// Workers: record -> text -> ids -> laid-out tokens
// ---------------------------------------------------------------------------------------------------------

// Python's str.isspace() code points that are not ASCII, as UTF-8 (what str.strip() removes besides ASCII).
size_t unicode_space_len(const char* p, size_t n) {
    auto u = (const unsigned char*)p;
    if (n >= 2 && u[0] == 0xC2 && (u[1] == 0x85 || u[1] == 0xA0)) return 2;
    if (n >= 3 && u[0] == 0xE1 && u[1] == 0x9A && u[2] == 0x80) return 3;  // U+1680
    if (n >= 3 && u[0] == 0xE2 && u[1] == 0x80 &&
        ((u[2] >= 0x80 && u[2] <= 0x8A) || u[2] == 0xA8 || u[2] == 0xA9 || u[2] == 0xAF))
        return 3;  // U+2000..200A, U+2028, U+2029, U+202F
    if (n >= 3 && u[0] == 0xE2 && u[1] == 0x81 && u[2] == 0x9F) return 3;  // U+205F
    if (n >= 3 && u[0] == 0xE3 && u[1] == 0x80 && u[2] == 0x80) return 3;  // U+3000
    return 0;
}
bool ascii_space(unsigned char c) { return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F); }

// Hugging Face's openwebtext loader: text mode newlines, re.sub("\n\n\n+", "\n\n", text).strip().
std::string owt_clean(std::string_view s) {
    std::string t;
    t.reserve(s.size());
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == '\r') {
            t += '\n';
            if (i + 1 < s.size() && s[i + 1] == '\n') i++;
        } else {
            t += s[i];
        }
    }
    std::string c;
    c.reserve(t.size());
    for (size_t i = 0; i < t.size();) {
        if (t[i] != '\n') {
            c += t[i++];
            continue;
        }
        size_t j = i;
        while (j < t.size() && t[j] == '\n') j++;
        c.append(j - i >= 3 ? 2 : j - i, '\n');
        i = j;
    }
    // strip(): leading, then trailing whitespace.
    size_t b = 0;
    while (b < c.size()) {
        if (ascii_space((unsigned char)c[b])) b++;
        else if (size_t k = unicode_space_len(c.data() + b, c.size() - b)) b += k;
        else break;
    }
    size_t e = c.size();
    while (e > b) {
        if (ascii_space((unsigned char)c[e - 1])) {
            e--;
            continue;
        }
        bool cut = false;
        for (size_t k = 2; k <= 3 && e - b >= k; k++) {
            if (unicode_space_len(c.data() + e - k, k) == k) {
                e -= k;
                cut = true;
                break;
            }
        }
        if (!cut) break;
    }
    return c.substr(b, e - b);
}

struct Layout {
    bool rows = false;
    int row_len = 0;
    uint32_t eos = 0, pad = 0;
    bool eos_before = false;  // flat: GPT-2 puts EOT before each document, SentencePiece EOS after
};

struct Encoder {
    const Options& o;
    const Tokenizer& tok;
    Layout lay;

    // The text of a JSON line, or an error message.
    std::string json_text(const Record& r, std::string* text) const {
        json j;
        try {
            j = json::parse(r.data);
        } catch (const json::parse_error& e) {
            std::string m = e.what();
            size_t k = m.find("] ");
            return format("invalid JSON: %s", k == std::string::npos ? m.c_str() : m.c_str() + k + 2);
        }
        if (!j.is_object()) return format("not a JSON object (a %s)", j.type_name());
        auto it = j.find(o.text_field);
        if (it == j.end()) {
            std::string keys;
            for (auto& [k, v] : j.items()) keys += (keys.empty() ? "\"" : ", \"") + k + "\"";
            return format("no \"%s\" field (its fields: %s)", o.text_field.c_str(),
                          keys.empty() ? "none" : keys.c_str());
        }
        if (!it->is_string()) return format("the \"%s\" field is a %s, not a string", o.text_field.c_str(),
                                            it->type_name());
        *text = it->get<std::string>();
        return "";
    }

    void process(Batch& b) const {
        b.off.assign(1, 0);
        b.flags.clear();
        std::vector<uint32_t> ids;
        std::string text, fixed;
        for (const Record& r : b.recs) {
            try {
                process_record(b, r, ids, text, fixed);
            } catch (const std::exception& e) {
                b.error = format("%s%s: %s", r.where->c_str(),
                                 r.line ? format(":%lld", (long long)r.line).c_str() : "", e.what());
            }
            if (!b.error.empty()) return;
        }
    }

    void process_record(Batch& b, const Record& r, std::vector<uint32_t>& ids, std::string& text,
                        std::string& fixed) const {
        {
            uint8_t fl = 0;
            std::string_view view;
            if (r.json) {
                std::string err = json_text(r, &text);
                if (!err.empty()) {
                    if (!o.skip_bad_json) {
                        b.error = format("%s:%lld: %s\n---> HINT: %s", r.where->c_str(), (long long)r.line,
                                         err.c_str(),
                                         err.rfind("no \"", 0) == 0
                                             ? "name the text's field with --text-field NAME, or skip such lines "
                                               "with --skip-bad-json"
                                             : "the file is damaged, or not JSON lines; --skip-bad-json skips "
                                               "such lines");
                        return;
                    }
                    b.flags.push_back(F_BAD_JSON);
                    b.off.push_back(b.tokens.size());
                    return;
                }
                view = text;
            } else {
                view = r.data;
                if (utf8_first_invalid(view) != std::string::npos) {
                    fixed = utf8_replace_invalid(view);
                    view = fixed;
                    fl |= F_REPAIRED;
                }
            }
            std::string cleaned;
            if (o.owt_clean) {
                cleaned = owt_clean(view);
                view = cleaned;
            }
            if (view.empty()) {
                b.flags.push_back(fl | F_EMPTY);
                b.off.push_back(b.tokens.size());
                return;
            }
            ids.clear();
            tok.encode(view, ids);
            if (lay.rows) {
                size_t keep = std::min(ids.size(), (size_t)lay.row_len - 1);
                if (ids.size() > keep) fl |= F_TRUNCATED;
                for (size_t i = 0; i < keep; i++) b.tokens.push_back((uint16_t)ids[i]);
                b.tokens.push_back((uint16_t)lay.eos);
                b.tokens.insert(b.tokens.end(), (size_t)lay.row_len - 1 - keep, (uint16_t)lay.pad);
            } else {
                if (lay.eos_before) b.tokens.push_back((uint16_t)lay.eos);
                for (uint32_t id : ids) b.tokens.push_back((uint16_t)id);
                if (!lay.eos_before) b.tokens.push_back((uint16_t)lay.eos);
            }
            b.flags.push_back(fl);
            b.off.push_back(b.tokens.size());
        }
    }
};

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
        if (!tty && interval <= 0 && !force) return;
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

    void make_tokenizer() {
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
                           "---> HINT: give --pad-id N (its targets are ignored by the loss)",
                           o.tokenizer.c_str());
            }
            CHECK_USER(pad < tok->vocab_size(), "--pad-id %d is outside the vocabulary (%d ids)", pad,
                       tok->vocab_size());
            lay.pad = (uint32_t)pad;
            if (lay.pad == lay.eos)
                std::fprintf(stderr, "warning: the pad id %d is the EOS id: the loss ignores pad targets, so EOS "
                             "targets will be ignored too\n", pad);
        }
        info.vocab_size = tok->vocab_size();
        info.layout = o.rows() ? SHARD_LAYOUT_ROWS : SHARD_LAYOUT_FLAT;
        info.row_len = lay.row_len;
        info.tokenizer = tok->kind();
        info.pad_id = o.rows() ? (int32_t)lay.pad : 0;
        info.eos_id = (int32_t)lay.eos;

        std::string tok_file = o.tokenizer == "gpt2" ? o.gpt2_ranks : o.spm_model;
        json val = {{"mode", !o.val_inputs.empty() ? "val-input" : o.val_docs > 0 ? "val-docs"
                                                       : o.val_fraction > 0   ? "val-fraction"
                                                                              : "none"}};
        if (o.val_docs > 0) val["docs"] = o.val_docs;
        if (o.val_fraction > 0) val["fraction"] = o.val_fraction, val["seed"] = o.val_seed;
        config = {{"tokenizer", o.tokenizer},
                  {"tokenizer_file_hash", hex64(hash_file(tok_file))},
                  {"vocab_size", info.vocab_size},
                  {"layout", o.layout},
                  {"row_len", info.row_len},
                  {"pad_id", info.pad_id},
                  {"eos_id", info.eos_id},
                  {"shard_tokens", o.shard_tokens},
                  {"val", val},
                  {"text_field", o.text_field},
                  {"doc_sep", o.doc_sep},
                  {"owt_clean", o.owt_clean},
                  {"skip_bad_json", o.skip_bad_json},
                  {"max_docs", o.max_docs}};
    }

    // ---- state ----
    json inputs_json() const {
        json a = json::array();
        for (const auto& f : files) {
            json e = {{"path", f.path}, {"size", f.size}, {"split", SPLIT_NAME[f.split_src]}};
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
    void checkpoint(bool done = false) {
        checkpoints.push_back(checkpoint_json(done));
        save_state();
    }

    // ---- shards ----
    void write_buf(int s) {
        SplitOut& so = sp[s];
        std::string path = shard_path(s, so.shards);
        write_shard(path, so.buf, info);
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
                    size_t real = n;
                    while (real > 0 && t[real - 1] == lay.pad && !(t[real - 1] == lay.eos)) real--;
                    st.real_tokens += (int64_t)real;
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
    // Validity of shard k of split s as state `st` describes it; full: also the checksum of its tokens.
    std::string check_shard(int s, int64_t k, const json& rec, bool full) const {
        std::string path = shard_path(s, k);
        try {
            ShardInfo h = read_shard_header(path);
            if (h.vocab_size != info.vocab_size || h.layout != info.layout || h.row_len != info.row_len ||
                h.tokenizer != info.tokenizer || h.pad_id != info.pad_id || h.eos_id != info.eos_id)
                return "its header does not match these options";
            if (h.num_tokens != rec.at("tokens").get<int64_t>())
                return format("%lld tokens, the state says %lld", (long long)h.num_tokens,
                              (long long)rec.at("tokens").get<int64_t>());
            if (full) {
                auto toks = read_shard(path);
                if (hex64(hash_tokens(toks.data(), toks.size())) != rec.at("hash").get<std::string>())
                    return "its tokens differ from what was written (checksum)";
            }
        } catch (const UserError& e) {
            std::string m = e.what();
            return m.substr(0, m.find('\n'));
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
                if (!old.contains(k) || old[k] != v)
                    diffs += format("\n  %s: was %s, now %s", k.c_str(), old.contains(k) ? old[k].dump().c_str() : "-",
                                    v.dump().c_str());
            CHECK_USER(diffs.empty(), "--resume: the options differ from the interrupted run's:%s\n"
                       "---> HINT: resume with the same command line, or start again with --overwrite", diffs.c_str());
            // Input files: same list; sizes checked below up to the resume point.
            const json& in = st.at("inputs");
            bool same = in.size() == files.size();
            for (size_t i = 0; same && i < files.size(); i++)
                same = in[i].at("path") == files[i].path && in[i].at("split") == SPLIT_NAME[files[i].split_src];
            if (!same)
                fail("--resume: the input files are not those of the interrupted run (%zu files then, %zu now)\n"
                     "---> HINT: resume with the same --input/--val-input, or start again with --overwrite",
                     in.size(), files.size());
            for (size_t i = 0; i < files.size(); i++)
                if (!in[i].at("first_doc").is_null()) files[i].first_doc = in[i].at("first_doc");

            // Shards and checkpoints.
            const json& shards = st.at("shards");
            std::vector<json> cks = st.at("checkpoints").get<std::vector<json>>();
            std::map<std::pair<int, int64_t>, std::string> verdict;  // (split, k) -> problem ("" = good)
            auto good = [&](int s, int64_t k, bool full) {
                auto key = std::make_pair(s * 2 + full, k);
                auto it = verdict.find(key);
                if (it == verdict.end()) {
                    const json& recs = shards.at(s);
                    std::string why = k < (int64_t)recs.size() ? check_shard(s, k, recs[(size_t)k], full)
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
                    for (int64_t k = 0; k < cnt && ok; k++) ok = good(s, k, k == cnt - 1);
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
            for (int s = 0; s < 2; s++) {
                sp[s].shards = ck.at("shards").at(s);
                for (int64_t k = 0; k < sp[s].shards; k++) {
                    const json& r = shards.at(s).at((size_t)k);
                    sp[s].written.push_back({r.at("tokens").get<int64_t>(),
                                             std::stoull(r.at("hash").get<std::string>(), nullptr, 16)});
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
            for (size_t i = 0; i <= start; i++)
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

    // Existing output of an earlier run: refuse, or delete with --overwrite.
    std::vector<std::string> existing_outputs() const {
        std::vector<std::string> found;
        for (const char* pat : {"_train_[0-9][0-9][0-9][0-9][0-9][0-9].bin", "_val_[0-9][0-9][0-9][0-9][0-9][0-9].bin",
                                "_prep.json"}) {
            glob_t g;
            std::string p = o.out + pat;
            if (glob(p.c_str(), 0, nullptr, &g) == 0)
                for (size_t i = 0; i < g.gl_pathc; i++) found.push_back(g.gl_pathv[i]);
            globfree(&g);
        }
        return found;
    }
    void remove_temporaries() const {  // left by a killed run (write_shard's and ours)
        glob_t g;
        std::string p = o.out + "_*.tmp.*";
        if (glob(p.c_str(), 0, nullptr, &g) == 0)
            for (size_t i = 0; i < g.gl_pathc; i++) std::remove(g.gl_pathv[i]);
        globfree(&g);
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
            std::fprintf(stderr, "  %-5s %5lld shard%s %14s docs %16s tokens%s\n", SPLIT_NAME[s], (long long)so.shards,
                         so.shards == 1 ? " " : "s", with_commas(so.st.docs).c_str(),
                         with_commas(so.st.tokens).c_str(), extra.c_str());
        }
        if (empty) std::fprintf(stderr, "  skipped %s empty documents\n", with_commas(empty).c_str());
        if (bad_json) std::fprintf(stderr, "  skipped %s bad JSON lines (--skip-bad-json)\n", with_commas(bad_json).c_str());
        if (ctr.entries_skipped)
            std::fprintf(stderr, "  skipped %s archive entries that are not .txt/.json(l) or archives\n",
                         with_commas(ctr.entries_skipped.load()).c_str());
        if (!complete) return;
        if (!lay.rows)
            for (int s = 0; s < 2; s++)
                if (sp[s].shards > 0 && sp[s].written.back().first < 1025)
                    std::fprintf(stderr,
                                 "  note: %s has only %lld tokens; the trainer needs --seq-len + 1 tokens in every "
                                 "shard (delete it, or use a smaller --shard-tokens so the last shard is larger)\n",
                                 shard_path(s, sp[s].shards - 1).c_str(), (long long)sp[s].written.back().first);
        bool gpt2 = o.tokenizer == "gpt2";
        std::fprintf(stderr, "train with: ./%s --train-data '%s_train_*.bin'%s%s\n", gpt2 ? "train_gpt2" : "train_llama",
                     o.out.c_str(),
                     sp[VAL].shards > 0 ? format(" --val-data '%s_val_*.bin'", o.out.c_str()).c_str() : "",
                     lay.rows ? format(" --seq-len %d", o.row_len).c_str() : "");
    }

    int run() {
        auto t0 = Clock::now();
        files = expand_inputs(o);
        uint64_t total = 0;
        for (auto& f : files) total += (uint64_t)f.size;
        make_tokenizer();
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
        Reader rd(o, files, ctr);
        if (o.resume) {
            remove_temporaries();
            if (!load_resume(rd)) {
                std::fprintf(stderr, "--resume: %s is complete and its shards check out; nothing to do\n",
                             state_path.c_str());
                summary(0, true);
                return 0;
            }
        } else {
            auto found = existing_outputs();
            if (!found.empty() && !o.overwrite)
                fail("%s already exists (and %zu more files of an earlier run with --out %s)\n"
                     "---> HINT: --resume continues an interrupted run; --overwrite deletes them and starts again",
                     found[0].c_str(), found.size() - 1, o.out.c_str());
            for (auto& p : found) std::remove(p.c_str());
            remove_temporaries();
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
            std::fprintf(stderr, "  tokenizer %s; layout %s; %s tokens per shard; %s; %d threads\n",
                         tok->name().c_str(),
                         lay.rows ? format("rows of %d (ids[:%d] + EOS %u + pad %u)", o.row_len, o.row_len - 1,
                                           lay.eos, lay.pad).c_str()
                                  : format("flat (EOS %u %s each document)", lay.eos,
                                           lay.eos_before ? "before" : "after").c_str(),
                         with_commas(o.shard_tokens).c_str(), valdesc.c_str(), o.threads);
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
                         "--resume\n", (long long)shards_this_run, shards_this_run == 1 ? "" : "s");
            return 0;
        }
        if (o.has_val() && sp[VAL].st.docs == 0)
            prog.message("warning: no document fell in the validation split, so no val shard was written");
        after_write(true);
        prog.tick(ctr.bytes_read.load(), sp[0].st.docs + sp[1].st.docs, sp[0].st.tokens + sp[1].st.tokens, true);
        summary(seconds_since(t0), true);
        return 0;
    }
};

}  // namespace

int main(int argc, char** argv) {
    try {
        Options o = parse_args(argc, argv);
        if (o.help || argc == 1) {
            std::fputs(HELP, o.help ? stdout : stderr);
            return o.help ? 0 : 1;
        }
        finish_options(o);
        Prep prep(o);
        return prep.run();
    } catch (const UserError& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "\nprep_data: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "\nprep_data: internal error: %s\n", e.what());
        return 2;
    }
}
