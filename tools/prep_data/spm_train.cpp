// prep_data --spm-vocab N: a SentencePiece model trained on the user's own text, so LLaMA training on it needs no
// outside step. A first pass reads the inputs with the same reader and workers as the tokenizing pass (so the
// documents are the same ones: JSON field, --doc-sep, --owt-clean), keeps the lines of the training documents in
// input order, and hands them to libsentencepiece's trainer (sentencepiece_trainer.h). The ids are T5's: pad 0,
// EOS 1, unk 2, no BOS (what data/spm_tokenizer.h and the trainers expect).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>  // atoi
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/files.h"  // write_file_atomic
#include "common/error.h"
#include "common/strings.h"  // with_commas
#include "data/tokenizer.h"
#include "tools/prep_data/prep_data.h"

#if PRAC_HAVE_SENTENCEPIECE
#include <sentencepiece_trainer.h>
#endif

namespace prep {
namespace {

// SentencePiece's trainer threads, whatever --threads says: its model depends on their number
constexpr int SPM_TRAIN_THREADS = 16;

// The collecting pass encodes nothing; the Encoder still wants a tokenizer.
struct NoTokenizer : Tokenizer {
    void encode(std::string_view, std::vector<uint32_t>&) const override {}
    std::string decode(const uint32_t*, size_t) const override { return ""; }
    int vocab_size() const override { return 1; }
    uint32_t eos_id() const override { return 0; }
    std::string eos_text() const override { return ""; }
    int kind() const override { return 0; }
    std::string name() const override { return "none"; }
};

// SentencePiece's trainer leaves out a sentence longer than its max_sentence_length (bytes), with only a log line:
// a longer line is cut into pieces of at most this many bytes, each at the last space or tab before the limit (at a
// character boundary where there is none), so that all of the text counts.
constexpr size_t SPM_MAX_LINE = 1000000;

// [p, e) of `t` as lines of at most `limit` bytes (see SPM_MAX_LINE), appended to `lines` while fewer than `cap`
void add_line_pieces(const std::string& t, size_t p, size_t e, size_t limit, int64_t cap,
                     std::vector<std::string>& lines) {
    while (p < e && (int64_t)lines.size() < cap) {
        size_t cut = e;
        if (e - p > limit) {
            size_t space = p + limit;  // the last space or tab after p, which starts the next piece
            while (space > p && t[space] != ' ' && t[space] != '\t') space--;
            cut = p + limit;
            if (space > p) cut = space;
            else
                while (cut > p + 1 && ((unsigned char)t[cut] & 0xC0) == 0x80) cut--;  // not inside a UTF-8 sequence
        }
        lines.emplace_back(t, p, cut - p);
        p = cut;
    }
}

// The lines of the training documents (empty lines dropped; longer than SPM_MAX_LINE: cut), in input order, at most
// `cap`.
std::vector<std::string> training_lines(const Options& o, const std::vector<InputFile>& files, int64_t cap,
                                        int64_t* docs) {
    NoTokenizer none;
    Encoder enc{o, none, Layout{}};
    enc.collect_text = true;
    Counters ctr;
    Reader rd(o, files, ctr);
    std::vector<std::string> lines;
    *docs = 0;
    Pipeline pipe(
        o.threads, 2 * o.threads + 2, [&](Batch& b) { enc.process(b); }, [&](Pipeline& p) { rd.run(p); });
    while ((int64_t)lines.size() < cap) {
        bool timed_out;
        auto b = pipe.next(1.0, &timed_out);
        if (timed_out) continue;
        if (!b) break;
        if (!b->error.empty()) throw UserError(b->error);
        for (size_t j = 0; j < b->texts.size() && (int64_t)lines.size() < cap; j++) {
            if (b->recs[j].split != TRAIN || b->texts[j].empty()) continue;
            (*docs)++;
            const std::string& t = b->texts[j];
            for (size_t p = 0; p < t.size() && (int64_t)lines.size() < cap;) {
                size_t e = t.find('\n', p);
                if (e == std::string::npos) e = t.size();
                add_line_pieces(t, p, e, SPM_MAX_LINE, cap, lines);
                p = e + 1;
            }
        }
    }
    return lines;
}

#if PRAC_HAVE_SENTENCEPIECE
struct LinesIterator : sentencepiece::SentenceIterator {
    const std::vector<std::string>& lines;
    size_t i = 0;
    explicit LinesIterator(const std::vector<std::string>& l) : lines(l) {}
    bool done() const override { return i >= lines.size(); }
    void Next() override { i++; }
    const std::string& value() const override { return lines[i]; }
    sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }
};
#endif

}  // namespace

