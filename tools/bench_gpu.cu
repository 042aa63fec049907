// bench_gpu: training-step throughput and memory of the CUDA backend, PRAC off vs on, per model size (GPT-2 124M at
// B=64 T=1024; LLaMA-130M, 350M, 1B at B=128 T=256) on random tokens: ms/step, tok/s, MFU, measured peak bytes vs
// the plan and the cudaMemGetInfo delta, the refresh step's extra cost amortized over T1, the slowest step when the
// refreshes are staggered one site-layer per step (as the trainer runs them; with --refresh-overlap D one every D
// steps), and PRAC at the largest micro-batch the planner fits. Flags (usage() below): --quick (GPT-2 124M B=16 and
// LLaMA-130M B=32: the gpu_verify budget), --models (also gpt2-tiny, llama-tiny, and any other named model or Hugging
// Face config.json of GPT-2 or LLaMA, run at its architecture's B and T), --batch-size B / --seq-len T (every model's),
// --steps (default 10), --max-batch / --no-max-batch, --json FILE, --optimizers (one more row per other optimizer),
// --hidden-align A (LLaMA rows: the trainer's --hidden-align, to compare with and without), --initial-spread K (PRAC
// rows: the trainer's --prac-initial-spread, for the first step's time), --refresh-overlap D (PRAC rows: the trainer's
// --prac-refresh-overlap D, refreshes solved beside the steps), --grad-accum K (every step K micro-batches of B, as the
// trainer's --grad-accum: PRAC refreshes on the first only, so K is what a refresh is measured against; the paper's
// global batch of 512 sequences is B = 128 x K = 4 on one GPU), --tiny (a smoke run of every code path, e.g. emulated
// in `make test`; its numbers mean nothing). Every row is also printed as a "RESULT ..." line (scripts/gpu_verify.sh
// copies them). Without a CUDA device: exit 77 (REQUIRE_GPU=1: exit 1). How each number is measured and what MFU
// counts: docs/DESIGN.md section 9.4.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda_backend.cuh"
#include "model/config.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "train/planner.h"
#include "prac/prac.h"  // PracOptions, prac_mode_name
#include "common/device.h"  // gpu_unavailable_exit_code
#include "train/optim_adamw.h"  // grad_norm, clip_scale
#include "train/optimizers.h"  // make_optimizer, init_master_weights
#include "common/files.h"    // write_file_atomic, dir_of, file_size_limit_as_error
#include "common/strings.h"  // parse_whole
#include "common/error.h"    // fail (UserError: exit 2)

static const double GiB = 1024.0 * 1024.0 * 1024.0;

// CUDA calls of this program throw (so one config's failure is reported and the next runs); the backend's own
// cudaCheck exits the process, which is why every row is printed (and the JSON rewritten) as soon as it is known.
#define benchCheck(call)                                                                                   \
    do {                                                                                                   \
        cudaError_t e_ = (call);                                                                           \
        if (e_ != cudaSuccess)                                                                             \
            throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(e_));                \
    } while (0)

struct Row {
    std::string config, prac, note;  // note: "" ok, otherwise why there are no numbers
    std::string optimizer = "adamw";
    bool ran = false, max_batch = false;
    int B = 0, T = 0, steps = 0;
    int accum = 1;  // micro-batches of B per step (--grad-accum)
    double ms = 0, tok_s = 0, mfu = -1, loss = 0;
    double peak = 0, plan = 0, delta = 0;  // bytes
    double refresh_ms = -1, normal_ms = -1;  // PRAC: one refresh step vs the median normal step
    double stagger_worst_ms = -1;            // PRAC, staggered one site-layer per step: the slowest such step
    std::string stagger_worst_site;          // whose refresh it was (site, layer)
    int stagger_worst_j = -1;                // which step of its window: 0 begins it, D - 1 installs it
    int overlap = 0;                         // --refresh-overlap D
    double first_ms = -1;                    // the first step (PRAC: every site's cold refresh; GEMM plans, ...)
    double flops_token = 0;                  // model_flops_per_token of the config at this T
    int t1 = 0;
};

struct Bench {
    std::string name;
    Arch arch;
    int B, T;
};

static double peak_tflops(const std::string& gpu) {
    auto has = [&](const char* s) { return gpu.find(s) != std::string::npos; };
    if (has("H200")) return 989;
    if (has("H100")) {
        if (has("PCIe") || has("PCIE")) return 756;
        if (has("NVL")) return 835;
        return 989;  // SXM
    }
    if (has("A100")) return 312;
    return 0;  // unknown: MFU printed as "-"
}

static std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

static std::string json_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        if ((unsigned char)c < 0x20) { o += ' '; continue; }
        o += c;
    }
    return o;
}

