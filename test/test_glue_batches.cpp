// Tests for data/glue_batches.h: GLUE examples encoded with RoBERTa's layout (each task's one or two text fields),
// truncation, batches padded to the longest row or a fixed T with kv_len and labels, the per-epoch shuffle (every
// example once per epoch; the orders uniform by a chi-square test), bit-exact resume from the saved state, and the
// errors bad input gives. The tokenizer is a bytes-only RoBERTa vocabulary (no merges), so every id is computed by
// hand: byte c -> 4 + c, <s> 0, <pad> 1, </s> 2.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "data/glue_batches.h"
#include "test/test_files.h"
#include "test/test_util.h"

#if PRAC_HAVE_PCRE2

namespace {

std::vector<uint32_t> bytes_of(const std::string& s) {
    std::vector<uint32_t> v;
    for (unsigned char c : s) v.push_back(4u + c);
    return v;
}

std::vector<uint32_t> cat(std::initializer_list<std::vector<uint32_t>> parts) {
    std::vector<uint32_t> v;
    for (const auto& p : parts) v.insert(v.end(), p.begin(), p.end());
    return v;
}

const std::vector<uint32_t> S = {0}, E = {2};  // <s>, </s>

struct GlueBatches : TmpDirTest {
    std::unique_ptr<RobertaTokenizer> tok;
    void SetUp() override {
        TmpDirTest::SetUp();
        nlohmann::json vocab = {{"<s>", 0}, {"<pad>", 1}, {"</s>", 2}, {"<unk>", 3}};
        for (int b = 0; b < 256; b++) vocab[gpt2_byte_to_unicode((unsigned char)b)] = 4 + b;
        vocab["<mask>"] = 260;
        write_bytes(file("vocab.json"), vocab.dump());
        write_bytes(file("merges.txt"), "#version: 0.2\n");
        tok = std::make_unique<RobertaTokenizer>(dir);
    }
    // n labeled examples of a single-sentence task, example i of length 1 + i % 5 ("x", "xy", ...) and label i % 2
    std::vector<GlueExample> sst2(int n) {
        std::vector<GlueExample> ex((size_t)n);
        for (int i = 0; i < n; i++) ex[(size_t)i] = {std::string("xyzwv").substr(0, 1 + (size_t)i % 5), "", i % 2};
        return ex;
    }
};

}  // namespace

TEST_F(GlueBatches, EncodesEachTasksTextFields) {
    for (GlueTask task : {GlueTask::COLA, GlueTask::SST2, GlueTask::MRPC, GlueTask::STSB, GlueTask::QQP,
                          GlueTask::MNLI, GlueTask::QNLI, GlueTask::RTE}) {
        const GlueTaskInfo& info = glue_task_info(task);
        GlueExample e{"Hi there", info.pair ? "ok." : "", info.num_labels == 1 ? 0 : info.num_labels - 1, 3.25f};
        GlueEncoded enc = encode_glue(*tok, task, {e});
        ASSERT_EQ(enc.ids.size(), 1u) << info.name;
        std::vector<uint32_t> want = info.pair ? cat({S, bytes_of("Hi there"), E, E, bytes_of("ok."), E})
                                               : cat({S, bytes_of("Hi there"), E});
        EXPECT_EQ(enc.ids[0], want) << info.name;
        EXPECT_EQ(enc.max_length, 512);
        EXPECT_EQ(enc.truncated, 0);
        EXPECT_EQ(enc.labels[0], info.num_labels == 1 ? 0 : info.num_labels - 1) << info.name;
        EXPECT_EQ(enc.scores[0], info.num_labels == 1 ? 3.25f : 0.0f) << info.name;
    }
}

// longest_first as RobertaTokenizer: budget t = max_length - 4; the longer text loses tokens first.
TEST_F(GlueBatches, TruncatesToMaxLength) {
    std::vector<GlueExample> ex = {{"abcdefghij", "xy", 1}, {"abcdef", "uvwxyz", 0}, {"ab", "cd", 1}};
    GlueEncoded enc = encode_glue(*tok, GlueTask::MRPC, ex, 10);
    EXPECT_EQ(enc.ids[0], cat({S, bytes_of("abcd"), E, E, bytes_of("xy"), E}));   // t = 6: 2 stays, 10 -> 4
    EXPECT_EQ(enc.ids[1], cat({S, bytes_of("abc"), E, E, bytes_of("uvw"), E}));   // tie: 3 + 3
    EXPECT_EQ(enc.ids[2], cat({S, bytes_of("ab"), E, E, bytes_of("cd"), E}));     // fits
    EXPECT_EQ(enc.truncated, 2);
    GlueEncoded single = encode_glue(*tok, GlueTask::COLA, {{"abcdefgh", "", 1}}, 5);
    EXPECT_EQ(single.ids[0], cat({S, bytes_of("abc"), E}));
}

