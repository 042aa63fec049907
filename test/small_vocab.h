// Emulated GPU tests train the tiny models' layouts with a vocabulary of 512 ids. The named tiny models' vocabularies
// (gpt2-tiny's 50,304 padded ids, llama-tiny's 32,000) made the classifier, the gradient norm and the AdamW update over
// the embeddings most of an emulated trainer run's time: a 6-step gpt2-tiny run took 22 s on the CPU execution layer,
// 2.8 s with 512 ids. write_small_vocab writes a config.json of each (gpt2-tiny's and llama-tiny's values,
// model/config.cpp, with vocab_size 512) and token shards of the built-in corpus's first GPT-2 tokens folded into 512
// ids (id mod 512: text's skewed distribution, which the loss learns; the header records no tokenizer, so both
// trainers take them; --save, which needs the model's tokenizer, is refused for these models).
#pragma once
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

struct SmallVocab {
    std::string gpt2, llama;  // " --model DIR/gpt2-tiny-v512.json", " --model DIR/llama-tiny-v512.json"
    std::string data;         // " --train-data DIR/v512_train.bin --val-data DIR/v512_val.bin"
};

// builtin_gpt2_shard: data/builtin/austen_gpt2_train.bin of the source tree (its first 40,000 tokens are read).
inline SmallVocab write_small_vocab(const std::string& dir, const std::string& builtin_gpt2_shard) {
    std::ifstream in(builtin_gpt2_shard, std::ios::binary);
    std::vector<uint16_t> toks(40000);
    in.seekg(1024);  // past the header
    in.read(reinterpret_cast<char*>(toks.data()), (std::streamsize)(toks.size() * 2));
    if (!in) throw std::runtime_error("small vocabulary: cannot read 40000 tokens from " + builtin_gpt2_shard);
    for (uint16_t& t : toks) t %= 512;
    auto shard = [&](const std::string& path, size_t from, size_t to) {  // data/README.md's header: magic,
        int32_t header[256] = {20240520, 1, (int32_t)(to - from), 512};  // version, count, vocabulary; the rest 0
        std::ofstream f(path, std::ios::binary);                        // (flat, no tokenizer)
        f.write(reinterpret_cast<const char*>(header), sizeof header);
        f.write(reinterpret_cast<const char*>(toks.data() + from), (std::streamsize)((to - from) * 2));
        if (!f) throw std::runtime_error("small vocabulary: cannot write " + path);
    };
    shard(dir + "/v512_train.bin", 0, 32000);
    shard(dir + "/v512_val.bin", 32000, toks.size());
    std::ofstream(dir + "/gpt2-tiny-v512.json")
        << R"({"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 64, "vocab_size": 512, )"
           R"("resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0})";
    std::ofstream(dir + "/llama-tiny-v512.json")
        << R"({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, )"
           R"("intermediate_size": 176, "max_position_embeddings": 1024, "vocab_size": 512})";
    return {" --model " + dir + "/gpt2-tiny-v512.json", " --model " + dir + "/llama-tiny-v512.json",
            " --train-data " + dir + "/v512_train.bin --val-data " + dir + "/v512_val.bin"};
}
