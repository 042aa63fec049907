// A user's own text from start to finish, through the binaries (./prep_data, ./train_gpt2, ./train_llama) on real
// files: the tokenizer travels with the shards (header and PREFIX_prep.json name it, by SHA-256 against
// coreutils' sha256sum), shards of the other model family are refused in both directions, --sample decodes with the
// model that made the shards or refuses, prep_data trains a SentencePiece model on the text (--spm-vocab), its
// `train with:` line runs when pasted into a shell, crafted shard headers are refused with the field named, and
// --save writes a complete Hugging Face directory whose GPT-2 tokenizer files, read by an independent Python BPE
// (test/reference/check_hf_export.py), reproduce tiktoken's ids on golden cases (data/gpt2/TestPlans.txt).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/spm_tokenizer.h"
#include "test/run_shell.h"
#include "common/error.h"
#include "test/test_files.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string ROOT = PRAC_SOURCE_DIR;

std::string q(const std::string& s) {
    std::string r = "'";
    for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return r + "'";
}

struct ShellRun {
    int rc;
    std::string out;
};

// A shell command run from the repository root (where the binaries are), 2 threads, under a timeout.
ShellRun sh(const std::string& cmd, int timeout_s = 240) {
    ShellRun r;
    r.rc = run_shell("cd " + q(ROOT) + " && OMP_NUM_THREADS=2 timeout -k 5 " + std::to_string(timeout_s) +
                         " bash -c " + q(cmd) + " < /dev/null",
                     &r.out);
    return r;
}

// coreutils' digest, the independent reference for the hashes we record
std::string sha256sum(const std::string& path) {
    ShellRun r = sh("sha256sum " + q(path));
    EXPECT_EQ(r.rc, 0) << r.out;
    return r.out.substr(0, 64);
}

std::vector<int32_t> header_of(const std::string& path) {
    std::string b = read_bytes(path);
    std::vector<int32_t> h(256, 0);
    if (b.size() >= 1024) std::memcpy(h.data(), b.data(), 1024);
    return h;
}

// The header's 64-bit hash, as 16 hex digits (header[10] high word, header[9] low word).
std::string header_hash_hex(const std::vector<int32_t>& h) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%08x%08x", (uint32_t)h[10], (uint32_t)h[9]);
    return buf;
}

std::string header_name(const std::vector<int32_t>& h) { return std::string((const char*)(h.data() + 16)); }

// The first `bytes` of Pride and Prejudice, cut at a paragraph end: a user's "own text" of a few thousand tokens.
std::string own_text(const std::string& dir, size_t bytes = 60000) {
    std::string t = read_bytes(ROOT + "/data/austen/pride-and-prejudice.txt");
    size_t cut = t.find("\n\n", bytes);
    std::string path = dir + "/my book.txt";  // a space: the printed command must quote it
    write_bytes(path, t.substr(0, cut == std::string::npos ? t.size() : cut + 1));
    return path;
}

// The command prep_data printed after "train with: ".
std::string train_line(const std::string& out) {
    size_t p = out.find("train with: ");
    if (p == std::string::npos) return "";
    size_t e = out.find('\n', p);
    return out.substr(p + 12, e - p - 12);
}

// The printed line's --seq-len (the trainer's default if it names none) gives each split of the shards at PREFIX at
// least one batch of the trainer's default --batch-size 4 (the tests below add their own tiny settings): windows of
// T + 1 tokens at stride T, counted from the shards' headers (header[2]: tokens).
void expect_a_batch_in_each_split(const std::string& line, const std::string& prefix, int64_t default_T) {
    size_t at = line.find("--seq-len ");
    const int64_t T = at == std::string::npos ? default_T : std::stoll(line.substr(at + 10));
    for (const char* split : {"train", "val"}) {
        int64_t windows = 0;
        for (int k = 0; fs::exists(format("%s_%s_%06d.bin", prefix.c_str(), split, k)); k++) {
            int64_t tokens = header_of(format("%s_%s_%06d.bin", prefix.c_str(), split, k))[2];
            windows += tokens >= T + 1 ? (tokens - 1) / T : 0;
        }
        EXPECT_GE(windows, 4) << split << " at --seq-len " << T << ": " << line;
    }
}

const std::string TINY_GPT2 = " --device cpu --model gpt2-tiny --seq-len 64 --batch-size 2 --steps 2 --eval-tokens 256";
const std::string TINY_LLAMA =
    " --device cpu --model llama-tiny --seq-len 64 --batch-size 2 --steps 2 --eval-tokens 256";
