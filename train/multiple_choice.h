// Multiple-choice evaluation in completion style (HellaSwag, as llm.c's dev/data/hellaswag.py and its C EvalLoader
// score it): each ending follows the context in a row of its own, the model's per-token losses over the ending's
// tokens are summed, and the example counts as right when the right ending has the lowest loss, by sum (acc) and
// by mean over its tokens (acc_norm, llm.c's number). The examples come from HellaSwag's JSON lines, tokenized here
// as llm.c renders them (the context, then " " + the ending, each encoded alone), or from llm.c's own eval file
// (magic 20240522, GPT-2 tokens).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "data/tokenizer.h"

// One example: the context's ids, each ending's ids, and the index of the right ending.
struct ChoiceExample {
    std::vector<int32_t> context;
    std::vector<std::vector<int32_t>> endings;
    int label = 0;
};

// What an evaluation over the examples scored: right by the ending's summed loss, and by its mean per token.
struct ChoiceScore {
    long long examples = 0, correct = 0, correct_norm = 0;
    double acc() const { return examples ? (double)correct / examples : NAN; }
    double acc_norm() const { return examples ? (double)correct_norm / examples : NAN; }
};

constexpr int32_t EVAL_FILE_MAGIC = 20240522;  // llm.c's multiple-choice eval file (dev/data/data_common.py)

// Whether FILE is HellaSwag's JSON lines (a name ending in .jsonl), which need the model's tokenizer.
bool choice_file_is_text(const std::string& path);

// The examples of FILE: HellaSwag's JSON lines (*.jsonl, fields ctx, endings, label) encoded with `tok`, or llm.c's
// eval file (any other name; GPT-2 ids, as llm.c writes them: refused unless `gpt2_ids`, the model's). Each example
// has 2 or more endings, and its longest row (context + ending, less the last token, which is no input) must fit
// `seq_len`; every id must be below `vocab`. At most `limit` examples (0: all), from the first. Refused, naming the
// line or example, when malformed.
std::vector<ChoiceExample> read_choice_examples(const std::string& path, const Tokenizer* tok, bool gpt2_ids,
                                                int seq_len, int vocab, long long limit);

// llm.c's eval file of `examples` (for tests and for feeding llm.c the examples read here).
std::string choice_eval_file_bytes(const std::vector<ChoiceExample>& examples);

// Scores examples rank, rank + ranks, ... on this rank (the caller sums the counts over ranks). The rows go through
// `token_losses(inputs, targets, losses)`, the model's evaluation forward over a micro-batch of B rows x T positions
// giving the per-token losses (B*T, targets -1 ignored); a row is its example's context and one ending, inputs its
// ids but the last, targets the next ids, and the ending's targets are scored. `each_batch`: before every
// micro-batch (the watchdog's progress); false ends the evaluation, with the score of no example (a stop signal).
// A non-finite loss on a scored token ends the evaluation with an error.
ChoiceScore score_choices(const std::vector<ChoiceExample>& examples, int B, int T, int rank, int ranks,
                          const std::function<void(const int32_t*, const int32_t*, float*)>& token_losses,
                          const std::function<bool()>& each_batch = {});
