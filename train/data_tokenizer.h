// The tokenizer travels with the data: before anything trains, the shards' headers (data/shard.h) must name the
// tokenizer of the trainer's model (GPT-2 BPE for train_gpt2, SentencePiece for train_llama), and a run that will
// decode (--sample) or export a tokenizer (--save) finds the very file that made the shards, by its hash, or stops.
#pragma once
#include <string>

#include "model/config.h"
#include "train/cli.h"

// Checks the shards of opts.train_data / opts.val_data against the model family; when --sample or --save needs
// the tokenizer, finds its file (LLaMA: sets opts.spm_model to it). Fails (UserError) with the cure otherwise.
// data_dir is the built-in corpus's directory (its parent holds gpt2/r50k_base.tiktoken).
void check_data_tokenizer(Arch arch, TrainOptions& opts, const std::string& data_dir, int model_vocab);

// The tokenizer file that decodes this run's data: GPT-2's vendored ranks, or opts.spm_model ("" when unknown).
std::string data_tokenizer_file(Arch arch, const TrainOptions& opts, const std::string& data_dir);