const std::string BUILTIN = "data/builtin/";

using OwnData = TmpDirTest;

// prep_data records the tokenizer in every shard header and in PREFIX_prep.json: its file name and SHA-256; the
// built-in shards carry the same fields.
TEST_F(OwnData, ShardsAndPrepJsonNameTheTokenizer) {
    std::string text = own_text(dir);
    ShellRun r = sh("./prep_data --tokenizer gpt2 --quiet --input " + q(text) + " --out " + q(dir + "/g"));
    ASSERT_EQ(r.rc, 0) << r.out;
    std::string ranks_sha = sha256sum(ROOT + "/data/gpt2/r50k_base.tiktoken");
    for (const char* split : {"train", "val"}) {
        auto h = header_of(dir + "/g_" + split + "_000000.bin");
        EXPECT_EQ(h[6], 1) << split;
        EXPECT_EQ(header_hash_hex(h), ranks_sha.substr(0, 16)) << split;
        EXPECT_EQ(header_name(h), "r50k_base.tiktoken") << split;
    }
    json st = json::parse(read_bytes(dir + "/g_prep.json"));
    EXPECT_EQ(st["config"]["tokenizer_sha256"], ranks_sha);
    EXPECT_EQ(st["config"]["tokenizer_name"], "r50k_base.tiktoken");

    // a SentencePiece model given by the user travels with the shards: a copy next to them, named by hash
    std::string model = dir + "/user.model";
    fs::copy_file(ROOT + "/data/builtin/austen_spm8k.model", model);
    r = sh("./prep_data --tokenizer spm --spm-model " + q(model) + " --quiet --input " + q(text) + " --out " +
           q(dir + "/s"));
    ASSERT_EQ(r.rc, 0) << r.out;
    auto h = header_of(dir + "/s_train_000000.bin");
    EXPECT_EQ(h[6], 2);
    EXPECT_EQ(header_hash_hex(h), sha256sum(model).substr(0, 16));
    EXPECT_EQ(header_name(h), "user.model");
    EXPECT_EQ(sha256sum(dir + "/s_tokenizer.model"), sha256sum(model));

    for (const char* f : {"austen_gpt2_train.bin", "austen_gpt2_val.bin"})
        EXPECT_EQ(header_hash_hex(header_of(ROOT + "/data/builtin/" + f)), ranks_sha.substr(0, 16)) << f;
    for (const char* f : {"austen_llama_train.bin", "austen_llama_val.bin"})
        EXPECT_EQ(header_hash_hex(header_of(ROOT + "/data/builtin/" + f)),
                  sha256sum(ROOT + "/data/builtin/austen_spm8k.model").substr(0, 16))
            << f;
}

// SentencePiece shards into train_gpt2 (it trained on them before), GPT-2 shards into train_llama: both refused
// before training, naming the tokenizer and the other trainer.
TEST_F(OwnData, OtherFamilysShardsAreRefusedBothWays) {
    ShellRun r = sh("./train_gpt2 --train-data " + BUILTIN + "austen_llama_train.bin --val-data " + BUILTIN +
               "austen_llama_val.bin" + TINY_GPT2);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("made with the SentencePiece tokenizer (austen_spm8k.model), 8000 ids"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("train these shards with train_llama"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("step "), std::string::npos) << "trained anyway:\n" << r.out;
    // a header whose vocabulary size is 0 (unknown): not "0 ids"
    for (const char* split : {"train", "val"}) {
        std::string b = read_bytes(BUILTIN + "austen_llama_" + split + ".bin");
        ((int32_t*)b.data())[3] = 0;
        write_bytes(dir + "/v0_" + split + ".bin", b);
    }
    r = sh("./train_gpt2 --train-data " + q(dir + "/v0_train.bin") + " --val-data " + q(dir + "/v0_val.bin") + TINY_GPT2);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("(austen_spm8k.model), its id count not recorded, but train_gpt2"), std::string::npos) << r.out;

    r = sh("./train_llama --train-data " + BUILTIN + "austen_gpt2_train.bin --val-data " + BUILTIN +
           "austen_gpt2_val.bin" + TINY_LLAMA);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("made with the GPT-2 BPE tokenizer (r50k_base.tiktoken)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("train these shards with train_gpt2"), std::string::npos) << r.out;

    // train and val from different tokenizers of one family: refused too
    std::string text = own_text(dir);
    ASSERT_EQ(sh("./prep_data --spm-vocab 300 --threads 2 --quiet --input " + q(text) + " --out " + q(dir + "/s")).rc,
              0);
    r = sh("./train_llama --train-data " + q(dir + "/s_train_*.bin") + " --val-data " + BUILTIN +
           "austen_llama_val.bin" + TINY_LLAMA);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("must come from the same tokenizer"), std::string::npos) << r.out;
    // two tokenizers among one pattern's training shards: said of that pattern, not of train and validation
    fs::copy_file(ROOT + "/" + BUILTIN + "austen_llama_train.bin", dir + "/s_train_zz.bin");
    r = sh("./train_llama --train-data " + q(dir + "/s_train_*.bin") + " --val-data " + q(dir + "/s_val_*.bin") +
           TINY_LLAMA);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("the shards \"" + dir + "/s_train_*.bin\" matches must all come from one tokenizer"),
              std::string::npos) << r.out;
}

