// Evaluation and samples: the validation loss (one rank, or the ranks' shares all-reduced) and a short sample of
// generated text. The trainer calls them periodically, at the end and for --eval-only / --sample.
#pragma once
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/error.h"  // format
#include "common/kill_point.h"
#include "data/dataloader.h"
#include "data/tokenizer.h"
#include "model/config.h"
#include "model/model_common.h"  // eval_logits_of_one_sequence
#include "train/cli.h"
#include "train/comm.h"

// Validation loss on this rank. protocol "tokens": eval_batches_per_rank micro-batches from the loader's start, mean
// over their non-ignored targets. protocol "galore" (GaLore's evaluate_model: C4 validation until 10M tokens): micro-
// batches while the non-pad input tokens counted so far, times the ranks, do not exceed eval_tokens (GaLore counts
// input_ids != pad, a row's EOS too, and each rank its own count times the world size), mean of the micro-batches'
// mean losses as GaLore averages (GaLore also divides by the batch count + 1, an off-by-one we do not copy). Never
// reads a token twice: both stop at the end of one epoch of the validation data. *tokens_seen: the targets scored.
// each_batch: called before every micro-batch (the watchdog's progress mark: a long evaluation is progress); false
// ends the evaluation there (a stop signal: the trainer then checkpoints without waiting for the rest).
template <class Model>
float evaluate(Model& model, DataLoader& val, long long eval_tokens, const std::string& protocol,
               long long* tokens_seen, int ranks = 1, const std::function<bool()>& each_batch = {}) {
    const int B = model.B, T = model.T;
    const bool galore = protocol == "galore";
    const long long batches = galore ? val.steps_per_epoch()
                                     : eval_batches_per_rank(eval_tokens, B, T, ranks, val.steps_per_epoch());
    // (flat: no pads; rows: every id equal to the pad id, as GaLore's input_ids != pad counts them, where our loader
    // pads only a row's tail: a GPT-2 row whose --pad-id is a real id counts its text's copies of it out too)
    const int pad = val.info().layout == SHARD_LAYOUT_ROWS ? val.info().pad_id : -1;
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
    val.reset();
    double sum = 0;
    long long count = 0, used = 0, inputs_counted = 0;
    for (long long i = 0; i < batches && !(galore && inputs_counted * ranks > eval_tokens); i++) {
        if (each_batch && !each_batch()) break;  // (told to stop: what was scored so far)
        val.next_batch(inputs.data(), targets.data());
        inputs_counted += (long long)inputs.size() - std::count(inputs.begin(), inputs.end(), pad);
        long long c = count_target_tokens(targets.data(), targets.size());
        if (c == 0) continue;
        float loss = model.eval_loss(inputs.data(), targets.data());
        sum += galore ? (double)loss : (double)loss * c;
        count += c;
        used++;
        kill_point("eval.batch");  // tests: a signal or a kill during an evaluation (common/kill_point.h)
    }
    *tokens_seen = count;
    if (count == 0) return NAN;
    return (float)(galore ? sum / used : sum / count);
}

// The tokenizer that decodes samples: GPT-2's from the vendored ranks, SentencePiece from --spm-model or the
// built-in corpus's model; nullptr (print ids) when unknown.
std::unique_ptr<Tokenizer> sample_decoder(Arch arch, const TrainOptions& opts);
// The same tokenizer, or an error saying why it cannot be loaded (--hellaswag's text needs it).
std::unique_ptr<Tokenizer> data_tokenizer(Arch arch, const TrainOptions& opts);

// A sample's ids as text: its documents apart at EOS, shown as the tokenizer's own (SentencePiece's decode drops
// it, and documents ran together); bytes that are not UTF-8 (a character cut between tokens) as U+FFFD, as
// tiktoken's decode shows them. NUL tokens stay (the text is written with its length, not as a C string).
std::string sample_text(const Tokenizer& tok, const std::vector<int32_t>& ids);

// --prompt's ids: its text encoded, and where it holds the tokenizer's end-of-text string (GPT-2's "<|endoftext|>",
// SentencePiece's "</s>") that token, as transformers' tokenizers read their special tokens in text and as
// sample_text shows it (it went in as the string's characters).
std::vector<uint32_t> prompt_ids(const Tokenizer& tok, const std::string& prompt);

