// GLUE encoding and fine-tuning batches. See glue_batches.h for the contract.
#include "data/glue_batches.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "common/error.h"
#include "data/shuffle.h"

GlueEncoded encode_glue(const RobertaTokenizer& tok, GlueTask task, const std::vector<GlueExample>& examples,
                        int max_length, bool require_labels, int threads) {
    const GlueTaskInfo& info = glue_task_info(task);
    const int specials = info.pair ? 4 : 2;
    CHECK_USER(max_length >= specials,
               "max_length %d cannot hold an example: RoBERTa's %s layout alone has %d tokens\n"
               "---> HINT: use the paper's --max-length 512 (or anything >= %d)",
               max_length, info.pair ? "pair" : "single", specials, specials);
    GlueEncoded enc;
    enc.task = task;
    enc.max_length = max_length;
    enc.pad_id = tok.pad_id;
    const size_t n = examples.size();
    CHECK_USER(n > 0, "GLUE %s: no examples to encode", info.name);
    enc.labels.resize(n);
    enc.scores.resize(n);
    // Labels first (cheap, and a bad file should fail before minutes of encoding).
    size_t empty_texts = 0;
    std::string first_empty;
    // what an example without a label is told (examples of which none has one: a test file's layout, or a TSV
    // header without the label column, which was said of example 0 alone)
    const bool all_unlabeled =
        std::all_of(examples.begin(), examples.end(), [](const GlueExample& e) { return e.label < 0; });
    const std::string none =
        std::string(all_unlabeled && n > 1 ? "none of its examples has one: a test file's layout (a TSV header "
                                             "without the task's label column, or JSON lines of label -1)\n"
                                           : "") +
        "---> HINT: every training and dev example needs one (GLUE's test files have none: fine-tune and evaluate "
        "on the train and dev files)";
    for (size_t i = 0; i < n; i++) {
        const GlueExample& e = examples[i];
        // "example 3 (line 5)": the line of the file it was read from, else its data row (index + 1)
        const std::string ex = format("GLUE %s example %zu (%s %zu)", info.name, i, e.line ? "line" : "data row",
                                      e.line ? (size_t)e.line : i + 1);
        if (info.num_labels == 1) {
            if (e.label < 0 && require_labels) fail("%s has no score\n%s", ex.c_str(), none.c_str());
            if (e.label >= 0 && !(std::isfinite(e.score) && e.score >= 0.0f && e.score <= 5.0f))
                fail("%s: score %g is not in STS-B's [0, 5]", ex.c_str(), (double)e.score);
            enc.labels[i] = e.label < 0 ? -1 : 0;
            enc.scores[i] = e.label < 0 ? 0.0f : e.score;
        } else {
            if (e.label < 0 && require_labels) fail("%s has no label\n%s", ex.c_str(), none.c_str());
            if (e.label >= info.num_labels || e.label < -1)
                fail("%s: label %d is not one of the task's %d classes (0..%d)", ex.c_str(), e.label, info.num_labels,
                     info.num_labels - 1);
            enc.labels[i] = e.label;
        }
        // an empty text is encoded as transformers' run_glue encodes it (<s> A </s></s> </s>): an unlabeled split's
        // rows are a submission's, each gets a prediction; a labeled split's few are data (below)
        if (e.text_a.empty() || (info.pair && e.text_b.empty()))
            if (!empty_texts++) first_empty = ex + (e.text_a.empty() ? ": its first text" : ": its second text");
        if (!info.pair && !e.text_b.empty())
            fail("%s has a second text; %s is a single-sentence task", ex.c_str(), info.name);
    }
    // A few empty texts in a labeled split are data: Hugging Face's QQP train has two rows with an empty question2,
    // and run_glue trains on them. Many are a file read with the wrong columns, or a broken export.
    if (require_labels && empty_texts * 100 > n)
        fail("%zu of %zu GLUE %s examples have an empty text (the first: %s)\n---> HINT: check the file's columns "
             "(its header names them); a few, up to 1%%, are kept as transformers' run_glue keeps them",
             empty_texts, n, info.name, first_empty.c_str());
    if (empty_texts)
        std::printf("note: %zu %sexample(s) with an empty text (the first: %s) are %s as they are, as transformers' "
                    "run_glue does\n", empty_texts, require_labels ? "" : "unlabeled ", first_empty.c_str(),
                    require_labels ? "kept" : "predicted");
    enc.ids.resize(n);
    std::vector<char> cut(n, 0);
    for_each_document(n, threads, [&](size_t i) {
        const GlueExample& e = examples[i];
        std::vector<uint32_t> a = tok.tokenize(e.text_a), b;
        if (info.pair) b = tok.tokenize(e.text_b);
        cut[i] = a.size() + b.size() + (size_t)specials > (size_t)max_length;
        enc.ids[i] = tok.build_inputs(std::move(a), info.pair ? &b : nullptr, max_length);
    });
    for (char c : cut) enc.truncated += c;
    return enc;
}