// prep_data --spm-vocab trains a SentencePiece model on the text (T5's ids); the printed `train with:` line runs as
// pasted (plus a tiny model for speed); --sample decodes with that model, found next to the shards by its hash; a
// different --spm-model is refused, and so is --sample when the model is gone (it decoded with the built-in model
// before: garbage, exit 0).
TEST_F(OwnData, OwnSentencePieceModelFromTextToSample) {
    std::string text = own_text(dir);
    ShellRun r = sh("./prep_data --spm-vocab 600 --threads 2 --input " + q(text) + " --out " + q(dir + "/mine/llama"));
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("the blank-line separated paragraphs of the one text file"), std::string::npos) << r.out;
    std::string model = dir + "/mine/llama_tokenizer.model";
    ASSERT_TRUE(fs::exists(model));
    SpmTokenizer tok(model);  // T5's ids
    EXPECT_EQ(tok.vocab_size(), 600);
    EXPECT_EQ(tok.pad_id(), 0);
    EXPECT_EQ((int)tok.eos_id(), 1);
    EXPECT_EQ(tok.unk_id(), 2);
    EXPECT_EQ(tok.bos_id(), -1);
    auto h = header_of(dir + "/mine/llama_val_000000.bin");  // a validation split by default
    EXPECT_EQ(h[3], 600);
    EXPECT_EQ(header_hash_hex(h), sha256sum(model).substr(0, 16));

    std::string line = train_line(r.out);
    ASSERT_EQ(line.rfind("./train_llama ", 0), 0u) << r.out;
    EXPECT_NE(line.find("--val-data"), std::string::npos) << line;
    expect_a_batch_in_each_split(line, dir + "/mine/llama", 256);
    ShellRun t = sh(line + TINY_LLAMA + " --sample 12");
    ASSERT_EQ(t.rc, 0) << line << "\n" << t.out;
    EXPECT_NE(t.out.find("sample (12 tokens)"), std::string::npos) << t.out;

    ShellRun wrong = sh(line + TINY_LLAMA + " --sample 12 --spm-model " + BUILTIN + "austen_spm8k.model");
    EXPECT_EQ(wrong.rc, 1) << wrong.out;
    EXPECT_NE(wrong.out.find("is not the SentencePiece model that made the shards"), std::string::npos) << wrong.out;

    fs::rename(model, dir + "/elsewhere.bin");
    ShellRun gone = sh(line + TINY_LLAMA + " --sample 12");
    EXPECT_EQ(gone.rc, 1) << gone.out;
    EXPECT_NE(gone.out.find("--sample needs the SentencePiece model that made the shards"), std::string::npos)
        << gone.out;
    EXPECT_EQ(gone.out.find("step "), std::string::npos) << "refused only after training:\n" << gone.out;
    // training alone does not need it
    EXPECT_EQ(sh(line + TINY_LLAMA).rc, 0);
}