// The next token from a row of V logits and 64 random bits `draw`: the inverse of the cumulative softmax of
// logits / temperature at the uniform draw, over the top_k largest logits (every one when 0; those tied with the k-th
// kept, as transformers' TopKLogitsWarper keeps them); temperature 0 takes the largest logit (the first of ties).
// At temperature 1 over every token it is the draw --sample made before --temperature and --top-k: one seed, the
// same sample. -1 when the logits give no distribution: a NaN or a +inf among them, or every one -inf (the weights
// were NaN and every draw went to the last token, silently).
inline int sample_token(const float* logits, int V, float temperature, int top_k, uint64_t draw) {
    if (std::any_of(logits, logits + V, [](float l) { return std::isnan(l) || l == INFINITY; })) return -1;
    const float* top = std::max_element(logits, logits + V);
    if (*top == -INFINITY) return -1;  // (every one)
    if (temperature == 0) return (int)(top - logits);
    const float m = *top;
    float cut = -INFINITY;  // logits below it are left out
    if (top_k > 0 && top_k < V) {
        std::vector<float> sorted(logits, logits + V);
        std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<float>());
        cut = sorted[top_k - 1];
    }
    std::vector<double> w(V);  // unnormalized probabilities
    double sum = 0;
    for (int v = 0; v < V; v++) sum += w[v] = logits[v] < cut ? 0.0 : std::exp(((double)logits[v] - m) / temperature);
    const double u = (double)(draw >> 11) * 0x1.0p-53 * sum;
    double acc = 0;
    int last = 0;  // the last token with a weight (rounding may leave the sum short of u)
    for (int v = 0; v < V; v++) {
        if (w[v] == 0) continue;
        if ((acc += w[v]) >= u) return v;
        last = v;
    }
    return last;
}

// How the training data starts a document, which is how a sample starts: flat shards hold documents one after
// another, each after an EOS; rows (GaLore's C4) hold a document at a row's start with nothing before it, its first
// token never a target, so a sample starts at the --prompt's first token, or without one at the first token of a
// document drawn from the data (document_start, given 64 random bits: DataLoader::document_start).
struct SampleStart {
    bool rows = false;
    std::function<int32_t(uint64_t draw)> document_start;  // rows only
    const char* data_flag = "";                             // the flag naming that data: --train-data
};

