#include "train/data_tokenizer.h"

#include <sys/stat.h>

#include <cstdio>
#include <vector>

#include "common/error.h"
#include "common/files.h"  // dir_of
#include "data/gpt2_tokenizer.h"  // GPT2_NUM_RANKS
#include "data/spm_tokenizer.h"  // SpmTokenizer: a given --spm-model is loaded before the run
#include "data/tokenizer_id.h"

static std::string gpt2_ranks_file(const std::string& data_dir) {
    return data_dir.substr(0, data_dir.rfind('/')) + "/gpt2/r50k_base.tiktoken";
}

std::string data_tokenizer_file(Arch arch, const TrainOptions& opts, const std::string& data_dir) {
    return arch == Arch::GPT2 ? gpt2_ranks_file(data_dir) : opts.spm_model;
}

void check_data_tokenizer(Arch arch, TrainOptions& opts, const std::string& data_dir, int model_vocab) {
    std::vector<std::string> patterns = {opts.val_data};
    if (!opts.eval_only) patterns.insert(patterns.begin(), opts.train_data);
    ShardTokenizer st = shard_tokenizer(patterns);
    if (st.first_file.empty()) return;  // no shard matched: the loader says so
    const bool gpt2 = arch == Arch::GPT2;
    const int want = gpt2 ? TOKENIZER_GPT2 : TOKENIZER_SENTENCEPIECE;
    const char* program = gpt2 ? "train_gpt2" : "train_llama";
    if (st.kind != TOKENIZER_UNKNOWN && st.kind != want)
        fail("%s was made with the %s tokenizer%s, %d ids, but %s trains a %s model (%d ids), whose tokenizer is %s\n"
             "---> HINT: train these shards with %s, or tokenize the text again for this model: prep_data %s ...",
             st.first_file.c_str(), tokenizer_kind_name(st.kind),
             st.name.empty() ? "" : format(" (%s)", st.name.c_str()).c_str(), st.vocab_size, program,
             gpt2 ? "GPT-2" : "LLaMA", model_vocab, tokenizer_kind_name(want), gpt2 ? "train_llama" : "train_gpt2",
             gpt2 ? "--tokenizer gpt2" : "--spm-vocab N (your own SentencePiece model) or --spm-model FILE");

    // Weights exported by --save carry their tokenizer (spiece.model), as Hugging Face LLaMA directories do
    // (tokenizer.model): fine-tuning or scoring them on other tokens would be garbage. --init-from may name the
    // directory or its weights file (then the tokenizer beside it counts: it was skipped).
    struct stat sb;
    std::string init_spm;
    const bool init_is_dir = stat(opts.init_from.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
    const std::string init_dir = opts.init_from.empty() || init_is_dir ? opts.init_from : dir_of(opts.init_from);
    for (const char* name : {"/spiece.model", "/tokenizer.model"})
        if (init_spm.empty() && !init_dir.empty() && stat((init_dir + name).c_str(), &sb) == 0 && S_ISREG(sb.st_mode))
            init_spm = init_dir + name;
    if (!gpt2 && st.hash != 0 && !init_spm.empty() && tokenizer_file_hash(init_spm) != st.hash)
        fail("--init-from %s holds a model trained with the SentencePiece model %s (SHA-256 %s...), but %s was made "
             "with %s (SHA-256 %s...)\n---> HINT: tokenize the text with the model's own tokenizer: prep_data "
             "--spm-model %s ...", opts.init_from.c_str(), init_spm.c_str(),
             tokenizer_hash_hex(tokenizer_file_hash(init_spm)).c_str(), st.first_file.c_str(), st.name.c_str(),
             tokenizer_hash_hex(st.hash).c_str(), init_spm.c_str());

    const bool needs = opts.sample > 0 || !opts.save.empty();
    const char* what = opts.sample > 0 && !opts.save.empty() ? "--sample and --save need"
                       : opts.sample > 0                    ? "--sample needs"
                                                            : "--save needs";
    // A tokenizer with more ids than the model has embedding rows is not the model's: --save exported it beside
    // the weights (text encoding to ids with no row, a bos/eos id past the vocabulary) and --sample decoded with it
    auto check_fits = [&](int ids, const std::string& file) {
        if (ids > model_vocab)
            fail("%s the model's tokenizer, and %s has %d ids, more than the model's vocab_size %d: it is not the "
                 "tokenizer of this model\n---> HINT: drop --sample and --save (--ckpt-dir keeps the weights), or "
                 "train a model whose vocab_size is at least %d on shards that tokenizer made",
                 what, file.c_str(), ids, model_vocab, ids);
    };
    if (gpt2) {
        CHECK_USER(opts.spm_model.empty(), "--spm-model is for SentencePiece (LLaMA) data; %s decodes with GPT-2's "
                   "tokenizer", program);
        if (!needs) return;
        std::string ranks = gpt2_ranks_file(data_dir);
        check_fits(GPT2_NUM_RANKS + 1, ranks);  // the mergeable ranks and <|endoftext|>
        if (st.hash == 0) return;  // llm.c's GPT-2 shards say nothing: they are r50k
        uint64_t have = tokenizer_file_hash(ranks);
        if (have != st.hash)
            fail("%s the tokenizer that made the shards, and %s was made with GPT-2 ranks %s (SHA-256 %s...), not "
                 "the built-in %s (SHA-256 %s...)\n---> HINT: tokenize the text with prep_data --tokenizer gpt2 "
                 "(the built-in ranks), or drop --sample and --save",
                 what, st.first_file.c_str(), st.name.c_str(), tokenizer_hash_hex(st.hash).c_str(), ranks.c_str(),
                 tokenizer_hash_hex(have).c_str());
        return;
    }
    if (!needs && opts.spm_model.empty()) return;
    std::string why;
    std::string found = find_spm_model_for(st, opts.spm_model, {data_dir + "/austen_spm8k.model"}, &why);
    if (found.empty())
        fail("%s the SentencePiece model that made the shards: %s\n---> HINT: pass --spm-model FILE (the model "
             "given to prep_data; prep_data keeps a copy next to the shards, PREFIX_tokenizer.model), or tokenize "
             "the text again with prep_data --spm-model FILE / --spm-vocab N",
             what, why.c_str());
    // loaded now: where the shards vouch for nothing, a file that is no SentencePiece model would stop --save after
    // the training and leave --sample printing ids (its error names the file and what is wrong with it)
    if (needs) check_fits(SpmTokenizer{found}.vocab_size(), found);
    if (st.hash == 0)
        std::printf("note: %s does not record its tokenizer; decoding with --spm-model %s as given\n",
                    st.first_file.c_str(), found.c_str());
    opts.spm_model = found;
}