// The results as JSON, rewritten whole after every row (write_file_atomic: never half a file) so that a run cut
// short keeps the rows it measured. `final`: a failure ends the run with its message and exit 2; before that a
// warning, and the rows still print (the path's directory was checked writable at the start).
static void write_json(const std::string& path, const std::string& gpu, double peak_tf, const std::vector<Row>& rows,
                       bool final = false) {
    if (path.empty()) return;
    std::string f = format("{\n  \"gpu\": \"%s\",\n  \"peak_bf16_tflops\": %g,\n  \"results\": [\n",
                           json_escape(gpu).c_str(), peak_tf);
    for (size_t i = 0; i < rows.size(); i++) {
        const Row& r = rows[i];
        f += format("    {\"config\": \"%s\", \"prac\": \"%s\", \"optimizer\": \"%s\", \"max_batch\": %s, "
                    "\"B\": %d, \"T\": %d, \"grad_accum\": %d, \"ran\": %s, "
                    "\"note\": \"%s\", \"steps\": %d, \"ms_per_step\": %.4f, \"tokens_per_s\": %.1f, \"mfu\": %s, "
                    "\"loss\": %.5f, \"peak_bytes\": %.0f, \"plan_bytes\": %.0f, \"memgetinfo_delta_bytes\": %.0f, "
                    "\"refresh_step_ms\": %s, \"normal_step_ms\": %s, \"first_step_ms\": %s, \"t1\": %d, "
                    "\"staggered_worst_step_ms\": %s, \"refresh_overlap\": %d}%s\n",
                    r.config.c_str(), r.prac.c_str(), r.optimizer.c_str(), r.max_batch ? "true" : "false", r.B, r.T,
                    r.accum, r.ran ? "true" : "false", json_escape(r.note).c_str(), r.steps, r.ms, r.tok_s,
                    r.mfu >= 0 ? fmt("%.4f", r.mfu).c_str() : "null", r.loss, r.peak, r.plan, r.delta,
                    r.refresh_ms >= 0 ? fmt("%.4f", r.refresh_ms).c_str() : "null",
                    r.normal_ms >= 0 ? fmt("%.4f", r.normal_ms).c_str() : "null",
                    r.first_ms >= 0 ? fmt("%.4f", r.first_ms).c_str() : "null", r.t1,
                    r.stagger_worst_ms >= 0 ? fmt("%.4f", r.stagger_worst_ms).c_str() : "null", r.overlap,
                    i + 1 < rows.size() ? "," : "");
    }
    f += "  ]\n}\n";
    if (final) return write_file_atomic(path, f);
    try {
        write_file_atomic(path, f);
    } catch (const UserError& e) {
        std::fprintf(stderr, "bench_gpu: warning: %s (tried again at the end)\n", e.what());
    }
}

// A row's name in the printed tables: a named model's, or for a --models config file the file's name without
// ".json" (its directory's for a config.json), so the columns stay aligned; RESULT lines and the JSON keep the path.
static std::string shown(const std::string& config) {
    const size_t slash = config.rfind('/');
    std::string file = slash == std::string::npos ? config : config.substr(slash + 1);
    if (file == "config.json" && slash != std::string::npos && slash > 0) return shown(config.substr(0, slash));
    if (file.size() > 5 && file.compare(file.size() - 5, 5, ".json") == 0) file.resize(file.size() - 5);
    return file;
}

static void print_header() {
    std::printf("%-12s %-14s %5s %10s %11s %6s %9s %9s %9s %9s %8s  %s\n", "config", "prac/opt", "B", "ms/step",
                "tok/s", "MFU", "peak GiB", "plan GiB", "peak/plan", "dMem GiB", "loss", "note");
}

static void print_row(const Row& r) {
    // the prac column also names a non-default optimizer: "none+rso"
    std::string prac = r.prac + (r.optimizer != "adamw" ? "+" + r.optimizer : "") + (r.max_batch ? "*" : "");
    if (!r.ran) {
        std::printf("%-12s %-14s %5d %10s %11s %6s %9s %9s %9s %9s %8s  %s\n", shown(r.config).c_str(), prac.c_str(),
                    r.B, "-", "-", "-", "-", r.plan > 0 ? fmt("%.2f", r.plan / GiB).c_str() : "-", "-", "-", "-",
                    r.note.c_str());
    } else {
        std::printf("%-12s %-14s %5d %10.2f %11.0f %6s %9.2f %9.2f %9.3f %9.2f %8.4f  %s\n", shown(r.config).c_str(),
                    prac.c_str(), r.B, r.ms, r.tok_s, r.mfu >= 0 ? fmt("%.1f%%", 100 * r.mfu).c_str() : "-",
                    r.peak / GiB, r.plan / GiB, r.plan > 0 ? r.peak / r.plan : 0.0, r.delta / GiB, r.loss,
                    r.note.c_str());
    }
    // one machine-readable line per row (gpu_verify copies "RESULT " lines into its summary)
    std::printf("RESULT bench_gpu config=%s prac=%s optimizer=%s B=%d T=%d status=%s ms_per_step=%.3f tok_s=%.0f "
                "mfu=%s peak_gib=%.3f plan_gib=%.3f peak_over_plan=%.4f memgetinfo_delta_gib=%.3f grad_accum=%d "
                "overlap=%d\n",
                r.config.c_str(), prac.c_str(), r.optimizer.c_str(), r.B, r.T, r.ran ? "ok" : "skipped", r.ms, r.tok_s,
                r.mfu >= 0 ? fmt("%.4f", r.mfu).c_str() : "-", r.peak / GiB, r.plan / GiB,
                r.ran && r.plan > 0 ? r.peak / r.plan : 0.0, r.delta / GiB, r.accum, r.overlap);
    std::fflush(stdout);
}