// Generates n tokens after how the training data starts a document (`start`) and the --prompt's tokens, each by
// sample_token (--temperature, --top-k) with mt19937_64 seeded with --sample-seed, by default --seed (its output the
// C++ standard fixes: one seed, one sample everywhere), and prints them decoded, the prompt first. No KV cache: each
// token reruns the forward over the window, which is fine for the short samples this is for (a look at what the model
// learned). A stop signal (`stop` set: SIGINT, SIGTERM) ends it early with the tokens so far; returns that signal, or
// 0.
template <class Model>
int print_sample(Model& model, const TrainOptions& opts, Arch arch, const SampleStart& start,
                 const volatile std::sig_atomic_t& stop, const std::function<void()>& each_token = {}) {
    int T = model.T, V = model.cfg.vocab_size;
    std::unique_ptr<Tokenizer> tok = sample_decoder(arch, opts);
    // a tokenizer smaller than the model's vocabulary (the built-in 8k SentencePiece model under LLaMA's 32000 rows)
    // never produced the extra ids: sample among the tokenizer's ids only
    int Vs = tok ? std::min(V, tok->vocab_size()) : V;
    // (an LCG from the seed drew first tokens in step with the seed)
    std::mt19937_64 rng((uint64_t)(opts.sample_seed >= 0 ? opts.sample_seed : opts.seed));
    std::vector<int32_t> ctx;  // what the model reads: the lead (not printed), the given tokens, the drawn ones
    if (!start.rows) ctx.push_back((int32_t)(tok ? tok->eos_id() : (arch == Arch::GPT2 ? 50256 : 1)));
    size_t lead = ctx.size();
    if (!opts.prompt.empty() && tok) {
        const std::vector<uint32_t> ids = prompt_ids(*tok, opts.prompt);
        if (lead && !ids.empty() && ids[0] == tok->eos_id()) ctx.clear(), lead = 0;  // the prompt's own EOS leads
        if (start.rows && !ids.empty() && ids[0] == tok->eos_id())  // (read as given: it is what was asked for)
            std::printf("note: the prompt starts with an end of text, which the rows of %s never put before a "
                        "document (nothing precedes a row's document): the model reads it as given\n",
                        start.data_flag);
        ctx.insert(ctx.end(), ids.begin(), ids.end());
        // what the model reads, when it is not what was typed (SentencePiece's characters without a token, its
        // normalization; text that is not UTF-8; the printed sample begins with it)
        const std::string read = sample_text(*tok, std::vector<int32_t>(ids.begin(), ids.end()));
        if (read != opts.prompt)
            std::printf("note: the prompt's %zu token%s read back as \"%s\": %s\n", ids.size(),
                        ids.size() == 1 ? "" : "s", read.c_str(),
                        tok->kind() == TOKENIZER_SENTENCEPIECE
                            ? "the tokenizer normalizes some of its text or has no token for some of its characters "
                              "(shown as \u2047)"
                            : "bytes that are not UTF-8 show as U+FFFD");
    } else if (!opts.prompt.empty()) {
        std::printf("note: no tokenizer to encode --prompt with: the sample starts %s\n",
                    start.rows ? "at a document's first token from the data" : "after an end of text alone");
    }
    const bool from_data = start.rows && ctx.empty();  // (an empty context is no input)
    if (from_data) {
        if (opts.prompt.empty())
            std::printf("note: the shards are rows (a document at each row's start, nothing before it): the sample "
                        "starts at the first token of a document drawn from %s (--prompt TEXT gives it one)\n",
                        start.data_flag);
        ctx.push_back(start.document_start(rng()));
    }
    const size_t given = ctx.size() - lead;  // the prompt's tokens, or the document's first
    if (lead + given > (size_t)T)
        std::printf("note: the prompt's %zu tokens fill the model's window of %d (--seq-len): each token is drawn from "
                    "the last %d before it\n", given, T, T);
    else if (lead + given + opts.sample > (size_t)T + 1) {  // (the draw of token i sees the lead, the given, i - 1)
        const bool given_falls = given && given + opts.sample > (size_t)T + 1;  // its first token left behind
        std::printf("note: the sample outgrows the model's window of %d tokens (--seq-len): from its token %zu on, "
                    "each is drawn from the last %d before it (%s%s%s left behind)\n", T, T - lead - given + 2, T,
                    lead ? "the end of text" : "", lead && given_falls ? " and " : "",
                    !given_falls ? "" : from_data ? "the document's first token" : "the prompt's start");
    }
    std::vector<int32_t> inputs((size_t)T, 0), targets((size_t)T, -1);  // one sequence
    std::vector<float> row(V);  // the logits of the last position (the next token's): one row, not B*T*V
    // Each forward reads one sequence (eval_logits_of_one_sequence), not the micro-batch's B; on the CPU backend
    // only the window so far, its len positions (causal attention gives the last one the same logits; a sample of 64
    // tokens after `make train` took 64 forwards of 4 x 128). The CUDA backend reads T positions, the tokens after
    // the window being 0s that the causal mask hides: cuDNN builds an attention graph per shape, one, not one per
    // length.
    constexpr bool window_only = std::string_view(std::decay_t<decltype(model.be)>::name) == "cpu";
    int sig = 0;
    for (int i = 0; i < opts.sample && !(sig = (int)stop); i++) {
        int len = (int)std::min<size_t>(ctx.size(), (size_t)T), first = (int)ctx.size() - len;
        for (int t = 0; t < len; t++) inputs[t] = ctx[first + t];
        eval_logits_of_one_sequence(model, row.data(), inputs.data(), targets.data(), window_only ? len : T, len - 1);
        const int next = sample_token(row.data(), Vs, opts.temperature, opts.top_k, rng());
        if (next < 0)
            fail("the model's logits at token %d of the sample are no distribution to draw from (NaN or +inf among "
                 "them, or all -inf): its weights are broken\n---> HINT: %s", i + 1,
                 opts.ckpt_dir.empty() ? "check the weights it was given (--init-from), or train again with a lower --lr"
                                       : "sample from an earlier checkpoint (--init-from one of --ckpt-dir's step "
                                         "folders)");
        ctx.push_back(next);
        if (each_token) each_token();  // the watchdog's progress mark: a long sample is progress
        kill_point("sample.token");    // tests: a signal while sampling (common/kill_point.h)
    }
    const std::string after = from_data ? format(" after a document's first token from %s", start.data_flag)
                              : given   ? format(" after a prompt of %zu token%s", given, given == 1 ? "" : "s")
                                        : "";
    if (sig)
        std::printf("sample (%zu of %d tokens%s: stopped by signal %d):\n", ctx.size() - lead - given, opts.sample,
                    after.c_str(), sig);
    else
        std::printf("sample (%d tokens%s):\n", opts.sample, after.c_str());
    if (tok) {
        const std::string text = sample_text(*tok, std::vector<int32_t>(ctx.begin() + lead, ctx.end())) + "\n";
        std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
        for (size_t i = lead; i < ctx.size(); i++) std::printf("%d ", ctx[i]);
        std::printf("\n(no tokenizer known for these shards: token ids)\n");
    }
    return sig;
}

// Distributed evaluation: each rank evaluates its share of the validation batches; the sums are all-reduced. NaN
// when any rank's loss over real tokens is not finite (the trainer then stops: a broken model gets no score).
template <class Model>
float evaluate_all(Model& model, DataLoader& val, const TrainOptions& opts, Comm& comm, long long* tokens_seen,
                   const std::function<bool()>& each_batch = {}) {
    long long seen = 0;
    float loss = evaluate(model, val, opts.eval_tokens, opts.eval_protocol, &seen, comm.size(), each_batch);
    // a rank that saw no tokens adds nothing; a non-finite loss over real tokens, on any rank, makes the result NaN
    const bool broken = seen > 0 && !std::isfinite(loss), counts = seen > 0 && !broken;
    double sums[4] = {counts ? (double)loss * (double)seen : 0.0, counts ? (double)seen : 0.0, (double)seen,
                      broken ? 1.0 : 0.0};
    if (opts.eval_protocol == "galore") sums[0] = counts ? loss : 0.0, sums[1] = counts;
    comm.allreduce_sum(sums, 4);
    *tokens_seen = (long long)sums[2];
    if (sums[3] > 0) return NAN;
    return sums[1] > 0 ? (float)(sums[0] / sums[1]) : NAN;
}