TEST_F(GlueBatches, PadsToTheLongestRowOrAFixedT) {
    GlueEncoded enc = encode_glue(*tok, GlueTask::SST2, sst2(5));  // lengths 3..7 with <s> </s>
    GlueBatcher b(enc, 2, /*shuffle=*/false, 0);
    EXPECT_EQ(b.batches_per_epoch(), 3);
    GlueBatch batch;
    ASSERT_TRUE(b.next(batch));
    EXPECT_EQ(batch.B, 2);
    EXPECT_EQ(batch.T, 4);  // "x" (3 tokens) and "xy" (4)
    EXPECT_EQ(batch.ids, (std::vector<int32_t>{0, 4 + 'x', 2, 1, 0, 4 + 'x', 4 + 'y', 2}));
    EXPECT_EQ(batch.kv_len, (std::vector<int32_t>{3, 4}));
    EXPECT_EQ(batch.labels, (std::vector<int32_t>{0, 1}));
    EXPECT_TRUE(batch.scores.empty());
    EXPECT_EQ(batch.example, (std::vector<int64_t>{0, 1}));
    ASSERT_TRUE(b.next(batch));
    ASSERT_TRUE(b.next(batch));  // the last, partial batch
    EXPECT_EQ(batch.B, 1);
    EXPECT_EQ(batch.T, 7);
    EXPECT_EQ(batch.example, (std::vector<int64_t>{4}));
    EXPECT_FALSE(b.next(batch));  // end of epoch 0
    EXPECT_EQ(b.epoch(), 1);
    ASSERT_TRUE(b.next(batch));
    EXPECT_EQ(batch.example, (std::vector<int64_t>{0, 1}));

    GlueBatcher fixed(enc, 2, false, 0, /*fixed_T=*/9, /*drop_last=*/true);
    EXPECT_EQ(fixed.batches_per_epoch(), 2);
    int batches = 0;
    while (fixed.next(batch)) {
        EXPECT_EQ(batch.T, 9);
        EXPECT_EQ(batch.B, 2);
        for (int r = 0; r < batch.B; r++)
            for (int t = batch.kv_len[(size_t)r]; t < 9; t++) EXPECT_EQ(batch.ids[(size_t)(r * 9 + t)], 1);
        batches++;
    }
    EXPECT_EQ(batches, 2);  // example 4 dropped
    EXPECT_USER_ERROR(GlueBatcher(enc, 2, false, 0, 6), "7 tokens, more than the fixed T = 6", "HINT");
}

TEST_F(GlueBatches, StsbScoresAreFloatTargets) {
    std::vector<GlueExample> ex = {{"a", "b", 0, 4.5f}, {"c", "d", 0, 0.0f}, {"e", "f", 0, 2.25f}};
    GlueEncoded enc = encode_glue(*tok, GlueTask::STSB, ex);
    GlueBatcher b(enc, 3, false, 0);
    GlueBatch batch;
    ASSERT_TRUE(b.next(batch));
    EXPECT_EQ(batch.scores, (std::vector<float>{4.5f, 0.0f, 2.25f}));
    EXPECT_TRUE(batch.labels.empty());
}

// Every epoch serves every example once; orders differ between epochs and seeds and repeat for the same seed.
TEST_F(GlueBatches, ShufflesEachEpoch) {
    GlueEncoded enc = encode_glue(*tok, GlueTask::SST2, sst2(23));
    auto epoch_order = [&](uint64_t seed, int epoch) {
        GlueBatcher b(enc, 4, true, seed);
        b.set_state({epoch, 0});
        std::vector<int64_t> order;
        GlueBatch batch;
        while (b.next(batch)) {
            order.insert(order.end(), batch.example.begin(), batch.example.end());
            for (int r = 0; r < batch.B; r++) {  // each row is its example
                int64_t ex = batch.example[(size_t)r];
                EXPECT_EQ(batch.kv_len[(size_t)r], (int)enc.ids[(size_t)ex].size());
                EXPECT_EQ(batch.labels[(size_t)r], enc.labels[(size_t)ex]);
            }
        }
        return order;
    };
    std::vector<int64_t> e0 = epoch_order(7, 0), e1 = epoch_order(7, 1);
    for (const auto* o : {&e0, &e1}) {
        std::vector<int64_t> sorted = *o;
        std::sort(sorted.begin(), sorted.end());
        for (int64_t i = 0; i < 23; i++) ASSERT_EQ(sorted[(size_t)i], i);
    }
    EXPECT_NE(e0, e1);
    EXPECT_NE(e0, epoch_order(8, 0));
    EXPECT_EQ(e0, epoch_order(7, 0));
}