// MFU's model flops per token at sequence length T (see the top): 6 N + 6 L C T, N = every parameter in specs
// except an untied input embedding ("wte" when cfg.tied_embeddings is false: LLaMA's).
static double model_flops_per_token(const ModelConfig& cfg, const std::vector<ParamSpec>& specs, int T) {
    size_t N = count_params(specs);
    if (!cfg.tied_embeddings)
        for (const ParamSpec& s : specs)
            if (s.name == "wte") N -= s.numel;
    return 6.0 * (double)N + 6.0 * (double)cfg.num_layers * cfg.channels * T;
}

// One config x PRAC mode x B: plan, fit check, build, warm up, time.
template <template <class> class M>
static void run_one(Row& r, const ModelConfig& cfg, PracOptions prac, const OptimizerChoice& oc, int B, int T,
                    int steps, double peak_tf, bool time_refresh) {
    r.B = B;
    r.T = T;
    r.steps = steps;
    r.t1 = prac.t1;
    r.overlap = prac.mode != PracMode::NONE ? prac.overlap : 0;
#if defined(PRAC_FP32)
    const PlanTarget target = PlanTarget::CUDA_FP32;
#else
    const PlanTarget target = PlanTarget::CUDA_BF16;
#endif
    prac.rso_rank = rso_rank_of(oc, cfg);  // RSO: the linear sites store X·P with the optimizer's P
    MemoryPlan plan = plan_memory(cfg, prac, B, T, target, &oc, 0);
    r.plan = (double)plan.total;

    size_t free0 = 0, total = 0;
    benchCheck(cudaDeviceSynchronize());
    benchCheck(cudaMemGetInfo(&free0, &total));
    if (plan.total > free0) {
        r.note = "does not fit: plan " + fmt("%.2f", plan.total / GiB) + " GiB > free " + fmt("%.2f", free0 / GiB) +
                 " GiB";
        return;
    }

    const int K = r.accum;  // micro-batches per step, each its own random tokens
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> tok(0, cfg.vocab_size - 1);
    std::vector<int32_t> inputs((size_t)K * B * T), targets((size_t)K * B * T);  // (K, B, T)
    for (auto& x : inputs) x = tok(rng);
    for (auto& x : targets) x = tok(rng);
    const float grad_scale = 1.0f / (float)((size_t)K * B * T);
    const float lr = 3e-4f, max_norm = 1.0f;

    {
        CudaBackend be(0, 42);
        M<CudaBackend> model(be, cfg, prac, 0);
        model.init_weights(1337);
        model.allocate_activations(B, T);
        r.flops_token = model_flops_per_token(cfg, model.param_specs, T);
        size_t n = model.param_buffer_numel;
        auto opt = make_optimizer(be, oc, cfg, model.param_specs, n, 0, n);
        init_master_weights(be, *opt, model.params_memory, n);
        opt->bind_sites(model.sites);

        int64_t step_index = 0;
        float loss = 0;
        auto one_step_with = [&](const PracOptions& o, int64_t s) {
            model.zero_grad();
            model.sched.begin_step(o, s);
            for (int m = 0; m < K; m++) {  // the trainer's step: no wait here; refreshes on the first micro-batch
                const size_t at = (size_t)m * B * T;
                model.train_forward(inputs.data() + at, targets.data() + at, grad_scale, K);
                model.backward();
            }
            float norm = grad_norm(be, model.grads_memory, n);
            loss = be.loss_read();
            model.install_refreshes();  // --refresh-overlap: as the trainer, before the update
            opt->step(model.params_memory, model.grads_memory, model.param_specs, lr, clip_scale(norm, max_norm));
            be.synchronize();
        };
        auto one_step = [&](int64_t s) { one_step_with(prac, s); };
        auto timed_with = [&](const PracOptions& o, int64_t s) {
            auto t0 = std::chrono::steady_clock::now();
            one_step_with(o, s);
            return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        };
        auto timed = [&](int64_t s) { return timed_with(prac, s); };
        r.first_ms = timed(step_index++);  // step 0: PRAC's cold refresh of every site (it cannot be staggered)
        for (int i = 0; i < 2; i++) one_step(step_index++);
        // the timed steps must not refresh: skip past any step that would (T1/T2 small, or a spread first refresh)
        auto refreshes = [&](int64_t s) {
            return prac.mode != PracMode::NONE && ((prac.t1 > 0 && s % prac.t1 == 0) ||
                                                   (prac.t2 > 0 && s % prac.t2 == 0) || s < prac.initial_spread);
        };
        std::vector<double> normal;  // the timed steps' ms
        while ((int)normal.size() < steps) {
            if (refreshes(step_index)) { step_index++; continue; }
            normal.push_back(timed(step_index++));
        }
        double total_ms = 0;
        for (double ms : normal) total_ms += ms;
        r.ms = total_ms / steps;  // throughput: the mean
        std::sort(normal.begin(), normal.end());
        r.loss = loss;
        r.tok_s = (double)K * B * T / (r.ms / 1000.0);
        if (peak_tf > 0) r.mfu = r.flops_token * r.tok_s / (peak_tf * 1e12);
        if (time_refresh && prac.mode != PracMode::NONE && prac.t1 > 0) {
            int64_t s = ((step_index + prac.t1 - 1) / prac.t1) * prac.t1;  // next Q1 refresh (Q2 is redrawn with it)
            r.refresh_ms = timed(s);
            // issue #15's "no step above 1.2x the median step": the median, which one slow step cannot move
            r.normal_ms = normal[normal.size() / 2];
            // --refresh-overlap D: what step s began is installed D - 1 steps later; those steps, untimed, keep it out
            // of the staggered windows below
            for (int64_t j = 1; j < std::max(1, prac.overlap); j++) one_step(s + j);
            // Staggered, as the trainer refreshes (prac/site.h PracSchedule): with T1 = T2 = k x the model's
            // refresh units, unit u refreshes alone, Q1 and Q2, on the steps = u k (mod T1), one every k steps.
            // Units are layer x sites + site, and the layers' sites have the same shapes, so the steps refreshing
            // one layer's sites show every site kind: layer 0's, whose inputs are saved first in forward (an
            // overlapped solve has the rest of the step to hide in), and the last layer's, saved last (the worst
            // case for the overlap). k = 1 in place; k = D with --refresh-overlap D, so that each
            // solve has its D steps before the next one begins (training's T1 / units, 6 for llama-130m at T1 =
            // 500, gives it as much; with k = 1 every begin would wait for the previous solve). Every step of
            // those windows is timed: the one that begins the refresh, the ones it overlaps, the one installing it.
            PracOptions st = prac;
            st.stagger = true;
            const int k = std::max(1, prac.overlap);
            st.t1 = st.t2 = k * model.sched.units;
            st.initial_spread = 0;
            const int64_t s0 = (s / st.t1 + 1) * st.t1;
            auto q1_refreshes = [&]() {  // every site-layer's Q1 refreshes so far, those in flight included
                int64_t c = 0;
                for (const auto& site : model.sites) {
                    for (int64_t q : site.q1_refreshes) c += q;
                    c += (int64_t)site.pending.size();  // --refresh-overlap: each refreshes Q1 and Q2 here
                }
                return c;
            };
            auto unit_refreshes = [&](const auto& site, int layer) {  // the same, of one site-layer
                int64_t c = site.q1_refreshes[layer];
                for (const auto& q : site.pending) c += q.layer == layer;
                return c;
            };
            const int S = (int)model.sites.size(), L = cfg.num_layers;
            for (int layer : L > 1 ? std::vector<int>{0, L - 1} : std::vector<int>{0}) {
                for (int site = 0; site < S; site++) {
                    const auto& ps = model.sites[site];
                    if (!ps.dims.compressed) continue;
                    const int64_t u = (int64_t)layer * S + (int)ps.id;  // its refresh unit (model/llama.h forward)
                    for (int j = 0; j < k; j++) {
                        const int64_t step = s0 + u * k + j, before = q1_refreshes(), mine = unit_refreshes(ps, layer);
                        double ms = timed_with(st, step);
                        const int64_t began = q1_refreshes() - before;  // an install moves one from pending
                        // the schedule must refresh this one site-layer alone
                        if (began != (j == 0 ? 1 : 0) || unit_refreshes(ps, layer) - mine != began)
                            throw std::runtime_error("staggered step " + std::to_string(step) + " began " +
                                                     std::to_string(began) + " site-layer refreshes, not " +
                                                     (j == 0 ? "1 (" : "0 (") + ps.name + ", layer " +
                                                     std::to_string(layer) + ")");
                        if (ms > r.stagger_worst_ms) {
                            r.stagger_worst_ms = ms;
                            r.stagger_worst_site = model.sites[site].name + "/layer" + std::to_string(layer) + "/n" +
                                                   std::to_string(model.sites[site].n);
                            r.stagger_worst_j = j;
                        }
                    }
                }
            }
        }
        be.synchronize();
        size_t free1 = 0;
        benchCheck(cudaMemGetInfo(&free1, &total));
        r.peak = (double)be.peak_bytes;
        r.delta = free0 > free1 ? (double)(free0 - free1) : 0.0;
        if (!std::isfinite(loss)) r.note = "non-finite loss";
        r.ran = true;
    }
    benchCheck(cudaDeviceSynchronize());
}

