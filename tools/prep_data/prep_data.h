// prep_data's shared declarations. Where each part lives: options.cpp (HELP, the command line), inputs.cpp
// (input files; byte sources: files, decompressors, tar entries), pipeline.cpp (records and batches between
// the threads), reader.cpp (inputs -> records -> batches), encoder.cpp (the workers: record -> text -> ids ->
// laid-out tokens), output.cpp (shards, the resume state, progress; the run), main.cpp.
// Pipeline: one reader thread cuts the inputs into numbered records and hands them out in batches; N workers
// encode batches; the main thread takes the results back in order, lays them out, writes shards and the resume
// state. Memory is bounded whatever the input size, and the output depends only on the inputs and the options,
// never on the thread count or on timing (docs/DESIGN.md section 7.2).
#pragma once
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

struct Tokenizer;  // data/tokenizer.h
struct archive;    // libarchive's (archive.h)

namespace prep {

constexpr int TRAIN = 0, VAL = 1;

// The SplitMix64 output function (Steele et al.); the i-th output of the generator seeded with s is
// mix64(s + (i + 1) * GOLDEN).
constexpr uint64_t GOLDEN = 0x9E3779B97F4A7C15ULL;
inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// ---------------------------------------------------------------------------------------------------------
// Options (options.cpp)
// ---------------------------------------------------------------------------------------------------------

struct Options {
    std::string preset;
    std::vector<std::string> inputs, val_inputs;
    std::string out;
    std::string tokenizer;  // gpt2 | spm
    std::string spm_model, gpt2_ranks;
    int spm_vocab = 0;                 // > 0: train a SentencePiece model of this many pieces first
    int64_t spm_train_lines = 2000000;  // at most this many lines of the training documents train it
    std::string layout = "flat";
    int row_len = 256;
    int pad_id = -1;  // -1: the model's
    int64_t shard_tokens = 100000000;
    int64_t val_docs = 0;
    double val_fraction = 0;
    uint64_t val_seed = 2357;
    std::string text_field = "text";
    std::string doc_sep = "auto";  // auto: resolved in run() to file or blank (resolve_doc_sep)
    bool owt_clean = false, skip_bad_json = false;
    int64_t max_docs = -1, max_shards = -1;
    bool resume = false, overwrite = false, no_val = false;
    int threads = 0, batch_docs = 256;
    double progress_interval = 10;
    bool quiet = false, help = false;
    std::set<std::string> given;  // options given on the command line (presets fill only the others)

    bool rows() const { return layout == "rows"; }
    bool has_val() const { return !val_inputs.empty() || val_docs > 0 || val_fraction > 0; }
};

extern const char* HELP;  // the --help text
Options parse_args(int argc, char** argv);
void finish_options(Options& o);  // the preset's defaults, then the checks

// ---------------------------------------------------------------------------------------------------------
// Input files (inputs.cpp)
// ---------------------------------------------------------------------------------------------------------

// The default validation split when none is asked for (and no preset sets one): --val-fraction 0.01.
constexpr double DEFAULT_VAL_FRACTION = 0.01;

// ---------------------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------------------

enum Codec { CODEC_NONE, CODEC_GZIP, CODEC_XZ, CODEC_ZSTD };
enum Kind { KIND_UNKNOWN, KIND_TEXT, KIND_JSONL, KIND_TAR };
const char* const CODEC_NAME[] = {"none", "gzip", "xz", "zstd"};

struct FileType {
    Kind kind = KIND_UNKNOWN;
    Codec codec = CODEC_NONE;
};

FileType classify(const std::string& path);  // by the file name
bool names_a_tar(const std::string& path);  // .tar, .tgz, .txz or .tzst in the file name

struct InputFile {
    std::string path;
    int64_t size = 0;
    int split_src = TRAIN;  // VAL for --val-input files
    int64_t first_doc = -1;  // index of its first document, once the reader got there
};

// The files of --val-input, then those of --input (patterns and directories expanded), each once.
std::vector<InputFile> expand_inputs(const Options& o);

// 1 once the run's state file lists a finished shard (a stop signal's message then names --resume); 2 while the
// first shard is in place and the state file does not list it yet (a run again without --overwrite is refused)
extern volatile std::sig_atomic_t g_resumable;

// ---------------------------------------------------------------------------------------------------------
// Byte sources (inputs.cpp): files, decompressors, tar entries. read() returns 0 only at the end, throws
// UserError on corrupt data naming the file.
// ---------------------------------------------------------------------------------------------------------

struct ByteSource {
    virtual ~ByteSource() = default;
    virtual size_t read(char* buf, size_t cap) = 0;
};

struct FileSource : ByteSource {
    FILE* f = nullptr;
    std::string path;
    std::atomic<uint64_t>* counter;  // counts the bytes read
    FileSource(const std::string& p, std::atomic<uint64_t>* c);
    ~FileSource() override;
    size_t read(char* buf, size_t cap) override;
};

// The decompressor of codec c reading `in`, or nullptr for CODEC_NONE; name is the file in messages.
std::unique_ptr<ByteSource> make_decoder(Codec c, ByteSource& in, const std::string& name);

// A tar archive read by libarchive from a ByteSource (we decompress ourselves, so nested archives and plain
// files share the decoders and their messages).
struct TarReader {
    archive* a;
    ByteSource& in;
    std::string name;
    std::vector<char> buf = std::vector<char>(1 << 17);
    std::exception_ptr err;  // an exception of `in`, carried across libarchive's C frames
    int64_t entries = 0;     // headers read: after one, a failure is damage, not another format
    // where the last entry's data ends in the stream (its header's end + its size, in whole blocks): at the end,
    // libarchive has read the end-of-archive marker's zero block past it, or nothing (a tar cut right after an entry,
    // which it takes for the end, as some writers omit the marker)
    int64_t entry_end = 0;
    // an archive's entry read as a tar by its name alone (NAME.gz, as OpenWebText's *.xz): when its content is not
    // a tar (a changelog.gz), NotATar is thrown, and the entry is skipped as other unknown entries are
    bool maybe_not_a_tar = false;
    struct NotATar {};