// The orders are uniform over permutations: 4 examples, 24,000 epochs, 24 orders expected 1,000 times each. Pearson's
// chi-square with 23 degrees of freedom exceeds 70.55 with probability 1e-6 for a uniform shuffle (the project's
// confidence for statistical tests); one order 30% too frequent adds about (0.3 * 1000)^2 / 1000 = 90 to its mean
// of 23, so such a shuffle fails (2,400 epochs at 1e-3 would have missed it).
TEST_F(GlueBatches, ShuffleOrdersAreUniform) {
    GlueEncoded enc = encode_glue(*tok, GlueTask::SST2, sst2(4));
    GlueBatcher b(enc, 4, true, 2024);
    std::map<std::vector<int64_t>, int> counts;
    GlueBatch batch;
    for (int epoch = 0; epoch < 24000; epoch++) {
        ASSERT_TRUE(b.next(batch));
        counts[batch.example]++;
        ASSERT_FALSE(b.next(batch));
    }
    ASSERT_EQ(counts.size(), 24u);
    double chi2 = 0;
    for (const auto& [order, k] : counts) chi2 += (k - 1000.0) * (k - 1000.0) / 1000.0;
    EXPECT_LT(chi2, 70.55);
}

// Stop anywhere (mid-epoch, at an epoch's end), save the state, resume in a new batcher: the same batches, bit for bit.
TEST_F(GlueBatches, ResumeIsBitExact) {
    GlueEncoded enc = encode_glue(*tok, GlueTask::SST2, sst2(11));
    for (int stop : {0, 1, 3, 4, 5, 9}) {
        GlueBatcher a(enc, 3, true, 99);
        GlueBatch batch;
        for (int k = 0; k < stop; k++)
            if (!a.next(batch)) k--;  // (an epoch boundary is not a batch)
        GlueBatchState saved = a.state();
        GlueBatcher b(enc, 3, true, 99);
        b.set_state(saved);
        for (int k = 0; k < 12; k++) {
            GlueBatch x, y;
            bool more_a = a.next(x), more_b = b.next(y);
            ASSERT_EQ(more_a, more_b) << "stop " << stop << ", step " << k;
            EXPECT_EQ(x.ids, y.ids);
            EXPECT_EQ(x.kv_len, y.kv_len);
            EXPECT_EQ(x.labels, y.labels);
            EXPECT_EQ(x.example, y.example);
            EXPECT_EQ(a.state().epoch, b.state().epoch);
            EXPECT_EQ(a.state().position, b.state().position);
        }
    }
    GlueBatcher c(enc, 3, true, 99);
    EXPECT_USER_ERROR(c.set_state({0, 12}), "position 12", "11 examples per epoch", "HINT");
    EXPECT_USER_ERROR(c.set_state({-1, 0}), "epoch -1");
}

