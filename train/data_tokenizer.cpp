#include "train/data_tokenizer.h"
#include "train/multiple_choice.h"  // choice_file_is_text

#include <sys/stat.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/error.h"
#include "common/files.h"  // dir_of, read_file_bytes
#include "common/strings.h"  // join
#include "data/gpt2_tokenizer.h"  // Gpt2Tokenizer, GPT2_* ids
#include "data/spm_tokenizer.h"  // SpmTokenizer: a given --spm-model is loaded before the run
#include "data/tokenizer_id.h"

static std::string gpt2_ranks_file(const std::string& data_dir) {
    return data_dir.substr(0, data_dir.rfind('/')) + "/gpt2/r50k_base.tiktoken";
}

// A GPT-2 model directory's vocabulary (vocab.json, else tokenizer.json's model.vocab) against r50k_base, the one
// GPT-2 tokenizer of the trainer's shards: a model of another BPE reads r50k's ids as other tokens (its merges are not
// compared: a vocabulary equal to r50k's is r50k's in every model seen)
static void check_gpt2_vocabulary(const std::string& dir, const std::string& ranks_file) {
    auto regular = [](const std::string& p) {
        struct stat sb;
        return stat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
    };
    const bool in_vocab_json = regular(dir + "/vocab.json");
    const std::string file = dir + (in_vocab_json ? "/vocab.json" : "/tokenizer.json");
    if (!regular(file)) return;
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(read_file_bytes(file));
    } catch (const nlohmann::json::exception& e) {
        fail("--init-from %s: %s is not valid JSON (%s)", dir.c_str(), file.c_str(), e.what());
    }
    const nlohmann::json* vocab =
        in_vocab_json ? &j
        : j.contains("model") && j["model"].is_object() && j["model"].contains("vocab") ? &j["model"]["vocab"]
                                                                                         : nullptr;
    // ids past r50k's (a pad token added to a GPT-2 model) are no token of the shards: not compared
    std::string why;
    if (!vocab || !vocab->is_object()) {
        why = file + " holds no vocabulary object";
    } else {
        Gpt2Tokenizer r50k(ranks_file);
        int matched = 0;
        for (const auto& [text, id] : vocab->items()) {
            if (id.is_number_integer() && id.get<int64_t>() >= GPT2_VOCAB_SIZE) continue;
            std::string bytes;
            const int64_t want = text == GPT2_EOT_TEXT ? (int64_t)GPT2_EOT_ID
                                 : gpt2_unicode_to_bytes(text, bytes) ? r50k.rank_of(bytes)
                                                                       : -1;
            matched++;
            if (!id.is_number_integer() || id.get<int64_t>() != want) {
                why = format("%s maps \"%s\" to id %s, %s", file.c_str(), text.c_str(), id.dump().c_str(),
                             want < 0 ? "and r50k has no such token"
                                      : format("r50k to %lld", (long long)want).c_str());
                break;
            }
        }
        if (why.empty() && matched != GPT2_VOCAB_SIZE)
            why = format("%s has %d of r50k's %d tokens", file.c_str(), matched, GPT2_VOCAB_SIZE);
    }
    if (!why.empty())
        fail("--init-from %s holds a model of another tokenizer than GPT-2's r50k_base, which train_gpt2's shards are "
             "made with: %s\n---> HINT: start from a GPT-2 model of r50k's vocabulary (Hugging Face's gpt2 models, "
             "what --save writes)", dir.c_str(), why.c_str());
}

std::string data_tokenizer_file(Arch arch, const TrainOptions& opts, const std::string& data_dir) {
    return arch == Arch::GPT2 ? gpt2_ranks_file(data_dir) : opts.spm_model;
}

