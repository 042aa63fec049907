#include "data/spm_tokenizer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

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
