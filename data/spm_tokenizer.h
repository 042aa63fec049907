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
    std::string eos_text() const override { return piece(eos_id_); }  // (its decode drops it)
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

// What a .model file says of how it tokenizes, read from its protobuf fields (sentencepiece_model.proto:
// ModelProto.trainer_spec = 2 { model_type = 3, byte_fallback = 35 }, normalizer_spec = 3 { name = 1 }); no
// libsentencepiece needed. Fails (UserError) on bytes that are not such a protobuf.
struct SpmModelKind {
    std::string model_type = "unigram";  // unigram | bpe | word | char (the proto's default: unigram)
    std::string normalizer = "nmt_nfkc";  // the normalization rule's name (the default: nmt_nfkc)
    bool byte_fallback = false;
};
SpmModelKind spm_model_kind(const std::string& model_bytes, const std::string& path);
// How this model differs from T5's kind ("model type bpe, normalization identity, byte fallback"; "" for a unigram
// model with the default nmt_nfkc normalization and no byte fallback), for which transformers' T5Tokenizer, which
// the --save export names, was seen to encode otherwise than SentencePiece (README: own data)
std::string spm_t5_mismatch(const SpmModelKind& k);