// GPT-2 on one's own text: one file becomes paragraphs (a stated default), a validation split by default, and the
// printed line, pasted into a shell, trains (the --out prefix holds a space and a quote).
TEST_F(OwnData, PastedGpt2TrainLineWorks) {
    std::string text = own_text(dir);
    std::string out = dir + "/it's mine/gpt2";
    ShellRun r = sh("./prep_data --tokenizer gpt2 --input " + q(text) + " --out " + q(out));
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(fs::exists(out + "_val_000000.bin")) << r.out;
    std::string line = train_line(r.out);
    ASSERT_EQ(line.rfind("./train_gpt2 ", 0), 0u) << r.out;
    expect_a_batch_in_each_split(line, out, 1024);
    ShellRun t = sh(line + TINY_GPT2);
    EXPECT_EQ(t.rc, 0) << line << "\n" << t.out;
    EXPECT_NE(t.out.find("final | val loss"), std::string::npos) << t.out;

    // one document per file when asked: said, with the cure
    r = sh("./prep_data --tokenizer gpt2 --doc-sep file --no-val --input " + q(text) + " --out " + q(dir + "/one"));
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("warning: the training split is a single document"), std::string::npos) << r.out;
}

// --layout rows: a row is a sample, and a split of fewer rows than the trainer's default batch of 4 gets the printed
// command a --batch-size it has (the line failed at once: "3 samples ... fewer than one step needs (1*4)").
TEST_F(OwnData, PastedRowsTrainLineWorksWithFewRows) {
    std::string text = own_text(dir, 20000);
    std::string out = dir + "/rows";
    ShellRun r = sh("./prep_data --tokenizer gpt2 --layout rows --row-len 64 --pad-id 50256 --val-docs 3 --input " +
                    q(text) + " --out " + q(out));
    ASSERT_EQ(r.rc, 0) << r.out;
    std::string line = train_line(r.out);
    EXPECT_NE(line.find(" --seq-len 64 --batch-size 3"), std::string::npos) << r.out;
    ShellRun t = sh(line + " --device cpu --model gpt2-tiny --steps 2 --eval-tokens 64");
    EXPECT_EQ(t.rc, 0) << line << "\n" << t.out;
}

// Shards of an older prep_data (or llm.c's) record no tokenizer file: they still train; --sample needs --spm-model
// then (the user's word, said in a note), and without it the run stops before training, saying how to fix it.
TEST_F(OwnData, OldShardsWithoutTokenizerFields) {
    for (const char* split : {"train", "val"}) {
        std::string b = read_bytes(ROOT + "/data/builtin/austen_llama_" + split + ".bin");
        std::memset(b.data() + 36, 0, 8);     // header[9..10]: the hash
        std::memset(b.data() + 64, 0, 256);   // header[16..79]: the name
        write_bytes(dir + "/old_" + split + ".bin", b);
    }
    std::string data = " --train-data " + q(dir + "/old_train.bin") + " --val-data " + q(dir + "/old_val.bin");
    ShellRun r = sh("./train_llama" + data + TINY_LLAMA + " --sample 8");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("does not record which SentencePiece model made it"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("pass --spm-model FILE"), std::string::npos) << r.out;
    r = sh("./train_llama" + data + TINY_LLAMA + " --sample 8 --spm-model " + BUILTIN + "austen_spm8k.model");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("does not record its tokenizer; decoding with --spm-model"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("sample (8 tokens)"), std::string::npos) << r.out;
    // a directory as --spm-model is said as one (it was "no such file")
    r = sh("./train_llama" + data + TINY_LLAMA + " --sample 8 --spm-model " + q(dir));
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("--spm-model " + dir + ": a directory, not a file"), std::string::npos) << r.out;
    // a --spm-model that is no SentencePiece model is refused before training (--save failed after it, and --sample
    // printed ids with exit 0)
    for (const std::string use : {std::string(" --sample 8"), " --save " + q(dir + "/out")}) {
        r = sh("./train_llama" + data + TINY_LLAMA + use + " --spm-model " + q(ROOT + "/README.md"));
        EXPECT_EQ(r.rc, 1) << use << ": " << r.out;
        EXPECT_NE(r.out.find("README.md is not a valid SentencePiece model"), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("| loss "), std::string::npos) << r.out;
    }
}

