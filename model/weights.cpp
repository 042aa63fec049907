#include "model/weights.h"

#include <cmath>
#include <set>

#include "common/error.h"
#include "common/safetensors.h"
#include "common/strings.h"  // join

size_t layout_params(const std::vector<ParamDecl>& decls, std::vector<ParamSpec>& specs) {
    specs.clear();
    size_t off = 0;
    for (const ParamDecl& d : decls) {
        specs.push_back({d.name, off, d.numel, d.decay});
        off = align_up(off + d.numel, 64);
    }
    return off;
}

size_t count_params(const std::vector<ParamSpec>& specs) {
    size_t n = 0;
    for (const ParamSpec& s : specs) n += s.numel;
    return n;
}

static bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void hf_load(const std::string& path, const std::vector<HFTensor>& map, const std::vector<std::string>& ignorable,
             float* params, const ModelConfig& cfg) {
    SafeTensorsFile file = safetensors_open(path);
    std::set<std::string> mapped;
    std::vector<float> tmp;
    for (const HFTensor& t : map) {
        mapped.insert(t.name);
        const SafeTensor* st = file.find(t.name);
        if (!st) {
            const std::string alike = file.name_up_to_a_prefix(t.name);
            fail("%s: tensor \"%s\" is missing (model %s expects %d layers, width %d)\n---> HINT: %s", path.c_str(),
                 t.name.c_str(), cfg.name.c_str(), cfg.num_layers, cfg.channels,
                 !alike.empty() ? format("the file has \"%s\": its names differ by a prefix, a layout of another "
                                         "tool or model family (GPT-2, LLaMA, RoBERTa)", alike.c_str()).c_str()
                                : "the checkpoint is not of this model's architecture or size: check its config.json "
                                  "(and the trainers' --model)");
        }
        std::vector<int64_t> want = hf_tensor_shape(t);
        if (st->shape != want) {
            const std::string got = join(st->shape), exp = join(want);
            fail("%s: tensor \"%s\" has shape [%s] but model %s needs [%s]\n"
                 "---> HINT: the checkpoint does not match the model config: check its config.json (and the "
                 "trainers' --model)",
                 path.c_str(), t.name.c_str(), got.c_str(), cfg.name.c_str(), exp.c_str());
        }
        size_t n = (size_t)t.rows * t.cols;
        float* dst = params + t.offset;
        if (!t.transposed) {
            file.read_f32(t.name, dst, n);
        } else {
            tmp.resize(n);
            file.read_f32(t.name, tmp.data(), n);  // stored (cols, rows)
            for (int r = 0; r < t.rows; r++)
                for (int c = 0; c < t.cols; c++) dst[(size_t)r * t.cols + c] = tmp[(size_t)c * t.rows + r];
        }
        // a NaN or Inf weight makes every output NaN: said here, not as a diverged first step or a NaN score
        const float* stored = t.transposed ? tmp.data() : dst;  // in the file's order, as the index says
        size_t bad = 0, first = 0;
        for (size_t i = n; i-- > 0;)
            if (!std::isfinite(stored[i])) bad++, first = i;
        if (bad)
            fail("%s: tensor \"%s\" holds %zu non-finite values (NaN or Inf), the first at element %zu of %zu\n"
                 "---> HINT: the weights are broken (a diverged run's? a bad conversion?): take an earlier "
                 "checkpoint", path.c_str(), t.name.c_str(), bad, first, n);
    }
    for (const std::string& name : file.names()) {
        if (mapped.count(name)) continue;
        bool skip = false;
        for (const std::string& suffix : ignorable) skip = skip || ends_with(name, suffix);
        if (!skip)
            fail("%s: unexpected tensor \"%s\" (model %s has %d layers)\n"
                 "---> HINT: the checkpoint does not match the model config: check its config.json (and the "
                 "trainers' --model)",
                 path.c_str(), name.c_str(), cfg.name.c_str(), cfg.num_layers);
    }
}

std::vector<int64_t> hf_tensor_shape(const HFTensor& t) {
    if (t.rows == 1 && !t.matrix) return {t.cols};  // vectors (norm weights, biases) are 1-D in HF files
    return t.transposed ? std::vector<int64_t>{t.cols, t.rows} : std::vector<int64_t>{t.rows, t.cols};
}

std::vector<float> hf_tensor_values(const HFTensor& t, const float* params) {
    const float* src = params + t.offset;
    if (!t.transposed) return std::vector<float>(src, src + (size_t)t.rows * t.cols);
    std::vector<float> tr((size_t)t.rows * t.cols);
    for (int r = 0; r < t.rows; r++)
        for (int c = 0; c < t.cols; c++) tr[(size_t)c * t.rows + r] = src[(size_t)r * t.cols + c];
    return tr;
}

void hf_save(const std::string& path, const std::vector<HFTensor>& map, const float* params,
             const std::map<std::string, std::string>& metadata) {
    std::vector<std::vector<float>> values;  // HF-layout copies, alive until the write
    values.reserve(map.size());
    std::vector<SafeTensorWrite> out;
    for (const HFTensor& t : map) {
        values.push_back(hf_tensor_values(t, params));
        out.push_back({t.name, "F32", hf_tensor_shape(t), values.back().data()});
    }
    safetensors_write(path, out, metadata);
}

// splitmix64: a tiny, well-mixed 64-bit generator; each (seed, stream, index) gives an independent value.
static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void fill_normal(float* x, size_t n, float std, uint64_t seed, uint64_t stream) {
    uint64_t base = splitmix64(seed ^ splitmix64(stream + 0x1234567ull));
    for (size_t i = 0; i < n; i += 2) {
        // Box-Muller on two uniforms in (0, 1]
        double u1 = ((splitmix64(base + i) >> 11) + 1) * 0x1.0p-53;
        double u2 = ((splitmix64(base + i + 1) >> 11) + 1) * 0x1.0p-53;
        double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * M_PI * u2;
        x[i] = (float)(std * r * std::cos(a));
        if (i + 1 < n) x[i + 1] = (float)(std * r * std::sin(a));
    }
}
