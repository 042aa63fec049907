#include "data/spm_tokenizer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "data/shard.h"

#if PRAC_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

#if PRAC_HAVE_SENTENCEPIECE

// What to do about a missing or bad model file.
static const char* SPM_FETCH =
    "T5's tokenizer (the one the C4/LLaMA runs use) is spiece.model from Hugging Face: "
    "huggingface-cli download google-t5/t5-base spiece.model --local-dir .  (a small test model is "
    "data/builtin/austen_spm8k.model)";

struct SpmTokenizer::Impl {
    sentencepiece::SentencePieceProcessor sp;
};

SpmTokenizer::SpmTokenizer(const std::string& model_path) : path_(model_path) {
    // Check the file ourselves first: libsentencepiece's own message for a missing file is terse.
    struct stat st;
    if (stat(model_path.c_str(), &st) != 0)
        fail("cannot open SentencePiece model %s: %s\n---> HINT: %s", model_path.c_str(), std::strerror(errno),
             SPM_FETCH);
    CHECK_USER(S_ISREG(st.st_mode), "SentencePiece model %s is not a regular file\n---> HINT: %s",
               model_path.c_str(), SPM_FETCH);
    impl_ = std::make_unique<Impl>();
    auto status = impl_->sp.Load(model_path);
    if (!status.ok())
        fail("%s is not a valid SentencePiece model (%lld bytes): %s\n"
             "---> HINT: the file is corrupt, truncated (an interrupted download, or a git-lfs pointer "
             "file?) or another format (a Hugging Face tokenizer.json is not a .model file). %s",
             model_path.c_str(), (long long)st.st_size, status.ToString().c_str(), SPM_FETCH);
    vocab_size_ = impl_->sp.GetPieceSize();
    CHECK_USER(vocab_size_ > 0, "SentencePiece model %s has no pieces\n---> HINT: %s", model_path.c_str(), SPM_FETCH);
    eos_id_ = impl_->sp.eos_id();
    pad_id_ = impl_->sp.pad_id();
    unk_id_ = impl_->sp.unk_id();
    bos_id_ = impl_->sp.bos_id();
    // A model trained with --eos_id=-1 cannot terminate documents, and the shard formats need an EOS.
    CHECK_USER(eos_id_ >= 0 && eos_id_ < vocab_size_,
               "SentencePiece model %s has no EOS piece (eos_id %d): documents could not be terminated\n"
               "---> HINT: use a model trained with an EOS id (T5's spiece.model: </s> = 1; spm_train "
               "--eos_id=1), e.g. huggingface-cli download google-t5/t5-base spiece.model",
               model_path.c_str(), eos_id_);
}

SpmTokenizer::~SpmTokenizer() = default;

void SpmTokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const {
    std::vector<int> ids;
    // No extra options were set, so no BOS/EOS is added. Encode is const and safe to call from
    // several threads on one processor.
    auto status = impl_->sp.Encode(text, &ids);
    if (!status.ok()) fail("SentencePiece (%s) could not encode a text: %s", path_.c_str(), status.ToString().c_str());
    out.reserve(out.size() + ids.size());
    for (int id : ids) out.push_back((uint32_t)id);
}

std::string SpmTokenizer::decode(const uint32_t* ids, size_t n) const {
    std::vector<int> v(n);
    for (size_t i = 0; i < n; i++) {
        CHECK_USER(ids[i] < (uint32_t)vocab_size_, "cannot decode token id %u: the SentencePiece model %s has %d ids",
                   (unsigned)ids[i], path_.c_str(), vocab_size_);
        v[i] = (int)ids[i];
    }
    std::string text;
    auto status = impl_->sp.Decode(v, &text);
    if (!status.ok()) fail("SentencePiece (%s) could not decode: %s", path_.c_str(), status.ToString().c_str());
    return text;
}

std::string SpmTokenizer::piece(int id) const {
    CHECK_USER(id >= 0 && id < vocab_size_, "SentencePiece model %s has no id %d", path_.c_str(), id);
    return impl_->sp.IdToPiece(id);
}

#else  // !PRAC_HAVE_SENTENCEPIECE

struct SpmTokenizer::Impl {};