// --init-from a directory: the model is its config.json's (none, and no --model, is refused, naming it: the default
// model's shapes failed on the first tensor instead), and its SentencePiece model, as --save names it (spiece.model)
// or Hugging Face's LLaMA directories do (tokenizer.model), must be the one that made the data.
TEST_F(OwnData, InitFromDirectoryChecksItsConfigAndTokenizer) {
    ASSERT_EQ(sh("./prep_data --spm-vocab 300 --threads 2 --quiet --input " + q(own_text(dir)) + " --out " +
                 q(dir + "/s")).rc, 0);
    std::string own = " --train-data " + q(dir + "/s_train_*.bin") + " --val-data " + q(dir + "/s_val_*.bin");
    ShellRun r = sh("./train_llama" + own + TINY_LLAMA + " --save " + q(dir + "/m"));
    ASSERT_EQ(r.rc, 0) << r.out;
    // shards moved away from their PREFIX_tokenizer.model decode --sample with the model's own spiece.model (the
    // shards' hash vouches for it; it was not looked for: "no file with that hash")
    fs::create_directories(dir + "/moved");
    fs::copy_file(dir + "/s_val_000000.bin", dir + "/moved/v.bin");
    r = sh("./train_llama --device cpu --seq-len 64 --batch-size 2 --eval-tokens 256 --eval-only --sample 3 "
           "--val-data " + q(dir + "/moved/v.bin") + " --init-from " + q(dir + "/m"));
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("sample (3 tokens):"), std::string::npos) << r.out;
    const std::string builtin_eval = " --device cpu --seq-len 64 --batch-size 2 --eval-tokens 256 --eval-only "
                                     "--val-data " + BUILTIN + "austen_llama_val.bin --init-from " + q(dir + "/m");
    for (const char* name : {"spiece.model", "tokenizer.model"}) {
        if (std::string(name) == "tokenizer.model") fs::rename(dir + "/m/spiece.model", dir + "/m/tokenizer.model");
        r = sh("./train_llama" + builtin_eval);
        EXPECT_EQ(r.rc, 1) << name << ": " << r.out;
        EXPECT_NE(r.out.find("holds a model trained with the SentencePiece model " + dir + "/m/" + name),
                  std::string::npos) << r.out;
        // --init-from naming the weights file: the tokenizer beside it counts (it was not looked for: exit 0)
        r = sh("./train_llama" + builtin_eval + "/model.safetensors --model " + q(dir + "/m/config.json"));
        EXPECT_EQ(r.rc, 1) << name << ": " << r.out;
        EXPECT_NE(r.out.find("holds a model trained with the SentencePiece model " + dir + "/m/" + name),
                  std::string::npos) << r.out;
    }
    fs::remove(dir + "/m/config.json");
    r = sh("./train_llama" + own + " --device cpu --seq-len 64 --batch-size 2 --eval-tokens 256 --eval-only "
           "--init-from " + q(dir + "/m"));
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("--init-from " + dir + "/m has no config.json"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("pass --model NAME"), std::string::npos) << r.out;
    // the weights file alone, likewise (the default model llama-130m was taken, and failed on a tensor's shape)
    r = sh("./train_llama" + own + " --device cpu --seq-len 64 --batch-size 2 --eval-tokens 256 --eval-only "
           "--init-from " + q(dir + "/m/model.safetensors"));
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("--init-from " + dir + "/m/model.safetensors has no config.json beside it"),
              std::string::npos) << r.out;
    r = sh("./train_llama" + own + " --model llama-tiny --device cpu --seq-len 64 --batch-size 2 --eval-tokens 256 "
           "--eval-only --init-from " + q(dir + "/m"));
    EXPECT_EQ(r.rc, 0) << r.out;  // --model says which model the weights are
}

// The same file as training and validation data is said (prep_data refuses such a split; a run may mean it)
TEST_F(OwnData, ValidationFilesThatAreAlsoTrainingDataAreSaid) {
    ShellRun r = sh("./train_gpt2 --train-data '" + BUILTIN + "austen_gpt2_*.bin' --val-data ./" + BUILTIN +
                    "austen_gpt2_val.bin" + TINY_GPT2);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("warning: 1 of the 1 validation file(s) are also training data (./" + BUILTIN +
                         "austen_gpt2_val.bin)"), std::string::npos) << r.out;
    r = sh("./train_gpt2 --train-data " + BUILTIN + "austen_gpt2_train.bin --val-data " + BUILTIN +
           "austen_gpt2_val.bin" + TINY_GPT2);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(r.out.find("also training data"), std::string::npos) << r.out;
}

