// The training loop shared by train_gpt2 and train_llama: flags -> config -> data -> model -> steps.
// One optimizer step, top to bottom, is train_step(); the model's forward/backward live in model/*.h.
#pragma once
#include <omp.h>

#include <chrono>
#include <memory>
#include <cmath>
#include <cstdio>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/device.h"
#include "common/error.h"
#include "data/dataloader.h"
#include "kernels/cpu_backend.h"
#include "model/config.h"
#include "model/weights.h"
#include "train/cli.h"
#include "train/metrics_log.h"
#include "train/optimizer.h"
#include "plan/planner.h"

// Directory of the built-in corpus: next to the binary (binaries live at the repository root), else the
// source tree this binary was built from.
std::string builtin_data_dir();
// Resolves --init-from: a .safetensors file, or a directory holding model.safetensors.
std::string resolve_weights_path(const std::string& path);
// Creates DIR (and parents) for --save, failing with a clear message when it cannot.
void prepare_save_dir(const std::string& dir);
void print_table(const char* title, const std::vector<std::pair<std::string, std::string>>& rows);
std::string human_duration(double seconds);

// --plan: the memory plan of this config (and with --gpu-mem, the largest micro-batch that fits), then exit.
int print_plan(const TrainOptions& opts, const ModelConfig& cfg, const PracOptions& prac);

// The PRAC sites of a model: class, width, ranks, k and bytes saved per layer.
template <class Site>
void print_site_table(const std::vector<Site>& sites, int L) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const Site& s : sites)
        rows.push_back({s.name, s.compressed()
                                    ? format("%-9s n=%-5d r1=%-4d r2=%-4d k=%-7.3f kept %.0f%% of the width",
                                             s.cls == SiteClass::LINEAR ? "linear" : "nonlinear", s.n, s.dims.r1,
                                             s.dims.r2, s.dims.k, 100.0 * s.r() / s.n)
                                    : format("%-9s n=%-5d exact", s.cls == SiteClass::LINEAR ? "linear" : "nonlinear",
                                             s.n)});
    print_table(format("PRAC sites (x %d layers)", L).c_str(), rows);
}

// Mean loss over the non-ignored targets of `batches` validation micro-batches, from the loader's start.
template <class Model>
float evaluate(Model& model, DataLoader& val, long long eval_tokens, long long* tokens_seen) {
    int B = model.B, T = model.T;
    long long batches = (eval_tokens + (long long)B * T - 1) / ((long long)B * T);
    if (batches > val.steps_per_epoch()) batches = val.steps_per_epoch();  // never count a token twice
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
    val.reset();
    double sum = 0;
    long long count = 0;
    for (long long i = 0; i < batches; i++) {
        val.next_batch(inputs.data(), targets.data());
        long long c = count_target_tokens(targets.data(), targets.size());
        if (c == 0) continue;
        sum += (double)model.forward(inputs.data(), targets.data(), 0.0f) * c;
        count += c;
    }
    *tokens_seen = count;
    return count ? (float)(sum / count) : NAN;
}