SpmTokenizer::SpmTokenizer(const std::string& model_path) : path_(model_path) {
    fail("cannot load SentencePiece model %s: this build has no SentencePiece support\n"
         "---> HINT: apt-get install libsentencepiece-dev, then re-run cmake and rebuild (cmake's dependency "
         "lines show \"SentencePiece\" as found)",
         model_path.c_str());
}

SpmTokenizer::~SpmTokenizer() = default;
void SpmTokenizer::encode(std::string_view, std::vector<uint32_t>&) const {}
std::string SpmTokenizer::decode(const uint32_t*, size_t) const { return std::string(); }
std::string SpmTokenizer::piece(int) const { return std::string(); }

#endif

int SpmTokenizer::kind() const { return TOKENIZER_SENTENCEPIECE; }

std::string SpmTokenizer::name() const {
    return format("SentencePiece %s (%d ids, eos %d, pad %d)", path_.c_str(), vocab_size_, eos_id_, pad_id_);
}

namespace {

// One protobuf field: its number, wire type, and (wire types 0, 2) its varint value or bytes
struct ProtoField {
    int number = 0, wire = 0;
    uint64_t value = 0;
    std::string_view bytes;
};

// The fields of one protobuf message, in order; false at bytes that are not a message
bool proto_fields(std::string_view m, std::vector<ProtoField>& out) {
    size_t i = 0;
    auto varint = [&](uint64_t& v) {
        v = 0;
        for (int shift = 0; shift < 64 && i < m.size(); shift += 7) {
            const uint8_t b = (uint8_t)m[i++];
            v |= (uint64_t)(b & 0x7F) << shift;
            if (!(b & 0x80)) return true;
        }
        return false;
    };
    while (i < m.size()) {
        uint64_t key;
        if (!varint(key) || (key >> 3) == 0) return false;
        ProtoField f;
        f.number = (int)(key >> 3), f.wire = (int)(key & 7);
        if (f.wire == 0) {
            if (!varint(f.value)) return false;
        } else if (f.wire == 1 || f.wire == 5) {
            const size_t n = f.wire == 1 ? 8 : 4;
            if (m.size() - i < n) return false;
            i += n;
        } else if (f.wire == 2) {
            uint64_t n;
            if (!varint(n) || n > m.size() - i) return false;
            f.bytes = m.substr(i, (size_t)n);
            i += (size_t)n;
        } else {
            return false;  // groups (3, 4) are not in sentencepiece_model.proto
        }
        out.push_back(f);
    }
    return true;
}

}  // namespace

SpmModelKind spm_model_kind(const std::string& model_bytes, const std::string& path) {
    std::vector<ProtoField> model, trainer, normalizer;
    CHECK_USER(proto_fields(model_bytes, model), "%s is not a SentencePiece model (not a protobuf message)",
               path.c_str());
    SpmModelKind k;
    for (const ProtoField& f : model) {
        if (f.wire != 2) continue;
        if (f.number == 2 && !proto_fields(f.bytes, trainer)) fail("%s: a damaged trainer_spec", path.c_str());
        if (f.number == 3 && !proto_fields(f.bytes, normalizer)) fail("%s: a damaged normalizer_spec", path.c_str());
    }
    static const char* TYPES[] = {"?", "unigram", "bpe", "word", "char"};
    for (const ProtoField& f : trainer) {
        if (f.number == 3 && f.wire == 0) k.model_type = f.value >= 1 && f.value <= 4 ? TYPES[f.value] : "unknown";
        if (f.number == 35 && f.wire == 0) k.byte_fallback = f.value != 0;
    }
    for (const ProtoField& f : normalizer)
        if (f.number == 1 && f.wire == 2) k.normalizer = std::string(f.bytes);
    return k;
}

std::string spm_t5_mismatch(const SpmModelKind& k) {
    std::vector<std::string> why;
    if (k.model_type != "unigram") why.push_back("model type " + k.model_type);
    if (k.normalizer != "nmt_nfkc") why.push_back("normalization " + k.normalizer);
    if (k.byte_fallback) why.push_back("byte fallback");
    std::string s;
    for (size_t i = 0; i < why.size(); i++) s += (i ? ", " : "") + why[i];
    return s;
}