void check_data_tokenizer(Arch arch, TrainOptions& opts, const std::string& data_dir, int model_vocab) {
    std::vector<std::string> patterns = {opts.val_data}, flags = {"--val-data"};
    if (!opts.eval_only) patterns.insert(patterns.begin(), opts.train_data), flags.insert(flags.begin(), "--train-data");
    ShardTokenizer st = shard_tokenizer(patterns, flags);
    if (st.first_file.empty()) return;  // no shard matched: the loader says so
    const bool gpt2 = arch == Arch::GPT2;
    const int want = gpt2 ? TOKENIZER_GPT2 : TOKENIZER_SENTENCEPIECE;
    const char* program = gpt2 ? "train_gpt2" : "train_llama";
    if (st.kind != TOKENIZER_UNKNOWN && st.kind != want)
        fail("%s was made with the %s tokenizer%s, %s, but %s trains a %s model (%d ids), whose tokenizer is %s\n"
             "---> HINT: train these shards with %s, or tokenize the text again for this model: prep_data %s ...",
             st.first_file.c_str(), tokenizer_kind_name(st.kind),
             st.name.empty() ? "" : format(" (%s)", st.name.c_str()).c_str(),
             st.vocab_size > 0 ? format("%d ids", st.vocab_size).c_str() : "its id count not recorded", program,
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
    if (gpt2 && !init_dir.empty() && !data_dir.empty()) check_gpt2_vocabulary(init_dir, gpt2_ranks_file(data_dir));
    if (!gpt2 && !init_dir.empty() && init_spm.empty() && stat((init_dir + "/tokenizer.json").c_str(), &sb) == 0)
        std::printf("notice: --init-from %s has a tokenizer.json but no spiece.model or tokenizer.model: its tokenizer "
                    "is not checked against the shards' (the SentencePiece model is what is compared)\n",
                    init_dir.c_str());

    // the flags that use the tokenizer: "--sample needs", "--sample and --save need", ...
    std::vector<std::string> users;
    if (opts.sample > 0) users.push_back("--sample");
    if (!opts.save.empty()) users.push_back("--save");
    if (choice_file_is_text(opts.hellaswag)) users.push_back("--hellaswag");  // (llm.c's eval file: GPT-2 ids)
    const bool needs = !users.empty();
    const std::string drop = join(users, " and ");  // "--sample and --save"
    const std::string what_text = drop + (users.size() > 1 ? " need" : " needs");
    const char* what = what_text.c_str();
    // A tokenizer with more ids than the model has embedding rows is not the model's: --save exported it beside
    // the weights (text encoding to ids with no row, a bos/eos id past the vocabulary) and --sample decoded with it
    auto check_fits = [&](int ids, const std::string& file) {
        if (ids > model_vocab)
            fail("%s the model's tokenizer, and %s has %d ids, more than the model's vocab_size %d: it is not the "
                 "tokenizer of this model\n---> HINT: drop %s (--ckpt-dir keeps the weights), or "
                 "train a model whose vocab_size is at least %d on shards that tokenizer made",
                 what, file.c_str(), ids, model_vocab, drop.c_str(), ids);
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
                 "(the built-in ranks), or drop %s",
                 what, st.first_file.c_str(), st.name.c_str(), tokenizer_hash_hex(st.hash).c_str(), ranks.c_str(),
                 tokenizer_hash_hex(have).c_str(), drop.c_str());
        return;
    }
    if (!needs && opts.spm_model.empty()) return;
    std::string why;
    // the model's own tokenizer (--init-from's, whose hash was compared with the shards' above) counts as one beside
    // the shards: shards moved away from their PREFIX_tokenizer.model still decode with it
    std::vector<std::string> fallbacks = {data_dir + "/austen_spm8k.model"};
    if (!init_spm.empty()) fallbacks.insert(fallbacks.begin(), init_spm);
    const bool init_vouches = opts.spm_model.empty() && st.hash == 0 && !init_spm.empty();  // (shards say nothing)
    std::string found = init_vouches ? init_spm : find_spm_model_for(st, opts.spm_model, fallbacks, &why);
    if (found.empty())
        fail("%s the SentencePiece model that made the shards: %s\n---> HINT: pass --spm-model FILE (the model "
             "given to prep_data; prep_data keeps a copy next to the shards, PREFIX_tokenizer.model), or tokenize "
             "the text again with prep_data --spm-model FILE / --spm-vocab N",
             what, why.c_str());
    // loaded now: where the shards vouch for nothing, a file that is no SentencePiece model would stop --save after
    // the training and leave --sample printing ids (its error names the file and what is wrong with it)
    if (needs) check_fits(SpmTokenizer{found}.vocab_size(), found);
    if (st.hash == 0)
        std::printf("note: %s does not record its tokenizer; decoding with %s %s\n", st.first_file.c_str(),
                    init_vouches ? "--init-from's" : "--spm-model", init_vouches ? init_spm.c_str()
                                                                                  : (found + " as given").c_str());
    opts.spm_model = found;
}
