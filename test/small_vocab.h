// The tiny models' layouts with 512 ids, which emulated GPU runs train (test/fixtures/v512: make.py there says why
// and how its shards were made; scripts/gpu_sanitize.sh runs them too).
#pragma once
#include <string>

struct SmallVocab {
    std::string gpt2, llama;  // " --model SOURCE/test/fixtures/v512/gpt2-tiny.json", the same of llama-tiny
    std::string data;         // " --train-data ... --val-data ...": the fixture's shards
};

inline SmallVocab small_vocab(const std::string& source_dir) {
    const std::string f = source_dir + "/test/fixtures/v512/";
    return {" --model " + f + "gpt2-tiny.json", " --model " + f + "llama-tiny.json",
            " --train-data " + f + "train.bin --val-data " + f + "val.bin"};
}
