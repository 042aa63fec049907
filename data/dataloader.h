// DataLoader: turns token shards (data/shard.h) into (inputs, targets) micro-batches of B x T. Flat layout (llm.c):
// a sample is a window of T+1 tokens at stride T; row layout (GaLore C4): one row of T tokens, whose last target and
// pad targets are -1 (the loss's ignore index). Each step takes the next num_ranks*B samples of the epoch (shard
// after shard, both orders permuted per epoch when shuffling); rank r gets the r-th group of B, and a last partial
// step is dropped. Permutations are mt19937_64 + our own Fisher-Yates, the same with every standard library.
// The sample rules, the epoch order and why the permutations are our own: docs/DESIGN.md section 7.1.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/shard.h"

// Where a loader is, for checkpoints. Rank-independent: it names the first sample of the next step
// (rank 0's next sample), so one saved state resumes every rank.
// Samples a stream shard of `tokens` tokens gives at sequence length T: windows of T + 1 tokens at stride T (0 when
// it holds fewer than T + 1). prep_data's suggested --seq-len counts with it too.
inline int64_t stream_samples(int64_t tokens, int T) { return tokens >= (int64_t)T + 1 ? (tokens - 1) / T : 0; }

struct DataLoaderState {
    int64_t epoch = 0;
    int64_t shard_index = 0;   // position in this epoch's shard order (not the file index)
    int64_t sample_index = 0;  // position in that shard's (possibly permuted) sample order
    uint64_t rng_state = 0;    // the generator state this epoch's permutations were drawn from
};

struct DataLoader {
    // pattern: glob(3) pattern of the shards (sorted; shard order when not shuffling). model_vocab: if
    // > 0, every token must be below it (checked when a shard is loaded). Fails on no match, empty or
    // too-small shards, shards that disagree on layout/vocab/tokenizer, and row length != T.
    DataLoader(const std::string& pattern, int B, int T, int rank, int num_ranks, uint64_t seed, bool shuffle,
               int model_vocab = 0);

    // Fills inputs[B*T] and targets[B*T] (-1 = ignore) with the next micro-batch of this rank.
    void next_batch(int32_t* inputs, int32_t* targets);
    // Back to the very beginning (epoch 0, first step, initial seed): used to rewind validation.
    void reset();
    // Reads every shard now and checks each token against model_vocab (otherwise checked when a shard is loaded:
    // for validation data at the first evaluation, which may come after the whole training; for training data in
    // the middle of the run). Rank r of `ranks` reads the files r, r + ranks, ...
    void check_every_token(int rank = 0, int ranks = 1) const;
    DataLoaderState get_state() const;
    // Fails when the state does not fit this loader (other shards, B or T). Another number of ranks continues
    // from the same position (the next samples in the epoch's order are the ones the old run would have read).
    void set_state(const DataLoaderState& state);

    // Rows layout: the first token of a row drawn uniformly among all rows of the shards by `draw` (64 random bits):
    // a document's first token, which training never predicts (nothing comes before it in its row), read alone.
    int32_t document_start(uint64_t draw) const;

    int64_t epoch() const { return epoch_; }
    // Steps (batches per rank) in one epoch; the same on every rank.
    int64_t steps_per_epoch() const { return steps_per_epoch_; }
    // Samples in one epoch over all ranks, before dropping the incomplete last step.
    int64_t samples_per_epoch() const { return total_samples_; }
    const ShardInfo& info() const { return info_; }  // common header fields of all shards
    const std::vector<std::string>& files() const { return files_; }

    const int B, T, rank, num_ranks;
    const uint64_t seed;
    const bool shuffle;
    const int model_vocab;

   private:
    std::vector<std::string> files_;
    std::vector<int64_t> shard_samples_;  // samples per file (file order)
    std::vector<int64_t> shard_tokens_;   // tokens per file when the run began: a shard rewritten since is refused
    ShardInfo info_;
    int64_t total_samples_ = 0;
    int64_t steps_per_epoch_ = 0;

    int64_t epoch_ = 0;
    int64_t step_ = 0;            // next step in this epoch
    // samples of this epoch before its step 0: 0, but after a resume by another number of ranks at a position
    // that is not a multiple of this run's ranks x B (the epoch ends with the last whole step after it)
    int64_t offset_ = 0;
    uint64_t epoch_rng_ = 0;      // rng state of this epoch
    std::vector<int> order_;      // this epoch's shard order (file indices)
    std::vector<int64_t> start_;  // start_[k] = epoch position of shard order_[k]'s first sample;
                                  // start_[num shards] = total_samples_

    int loaded_file_ = -1;        // file whose tokens are in tokens_
    std::vector<uint16_t> tokens_;
    int perm_file_ = -1;          // file and epoch rng that perm_ was drawn for
    uint64_t perm_rng_ = 0;
    std::vector<uint32_t> perm_;  // sample order inside perm_file_ (shuffle only)

    void compute_order(uint64_t rng, std::vector<int>* order, std::vector<int64_t>* start) const;
    void locate(int64_t pos, int* order_pos, int64_t* sample) const;
    void next_epoch();  // the next epoch's order, from its first sample
    void copy_sample(int64_t pos, int32_t* inputs, int32_t* targets);
    void check_unchanged(int file, const ShardInfo& now) const;  // fails when the file is not as at the start
};

// Number of targets that count in the loss (!= -1) among n.
int64_t count_target_tokens(const int32_t* targets, size_t n);

// The files a data pattern (--train-data, --val-data) names, sorted by name: a path that exists names itself, glob
// characters and all (as prep_data reads its --input; "a[1]_train.bin" matched no file), else the glob's matches;
// empty when nothing matches. Fails on a glob error (an unreadable directory), naming the pattern.
std::vector<std::string> expand_data_pattern(const std::string& pattern);