GlueBatcher::GlueBatcher(const GlueEncoded& data, int batch_size_, bool shuffle_, uint64_t seed_, int fixed_T_,
                         bool drop_last_)
    : batch_size(batch_size_), fixed_T(fixed_T_), shuffle(shuffle_), drop_last(drop_last_), seed(seed_),
      data_(data) {
    const int64_t n = (int64_t)data.ids.size();
    CHECK_USER(batch_size >= 1, "batch size %d: must be at least 1", batch_size);
    CHECK_USER(n > 0, "no GLUE examples to batch");
    CHECK_USER(!drop_last || n >= batch_size,
               "%lld examples make no full batch of %d, and the last partial batch is dropped: nothing to train on\n"
               "---> HINT: use a smaller batch", (long long)n, batch_size);
    CHECK_USER(fixed_T >= 0, "fixed T %d must be >= 0 (0: pad to each batch's longest row)", fixed_T);
    if (fixed_T > 0)
        for (int64_t i = 0; i < n; i++)
            if (data.ids[(size_t)i].size() > (size_t)fixed_T)
                fail("GLUE example %lld has %zu tokens, more than the fixed T = %d\n"
                     "---> HINT: encode with max_length <= T (encode_glue), or pad to a larger T",
                     (long long)i, data.ids[(size_t)i].size(), fixed_T);
    draw_order();
}

int64_t GlueBatcher::epoch_end() const {
    const int64_t n = (int64_t)data_.ids.size();
    return drop_last ? n / batch_size * batch_size : n;
}

int64_t GlueBatcher::batches_per_epoch() const { return (epoch_end() + batch_size - 1) / batch_size; }

void GlueBatcher::draw_order() {
    if (order_epoch_ == state_.epoch) return;
    order_.resize(data_.ids.size());
    std::iota(order_.begin(), order_.end(), 0);
    // Stream 0x474c5545 ("GLUE") keeps these orders apart from the token loader's for the same seed.
    if (shuffle) fisher_yates(order_, mix_seed(mix_seed(seed, 0x474c5545), (uint64_t)state_.epoch));
    order_epoch_ = state_.epoch;
}

bool GlueBatcher::next(GlueBatch& batch) {
    draw_order();
    if (state_.position >= epoch_end()) {
        state_ = {state_.epoch + 1, 0};
        return false;
    }
    const int64_t rows = std::min<int64_t>(batch_size, epoch_end() - state_.position);
    std::vector<const std::vector<uint32_t>*> ptrs((size_t)rows);
    batch.example.resize((size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        int64_t ex = order_[(size_t)(state_.position + r)];
        batch.example[(size_t)r] = ex;
        ptrs[(size_t)r] = &data_.ids[(size_t)ex];
    }
    TokenBatch tb = pad_rows(ptrs, data_.pad_id, fixed_T);
    batch.B = tb.B;
    batch.T = tb.T;
    batch.ids = std::move(tb.ids);
    batch.kv_len = std::move(tb.kv_len);
    const bool regression = glue_task_info(data_.task).num_labels == 1;
    batch.labels.clear();
    batch.scores.clear();
    for (int64_t ex : batch.example) {
        if (regression) batch.scores.push_back(data_.scores[(size_t)ex]);
        else batch.labels.push_back(data_.labels[(size_t)ex]);
    }
    state_.position += rows;
    return true;
}

void GlueBatcher::set_state(const GlueBatchState& s) {
    if (s.epoch < 0 || s.position < 0 || s.position > epoch_end())
        fail("GLUE data position (epoch %lld, position %lld) does not fit this data: %lld examples per epoch\n"
             "---> HINT: resume with the same task files, batch size and drop-last setting as the checkpoint",
             (long long)s.epoch, (long long)s.position, (long long)epoch_end());
    state_ = s;
    draw_order();
}
