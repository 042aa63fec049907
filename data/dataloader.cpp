#include "data/dataloader.h"

#include <cstdio>

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <random>

#include "common/error.h"
#include "data/shuffle.h"

std::vector<std::string> expand_data_pattern(const std::string& pattern) {
    struct stat st;
    if (::stat(pattern.c_str(), &st) == 0) return {pattern};
    glob_t g;
    const int rc = glob(pattern.c_str(), 0, nullptr, &g);  // sorted by name
    if (rc == GLOB_NOMATCH) return {};
    if (rc != 0) {
        globfree(&g);
        fail("cannot expand the data pattern \"%s\" (glob error %d: unreadable directory?)", pattern.c_str(), rc);
    }
    std::vector<std::string> files(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    return files;
}

static std::vector<std::string> glob_files(const std::string& pattern) {
    std::vector<std::string> files = expand_data_pattern(pattern);
    if (files.empty())
        fail("no files match the data pattern \"%s\"\n"
             "---> HINT: check the path; quote the pattern so the shell does not expand it, "
             "e.g. --train-data \"data/fineweb_train_*.bin\"",
             pattern.c_str());
    return files;
}

DataLoader::DataLoader(const std::string& pattern, int B_, int T_, int rank_, int num_ranks_, uint64_t seed_,
                       bool shuffle_, int model_vocab_)
    : B(B_), T(T_), rank(rank_), num_ranks(num_ranks_), seed(seed_), shuffle(shuffle_), model_vocab(model_vocab_) {
    CHECK_USER(B > 0 && T > 0, "data loader: batch size B=%d and sequence length T=%d must be positive", B, T);
    CHECK_USER(num_ranks > 0, "data loader: the number of ranks must be positive, got %d", num_ranks);
    CHECK_USER(rank >= 0 && rank < num_ranks, "data loader: rank %d is not in 0..%d", rank, num_ranks - 1);
    files_ = glob_files(pattern);

    int short_shards = 0;  // stream shards without a whole sample (skipped)
    for (size_t i = 0; i < files_.size(); i++) {
        const std::string& path = files_[i];
        ShardInfo h = read_shard_header(path);
        check_token_ids(path, h, nullptr, 0, model_vocab);  // header vocab vs model vocab
        shard_tokens_.push_back(h.num_tokens);
        if (i == 0) {
            info_ = h;
            info_.num_tokens = 0;
        } else {
            const std::string& first = files_[0];
            CHECK_USER(h.layout == info_.layout && h.row_len == info_.row_len,
                       "%s has layout %s (row length %d), but %s has layout %s (row length %d)\n"
                       "---> HINT: all shards matched by \"%s\" must have the same layout; narrow the pattern",
                       path.c_str(), shard_layout_name(h.layout), h.row_len, first.c_str(),
                       shard_layout_name(info_.layout), info_.row_len, pattern.c_str());
            CHECK_USER(h.layout != SHARD_LAYOUT_ROWS || h.pad_id == info_.pad_id,
                       "%s has pad id %d, but %s has pad id %d: shards from different tokenizers?", path.c_str(),
                       h.pad_id, first.c_str(), info_.pad_id);
            // Zero means unknown (llm.c's files), which agrees with anything.
            CHECK_USER(h.vocab_size == 0 || info_.vocab_size == 0 || h.vocab_size == info_.vocab_size,
                       "%s was written by a tokenizer with %d ids, but %s by one with %d\n"
                       "---> HINT: shards from different tokenizers cannot be mixed; narrow the pattern \"%s\"",
                       path.c_str(), h.vocab_size, first.c_str(), info_.vocab_size, pattern.c_str());
            CHECK_USER(h.tokenizer == 0 || info_.tokenizer == 0 || h.tokenizer == info_.tokenizer,
                       "%s was written by a %s tokenizer, but %s by a %s one\n"
                       "---> HINT: shards from different tokenizers cannot be mixed; narrow the pattern \"%s\"",
                       path.c_str(), tokenizer_kind_name(h.tokenizer), first.c_str(),
                       tokenizer_kind_name(info_.tokenizer), pattern.c_str());
            if (info_.vocab_size == 0) info_.vocab_size = h.vocab_size;
            if (info_.tokenizer == 0) info_.tokenizer = h.tokenizer;
            if (info_.eos_id == 0) info_.eos_id = h.eos_id;
        }
        int64_t n;
        if (h.layout == SHARD_LAYOUT_ROWS) {
            CHECK_USER(T == h.row_len,
                       "%s holds rows of %d tokens (one document each), but the sequence length T is %d\n"
                       "---> HINT: with row-aligned shards T must equal the row length: pass --seq-len %d",
                       path.c_str(), h.row_len, T, h.row_len);
            CHECK_USER(h.num_tokens > 0, "%s is empty (0 tokens): nothing to train on\n"
                       "---> HINT: delete it or narrow the pattern \"%s\"", path.c_str(), pattern.c_str());
            n = h.num_tokens / h.row_len;
        } else {
            // a stream's last shard is often short (prep_data ends a split wherever its documents end): among
            // several shards one without a whole sample is skipped; alone, it is an error
            if (h.num_tokens < (int64_t)T + 1 && files_.size() > 1) {
                // (hundreds of them, from a tiny --shard-tokens, would bury the rest; rank 0's alone, as the notes)
                if (++short_shards <= 3 && rank == 0)
                    std::fprintf(stderr, "note: %s has %lld tokens, fewer than the T+1 = %d of one sample: skipped\n",
                                 path.c_str(), (long long)h.num_tokens, T + 1);
                shard_samples_.push_back(0);
                info_.num_tokens += h.num_tokens;
                continue;
            }
            CHECK_USER(h.num_tokens >= (int64_t)T + 1,
                       "%s has %lld tokens%s, fewer than the T+1 = %d that one sample needs\n"
                       "---> HINT: use a smaller sequence length T, or remove the shard (narrow the pattern \"%s\")",
                       path.c_str(), (long long)h.num_tokens, h.num_tokens == 0 ? " (empty shard)" : "", T + 1,
                       pattern.c_str());
            n = stream_samples(h.num_tokens, T);
        }
        shard_samples_.push_back(n);
        total_samples_ += n;
        info_.num_tokens += h.num_tokens;
    }

    if (short_shards > 3 && rank == 0)
        std::fprintf(stderr, "note: %d more shards of fewer than T+1 = %d tokens skipped\n", short_shards - 3, T + 1);
    int64_t per_step = (int64_t)num_ranks * B;
    steps_per_epoch_ = total_samples_ / per_step;
    // the tokens would do as one stream: cut into shards, each too short or leaving a remainder (prep_data
    // --shard-tokens), they do not
    const bool shards_too_short =
        info_.layout != SHARD_LAYOUT_ROWS && stream_samples(info_.num_tokens, T) >= per_step;
    CHECK_USER(steps_per_epoch_ > 0,
               "\"%s\": %zu shard(s) give %lld samples of %d tokens, fewer than a micro-batch on every rank needs "
               "(num_ranks*B = %d*%d = %lld)%s\n---> HINT: %s", pattern.c_str(), files_.size(),
               (long long)total_samples_, T, num_ranks, B, (long long)per_step,
               shards_too_short ? format("; they hold %lld tokens, but a sample's T+1 lie within one shard%s",
                                         (long long)info_.num_tokens,
                                         short_shards ? format(" and %d of them are shorter", short_shards).c_str()
                                                      : "").c_str()
                                : "",
               shards_too_short ? "prepare the text again with a larger prep_data --shard-tokens, or use a smaller T"
                                : "use a smaller B or T, fewer ranks, or more data");
    // A sample's T+1 tokens lie within one shard: each flat shard's last (tokens - 1) mod T tokens (a skipped shard's
    // all) are read by no sample. Said (by rank 0) when the split into shards leaves over 5% of the tokens unread
    // beyond what one stream of them would leave: shards not much longer than T (a small prep_data --shard-tokens)
    // leave a large part of the data unread, without a word (100M-token shards: ~1e-5)
    if (info_.layout != SHARD_LAYOUT_ROWS && rank == 0) {
        int64_t read = 0;
        for (int64_t n : shard_samples_) read += n > 0 ? n * T + 1 : 0;
        const int64_t unread = info_.num_tokens - read, one_stream = (info_.num_tokens - 1) % T;
        if ((unread - one_stream) * 20 > info_.num_tokens)
            std::fprintf(stderr, "note: \"%s\": %lld of its %lld tokens (%.0f%%) are read by no sample: a sample's "
                         "T+1 = %d tokens lie within one shard, and each shard's last (tokens - 1) mod T are left out "
                         "(prepare the text with a prep_data --shard-tokens much larger than T)\n", pattern.c_str(),
                         (long long)unread, (long long)info_.num_tokens, 100.0 * unread / info_.num_tokens, T + 1);
    }
    reset();
}

void DataLoader::compute_order(uint64_t rng, std::vector<int>* order, std::vector<int64_t>* start) const {
    order->resize(files_.size());
    for (size_t i = 0; i < order->size(); i++) (*order)[i] = (int)i;
    if (shuffle) fisher_yates(*order, mix_seed(rng, 0));
    start->assign(1, 0);
    for (int f : *order) start->push_back(start->back() + shard_samples_[f]);
}

void DataLoader::check_every_token(int rank, int ranks) const {
    for (size_t i = (size_t)rank; i < files_.size(); i += (size_t)ranks) read_shard(files_[i], nullptr, model_vocab);
}

void DataLoader::reset() {
    epoch_ = 0;
    step_ = 0;
    offset_ = 0;
    epoch_rng_ = seed;
    compute_order(epoch_rng_, &order_, &start_);
}

void DataLoader::locate(int64_t pos, int* order_pos, int64_t* sample) const {
    // start_ is increasing (every shard has >= 1 sample): the shard is the last start <= pos.
    int k = (int)(std::upper_bound(start_.begin(), start_.end(), pos) - start_.begin()) - 1;
    *order_pos = k;
    *sample = pos - start_[k];
}

void DataLoader::copy_sample(int64_t pos, int32_t* inputs, int32_t* targets) {
    int k;
    int64_t s;
    locate(pos, &k, &s);
    int file = order_[k];
    if (file != loaded_file_) {
        loaded_file_ = -1;  // stays invalid if read_shard throws
        ShardInfo now;
        tokens_ = read_shard(files_[file], &now, model_vocab);
        check_unchanged(file, now);
        loaded_file_ = file;
    }
    int64_t w = s;
    if (shuffle) {
        if (file != perm_file_ || epoch_rng_ != perm_rng_) {
            perm_.resize((size_t)shard_samples_[file]);
            for (size_t i = 0; i < perm_.size(); i++) perm_[i] = (uint32_t)i;
            fisher_yates(perm_, mix_seed(epoch_rng_, (uint64_t)file + 1));
            perm_file_ = file;
            perm_rng_ = epoch_rng_;
        }
        w = perm_[(size_t)s];
    }
    if (info_.layout == SHARD_LAYOUT_ROWS) {
        // a row is a document's ids, its EOS, then pad ids: the targets past the EOS are ignored, and only those (the
        // pad id can be a token of the text: GPT-2 has no pad token, so whatever --pad-id names is one of its ids)
        const uint16_t* row = tokens_.data() + w * T;
        const int pad = info_.pad_id;
        int last = T - 1;  // the last id that is not pad: the EOS, or with pad == EOS the document's last id
        while (last >= 0 && row[last] == pad) last--;
        // (a header's EOS 0 is unknown, not a pad 0 that is also EOS)
        const int eos_at = info_.eos_id != 0 && pad == info_.eos_id ? std::min(last + 1, T - 1) : last;
        for (int t = 0; t < T; t++) {
            inputs[t] = row[t];
            targets[t] = t + 1 <= eos_at ? (int32_t)row[t + 1] : -1;  // the last position has no next token
        }
    } else {
        const uint16_t* win = tokens_.data() + w * T;  // T+1 tokens; the last is the next window's first
        for (int t = 0; t < T; t++) {
            inputs[t] = win[t];
            targets[t] = win[t + 1];
        }
    }
}

// The samples were counted from the header read when the run began: a shard rewritten since (prep_data --overwrite
// under a running job) would be read past its end, or (rows) at what is no row's start.
void DataLoader::check_unchanged(int file, const ShardInfo& now) const {
    const char* hint = "do not rewrite shards under a running job; write new ones under another --out prefix";
    CHECK_USER(now.num_tokens == shard_tokens_[file],
               "%s changed during the run: it held %lld tokens when the run began and holds %lld now\n---> HINT: %s",
               files_[file].c_str(), (long long)shard_tokens_[file], (long long)now.num_tokens, hint);
    CHECK_USER(now.layout == info_.layout && now.row_len == info_.row_len,
               "%s changed during the run: it held %s when the run began and holds %s now\n---> HINT: %s",
               files_[file].c_str(),
               info_.layout == SHARD_LAYOUT_ROWS ? format("rows of %d tokens", info_.row_len).c_str() : "a flat stream",
               now.layout == SHARD_LAYOUT_ROWS ? format("rows of %d", now.row_len).c_str() : "a flat stream", hint);
}

int32_t DataLoader::document_start(uint64_t draw) const {
    CHECK_USER(info_.layout == SHARD_LAYOUT_ROWS, "a document's first token is drawn from rows, not layout %s",
               shard_layout_name(info_.layout));
    int64_t row = (int64_t)(((unsigned __int128)draw * (uint64_t)total_samples_) >> 64);  // in [0, rows)
    size_t f = 0;
    while (row >= shard_samples_[f]) row -= shard_samples_[f++];
    check_unchanged((int)f, read_shard_header(files_[f]));
    return read_shard_token(files_[f], row * info_.row_len, model_vocab);
}

void DataLoader::next_batch(int32_t* inputs, int32_t* targets) {
    const int64_t per_step = (int64_t)num_ranks * B;
    int64_t pos = offset_ + step_ * per_step + (int64_t)rank * B;
    for (int b = 0; b < B; b++) copy_sample(pos + b, inputs + (size_t)b * T, targets + (size_t)b * T);
    if (++step_ == (total_samples_ - offset_) / per_step) next_epoch();  // eagerly: the state names a valid position
}

void DataLoader::next_epoch() {
    epoch_++;
    step_ = 0;
    offset_ = 0;
    epoch_rng_ = splitmix64(epoch_rng_);
    compute_order(epoch_rng_, &order_, &start_);
}

DataLoaderState DataLoader::get_state() const {
    DataLoaderState st;
    int k;
    locate(offset_ + step_ * num_ranks * B, &k, &st.sample_index);
    st.epoch = epoch_;
    st.shard_index = k;
    st.rng_state = epoch_rng_;
    return st;
}

void DataLoader::set_state(const DataLoaderState& st) {
    std::vector<int> order;
    std::vector<int64_t> start;
    compute_order(st.rng_state, &order, &start);
    int64_t per_step = (int64_t)num_ranks * B;
    bool ok = st.epoch >= 0 && st.shard_index >= 0 && st.shard_index < (int64_t)order.size() &&
              st.sample_index >= 0 && st.sample_index < shard_samples_[order[st.shard_index]];
    int64_t pos = ok ? start[st.shard_index] + st.sample_index : 0;
    // a step's start under any number of ranks with this B (a whole step of the writer's ranks x B)
    ok = ok && pos % B == 0;
    CHECK_USER(ok,
               "data loader state (epoch %lld, shard %lld, sample %lld) does not fit this loader "
               "(%zu shards, %lld samples per epoch, B = %d)\n"
               "---> HINT: resume with the same data files, B and T as the checkpoint",
               (long long)st.epoch, (long long)st.shard_index, (long long)st.sample_index, files_.size(),
               (long long)total_samples_, B);
    epoch_ = st.epoch;
    epoch_rng_ = st.rng_state;
    order_ = std::move(order);
    start_ = std::move(start);
    // pos = offset_ + step_ x ranks x B; offset_ is 0 when the writer had these ranks (pos starts one of our steps)
    offset_ = pos % per_step;
    step_ = pos / per_step;
    // the writer's ranks had a whole step left here and this run's have none: the epoch's short rest is dropped,
    // as every epoch drops its incomplete last step
    if (step_ >= (total_samples_ - offset_) / per_step) next_epoch();
}

int64_t count_target_tokens(const int32_t* targets, size_t n) {
    int64_t c = 0;
    for (size_t i = 0; i < n; i++) c += targets[i] != -1;
    return c;
}
