// The rest of a Hugging Face model directory beside model.safetensors (--save): config.json with the special-token
// ids, generation_config.json, and the tokenizer that made the training data, so that
// AutoTokenizer.from_pretrained(dir) and generate() work. GPT-2: vocab.json + merges.txt (derived from the r50k
// ranks: merge i of merges.txt makes rank 256 + i) and a GPT2Tokenizer config; LLaMA: the SentencePiece model as
// spiece.model and a T5Tokenizer config (T5's ids: pad 0, EOS 1, unk 2, no BOS; T5Tokenizer's encode appends EOS,
// as prep_data's documents end with it). The file list and their keys: data/README.md, "Export".
#pragma once
#include <string>
#include <vector>

#include "model/config.h"

// Writes config.json, generation_config.json and the tokenizer files into dir (which exists). tokenizer_file is
// the GPT-2 ranks (r50k_base.tiktoken) or the SentencePiece .model the training shards were made with.
void write_hf_export(const std::string& dir, const ModelConfig& cfg, const std::string& tokenizer_file);


// Whether a file of this name belongs to a Hugging Face model directory (what from_pretrained reads: config,
// weights and their shards, tokenizer files): the files an earlier model left that --save removes when it replaces
// the model (a stale tokenizer.json is read before the new spiece.model).
bool is_hf_model_file(const std::string& name);
// The names of DIR's files that is_hf_model_file names, sorted (none when DIR is missing).
std::vector<std::string> hf_model_files_in(const std::string& dir);
// The line --save prints for the earlier model's files it removed (StagedDir::commit's list); "" for none.
std::string earlier_files_removed(const std::vector<std::string>& names);