// One file under two names (hard links) is one file: as training and validation data it is said (the warning compared
// paths), and a pattern matching both names is refused (its tokens were read twice in each epoch, without a word)
TEST_F(OwnData, HardLinksToOneDataFileAreOneFile) {
    fs::copy_file(BUILTIN + "austen_gpt2_val.bin", dir + "/v.bin");
    fs::create_hard_link(dir + "/v.bin", dir + "/w.bin");
    ShellRun r = sh("./train_gpt2 --train-data " + q(dir + "/v.bin") + " --val-data " + q(dir + "/w.bin") + TINY_GPT2);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("warning: 1 of the 1 validation file(s) are also training data (" + dir + "/w.bin)"),
              std::string::npos) << r.out;
    r = sh("./train_gpt2 --train-data " + q(dir + "/[vw].bin") + " --val-data " + BUILTIN + "austen_gpt2_val.bin" +
           TINY_GPT2);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("matches one file twice: " + dir + "/v.bin and " + dir + "/w.bin are hard or symbolic links "
                         "to it"), std::string::npos) << r.out;
}

// Training and validation shards of other layouts (flat and rows) are said: the validation loss measures other samples
// than the training sees (it was silent); shards of one layout are not
TEST_F(OwnData, ValidationShardsOfAnotherLayoutAreSaid) {
    ShellRun r = sh("./prep_data --tokenizer gpt2 --layout rows --row-len 64 --pad-id 50256 --val-docs 8 --quiet "
                    "--input " + q(own_text(dir)) + " --out " + q(dir + "/rows"));
    ASSERT_EQ(r.rc, 0) << r.out;
    r = sh("./train_gpt2 --train-data " + BUILTIN + "austen_gpt2_train.bin --val-data " + q(dir + "/rows_val_*.bin") +
           TINY_GPT2);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("warning: the validation shards are rows of 64 tokens padded with 50256, the training shards "
                         "flat: the validation loss measures other samples"), std::string::npos) << r.out;
    r = sh("./train_gpt2 --train-data " + q(dir + "/rows_train_*.bin") + " --val-data " + q(dir + "/rows_val_*.bin") +
           TINY_GPT2);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(r.out.find("validation shards are"), std::string::npos) << r.out;
}

// A line longer than SentencePiece's sentence limit (1 MB) is cut into pieces for --spm-vocab's training, not left
// out: a 1.2 MB paragraph of Greek words beside English text, and the model knows the Greek letters (it encoded them
// as <unk>, with exit 0).
TEST_F(OwnData, SpmVocabTrainsOnVeryLongLines) {
    std::string greek;
    while (greek.size() < 1200000) greek += "\u03b1\u03b2\u03b3\u03b4 \u03b5\u03b6\u03b7\u03b8 \u03b9\u03ba\u03bb\u03bc ";
    write_bytes(dir + "/long.txt", read_bytes(own_text(dir)) + "\n" + greek + "\n");
    ShellRun r = sh("./prep_data --spm-vocab 300 --threads 2 --quiet --no-val --input " + q(dir + "/long.txt") +
                    " --out " + q(dir + "/g"));
    ASSERT_EQ(r.rc, 0) << r.out;
    SpmTokenizer tok(dir + "/g_tokenizer.model");
    std::vector<uint32_t> ids;
    tok.encode("\u03b1\u03b2\u03b3\u03b4 \u03b9\u03ba\u03bb\u03bc", ids);
    ASSERT_FALSE(ids.empty());
    for (uint32_t id : ids) EXPECT_NE((int)id, tok.unk_id()) << "a Greek letter is <unk>";
}

// --spm-vocab and --resume: the interrupted run's model is reused (not trained again), and the result equals an
// uninterrupted run's (the shards differ only in the recorded model file name, which carries the prefix).
TEST_F(OwnData, SpmVocabResumes) {
    std::string text = own_text(dir);
    std::string args = " --spm-vocab 400 --threads 2 --quiet --shard-tokens 4000 --input " + q(text);
    ASSERT_EQ(sh("./prep_data" + args + " --out " + q(dir + "/full")).rc, 0);
    ASSERT_EQ(sh("./prep_data" + args + " --max-shards 2 --out " + q(dir + "/part")).rc, 0);
    ShellRun r = sh("./prep_data" + args + " --resume --out " + q(dir + "/part"));
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(read_bytes(dir + "/full_tokenizer.model"), read_bytes(dir + "/part_tokenizer.model"));
    int n = 0;
    for (const char* f : {"_train_000000.bin", "_train_000003.bin", "_val_000000.bin"}) {
        std::string a = read_bytes(dir + "/full" + f), b = read_bytes(dir + "/part" + f);
        ASSERT_EQ(a.size(), b.size()) << f;
        EXPECT_EQ(a.substr(0, 64), b.substr(0, 64)) << f;
        EXPECT_EQ(a.substr(320), b.substr(320)) << f;
        n++;
    }
    EXPECT_EQ(n, 3);
}

