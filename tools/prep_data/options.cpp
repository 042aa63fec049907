// prep_data's command line: the --help text (HELP), the parsing of the options, and finish_options: the
// presets (c4, owt) and the checks of the combination.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>  // NAME_MAX
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>  // strlen
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/numbers.h"  // typed_as_decimal
#include "common/strings.h"  // closest_name
#include "tools/prep_data/prep_data.h"

#ifndef PRAC_SOURCE_DIR
#define PRAC_SOURCE_DIR "."
#endif

namespace prep {

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
  owt   GPT-2 OpenWebText: --tokenizer gpt2 --layout flat (each document is EOT 50256 then its tokens, as
        llm.c writes; nanoGPT puts EOT after each), --val-fraction 0.0005 --val-seed 2357 (nanoGPT's),
        --owt-clean.
          prep_data owt --input openwebtext.tar.xz --out owt_gpt2

Input:
  --input PATH...       files, directories or glob patterns (quoted, or let the shell expand them: every
                        argument up to the next option is an input). Read in the order given; the matches of a
                        pattern and the files of a directory in name order; a path that exists is read as named,
                        glob characters and all ("book [1].txt"). Formats, by file name:
                          *.txt                    one document per file (or see --doc-sep)
                          *.jsonl *.json *.ndjson  JSON lines: one object per line, the text in --text-field
                          *.tar                    a tar archive: .txt entries are documents, .jsonl entries JSON
                                                   lines, compressed entries nested tar archives (OpenWebText:
                                                   openwebtext/*_data.xz are xz-compressed tars of .txt files;
                                                   one that is no tar, a changelog.gz, is skipped and counted)
                          any of these + .gz .xz .zst (also .tgz .txz); a compressed file with no other known
                          extension is read as a tar archive
                        A directory stands for all its *.txt files (also .txt.gz/.xz/.zst), recursively.
                        Parquet is not read: convert it to JSON lines first (see below).
  --val-input PATH...   like --input, for the validation split only (read first)
  --text-field NAME     the JSON field holding the text (default "text")
  --doc-sep auto|file|blank  in text files and .txt entries: one document per file, or documents separated
                        by blank lines (lines of only spaces, tabs, \r, \f or \v; a document's lines are
                        joined with "\n").
                        auto (default): blank when --input is one text file (a book, a dump of your notes:
                        its paragraphs are the documents) and --val-input, if given, is one too; file
                        otherwise (several files, a directory, a corpus archive)
  --owt-clean           clean each document like Hugging Face's openwebtext loader: \r\n and \r become \n,
                        runs of 3+ newlines become 2, leading and trailing whitespace is removed (owt: on)
  --skip-bad-json       skip (and count) JSON lines that do not parse or lack the text field, instead of
                        stopping with an error (a --resume of a run stopped at one may add it)
  --max-docs N          read at most N documents from --input (and at most N from --val-input)
  Documents that are empty (after --owt-clean) are skipped and counted; they and JSON lines skipped by
  --skip-bad-json keep their place in the numbering that --max-docs, --val-docs and --val-fraction
  count (the split of every document is known before it is read). Invalid UTF-8 in text files and
  JSON lines is replaced by U+FFFD (as Python's errors="replace"), and counted. With --doc-sep blank, lines end at
  \n, \r\n or a lone \r (Python's universal newlines; --doc-sep file keeps a file's line endings);
  a UTF-8 byte order mark is dropped; UTF-16 and UTF-32 files are refused (convert them with iconv).
  A directory's files reached by several paths (symbolic or hard links) are read once, under the
  name that sorts first; links that lead nowhere are skipped (said).

Tokenizer and layout:
  --tokenizer gpt2|spm  gpt2: GPT-2 r50k BPE (50257 ids, EOT 50256), as tiktoken's encode_ordinary;
                        spm: a SentencePiece model, no BOS
  --spm-model FILE      the SentencePiece .model (T5's spiece.model: 32000 ids, pad 0, EOS 1, unk 2); a copy
                        is kept next to the shards as PREFIX_tokenizer.model (the trainers decode with it)
  --spm-vocab N         train your own SentencePiece model (unigram, N pieces, T5's ids: pad 0, EOS 1, unk 2,
                        no BOS) on the training documents first, write it to PREFIX_tokenizer.model, and
                        tokenize with it (implies --tokenizer spm; for LLaMA on your own text); SentencePiece's
                        trainer runs 16 threads whatever --threads says: the model does not depend on it
  --spm-train-lines N   train it on at most the first N lines of the training documents (default 2M)
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
                        (PREFIX names files: a directory, or a trailing /, is refused)
  --shard-tokens N      tokens per shard (default 100M; suffixes K, M, G = 10^3, 10^6, 10^9; rows: rounded
                        down to whole rows). Every shard but the last of each split has exactly N tokens; in
                        the flat layout a document may continue in the next shard (as llm.c's fineweb.py)
  --overwrite           delete the shards and state of an earlier run with this PREFIX, then start
  --resume              continue an interrupted run (see Resume)
  --max-shards N        stop (exit 0) after writing N shards in this invocation; continue with --resume

Validation split (one of these; default: --val-fraction 0.01, the owt preset 0.0005):
  --val-docs N          the first N documents of --input go to val
  --val-fraction F      each document goes to val with probability F, decided by its index i (from 0, in
                        input order) alone: val iff the i-th output of SplitMix64 seeded with --val-seed,
                        divided by 2^64, is below F. The same inputs give the same split on every machine,
                        whatever the thread count.
  --val-seed S          that seed (default 2357, nanoGPT's)
  --no-val              no validation split (the trainer then needs --val-data from elsewhere)

Speed and display:
  --threads N           encoding threads (default, and 0: all cores; at most 4096); one more reads and decompresses
  --batch-docs N        documents per encoding batch (default 256; at most 1048576)
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
  input file list are the same (a path may be spelled otherwise: ./a.jsonl is a.jsonl, also from another
  folder; the message names the first file that differs), checks every shard the state lists (header, file
  size, token count, the checksum of its tokens: every shard is read), and continues after the
  last good shard; later shards are written again. Input files before the resume point are not read at
  all; the file holding it is read from its beginning, and documents already in shards are skipped without
  being tokenized. The result is byte-identical to an uninterrupted run. With --val-fraction the val shard
  is only written at the end, so a resume reads from the first pending val document on (tokenizing only
  val documents up to the train resume point). Files after the one holding the later of the two resume
  points may change (e.g. a corrupt download the run had not reached, replaced); that file and those
  before it must be as they were (their sizes are checked: a corrupt file that stopped the run holds its
  resume point, so replacing it means --overwrite). A finished run is recognized: --resume then only
  checks the shards.

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
      python3 -c "import pandas as p,sys;p.read_parquet(sys.argv[1]).to_json(sys.argv[2],orient='records',lines=True)" \
          in.parquet out.jsonl

Your own text (one file: its blank-line separated paragraphs are the documents; 1% goes to validation):
  prep_data --tokenizer gpt2 --input mybook.txt --out data/mine/gpt2      then ./train_gpt2 ... (printed)
  prep_data --spm-vocab 4000 --input mybook.txt --out data/mine/llama     then ./train_llama ... (printed)

Train on the result (prep_data prints the command for its output):
  ./train_gpt2 --train-data 'owt_gpt2_train_??????.bin' --val-data 'owt_gpt2_val_??????.bin'
  ./train_llama --train-data 'c4_llama_train_??????.bin' --val-data 'c4_llama_val_??????.bin' --seq-len 256
)HELP";

namespace {

// A 64-bit seed: any whole number 0 .. 2^64 - 1, digits only (parse_count stopped at 2^63 - 1).
uint64_t parse_seed(const std::string& flag, const std::string& v) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
    CHECK_USER(!v.empty() && std::isdigit((unsigned char)v[0]) && *end == '\0' && errno == 0,
               "%s: \"%s\" is not a whole number from 0 to 18446744073709551615", flag.c_str(), v.c_str());
    return (uint64_t)x;
}

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
    // (digits first: strtoll skips a space before the number, " 5", a quoting slip, as the trainers refuse it)
    CHECK_USER(!s.empty() && std::isdigit((unsigned char)s[0]) && end && *end == '\0' && errno == 0 && x >= 0 &&
                   x <= INT64_MAX / mult,
               "%s: \"%s\" is not a non-negative whole number (suffixes K, M, G allowed)", flag.c_str(), v.c_str());
    return (int64_t)x * mult;
}

static const char* const SPM_VOCAB_RANGE = "a SentencePiece model here has 8..65536 pieces (shards store uint16 ids)";

// A count with a ceiling, refused above it (--threads 10000 was 4096 without a word)
static int64_t parse_count_at_most(const std::string& flag, const std::string& v, int64_t most) {
    const int64_t x = parse_count(flag, v);
    CHECK_USER(x <= most, "%s must be at most %lld (got %s)", flag.c_str(), (long long)most, v.c_str());
    return x;
}

// A finite decimal number, as the trainers' number flags take it: strtod also reads hexadecimal ("0x0.1" was 0.0625)
// and skips a space before the number, and a value below the smallest double ("1e-400") came back as 0 (--val-fraction
// 1e-400: no validation split, unsaid)
double parse_double(const std::string& flag, const std::string& v) {
    char* end = nullptr;
    errno = 0;
    double x = std::strtod(v.c_str(), &end);
    CHECK_USER(typed_as_decimal(v) && end && *end == '\0' && std::isfinite(x),
               "%s: \"%s\" is not a decimal number", flag.c_str(), v.c_str());
    CHECK_USER(errno != ERANGE || x != 0, "%s: %s is too small to be told from 0", flag.c_str(), v.c_str());
    return x;
}

const char* const VALUE_FLAGS[] = {"--out", "--tokenizer", "--spm-model", "--gpt2-ranks", "--layout",
                                   "--row-len", "--pad-id", "--shard-tokens", "--val-docs", "--val-fraction",
                                   "--val-seed", "--text-field", "--doc-sep", "--max-docs", "--max-shards",
                                   "--threads", "--batch-docs", "--progress-interval", "--spm-vocab",
                                   "--spm-train-lines"};
const char* const BOOL_FLAGS[] = {"--owt-clean", "--skip-bad-json", "--resume", "--overwrite", "--quiet", "--help",
                                  "--no-val"};
const char* const LIST_FLAGS[] = {"--input", "--val-input"};

}  // namespace

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
            if (name == "--no-val") o.no_val = true;
            continue;
        }
        if (!is_in(name, VALUE_FLAGS)) {
            const std::string best = closest_name(name, all, 3);
            fail("unknown option %s%s\n---> HINT: prep_data --help lists the options", name.c_str(),
                 best.empty() ? "" : format(" (did you mean %s?)", best.c_str()).c_str());
        }
        if (!has_value) {
            CHECK_USER(i + 1 < argc, "%s needs a value", name.c_str());
            value = argv[++i];
        }
        // a second value is a slip (the last one was taken: two --out, one output, no word)
        CHECK_USER(!o.given.count(name), "%s is given twice; it takes one value (the second is \"%s\")\n---> HINT: "
                   "keep the one you mean", name.c_str(), value.c_str());
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
        else if (name == "--val-seed") o.val_seed = parse_seed(name, value);
        else if (name == "--text-field") o.text_field = value;
        else if (name == "--doc-sep") o.doc_sep = value;
        else if (name == "--max-docs") o.max_docs = parse_count(name, value);
        else if (name == "--max-shards") o.max_shards = parse_count(name, value);
        else if (name == "--threads") o.threads = (int)parse_count_at_most(name, value, 4096);
        else if (name == "--batch-docs") o.batch_docs = (int)parse_count_at_most(name, value, 1 << 20);
        else if (name == "--progress-interval") o.progress_interval = parse_double(name, value);
        else if (name == "--spm-vocab") {  // (one far above was clamped, and said as "--spm-vocab 2147483647")
            const int64_t pieces = parse_count(name, value);
            CHECK_USER(pieces <= 65536, "--spm-vocab %s: %s", value.c_str(), SPM_VOCAB_RANGE);
            o.spm_vocab = (int)pieces;
        }
        else if (name == "--spm-train-lines") o.spm_train_lines = parse_count(name, value);
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
        CHECK_USER(val_given || o.no_val,
                   "the c4 preset takes its validation split from C4's validation files, and no --val-input "
                   "was given\n---> HINT: add --val-input 'c4/en/c4-validation.*.json.gz' (or --val-docs N, or "
                   "--no-val for no validation split)");
    } else if (o.preset == "owt") {
        if (!o.given.count("--tokenizer")) o.tokenizer = "gpt2";
        if (!o.given.count("--layout")) o.layout = "flat";
        if (!val_given) o.val_fraction = 0.0005;
        if (!o.given.count("--val-seed")) o.val_seed = 2357;
        o.owt_clean = true;
    }
    CHECK_USER(!(o.no_val && val_given), "--no-val contradicts --val-input / --val-docs / --val-fraction: pick one");
    if (!val_given && !o.no_val && o.preset.empty()) o.val_fraction = DEFAULT_VAL_FRACTION;
    if (o.no_val) o.val_fraction = 0;
    if (o.spm_vocab > 0 || o.given.count("--spm-vocab")) {  // (--spm-vocab 0 was taken as not given: "no tokenizer")
        CHECK_USER(o.spm_model.empty(), "--spm-vocab trains a new SentencePiece model, and --spm-model names one to "
                   "use: pick one");
        CHECK_USER(o.tokenizer.empty() || o.tokenizer == "spm" || !o.given.count("--tokenizer"),
                   "--spm-vocab trains a SentencePiece model, but --tokenizer is %s", o.tokenizer.c_str());
        CHECK_USER(o.spm_vocab >= 8 && o.spm_vocab <= 65536, "--spm-vocab %d: %s", o.spm_vocab, SPM_VOCAB_RANGE);
        o.tokenizer = "spm";
    }
    CHECK_USER(o.spm_train_lines > 0, "--spm-train-lines must be positive (got %lld)", (long long)o.spm_train_lines);
    CHECK_USER(!o.given.count("--spm-train-lines") || o.spm_vocab > 0, "--spm-train-lines goes with --spm-vocab N (it "
               "limits the lines a new SentencePiece model is trained on); no model is trained here");
    CHECK_USER(!o.inputs.empty(), "no input: give --input PATH (files, directories or patterns)\n"
               "---> HINT: prep_data --help shows the formats and where to download C4 and OpenWebText");
    CHECK_USER(!o.out.empty(), "no output: give --out PREFIX (shards are written to PREFIX_train_000000.bin, ...)");
    // status with an error_code: a path that cannot be looked at (a directory on it we may not enter, a symlink
    // loop, a name too long) is the user's to fix, not an internal error; a path that does not exist yet is fine.
    std::error_code out_ec;
    const std::filesystem::file_status out_st = std::filesystem::status(o.out, out_ec);
    CHECK_USER(!out_ec || out_st.type() == std::filesystem::file_type::not_found,
               "cannot use --out %s: %s\n---> HINT: --out is a prefix of file names (PREFIX_train_000000.bin, ...) "
               "in a directory this user may create or enter and write; check the directories on its path, or choose "
               "another --out", o.out.c_str(), out_ec.message().c_str());
    CHECK_USER(o.out.back() != '/' && !std::filesystem::is_directory(out_st),
               "--out %s is a directory; --out is a prefix of file names (shards are written to "
               "PREFIX_train_000000.bin, ...)\n---> HINT: name the files too, e.g. --out %s%sdata",
               o.out.c_str(), o.out.c_str(), o.out.back() == '/' ? "" : "/");
    // the longest name written beside the shards, a shard's temporary: past NAME_MAX the run failed at its first
    // shard ("File name too long"), after the first 100M tokens of a real corpus
    const std::string out_base = o.out.substr(o.out.find_last_of('/') + 1);  // (npos + 1 = 0: no directory)
    const size_t longest = out_base.size() + std::strlen("_train_000000.bin.tmp.") + 10;
    CHECK_USER(longest <= NAME_MAX, "--out %s: the names written beside it (PREFIX_train_000000.bin.tmp.PID: up to %zu "
               "characters) pass the filesystem's limit of %d a name\n---> HINT: choose a shorter --out", o.out.c_str(),
               longest, NAME_MAX);
    CHECK_USER(!o.tokenizer.empty(), "no tokenizer: give --tokenizer gpt2 (GPT-2), --spm-vocab N (LLaMA: "
               "train a SentencePiece model on your text) or --tokenizer spm --spm-model FILE (or a preset: "
               "prep_data c4 ... / prep_data owt ...)");
    CHECK_USER(o.tokenizer == "gpt2" || o.tokenizer == "spm", "--tokenizer must be gpt2 or spm, not \"%s\"",
               o.tokenizer.c_str());
    if (o.tokenizer == "spm" && o.spm_vocab == 0)
        CHECK_USER(!o.spm_model.empty(),
                   "--tokenizer spm needs --spm-model FILE (T5's spiece.model for C4), or --spm-vocab N to "
                   "train one on your text\n---> HINT: huggingface-cli download google-t5/t5-base spiece.model --local-dir . ; a small "
                   "test model is data/builtin/austen_spm8k.model");
    else if (o.tokenizer == "gpt2")
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
    CHECK_USER(o.doc_sep == "auto" || o.doc_sep == "file" || o.doc_sep == "blank",
               "--doc-sep must be auto, file or blank, not \"%s\"",
               o.doc_sep.c_str());
    CHECK_USER(!o.text_field.empty(), "--text-field must not be empty");
    int nval = (o.val_docs > 0) + (o.val_fraction > 0) + !o.val_inputs.empty();
    CHECK_USER(nval <= 1, "give at most one of --val-input, --val-docs, --val-fraction");
    CHECK_USER(o.val_fraction >= 0 && o.val_fraction < 1, "--val-fraction must be in [0, 1), got %g", o.val_fraction);
    // (accepted without a word, it changed nothing; a preset's own seed is not the user's)
    CHECK_USER(!o.given.count("--val-seed") || o.val_fraction > 0,
               "--val-seed goes with --val-fraction (it seeds which documents go to validation), and this split is %s, "
               "which draws nothing\n---> HINT: drop --val-seed, or split with --val-fraction F",
               o.no_val ? "--no-val" : o.val_docs > 0 ? "--val-docs" : !o.val_inputs.empty() ? "--val-input"
                                                                               : "--val-fraction 0");
    CHECK_USER(o.shard_tokens > 0 && o.shard_tokens <= INT32_MAX,
               "--shard-tokens must be in 1..%d (the header's token count is an int32)", INT32_MAX);
    if (o.rows()) {
        int64_t rounded = o.shard_tokens / o.row_len * o.row_len;
        CHECK_USER(rounded > 0, "--shard-tokens %lld is less than one row of %d tokens", (long long)o.shard_tokens,
                   o.row_len);
        o.shard_tokens = rounded;
    }
    CHECK_USER(o.max_docs != 0, "--max-docs must be positive (got 0)");
    CHECK_USER(o.max_shards != 0, "--max-shards must be positive (got 0)");
    CHECK_USER(!(o.resume && o.overwrite), "--resume and --overwrite contradict each other: pick one");
    if (o.threads <= 0) o.threads = (int)std::max(1u, std::thread::hardware_concurrency());
    CHECK_USER(o.batch_docs > 0, "--batch-docs must be positive (got %d)", o.batch_docs);
    CHECK_USER(o.progress_interval >= 0, "--progress-interval must be >= 0 seconds (got %g)", o.progress_interval);
}

}  // namespace prep