static void usage() {
    std::printf("usage: bench_gpu [--quick] [--tiny] [--models gpt2-124m,llama-130m,llama-350m,llama-1b] [--steps N]\n"
                "                 (--models also takes gpt2-tiny, llama-tiny, and any other named model or path to a\n"
                "                 Hugging Face config.json of GPT-2 or LLaMA, run at the B and T of gpt2-124m or\n"
                "                 llama-130m)\n"
                "                 [--batch-size B] [--seq-len T]  (every model's micro-batch and sequence length)\n"
                "                 [--max-batch | --no-max-batch] [--json FILE] [--optimizers adamw,muon,adam-mini,"
                "galore,rso]\n                 [--hidden-align A] [--initial-spread K] [--grad-accum K]\n"
                "                 [--refresh-overlap D]\n");
}

static int bench_main(int argc, char** argv) {
    bool quick = false, tiny = false;
    int steps = -1, maxb = -1;  // -1: default
    int hidden_align = 1;       // LLaMA: the trainer's --hidden-align
    int initial_spread = 0;     // PRAC: the trainer's --prac-initial-spread
    int refresh_overlap = 0;    // PRAC: the trainer's --prac-refresh-overlap
    int grad_accum = 1;         // micro-batches per step: the trainer's --grad-accum
    int batch_size = 0, seq_len = 0;  // every model's B and T (0: the table's)
    std::string models_arg, json, optimizers_arg = "adamw";
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_gpu: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--quick") quick = true;
        else if (a == "--tiny") tiny = true;
        else if (a == "--models") models_arg = next();
        else if (a == "--steps") steps = (int)parse_whole("--steps", next(), 1, 1000000);
        else if (a == "--json") json = next();
        else if (a == "--optimizers") optimizers_arg = next();
        else if (a == "--hidden-align") hidden_align = (int)parse_whole("--hidden-align", next(), 1, 256);
        else if (a == "--initial-spread") initial_spread = (int)parse_whole("--initial-spread", next(), 0, 1000000);
        else if (a == "--refresh-overlap") refresh_overlap = (int)parse_whole("--refresh-overlap", next(), 0, 8);
        else if (a == "--grad-accum") grad_accum = (int)parse_whole("--grad-accum", next(), 1, 64);
        else if (a == "--batch-size") batch_size = (int)parse_whole("--batch-size", next(), 1, 65536);
        else if (a == "--seq-len") seq_len = (int)parse_whole("--seq-len", next(), 1, 1 << 20);
        else if (a == "--max-batch") maxb = 1;
        else if (a == "--no-max-batch") maxb = 0;
        else if (a == "-h" || a == "--help") { usage(); return 0; }
        else {
            std::fprintf(stderr, "bench_gpu: unknown flag %s\n", a.c_str());
            usage();
            return 2;
        }
    }
    if (steps < 0) steps = quick ? 5 : 10;
    // the results of a run of minutes to hours go to --json: a path they cannot go to is refused before it
    if (!json.empty() && access(dir_of(json).c_str(), W_OK) != 0)
        fail("--json %s: cannot write into %s (%s)\n---> HINT: give a file in an existing, writable directory",
             json.c_str(), dir_of(json).c_str(), std::strerror(errno));
    if (!json.empty() && (json.back() == '/' || std::filesystem::is_directory(json)))
        fail("--json %s: that is a directory\n---> HINT: give a file path (e.g. %s/bench.json)", json.c_str(),
             json.c_str());
    bool do_maxb = maxb < 0 ? !quick : maxb == 1;

    std::vector<std::string> extra_optimizers;  // besides AdamW (the PRAC rows' optimizer)
    for (size_t p = 0; p <= optimizers_arg.size();) {
        size_t q = optimizers_arg.find(',', p);
        if (q == std::string::npos) q = optimizers_arg.size();
        std::string o = optimizers_arg.substr(p, q - p);
        p = q + 1;
        if (o.empty() || o == "adamw") continue;
        if (o != "muon" && o != "adam-mini" && o != "galore" && o != "rso") {
            std::fprintf(stderr, "bench_gpu: unknown optimizer %s (adamw, muon, adam-mini, galore, rso)\n", o.c_str());
            return 2;
        }
        extra_optimizers.push_back(o);
    }

    std::vector<Bench> table = {{"gpt2-124m", Arch::GPT2, 64, 1024},
                                {"llama-130m", Arch::LLAMA, 128, 256},
                                {"llama-350m", Arch::LLAMA, 128, 256},
                                {"llama-1b", Arch::LLAMA, 128, 256}};
    if (quick) table = {{"gpt2-124m", Arch::GPT2, 16, 1024}, {"llama-130m", Arch::LLAMA, 32, 256}};
    if (tiny) table = {{"gpt2-tiny", Arch::GPT2, 2, 64}, {"llama-tiny", Arch::LLAMA, 2, 64}};
    if (!models_arg.empty()) {
        std::vector<Bench> all = {{"gpt2-124m", Arch::GPT2, quick ? 16 : 64, 1024},
                                  {"llama-130m", Arch::LLAMA, quick ? 32 : 128, 256},
                                  {"llama-350m", Arch::LLAMA, quick ? 32 : 128, 256},
                                  {"llama-1b", Arch::LLAMA, quick ? 32 : 128, 256},
                                  {"gpt2-tiny", Arch::GPT2, 2, 64},  // the emulated smoke runs
                                  {"llama-tiny", Arch::LLAMA, 2, 64}};
        table.clear();
        size_t p = 0;
        while (p <= models_arg.size()) {
            size_t q = models_arg.find(',', p);
            if (q == std::string::npos) q = models_arg.size();
            std::string m = models_arg.substr(p, q - p);
            p = q + 1;
            if (m.empty()) continue;
            auto it = std::find_if(all.begin(), all.end(), [&](const Bench& b) { return b.name == m; });
            if (it != all.end()) {
                table.push_back(*it);
                continue;
            }
            // another named model or a config.json: its architecture's row of the table (gpt2-124m's or
            // llama-130m's B and T)
            const Arch arch = model_config_arch(m);  // (UserError: exit 2)
            if (arch != Arch::GPT2 && arch != Arch::LLAMA)
                fail("--models %s: a %s config; bench_gpu runs GPT-2 and LLaMA", m.c_str(), arch_name(arch));
            Bench b = all[arch == Arch::GPT2 ? 0 : 1];
            b.name = m;
            table.push_back(b);
        }
    }
    for (Bench& b : table) {  // (a config file is read once more, by the run)
        const int positions = model_config_load(b.arch, b.name).max_seq_len;
        if (seq_len > positions) fail("--seq-len %d: longer than %s's %d positions", seq_len, b.name.c_str(), positions);
        b.T = seq_len ? seq_len : std::min(b.T, positions);
        if (batch_size) b.B = batch_size;
    }
    // (after every flag's check: a bad one is exit 2 on a machine without a GPU too, not its skip)
    int unavailable = gpu_unavailable_exit_code("bench_gpu");
    if (unavailable >= 0) return unavailable;

    std::string gpu = "?";
    double peak_tf = 0;
    try {
        int dev = 0;
        cudaDeviceProp prop;
        benchCheck(cudaSetDevice(dev));
        benchCheck(cudaGetDeviceProperties(&prop, dev));
        gpu = prop.name;
        peak_tf = peak_tflops(gpu);
        size_t fr = 0, tot = 0;
        benchCheck(cudaMemGetInfo(&fr, &tot));
        std::printf("bench_gpu: %s (sm_%d%d, %.1f GiB, %.1f GiB free), peak bf16 dense %s TFLOP/s, %s build\n",
                    gpu.c_str(), prop.major, prop.minor, tot / GiB, fr / GiB,
                    peak_tf > 0 ? fmt("%.0f", peak_tf).c_str() : "unknown (MFU '-')",
#if defined(PRAC_FP32)
                    "FP32"
#else
                    "BF16"
#endif
        );
    } catch (const std::exception& e) {
        std::printf("FAIL bench_gpu: %s\n", e.what());
        return 1;
    }
    std::printf("%d warmup + %d timed steps of %d x (forward + backward) + AdamW on random tokens (--grad-accum); "
                "MFU = (6N + 6LCT) * tok/s / peak, N without LLaMA's untied input embedding (PRAC's extra work is "
                "not counted as model flops); * = PRAC at the planner's largest micro-batch (1 GiB reserve); "
                "LLaMA's (N, F) rows at stride F rounded up to a multiple of %d (--hidden-align); PRAC's first "
                "refreshes spread over %d steps "
                "(--initial-spread)\n\n",
                3, steps, grad_accum, hidden_align, initial_spread);
    print_header();

    std::vector<Row> rows;
    struct Pair { int none = -1, prac = -1, maxb = -1; };
    std::vector<Pair> pairs(table.size());
    int failures = 0;
    for (size_t ci = 0; ci < table.size(); ci++) {
        const Bench& b = table[ci];
        ModelConfig cfg;
        try {
            cfg = model_config_load(b.arch, b.name);
            if (cfg.arch == Arch::LLAMA) cfg.hidden_align = hidden_align;
        } catch (const std::exception& e) {
            Row r;
            r.config = b.name;
            r.prac = "-";
            r.B = b.B;
            r.accum = grad_accum;
            r.T = b.T;
            r.note = std::string("error: ") + e.what();
            rows.push_back(r);
            print_row(r);
            failures++;
            continue;
        }
        for (int pm = 0; pm < 3; pm++) {
            PracOptions prac;  // the paper's defaults: ranks 0.3 + 0.3 / 0.2 + 0.2, T1 = T2 = 500
            prac.mode = pm == 0 ? PracMode::NONE : PracMode::PRAC;
            // every site-layer refreshes on multiples of T1 (not staggered, as training does): the refresh step
            // timed below then holds all of one period's refresh work, which the report amortizes over T1
            prac.stagger = false;
            prac.refresh = PracRefresh::SUBSPACE;  // the trainer's default (--prac-refresh auto)
            prac.initial_spread = initial_spread;
            prac.overlap = refresh_overlap;
            int B = b.B;
            if (pm == 2) {  // PRAC at the largest micro-batch that fits
                if (!do_maxb) break;
                try {
                    size_t fr = 0, tot = 0;
                    benchCheck(cudaMemGetInfo(&fr, &tot));
#if defined(PRAC_FP32)
                    B = plan_max_batch(cfg, prac, b.T, PlanTarget::CUDA_FP32, fr, 1ull << 30);
#else
                    B = plan_max_batch(cfg, prac, b.T, PlanTarget::CUDA_BF16, fr, 1ull << 30);
#endif
                } catch (const std::exception& e) {
                    std::printf("  (%s: plan_max_batch failed: %s)\n", b.name.c_str(), e.what());
                    break;
                }
                if (B <= 0 || B == b.B) break;
            }
            Row r;
            r.config = b.name;
            r.prac = prac_mode_name(prac.mode);
            r.max_batch = pm == 2;
            r.B = B;
            r.accum = grad_accum;
            r.T = b.T;
            try {
                OptimizerChoice adamw;  // the trainer's defaults
                if (b.arch == Arch::GPT2) run_one<GPT2>(r, cfg, prac, adamw, B, b.T, steps, peak_tf, pm == 1);
                else run_one<Llama>(r, cfg, prac, adamw, B, b.T, steps, peak_tf, pm == 1);
            } catch (const std::exception& e) {
                r.ran = false;
                r.note = std::string("error: ") + e.what();
                failures++;
                cudaGetLastError();  // clear a sticky-free error so the next config can try
            }
            rows.push_back(r);
            int idx = (int)rows.size() - 1;
            (pm == 0 ? pairs[ci].none : pm == 1 ? pairs[ci].prac : pairs[ci].maxb) = idx;
            print_row(r);
            write_json(json, gpu, peak_tf, rows);
        }
        for (const std::string& kind : extra_optimizers) {  // the other optimizers, PRAC off, the baseline's B
            Row r;
            r.config = b.name;
            r.prac = "none";
            r.optimizer = kind;
            r.B = b.B;
            r.accum = grad_accum;
            r.T = b.T;
            OptimizerChoice oc;
            oc.kind = kind;
            try {
                if (b.arch == Arch::GPT2) run_one<GPT2>(r, cfg, PracOptions(), oc, b.B, b.T, steps, peak_tf, false);
                else run_one<Llama>(r, cfg, PracOptions(), oc, b.B, b.T, steps, peak_tf, false);
            } catch (const std::exception& e) {
                r.ran = false;
                r.note = std::string("error: ") + e.what();
                failures++;
                cudaGetLastError();
            }
            rows.push_back(r);
            print_row(r);
            write_json(json, gpu, peak_tf, rows);
        }
    }

    // PRAC / baseline, side by side per config
    std::printf("\nPRAC / baseline (same B unless marked *):\n");
    std::printf("%-12s %5s %10s %10s %10s %10s  %s\n", "config", "B", "peak", "plan", "ms/step", "tok/s", "");
    for (size_t ci = 0; ci < table.size(); ci++) {
        const Pair& p = pairs[ci];
        if (p.prac < 0) continue;
        const Row& pr = rows[p.prac];
        const Row* base = p.none >= 0 ? &rows[p.none] : nullptr;
        auto ratio = [](double a, double b) { return b > 0 && a > 0 ? fmt("%.3f", a / b) : std::string("-"); };
        if (base && base->ran && pr.ran) {
            std::printf("%-12s %5d %10s %10s %10s %10s\n", shown(table[ci].name).c_str(), pr.B,
                        ratio(pr.peak, base->peak).c_str(), ratio(pr.plan, base->plan).c_str(),
                        ratio(pr.ms, base->ms).c_str(), ratio(pr.tok_s, base->tok_s).c_str());
        } else {
            std::printf("%-12s %5d %10s %10s %10s %10s  baseline %s, prac %s\n", shown(table[ci].name).c_str(), pr.B,
                        "-", base ? ratio(pr.plan, base->plan).c_str() : "-", "-", "-",
                        base ? (base->ran ? "ran" : base->note.c_str()) : "missing",
                        pr.ran ? "ran" : pr.note.c_str());
        }
        if (p.maxb >= 0 && rows[p.maxb].ran) {
            const Row& m = rows[p.maxb];
            std::printf("%-12s %4d* %10s %10s %10s %10s  (PRAC at its max micro-batch vs baseline at B=%d)\n",
                        shown(table[ci].name).c_str(), m.B, base && base->ran ? ratio(m.peak, base->peak).c_str() : "-",
                        base ? ratio(m.plan, base->plan).c_str() : "-",
                        base && base->ran ? ratio(m.ms, base->ms).c_str() : "-",
                        base && base->ran ? ratio(m.tok_s, base->tok_s).c_str() : "-", base ? base->B : 0);
        }
    }

    // the cost of one PRAC basis refresh, amortized over T1
    std::printf("\nPRAC refresh cost (one step where begin_step redraws Q1/Q2, vs a normal step):\n");
    for (size_t ci = 0; ci < table.size(); ci++) {
        const Pair& p = pairs[ci];
        if (p.prac < 0 || !rows[p.prac].ran || rows[p.prac].refresh_ms < 0) continue;
        const Row& r = rows[p.prac];
        double extra = r.refresh_ms - r.normal_ms;
        double amort = r.t1 > 0 ? extra / r.t1 : 0;
        const Row* base = p.none >= 0 && rows[p.none].ran ? &rows[p.none] : nullptr;
        std::printf("refresh %-12s B=%d x %d refresh step %.2f ms, normal step %.2f ms: +%.2f ms per refresh, "
                    "amortized over T1=%d: +%.3f ms/step (%.2f%%); first step %.2f ms (%.2fx the normal step; "
                    "baseline's first step %s ms)\n",
                    shown(r.config).c_str(), r.B, r.accum, r.refresh_ms, r.normal_ms, extra, r.t1, amort,
                    r.normal_ms > 0 ? 100.0 * amort / r.normal_ms : 0.0, r.first_ms,
                    r.normal_ms > 0 ? r.first_ms / r.normal_ms : 0.0, base ? fmt("%.2f", base->first_ms).c_str() : "-");
        std::printf("        staggered (one site-layer's Q1 and Q2 %s; layers 0 and L-1): the slowest step %.2f ms, "
                    "%.2fx the median normal step, refreshing %s (step %d of its window)\n",
                    refresh_overlap ? ("every " + std::to_string(refresh_overlap) + " step(s), each overlapped over " +
                                       std::to_string(refresh_overlap) + " step(s)").c_str()
                                    : "per step",
                    r.stagger_worst_ms,
                    r.normal_ms > 0 ? r.stagger_worst_ms / r.normal_ms : 0.0, r.stagger_worst_site.c_str(),
                    r.stagger_worst_j);
        std::printf("RESULT bench_gpu refresh config=%s B=%d refresh_ms=%.3f normal_ms=%.3f extra_ms=%.3f t1=%d "
                    "amortized_ms_per_step=%.4f first_ms=%.3f baseline_first_ms=%s staggered_worst_ms=%.3f "
                    "staggered_worst_over_normal=%.3f overlap=%d grad_accum=%d worst_site=%s worst_j=%d "
                    "normal_median_of=%d\n",
                    r.config.c_str(), r.B, r.refresh_ms, r.normal_ms, extra, r.t1, amort, r.first_ms,
                    base ? fmt("%.3f", base->first_ms).c_str() : "-", r.stagger_worst_ms,
                    r.normal_ms > 0 ? r.stagger_worst_ms / r.normal_ms : 0.0, refresh_overlap, r.accum,
                    r.stagger_worst_site.c_str(), r.stagger_worst_j, r.steps);
    }
    write_json(json, gpu, peak_tf, rows, /*final=*/true);
    if (!json.empty()) std::printf("\nwrote %s\n", json.c_str());

    // --tiny: the MFU numerator against a hand count of the tiny models' matmul weights (model/config.cpp, the
    // layouts in model/gpt2.h and model/llama.h), T = 64, 6 L C T = 6 * 2 * 64 * 64 = 49152:
    //   gpt2-tiny (L 2, C 64, Vp 50304, maxT 64): N = Vp C + maxT C + L (12 C² + 13 C) + 2 C
    //     = 3219456 + 4096 + 2 * (49152 + 832) + 128 = 3323648 (wte is also the LM head: counted once)
    //     -> 6 * 3323648 + 49152 = 19991040
    //   llama-tiny (L 2, C 64, F 176, V = Vp 32000): N - V C = L (4 C² + 3 F C + 2 C) + C + V C (the LM head; the
    //     input embedding is a lookup) = 2 * (16384 + 33792 + 128) + 64 + 2048000 = 2148672
    //     -> 6 * 2148672 + 49152 = 12941184
    if (tiny && models_arg.empty() && batch_size == 0 && seq_len == 0) {
        std::printf("\nMFU flop count (6N + 6LCT per token) vs the hand count:\n");
        const std::pair<std::string, double> hand[] = {{"gpt2-tiny", 19991040.0}, {"llama-tiny", 12941184.0}};
        for (const auto& h : hand) {
            auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& r) {
                return r.config == h.first && r.prac == "none" && r.optimizer == "adamw" && !r.max_batch;
            });
            double got = it == rows.end() ? 0.0 : it->flops_token;
            bool ok = got == h.second;
            std::printf("  [%s] %s at T=64: %.0f model flops per token (hand count %.0f)\n", ok ? "ok" : "FAIL",
                        h.first.c_str(), got, h.second);
            failures += !ok;
        }
    }
    return failures ? 1 : 0;
}

int main(int argc, char** argv) {
    file_size_limit_as_error();  // a full --json under `ulimit -f` is an error, not a silent kill
    try {
        return bench_main(argc, argv);
    } catch (const UserError& e) {  // a bad flag value, --json's directory: before any GPU work
        std::fprintf(stderr, "bench_gpu: %s\n", e.what());
        return 2;
    }
}