// The trained model and the shards do not depend on --threads (the trainer's own thread count made another model on
// a machine with other cores).
TEST_F(OwnData, SpmVocabDoesNotDependOnThreads) {
    std::string text = own_text(dir);
    for (const char* t : {"1", "3"})
        ASSERT_EQ(sh("./prep_data --spm-vocab 400 --quiet --threads " + std::string(t) + " --input " + q(text) +
                     " --out " + q(dir + "/t" + t + "/x")).rc, 0);
    for (const char* f : {"_tokenizer.model", "_train_000000.bin", "_val_000000.bin"})
        EXPECT_TRUE(read_bytes(dir + "/t1/x" + f) == read_bytes(dir + "/t3/x" + f)) << f;
}

// --spm-vocab's bad values: more pieces than the text holds, or fewer than its distinct characters (libsentencepiece's
// limits, passed on with the cure for each), out of range, or together with --spm-model.
TEST_F(OwnData, SpmVocabBadValues) {
    std::string text = own_text(dir, 20000);
    ShellRun r = sh("./prep_data --spm-vocab 30000 --threads 2 --quiet --input " + q(text) + " --out " + q(dir + "/a"));
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("Vocabulary size too high"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("use a smaller --spm-vocab"), std::string::npos) << r.out;
    // more distinct characters than pieces (600 CJK characters, each as common as the next, for 300 pieces):
    // SentencePiece asks for a larger vocabulary, and so does the hint
    std::string many;
    for (int rep = 0; rep < 4; rep++)
        for (uint32_t c = 0x4E00; c < 0x4E00 + 600; c++) {
            many += {(char)(0xE0 | (c >> 12)), (char)(0x80 | ((c >> 6) & 0x3F)), (char)(0x80 | (c & 0x3F))};
            if (c % 7 == 0) many += c % 49 == 0 ? "\n\n" : " ";
        }
    write_bytes(dir + "/many.txt", many);
    r = sh("./prep_data --spm-vocab 300 --threads 2 --quiet --input " + q(dir + "/many.txt") + " --out " +
           q(dir + "/m"));
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("use a larger --spm-vocab"), std::string::npos) << r.out;
    r = sh("./prep_data --spm-vocab 70000 --input " + q(text) + " --out " + q(dir + "/b"));
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("8..65536 pieces"), std::string::npos) << r.out;
    r = sh("./prep_data --spm-vocab 500 --spm-model " + BUILTIN + "austen_spm8k.model --input " + q(text) + " --out " +
           q(dir + "/c"));
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("pick one"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir + "/a_train_000000.bin"));
}

// Every header field is range-checked where it is read; each crafted header is refused naming its problem.
TEST_F(OwnData, CraftedHeadersAreRefused) {
    std::string good = read_bytes(ROOT + "/data/builtin/austen_gpt2_val.bin");
    struct Case {
        const char* what;
        std::vector<std::pair<int, int32_t>> ints;
        const char* message;
    };
    const int32_t H = (int32_t)0x80000000;
    std::vector<Case> cases = {
        {"negative token count", {{2, -5}}, "negative"},
        {"token count past the file", {{2, 0x7FFFFFFF}}, "file too short"},
        {"vocab past uint16", {{3, 70000}}, "outside 0..65536"},
        {"negative vocab", {{3, -1}}, "outside 0..65536"},
        {"unknown layout", {{4, 7}}, "unknown layout 7"},
        {"row length overflow", {{4, 1}, {5, H}}, "row length in 2.."},
        {"huge row length", {{4, 1}, {5, 1 << 30}}, "row length in 2.."},
        {"tokenizer kind", {{6, 9}}, "tokenizer kind 9"},
        {"flat pad id", {{7, 3}}, "pad id header[7]=3"},
        {"EOS past vocab", {{8, 60000}}, "EOS id 60000 is outside the vocabulary (size 50257)"},
        // an unknown (0) vocabulary: the uint16 range, not "the vocabulary (size 0)"
        {"EOS past uint16", {{3, 0}, {8, 70000}}, "EOS id 70000 is outside the token range 0..65535"},
        {"negative EOS", {{8, -2}}, "EOS id -2"},
        {"hash without name", {{16, 0}, {17, 0}, {18, 0}, {19, 0}, {20, 0}}, "tokenizer fields disagree"},
        {"name without NUL", {}, "no terminating NUL"},
        {"control byte in name", {{16, 0x0A414141}}, "control character"},
        {"reserved int", {{200, 1}}, "header int 200 is 1"},
        {"reserved int 11", {{11, -1}}, "header int 11 is -1"},
    };
    for (const Case& c : cases) {
        std::string b = good;
        auto* h = (int32_t*)b.data();
        for (auto [i, v] : c.ints) h[i] = v;
        if (std::string(c.what) == "name without NUL") std::memset(b.data() + 64, 'a', 256);
        std::string path = dir + "/crafted.bin";
        write_bytes(path, b);
        ShellRun r = sh("./train_gpt2 --train-data " + q(path) + " --val-data " + q(path) + TINY_GPT2, 60);
        EXPECT_EQ(r.rc, 1) << c.what << ":\n" << r.out;
        // (the flag first, as the loader's errors name it)
        EXPECT_NE(r.out.find("train_gpt2: error: --train-data: " + path), std::string::npos) << c.what << ":\n" << r.out;
        EXPECT_NE(r.out.find(c.message), std::string::npos) << c.what << ": lacks \"" << c.message << "\":\n" << r.out;
    }
}