TEST_F(GlueBatches, BadInputIsAClearError) {
    // many empty texts are a misread file; a few (up to 1%) are data, kept as run_glue keeps them (Hugging Face's
    // QQP train has two rows with an empty question2: the file was refused)
    EXPECT_USER_ERROR(encode_glue(*tok, GlueTask::SST2, {{"fine", "", 1}, {"", "", 0}}), "1 of 2 GLUE sst2 examples",
                      "the first: GLUE sst2 example 1 (data row 2): its first text", "HINT: check the file's columns");
    EXPECT_USER_ERROR(encode_glue(*tok, GlueTask::RTE, {{"a", "", 1}}), "rte example 0 (data row 1): its second text");
    std::vector<GlueExample> qqp(100, {"What is a tensor?", "What is a matrix?", 0});
    qqp[42].text_b = "";
    const GlueEncoded one_empty = encode_glue(*tok, GlueTask::QQP, qqp);
    const std::vector<uint32_t>& kept = one_empty.ids[42];  // <s> A </s></s> </s>, as an unlabeled row's
    EXPECT_EQ(kept, encode_glue(*tok, GlueTask::QQP, {{"What is a tensor?", "", -1}}, 512, false).ids[0]);
    ASSERT_GE(kept.size(), 4u);
    EXPECT_EQ(std::vector<uint32_t>(kept.end() - 3, kept.end()),
              (std::vector<uint32_t>{tok->sep_id, tok->sep_id, tok->sep_id}));
    qqp[43].text_a = "";
    EXPECT_USER_ERROR(encode_glue(*tok, GlueTask::QQP, qqp), "2 of 100 GLUE qqp examples",
                      "example 42 (data row 43): its second text");
    EXPECT_USER_ERROR(encode_glue(*tok, GlueTask::MNLI, {{"a", "b", 3}}), "label 3 is not one of the task's 3 classes");
    EXPECT_USER_ERROR(encode_glue(*tok, GlueTask::QNLI, {{"a", "b", -1}}), "has no label", "data row 1",
                      "every training and dev example needs one", "HINT");
    EXPECT_NO_THROW(encode_glue(*tok, GlueTask::QNLI, {{"a", "b", -1}}, 512, /*require_labels=*/false));
    // an unlabeled split's empty text is a submission row: encoded (<s> A </s></s> </s>, transformers' pair layout
    // with an empty second text), not refused with a hint to remove the row
    const GlueEncoded test_row = encode_glue(*tok, GlueTask::QQP, {{"a", "", -1}}, 512, /*require_labels=*/false);
    ASSERT_EQ(test_row.ids.size(), 1u);
    const std::vector<uint32_t>& ids = test_row.ids[0];
    ASSERT_EQ(ids.size(), 5u);
    EXPECT_EQ(ids[0], tok->cls_id);
    EXPECT_EQ(std::vector<uint32_t>(ids.begin() + 2, ids.end()),
              (std::vector<uint32_t>{tok->sep_id, tok->sep_id, tok->sep_id}));
    EXPECT_USER_ERROR(encode_glue(*tok, GlueTask::STSB, {{"a", "b", 0, NAN}}), "not in STS-B's [0, 5]");
    EXPECT_USER_ERROR(encode_glue(*tok, GlueTask::STSB, {{"a", "b", -1}}), "has no score");
    EXPECT_USER_ERROR(encode_glue(*tok, GlueTask::COLA, {{"a", "b", 1}}), "single-sentence task");
    EXPECT_USER_ERROR(encode_glue(*tok, GlueTask::MRPC, {{"a", "b", 1}}, 3), "max_length 3", "HINT");
    EXPECT_USER_ERROR(encode_glue(*tok, GlueTask::SST2, {{"bad \xff", "", 1}}), "document 0 of 1",
                      "invalid UTF-8 at byte offset 4");
    GlueEncoded enc = encode_glue(*tok, GlueTask::SST2, sst2(3));
    EXPECT_USER_ERROR(GlueBatcher(enc, 4, true, 0, 0, /*drop_last=*/true), "make no full batch of 4", "HINT");
    EXPECT_USER_ERROR(GlueBatcher(enc, 0, true, 0), "batch size 0");
}

// A label column missing from a TSV is the reader's error for the task's layout, or, for a file without one
// (GLUE's test split), unlabeled examples that encode_glue refuses for training.
TEST_F(GlueBatches, TestSplitWithoutLabelsIsRefusedForTraining) {
    write_bytes(file("test.tsv"), "index\tsentence\n0\tit is fine\n1\tit is not\n");
    std::vector<GlueExample> ex = read_glue_file(GlueTask::SST2, file("test.tsv"));
    ASSERT_EQ(ex.size(), 2u);
    EXPECT_USER_ERROR(encode_glue(*tok, GlueTask::SST2, ex), "sst2 example 0 (line 2) has no label",
                      "none of its examples has one: a test file's layout", "test files have none");
    GlueEncoded enc = encode_glue(*tok, GlueTask::SST2, ex, 512, false);
    EXPECT_EQ(enc.labels, (std::vector<int32_t>{-1, -1}));
}

#else
TEST(GlueBatches, NeedsPcre2) { GTEST_SKIP() << "built without PCRE2"; }
#endif