    TarReader(ByteSource& i, const std::string& n, bool maybe_not_a_tar = false);
    ~TarReader();
    [[noreturn]] void raise(const char* what);
    // Next entry; false at the end.
    bool next(std::string* path, bool* regular);
    void skip();
};

struct EntrySource : ByteSource {
    TarReader& t;
    std::string name;
    EntrySource(TarReader& tr, const std::string& n) : t(tr), name(n) {}
    size_t read(char* buf, size_t cap) override;
};

// Lines of a ByteSource, without their "\n".
struct LineReader {
    ByteSource& src;
    const std::string& name;  // the file (or archive entry) that a line too long is said of
    std::vector<char> buf = std::vector<char>(1 << 18);
    size_t pos = 0, end = 0;
    bool done = false;
    LineReader(ByteSource& s, const std::string& n) : src(s), name(n) {}
    bool next(std::string& line);
};

std::string read_all(ByteSource& s, const std::string& name);  // one document: all of s
bool is_blank(const std::string& s);                             // --doc-sep blank's separator lines

// ---------------------------------------------------------------------------------------------------------
// Records and batches (Pipeline: pipeline.cpp)
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
    std::vector<uint32_t> pads;  // --layout rows: how many of record j's tokens are the pads after its EOS (else 0)
    std::string error;  // the first bad record's error, if any
    std::vector<std::string> texts;  // Encoder::collect_text: the text of each record instead of its tokens
};

// Reader thread -> worker threads -> the main thread, in order, with a bound on the batches in flight.
class Pipeline {
   public:
    struct Stopped {};

    Pipeline(int workers, int max_inflight, std::function<void(Batch&)> work,
             std::function<void(Pipeline&)> read);
    ~Pipeline();

    // Reader side: blocks while too many batches are in flight.
    void submit(std::unique_ptr<Batch> b);

    // Main thread: the next batch in order; nullptr at the end of the input, or (*timed_out) after
    // `timeout` seconds without one. Rethrows the reader's error in its place in the order.
    std::unique_ptr<Batch> next(double timeout, bool* timed_out);

   private:
    void worker();

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

// ---------------------------------------------------------------------------------------------------------
// The reader: inputs -> records -> batches (reader.cpp)
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

    void submit();
    bool begin_record(int src, int64_t* idx, int* split);
    void emit(int64_t idx, int split, bool is_json, int64_t line, const Where& where, std::string&& data);
    void run(Pipeline& p);  // the reader thread
    void read_file(const InputFile& f);
    void read_kind(Kind k, ByteSource& src, const Where& where, int split_src, int depth);
    void read_text(ByteSource& src, const Where& where, int split_src);
    void read_jsonl(ByteSource& src, const Where& where, int split_src);
    void read_tar(ByteSource& src, const Where& where, int split_src, int depth, bool maybe_not_a_tar = false);
};

// ---------------------------------------------------------------------------------------------------------
// Workers: record -> text -> ids -> laid-out tokens (encoder.cpp)
// ---------------------------------------------------------------------------------------------------------

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
    bool collect_text = false;  // the SentencePiece training pass: keep each record's text (Batch::texts)

    // The text of a JSON line, or an error message; *repaired: the line held invalid UTF-8, replaced by U+FFFD first.
    std::string json_text(const Record& r, std::string* text, bool* repaired) const;
    // A worker's job: the laid-out tokens (b.tokens, b.off) and flags of each record; stops at an error (b.error).
    void process(Batch& b) const;
    void process_record(Batch& b, const Record& r, std::vector<uint32_t>& ids, std::string& text,
                        std::string& fixed) const;
};

// ---------------------------------------------------------------------------------------------------------
// Output: shards, the resume state, progress (output.cpp)
// ---------------------------------------------------------------------------------------------------------

// The whole run with finished options (finish_options): inputs -> shards. Returns the exit status.
int run(Options& o);

// --spm-vocab (spm_train.cpp): trains a SentencePiece unigram model with T5's ids (pad 0, EOS 1, unk 2, no BOS)
// on the lines of the training documents (at most --spm-train-lines) and writes it atomically to model_path.
void train_spm_model(const Options& o, const std::vector<InputFile>& files, const std::string& model_path);

}  // namespace prep