// --save: a complete Hugging Face directory. Every file parses; the ids of config.json, generation_config.json and
// the tokenizer files agree; GPT-2's vocab.json + merges.txt, run by an independent Python BPE, give tiktoken's ids
// on the golden cases; LLaMA's spiece.model is the file that made the shards and names the same special pieces.
TEST_F(OwnData, ExportIsACompleteHuggingFaceDirectory) {
    std::string g = dir + "/g";
    ShellRun r = sh("./train_gpt2 --save " + q(g) + TINY_GPT2);
    ASSERT_EQ(r.rc, 0) << r.out;
    for (const char* f : {"model.safetensors", "config.json", "generation_config.json", "vocab.json", "merges.txt",
                          "tokenizer_config.json", "special_tokens_map.json"})
        EXPECT_TRUE(fs::exists(g + "/" + f)) << f;
    json cfg = json::parse(read_bytes(g + "/config.json")), gen = json::parse(read_bytes(g + "/generation_config.json"));
    EXPECT_EQ(cfg["eos_token_id"], 50256);
    EXPECT_EQ(cfg["bos_token_id"], 50256);
    EXPECT_EQ(gen["eos_token_id"], 50256);
    ShellRun py = sh("python3 test/reference/check_hf_export.py gpt2 " + q(g) + " data/gpt2/TestPlans.txt");
    EXPECT_EQ(py.rc, 0) << py.out;
    EXPECT_NE(py.out.find("golden cases agree"), std::string::npos) << py.out;

    std::string l = dir + "/l";
    r = sh("./train_llama --save " + q(l) + TINY_LLAMA);
    ASSERT_EQ(r.rc, 0) << r.out;
    for (const char* f : {"model.safetensors", "config.json", "generation_config.json", "spiece.model",
                          "tokenizer_config.json", "special_tokens_map.json"})
        EXPECT_TRUE(fs::exists(l + "/" + f)) << f;
    EXPECT_EQ(sha256sum(l + "/spiece.model"), sha256sum(ROOT + "/data/builtin/austen_spm8k.model"));
    SpmTokenizer tok(l + "/spiece.model");
    json lc = json::parse(read_bytes(l + "/config.json")), lg = json::parse(read_bytes(l + "/generation_config.json"));
    json tc = json::parse(read_bytes(l + "/tokenizer_config.json"));
    EXPECT_EQ(lc["eos_token_id"], tok.eos_id());
    EXPECT_EQ(lc["pad_token_id"], tok.pad_id());
    EXPECT_EQ(lg["eos_token_id"], tok.eos_id());
    EXPECT_EQ(tc["eos_token"], tok.piece((int)tok.eos_id()));
    EXPECT_EQ(tc["pad_token"], tok.piece(tok.pad_id()));
    EXPECT_EQ(tc["unk_token"], tok.piece(tok.unk_id()));
    EXPECT_EQ(tc["extra_ids"], 0);  // T5Tokenizer would add 100 ids past the model's vocabulary otherwise
    EXPECT_LE(tok.vocab_size(), lc["vocab_size"].get<int>());
    py = sh("python3 test/reference/check_hf_export.py llama " + q(l));
    EXPECT_EQ(py.rc, 0) << py.out;
}

}  // namespace