void train_spm_model(const Options& o, const std::vector<InputFile>& files, const std::string& model_path) {
#if PRAC_HAVE_SENTENCEPIECE
    int64_t docs = 0;
    std::vector<std::string> lines = training_lines(o, files, o.spm_train_lines, &docs);
    size_t bytes = 0;
    for (auto& l : lines) bytes += l.size();
    CHECK_USER(!lines.empty(), "--spm-vocab: the training documents hold no text to train a tokenizer on\n"
               "---> HINT: check the --input files, --text-field and --doc-sep");
    if (!o.quiet)
        std::fprintf(stderr, "training a SentencePiece model (unigram, %d pieces, T5 ids: pad 0, EOS 1, unk 2) on "
                     "%s lines (%s bytes) of %s training documents%s...\n", o.spm_vocab,
                     with_commas((long long)lines.size()).c_str(), with_commas((long long)bytes).c_str(),
                     with_commas(docs).c_str(),
                     (int64_t)lines.size() >= o.spm_train_lines ? " (the first --spm-train-lines)" : "");
    std::unordered_map<std::string, std::string> args = {
        {"model_type", "unigram"}, {"vocab_size", std::to_string(o.spm_vocab)},
        {"pad_id", "0"}, {"eos_id", "1"}, {"unk_id", "2"}, {"bos_id", "-1"},
        {"pad_piece", "<pad>"}, {"eos_piece", "</s>"}, {"unk_piece", "<unk>"},
        // every line counts, in input order, none skipped for length (training_lines cut the longer ones): the model
        // depends on the input alone
        {"input_sentence_size", "0"}, {"shuffle_input_sentence", "false"},
        {"max_sentence_length", std::to_string(SPM_MAX_LINE)},
        // a fixed count, not --threads: the trainer sums each thread's share of the statistics, so its model
        // depended on the machine's cores (on a 2-core machine 16 threads cost little)
        {"num_threads", std::to_string(SPM_TRAIN_THREADS)}, {"minloglevel", o.quiet ? "2" : "1"}};
    std::string proto;
    LinesIterator it(lines);
    auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &proto);
    if (!status.ok()) {
        std::string m = status.ToString();
        // SentencePiece's two vocabulary complaints: more distinct characters than pieces ("... smaller than
        // required_chars. A vs B. Increase vocab_size ..."), or more pieces than the text can give ("too high")
        // ("Vocabulary size is too high ... <= N": an N below the smallest --spm-vocab, 8, leaves more text)
        const size_t le = m.find("<= ");
        const bool below_min = le != std::string::npos && std::atoi(m.c_str() + le + 3) < 8;
        const char* hint = m.find("Increase vocab_size") != std::string::npos
                               ? "the text has more distinct characters than that many pieces: use a larger "
                                 "--spm-vocab (at least the second number it names)"
                           : m.find("Vocabulary size") != std::string::npos
                               ? below_min ? "the text is too small for a model: give more text (--spm-vocab is at "
                                             "least 8)"
                                           : "the text is too small for that many pieces: use a smaller --spm-vocab "
                                             "(the number it names)"
                               : "check the input text";
        fail("--spm-vocab %d: SentencePiece could not train a model: %s\n---> HINT: %s", o.spm_vocab, m.c_str(), hint);
    }
    write_file_atomic(model_path, proto);
#else
    (void)files;
    fail("--spm-vocab needs SentencePiece, which this build lacks (model %s not written)\n---> HINT: apt-get install "
         "libsentencepiece-dev, then re-run cmake and rebuild", model_path.c_str());
#endif
}

}  // namespace prep
