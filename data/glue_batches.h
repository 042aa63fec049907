// GLUE examples (glue.h) as fine-tuning inputs (issue 17): each example's text or text pair encoded with RoBERTa's
// tokenizer (<s> A </s>, or <s> A </s></s> B </s>, truncated longest_first to max_length, as run_glue.py's
// tokenizer(a, b, truncation=True, max_length=512) does), then batches of B rows: ids (B, T) right-padded with <pad>
// to the batch's longest row (or a fixed T), kv_len (B), and the labels (class ids, or STS-B's float scores). The
// training order is a seeded permutation per epoch (shuffle.h: the same on every machine), so the position is just
// (epoch, next example): GlueBatchState, which a checkpoint saves for a bit-exact resume. docs/DESIGN.md section 7.2.
#pragma once
#include <cstdint>
#include <vector>

#include "data/glue.h"
#include "data/roberta_tokenizer.h"

struct GlueEncoded {
    GlueTask task = GlueTask::COLA;
    int max_length = 0;
    uint32_t pad_id = 1;
    std::vector<std::vector<uint32_t>> ids;  // per example: the model input with its special tokens, <= max_length
    std::vector<int32_t> labels;             // per example: class id (-1 = unlabeled); STS-B: 0
    std::vector<float> scores;               // per example: STS-B's similarity in [0, 5]; classification: 0
    int64_t truncated = 0;                   // examples that lost tokens to max_length
};

// Encodes the examples on `threads` threads (<= 0: all cores). With require_labels (training and dev splits), an
// unlabeled example (a file without a label column, e.g. GLUE's test split) is an error; so is a label outside the
// task's classes, an STS-B score outside [0, 5], more than 1% of a labeled split with an empty text (text_b too for
// the pair tasks: a misread file; a few are kept, encoded as run_glue encodes them, and noted, as an unlabeled
// split's are) and a max_length too small for the special tokens. Errors name the example (0-based) and its line in
// the file it was read from (its data row, index + 1, when it was not read from a file); the caller names the file.
GlueEncoded encode_glue(const RobertaTokenizer& tok, GlueTask task, const std::vector<GlueExample>& examples,
                        int max_length = 512, bool require_labels = true, int threads = 0);

// One batch. The last batch of an epoch has fewer rows unless drop_last.
struct GlueBatch {
    int B = 0, T = 0;               // rows, padded length
    std::vector<int32_t> ids;       // (B, T) token ids, <pad> after row b's kv_len[b] tokens
    std::vector<int32_t> kv_len;    // (B) real tokens per row (right padding: the attention mask is t < kv_len[b])
    std::vector<int32_t> labels;    // (B) class ids; empty for STS-B
    std::vector<float> scores;      // (B) STS-B targets; empty for the classification tasks
    std::vector<int64_t> example;   // (B) which example each row is (predictions back to the dev file's order)
};

// Where a GlueBatcher is: the epoch and its next position in that epoch's order. Nothing else is needed: the
// order is a function of (seed, epoch).
struct GlueBatchState {
    int64_t epoch = 0;
    int64_t position = 0;
};

struct GlueBatcher {
    // data must outlive the batcher. shuffle: a new order every epoch, from seed and the epoch number; else the
    // examples in file order (evaluation). fixed_T > 0: every batch is (B, fixed_T) (fails if an example is longer);
    // 0: padded to the batch's longest row. drop_last: the epoch's last, partial batch is skipped.
    GlueBatcher(const GlueEncoded& data, int batch_size, bool shuffle, uint64_t seed, int fixed_T = 0,
                bool drop_last = false);

    // Fills batch with the next batch of this epoch and returns true; at the end of the epoch returns false (batch
    // untouched) and moves to the start of the next one.
    bool next(GlueBatch& batch);
    int64_t batches_per_epoch() const;
    int64_t epoch() const { return state_.epoch; }

    GlueBatchState state() const { return state_; }
    // Fails when the state cannot be one of this batcher's (negative, or a position past this epoch's examples).
    void set_state(const GlueBatchState& state);

    const int batch_size, fixed_T;
    const bool shuffle, drop_last;
    const uint64_t seed;

   private:
    const GlueEncoded& data_;
    GlueBatchState state_;
    std::vector<int64_t> order_;  // this epoch's example order
    int64_t order_epoch_ = -1;    // the epoch order_ was drawn for
    int64_t epoch_end() const;    // examples served per epoch (n, or n rounded down to whole batches)
    void draw_order();
};
