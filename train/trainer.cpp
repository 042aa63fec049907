#include "train/trainer.h"

#include "data/gpt2_tokenizer.h"
#include "data/spm_tokenizer.h"

volatile std::sig_atomic_t g_stop_signal = 0;

static void on_stop_signal(int sig) { g_stop_signal = sig; }

void install_stop_signals() {
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
}

#include <cerrno>
#include <climits>
#include <cstring>

static bool is_dir(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string builtin_data_dir() {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = 0;
        std::string dir(exe);
        dir = dir.substr(0, dir.rfind('/')) + "/data/builtin";
        if (is_dir(dir)) return dir;
    }
    std::string src = std::string(PRAC_SOURCE_DIR) + "/data/builtin";
    if (is_dir(src)) return src;
    fail("the built-in corpus is not found next to the binary nor in %s\n---> HINT: pass --train-data and "
         "--val-data, or run the binary from the repository it was built in", src.c_str());
}

std::string resolve_weights_path(const std::string& path) {
    if (is_dir(path)) return path + "/model.safetensors";
    return path;
}

void prepare_save_dir(const std::string& dir) {
    std::string partial;
    for (size_t i = 0; i <= dir.size(); i++) {
        if (i == dir.size() || dir[i] == '/') {
            if (!partial.empty() && !is_dir(partial) && mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
                fail("--save: cannot create directory %s (%s)", partial.c_str(), std::strerror(errno));
        }
        if (i < dir.size()) partial += dir[i];
    }
    if (access(dir.c_str(), W_OK) != 0)
        fail("--save: directory %s is not writable (%s)", dir.c_str(), std::strerror(errno));
}

void print_table(const char* title, const std::vector<std::pair<std::string, std::string>>& rows) {
    size_t w1 = std::strlen(title), w2 = 0;
    for (const auto& r : rows) {
        w1 = std::max(w1, r.first.size());
        w2 = std::max(w2, r.second.size());
    }
    std::string line = "+" + std::string(w1 + 2, '-') + "+" + std::string(w2 + 2, '-') + "+";
    std::printf("%s\n| %-*s | %-*s |\n%s\n", line.c_str(), (int)w1, title, (int)w2, "", line.c_str());
    for (const auto& r : rows) std::printf("| %-*s | %-*s |\n", (int)w1, r.first.c_str(), (int)w2, r.second.c_str());
    std::printf("%s\n", line.c_str());
}

std::string human_duration(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    long long t = (long long)(s + 0.5);
    if (t < 60) return format("%llds", t);
    if (t < 3600) return format("%lldm%02llds", t / 60, t % 60);
    return format("%lldh%02lldm", t / 3600, (t % 3600) / 60);
}

int print_plan(const TrainOptions& opts, const ModelConfig& cfg, const PracOptions& prac) {
    PlanTarget target = opts.device == "cpu"      ? PlanTarget::CPU_FP32
                        : opts.precision == "fp32" ? PlanTarget::CUDA_FP32
                                                   : PlanTarget::CUDA_BF16;
    OptimizerChoice optim = optimizer_choice_from(opts);
    MemoryPlan p = plan_memory(cfg, prac, opts.batch_size, opts.seq_len, target, &optim, opts.recompute);
    // what the plan leaves out and a GPU needs anyway: the CUDA context and allocator slack
    const size_t reserve = 1ull << 30;
    int max_b = opts.gpu_mem_gib > 0 ? plan_max_batch(cfg, prac, opts.seq_len, target,
                                                       (size_t)(opts.gpu_mem_gib * 1073741824.0), reserve, &optim,
                                                       opts.recompute)
                                     : -1;
    if (opts.json) {
        std::string j = plan_json(p);
        if (max_b >= 0) {
            j.pop_back();  // reopen the object: add the fit result
            while (!j.empty() && (j.back() == '\n' || j.back() == ' ')) j.pop_back();
            j += format(",\n  \"gpu_mem_gib\": %g,\n  \"reserve_bytes\": %zu,\n  \"max_batch_size\": %d\n}",
                        opts.gpu_mem_gib, reserve, max_b);
        }
        std::printf("%s\n", j.c_str());
        return 0;
    }
    std::printf("%s", plan_table(p).c_str());
    if (max_b >= 0) {
        if (max_b == 0)
            std::printf("does not fit in %g GiB even at micro-batch 1 (with a %.0f GiB reserve for the CUDA context)\n",
                        opts.gpu_mem_gib, reserve / 1073741824.0);
        else
            std::printf("largest micro-batch that fits in %g GiB at T=%d: %d (keeping %.0f GiB for the CUDA context "
                        "and allocator slack)\n", opts.gpu_mem_gib, opts.seq_len, max_b, reserve / 1073741824.0);
    }
    return 0;
}

std::unique_ptr<Tokenizer> sample_decoder(Arch arch, const TrainOptions& opts) {
    std::string data = builtin_data_dir();  // <root>/data/builtin
    std::string root = data.substr(0, data.rfind('/'));
    try {
        if (arch == Arch::GPT2) return std::make_unique<Gpt2Tokenizer>(root + "/gpt2/r50k_base.tiktoken");
        return std::make_unique<SpmTokenizer>(opts.spm_model.empty() ? data + "/austen_spm8k.model" : opts.spm_model);
    } catch (const UserError& e) {
        std::printf("note: cannot load a tokenizer to decode the sample (%s)\n", e.what());
        return nullptr;
    }
}