template <template <class> class Model>
int train_main(Arch arch, const char* program, int argc, char** argv) {
    TrainOptions opts;
    parse_train_options(opts, argc, argv);
    if (opts.help) {
        std::printf("%s", train_options_help(arch, program).c_str());
        return 0;
    }

    // ---- config ----
    if (opts.model.empty()) opts.model = arch == Arch::GPT2 ? "gpt2-124m" : "llama-130m";
    ModelConfig cfg = model_config_load(arch, opts.model);
    if (opts.seq_len == 0) opts.seq_len = std::min(arch == Arch::GPT2 ? 1024 : 256, cfg.max_seq_len);
    CHECK_USER(opts.seq_len <= cfg.max_seq_len, "sequence length %d (--seq-len) exceeds the model's %d positions\n---> HINT: use --seq-len "
               "%d or less", opts.seq_len, cfg.max_seq_len, cfg.max_seq_len);
    if (opts.warmup < 0) opts.warmup = opts.steps / 10;
    bool builtin = opts.train_data.empty() && opts.val_data.empty();
    if (builtin) {
        std::string dir = builtin_data_dir(), tag = arch == Arch::GPT2 ? "gpt2" : "llama";
        opts.train_data = dir + "/austen_" + tag + "_train.bin";
        opts.val_data = dir + "/austen_" + tag + "_val.bin";
    }
    PracOptions prac = prac_options_from(opts);
    if (opts.plan) return print_plan(opts, cfg, prac);
    // ---- device ----
    std::string why;
    int gpus = cuda_device_count(&why);
    if (opts.device == "cuda")
        fail("--device cuda: the CUDA backend is not part of this build yet (it lands with the CUDA-trainer "
             "issue); %s\n---> HINT: use --device cpu", gpus ? "a GPU is present" : why.c_str());
    if (gpus > 0)
        std::printf("notice: %d GPU(s) found, but the CUDA backend is not built yet: running on the CPU\n", gpus);
    else
        std::printf("notice: no usable GPU (%s): running the CPU backend (fp32, OpenBLAS, %d threads); "
                    "fine for small models only\n", why.c_str(), omp_get_max_threads());
    CpuBackend be;

    print_table(program, model_config_rows(cfg));
    print_table("training", train_options_rows(opts));

    if (!opts.save.empty()) prepare_save_dir(opts.save);  // fail now, not after the whole run

    // ---- data ----
    int B = opts.batch_size, T = opts.seq_len;
    DataLoader val(opts.val_data, B, T, 0, 1, (uint64_t)opts.seed, false, cfg.vocab_size);
    std::unique_ptr<DataLoader> train;
    if (!opts.eval_only)
        train.reset(new DataLoader(opts.train_data, B, T, 0, 1, (uint64_t)opts.seed, opts.shuffle, cfg.vocab_size));
    if (train)
        std::printf("train data: %zu shard(s), %lld samples of %d tokens per epoch%s\n", train->files().size(),
                    (long long)train->samples_per_epoch(), T, builtin ? " (built-in corpus)" : "");
    std::printf("val data:   %zu shard(s), %lld samples per epoch\n", val.files().size(),
                (long long)val.samples_per_epoch());

    // ---- model ----
    Model<CpuBackend> model(be, cfg, prac);
    if (prac.mode != PracMode::NONE) print_site_table(model.sites, cfg.num_layers);
    if (!opts.dump_site.empty()) {
        bool known = false;
        std::string names;
        for (const auto& s : model.sites) {
            known = known || s.name == opts.dump_site;
            names += (names.empty() ? "" : ", ") + s.name;
        }
        CHECK_USER(known, "--dump-site: unknown site \"%s\" (sites: %s)", opts.dump_site.c_str(), names.c_str());
        CHECK_USER(opts.dump_layer >= 0 && opts.dump_layer < cfg.num_layers, "--dump-layer must be in [0, %d)",
                   cfg.num_layers);
        CHECK_USER(opts.dump_step >= 0 && opts.dump_step < opts.steps, "--dump-step must be in [0, --steps)");
        model.dump = {opts.dump_site, opts.dump_layer, opts.dump_step, opts.dump_path};
    }
    std::printf("parameters: %zu (%.2fM)\n", model.num_parameters, model.num_parameters / 1e6);
    if (!opts.init_from.empty()) {
        std::string path = resolve_weights_path(opts.init_from);
        model.load_weights(path);
        std::printf("loaded weights from %s\n", path.c_str());
    } else {
        model.init_weights((uint64_t)opts.seed);
    }
    model.allocate_activations(B, T);
    MetricsLog log(opts.log);

    if (opts.eval_only) {
        long long seen = 0;
        float loss = evaluate(model, val, opts.eval_tokens, &seen);
        std::printf("val loss %.4f | perplexity %.3f | %lld tokens\n", loss, std::exp(loss), seen);
        log.eval(0, loss, seen);
        return 0;
    }

    AdamW<CpuBackend> opt(be, model.param_buffer_numel, opts.beta1, opts.beta2, opts.adam_eps, opts.weight_decay);
    std::printf("memory: parameters %.1f MiB | gradients %.1f MiB | optimizer %.1f MiB | activations %.1f MiB | "
                "live %.1f MiB\n", model.param_buffer_numel * sizeof(float) / 1048576.0,
                model.param_buffer_numel * sizeof(float) / 1048576.0, 2 * model.param_buffer_numel * 4 / 1048576.0,
                model.acts_bytes / 1048576.0, be.live_bytes / 1048576.0);

    // ---- steps ----
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
    double total_ms = 0;
    for (int step = 0; step < opts.steps; step++) {
        if (opts.eval_interval > 0 && step > 0 && step % opts.eval_interval == 0) {
            long long seen = 0;
            float vl = evaluate(model, val, opts.eval_tokens, &seen);
            std::printf("step %d | val loss %.4f | perplexity %.3f\n", step, vl, std::exp(vl));
            log.eval(step, vl, seen);
        }
        auto t0 = std::chrono::steady_clock::now();

        // one optimizer step: accumulate the gradients of grad_accum micro-batches, each weighted so that
        // the step minimizes the mean of the micro-batches' mean token losses
        model.zero_grad();
        model.sched.begin_step(prac, step);  // PRAC bases refresh on this step's first micro-batch when due
        float loss = 0;
        for (int micro = 0; micro < opts.grad_accum; micro++) {
            train->next_batch(inputs.data(), targets.data());
            long long valid = count_target_tokens(targets.data(), targets.size());
            if (valid == 0) continue;  // nothing to learn from a micro-batch of padding
            float grad_scale = 1.0f / ((float)valid * opts.grad_accum);
            loss += model.forward(inputs.data(), targets.data(), grad_scale) / opts.grad_accum;
            model.backward();
        }
        float norm = grad_norm(be, model.grads_memory, model.param_buffer_numel);
        if (!std::isfinite(loss) || !std::isfinite(norm))
            fail("step %d: loss %g, gradient norm %g: training diverged\n---> HINT: lower --lr, raise --warmup or "
                 "check the data", step, loss, norm);
        float lr = lr_schedule(step, opts.steps, opts.warmup, opts.lr, opts.min_lr_frac);
        opt.step(model.params_memory, model.grads_memory, model.param_specs, lr, clip_scale(norm, opts.grad_clip));
        be.synchronize();

        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        total_ms += ms;
        double tok_s = (double)B * T * opts.grad_accum / (ms / 1000.0);
        double eta = total_ms / (step + 1) * (opts.steps - step - 1) / 1000.0;
        if (step % opts.log_interval == 0 || step == opts.steps - 1)
            std::printf("step %5d/%d | loss %.4f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | eta %s\n", step + 1,
                        opts.steps, loss, norm, lr, ms, tok_s, human_duration(eta).c_str());
        std::fflush(stdout);
        log.step(step + 1, loss, lr, norm, tok_s, ms, be.peak_bytes);
    }

    int64_t failures = 0;
    for (const auto& s : model.sites) failures += s.failures;
    if (failures) std::printf("warning: %lld PRAC basis refreshes failed and kept the previous basis (see above)\n",
                              (long long)failures);
    long long seen = 0;
    float vl = evaluate(model, val, opts.eval_tokens, &seen);
    std::printf("final | val loss %.4f | perplexity %.3f | %lld tokens | %s total\n", vl, std::exp(vl), seen,
                human_duration(total_ms / 1000.0).c_str());
    log.eval(opts.steps, vl, seen);

    if (!opts.save.empty()) {
        model.save_weights(opts.save + "/model.safetensors");
        write_hf_config(opts.save + "/config.json", cfg);
        std::printf("saved %s/model.safetensors and config.json\n", opts.save.c_str());
    }
    return 0;
}

// main() of both binaries: errors in user input end the run with the message and exit code 1.
template <template <class> class Model>
int train_main_checked(Arch arch, const char* program, int argc, char** argv) {
    try {
        return train_main<Model>(arch, program, argc, argv);
    } catch (const UserError& e) {
        std::fprintf(stderr, "%s: error: %s\n", program, e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
        return 2;
    }
}
