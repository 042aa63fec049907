// SentencePiece tokenizer (T5's spiece.model for the LLaMA/C4 runs, or the built-in
// data/builtin/austen_spm8k.model) over libsentencepiece. encode() adds neither BOS nor EOS: the data
// tools append eos_id() themselves (T5/GaLore: ids + EOS 1, then pads 0 in the rows layout).
//
// Built without SentencePiece (PRAC_HAVE_SENTENCEPIECE unset), the constructor fails with the apt
// command that fixes it, so everything else still builds and runs.
#pragma once
#include <memory>
#include <string>

#include "data/tokenizer.h"

struct SpmTokenizer : Tokenizer {
    // Loads a SentencePiece .model file. Fails (UserError) when the file is missing, is not a
    // SentencePiece model, or the model has no EOS piece (documents could not be terminated).
    explicit SpmTokenizer(const std::string& model_path);
    ~SpmTokenizer() override;

    void encode(std::string_view text, std::vector<uint32_t>& out) const override;
    std::string decode(const uint32_t* ids, size_t n) const override;
    int vocab_size() const override { return vocab_size_; }
    uint32_t eos_id() const override { return (uint32_t)eos_id_; }
    int kind() const override;
    std::string name() const override;

    // The model's special ids, -1 when the model has none (T5: pad 0, unk 2, no BOS).
    int pad_id() const { return pad_id_; }
    int unk_id() const { return unk_id_; }
    int bos_id() const { return bos_id_; }
    const std::string& path() const { return path_; }
    std::string piece(int id) const;  // the piece of an id ("</s>", "▁the"); id in 0..vocab_size()-1

   private:
    struct Impl;  // the SentencePieceProcessor; kept out of this header so users need no spm headers
    std::unique_ptr<Impl> impl_;
    std::string path_;
    int vocab_size_ = 0, eos_id_ = -1, pad_id_ = -1, unk_id_ = -1, bos_id_ = -1;
};
