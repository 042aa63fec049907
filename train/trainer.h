// The training loop shared by train_gpt2 and train_llama: flags -> config -> data -> model -> steps.
// train_main picks the backend; train_run holds the loop, one optimizer step top to bottom inside it. The model's
// forward and backward live in model/*.h, the ops in kernels/.
#pragma once
#include <omp.h>

#include <chrono>
#include <cstring>
#include <csignal>
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
#include "data/tokenizer.h"
#include "kernels/cpu_backend.h"
// The CUDA backend is visible only where nvcc compiles (the .cu mains), or where the CPU execution layer does
// (kernels/cuda_emu/); C++ files that include this header see the CPU backend alone.
#if defined(PRAC_HAVE_CUDA) && (defined(__CUDACC__) || defined(PRAC_CUDA_EMU))
#define PRAC_CUDA_BACKEND 1
#include "kernels/cuda_backend.cuh"
#endif
#include "model/config.h"
#include "model/model_common.h"
#include "model/weights.h"
#include "train/cli.h"
#include "train/metrics_log.h"
#include "train/optimizers.h"
#include "train/comm.h"
#if defined(PRAC_CUDA_BACKEND) && defined(PRAC_HAVE_NCCL)
#include "train/comm_nccl.h"
#endif
#include "train/train_checkpoint.h"
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

// Validation loss. protocol "tokens": ceil(eval_tokens / (B*T)) micro-batches from the loader's start, mean over
// their non-ignored targets. protocol "galore": micro-batches until more than eval_tokens non-ignored targets were
// seen (GaLore evaluates C4 validation until 10M non-pad tokens), mean of the micro-batches' mean losses as GaLore
// averages (GaLore also divides by the batch count + 1, an off-by-one we do not copy). Never reads a token twice:
// both stop at the end of one epoch of the validation data.
template <class Model>
float evaluate(Model& model, DataLoader& val, long long eval_tokens, const std::string& protocol,
               long long* tokens_seen) {
    int B = model.B, T = model.T;
    bool galore = protocol == "galore";
    long long batches = galore ? val.steps_per_epoch() : (eval_tokens + (long long)B * T - 1) / ((long long)B * T);
    if (batches > val.steps_per_epoch()) batches = val.steps_per_epoch();
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
    val.reset();
    double sum = 0;
    long long count = 0, used = 0;
    for (long long i = 0; i < batches && !(galore && count > eval_tokens); i++) {
        val.next_batch(inputs.data(), targets.data());
        long long c = count_target_tokens(targets.data(), targets.size());
        if (c == 0) continue;
        float loss = model.forward(inputs.data(), targets.data(), 0.0f);
        sum += galore ? (double)loss : (double)loss * c;
        count += c;
        used++;
    }
    *tokens_seen = count;
    if (count == 0) return NAN;
    return (float)(galore ? sum / used : sum / count);
}

// The tokenizer that decodes samples: GPT-2's from the vendored ranks, SentencePiece from --spm-model or the
// built-in corpus's model; nullptr (print ids) when unknown.
std::unique_ptr<Tokenizer> sample_decoder(Arch arch, const TrainOptions& opts);

// Generates n tokens after an end-of-text/EOS prompt, sampling from the softmax at temperature 1 with our own
// generator (seeded), and prints them decoded. No KV cache: each token reruns the forward over the window, which is
// fine for the short samples this is for (a look at what the model learned).
template <class Model>
void print_sample(Model& model, const TrainOptions& opts, Arch arch) {
    int T = model.T, V = model.cfg.vocab_size, B = model.B;
    std::unique_ptr<Tokenizer> tok = sample_decoder(arch, opts);
    // a tokenizer smaller than the model's vocabulary (the built-in 8k SentencePiece model under LLaMA's 32000 rows)
    // never produced the extra ids: sample among the tokenizer's ids only
    int Vs = tok ? std::min(V, tok->vocab_size()) : V;
    std::vector<int32_t> ctx = {(int32_t)(tok ? tok->eos_id() : (arch == Arch::GPT2 ? 50256 : 1))};
    std::vector<int32_t> inputs((size_t)B * T, 0), targets((size_t)B * T, -1);
    std::vector<float> logits((size_t)B * T * V);
    uint64_t state = (uint64_t)opts.seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < opts.sample; i++) {
        int len = (int)std::min<size_t>(ctx.size(), (size_t)T), start = (int)ctx.size() - len;
        for (int t = 0; t < len; t++) inputs[t] = ctx[start + t];
        model.forward(inputs.data(), targets.data(), 0.0f);
        model.logits(logits.data());
        const float* row = logits.data() + (size_t)(len - 1) * V;
        float m = *std::max_element(row, row + Vs);
        double sum = 0;
        for (int v = 0; v < Vs; v++) sum += std::exp((double)row[v] - m);
        state = state * 6364136223846793005ull + 1442695040888963407ull;  // LCG: enough for one uniform draw
        double u = (double)(state >> 11) * 0x1.0p-53 * sum, acc = 0;
        int next = Vs - 1;
        for (int v = 0; v < Vs; v++)
            if ((acc += std::exp((double)row[v] - m)) >= u) {
                next = v;
                break;
            }
        ctx.push_back(next);
    }
    std::printf("sample (%d tokens):\n", opts.sample);
    if (tok) {
        std::vector<uint32_t> ids(ctx.begin() + 1, ctx.end());
        std::printf("%s\n", tok->decode(ids.data(), ids.size()).c_str());
    } else {
        for (size_t i = 1; i < ctx.size(); i++) std::printf("%d ", ctx[i]);
        std::printf("\n(no tokenizer known for these shards: token ids)\n");
    }
}

// SIGINT / SIGTERM: the loop finishes the step in flight, writes a checkpoint when checkpointing is on, and exits.
extern volatile std::sig_atomic_t g_stop_signal;
void install_stop_signals();

// The MPI communicator reduces host fp32 buffers: the CPU backend's gradients and parameters. (GPU data
// parallelism uses NcclComm's device_comm() on device buffers; train_main refuses MPI with GPU ranks > 1.)
template <typename T>
float* comm_buffer(T* p) {
    if constexpr (std::is_same_v<T, float>) return p;
    else fail("internal: MPI collectives need the CPU backend's fp32 host buffers");
}

// Distributed evaluation: each rank evaluates its share of the validation batches; the sums are all-reduced.
template <class Model>
float evaluate_all(Model& model, DataLoader& val, const TrainOptions& opts, Comm& comm, long long* tokens_seen) {
    long long seen = 0;
    long long budget = opts.eval_tokens / comm.size() + (comm.rank() < opts.eval_tokens % comm.size());
    float loss = evaluate(model, val, budget, opts.eval_protocol, &seen);
    double sums[2] = {std::isfinite(loss) ? (double)loss * (double)seen : 0.0, (double)seen};
    if (opts.eval_protocol == "galore") sums[0] = std::isfinite(loss) ? loss : 0.0, sums[1] = std::isfinite(loss);
    comm.allreduce_sum(sums, 2);
    double tok[1] = {(double)seen};
    comm.allreduce_sum(tok, 1);
    *tokens_seen = (long long)tok[0];
    return sums[1] > 0 ? (float)(sums[0] / sums[1]) : NAN;
}

template <template <class> class Model, class Backend>
int train_run(Backend& be, TrainOptions& opts, const ModelConfig& cfg, const PracOptions& prac, Comm& comm,
              const char* program, bool builtin);

template <template <class> class Model>
int train_main(Arch arch, const char* program, int argc, char** argv, Comm& comm) {
    TrainOptions opts;
    parse_train_options(opts, argc, argv);
    const int rank = comm.rank(), ranks = comm.size();
    // only rank 0 reports: the other ranks' stdout goes nowhere (their errors still reach stderr)
    if (rank != 0 && !std::freopen("/dev/null", "w", stdout)) fail("cannot silence the output of rank %d", rank);
    if (opts.help) {
        std::printf("%s", train_options_help(arch, program).c_str());
        return 0;
    }

    // ---- config ----
    if (opts.model.empty()) opts.model = arch == Arch::GPT2 ? "gpt2-124m" : "llama-130m";
    ModelConfig cfg = model_config_load(arch, opts.model);
    if (opts.seq_len == 0) opts.seq_len = std::min(arch == Arch::GPT2 ? 1024 : 256, cfg.max_seq_len);
    CHECK_USER(opts.seq_len <= cfg.max_seq_len, "sequence length %d (--seq-len) exceeds the model's %d positions\n"
               "---> HINT: use --seq-len %d or less", opts.seq_len, cfg.max_seq_len, cfg.max_seq_len);
    if (opts.warmup < 0) opts.warmup = opts.steps / 10;
    bool builtin = opts.train_data.empty() && opts.val_data.empty();
    if (builtin) {
        std::string dir = builtin_data_dir(), tag = arch == Arch::GPT2 ? "gpt2" : "llama";
        opts.train_data = dir + "/austen_" + tag + "_train.bin";
        opts.val_data = dir + "/austen_" + tag + "_val.bin";
    }
    PracOptions prac = prac_options_from(opts);
    if (opts.optimizer == "rso") {  // the linear sites store X·P with the optimizer's P (train/optim_rso.h)
        if (opts.rso_rank == 0) opts.rso_rank = rso_default_rank(cfg);
        if (opts.rso_activations == "projected") prac.rso_rank = opts.rso_rank;
    }
    if (opts.plan) return print_plan(opts, cfg, prac);
    // PRAC subspaces are per rank by default: each rank's estimator is unbiased on its own data, and independent
    // draws make the averaged gradient's noise shrink with the number of ranks. The shared option all-reduces the
    // Gram matrix and draws with the same seed, so every rank holds the same bases.
    if (!opts.prac_shared) prac.seed += 1000003ull * (uint64_t)rank;

    // ---- device: the CUDA backend when a GPU is there (or asked for), else the CPU backend ----
    std::string why;
    int gpus = cuda_device_count(&why);
#if defined(PRAC_CUDA_BACKEND)
    bool use_cuda = opts.device == "cuda" || (opts.device == "auto" && gpus > 0);
    if (use_cuda && gpus == 0)
        fail("--device cuda: no usable GPU (%s)\n---> HINT: use --device cpu", why.c_str());
    if (use_cuda) {
        // the gradients live on the GPU: data parallelism reduces them with NCCL (MPI reduces host buffers only).
        // --comm nccl with one rank runs the same NCCL path alone (the GPU tests compare it with the plain run).
        bool nccl = opts.comm == "nccl" || (opts.comm == "auto" && ranks > 1);
        if (ranks > 1 && !nccl)
            fail("--comm mpi reduces host buffers, but the CUDA backend's gradients are on the GPU: %d GPU ranks need "
                 "NCCL\n---> HINT: drop --comm mpi (auto picks nccl on GPUs), or use --device cpu", ranks);
        int dev = comm.local_rank() % gpus;  // one GPU per rank of this node
        std::printf("device: CUDA GPU %d (%s storage; the CUDA backend has not yet run on a real GPU, see "
                    "docs/VERIFICATION.md)\n", dev, PRAC_FLOATX_NAME);
        if (nccl) {
#if defined(PRAC_HAVE_NCCL)
            if (comm.local_size() > gpus)
                fail("%d ranks on this node but %d GPU(s): NCCL needs one GPU per rank (two ranks on one GPU fail "
                     "with \"Duplicate GPU detected\")\n---> HINT: start at most %d ranks per node (mpirun -np N "
                     "--host NODE:%d,...), or use --device cpu", comm.local_size(), gpus, gpus, gpus);
            CudaBackend be(dev, (uint64_t)opts.seed);
            NcclComm nccl_comm(comm, dev, be.stream);  // destroyed before be (its stream waits on be's)
            std::printf("communicator: %s (%s), rank %d of %d on GPU %d\n",
                        NcclComm::version().c_str(), ranks > 1 ? "id broadcast over MPI" : "one process", rank, ranks,
                        dev);
            return train_run<Model, CudaBackend>(be, opts, cfg, prac, nccl_comm, program, builtin);
#else
            fail("data parallelism on GPUs needs NCCL, which this build lacks (cmake's dependency report says "
                 "\"NCCL not found\")\n---> HINT: pip install nvidia-nccl-cu13 (or set NCCL_PATH), reconfigure and "
                 "rebuild; or use --device cpu%s", ranks > 1 ? "" : ", or drop --comm nccl");
#endif
        }
        CudaBackend be(dev, (uint64_t)opts.seed);
        return train_run<Model, CudaBackend>(be, opts, cfg, prac, comm, program, builtin);
    }
#else
    if (opts.device == "cuda")
        fail("--device cuda: this build has no CUDA backend (built without nvcc)\n---> HINT: rebuild where nvcc 13 is "
             "installed (make), or use --device cpu");
    if (gpus > 0) std::printf("notice: %d GPU(s) found, but this build has no CUDA backend: running on the CPU\n", gpus);
#endif
    CHECK_USER(opts.comm != "nccl", "--comm nccl reduces GPU buffers, but this run uses the CPU backend\n---> HINT: "
               "use --comm auto or mpi on the CPU (or --device cuda in a build with CUDA and NCCL)");
    std::printf("device: CPU backend (fp32, OpenBLAS, %d threads)%s\n", omp_get_max_threads(),
                gpus > 0 ? "" : "; fine for small models only");
    CpuBackend be;
    return train_run<Model, CpuBackend>(be, opts, cfg, prac, comm, program, builtin);
}

// Everything after the device choice: data, model, optimizer, resume, the steps, evaluation, checkpoints.
template <template <class> class Model, class Backend>
int train_run(Backend& be, TrainOptions& opts, const ModelConfig& cfg, const PracOptions& prac, Comm& comm,
              const char* program, bool builtin) {
    const int rank = comm.rank(), ranks = comm.size();
    if (ranks > 1)
        std::printf("data parallel: %d ranks (%s), ZeRO-%d, PRAC subspace %s\n", ranks, comm.name(), opts.zero,
                    opts.prac_shared ? "shared" : "per rank");
    print_table(program, model_config_rows(cfg));
    print_table("training", train_options_rows(opts));
    if (!opts.save.empty() && rank == 0) prepare_save_dir(opts.save);  // fail now, not after the whole run

    // ---- data: every rank reads disjoint samples ----
    int B = opts.batch_size, T = opts.seq_len;
    DataLoader val(opts.val_data, B, T, rank, ranks, (uint64_t)opts.seed, false, cfg.vocab_size);
    std::unique_ptr<DataLoader> train;
    if (!opts.eval_only)
        train.reset(new DataLoader(opts.train_data, B, T, rank, ranks, (uint64_t)opts.seed, opts.shuffle,
                                   cfg.vocab_size));
    if (train)
        std::printf("train data: %zu shard(s), %lld samples of %d tokens per epoch%s\n", train->files().size(),
                    (long long)train->samples_per_epoch(), T, builtin ? " (built-in corpus)" : "");
    std::printf("val data:   %zu shard(s), %lld samples per epoch\n", val.files().size(),
                (long long)val.samples_per_epoch());

    // ---- model ----
    Model<Backend> model(be, cfg, prac, opts.recompute);
    // --prac-shared-subspace: the Gram matrix of every refresh is averaged over the ranks before the eigensolver
    // (on the host through MPI for the CPU backend, on the device through NCCL for the CUDA backend). A rank that
    // only joins a refresh (gram_nothing: its micro-batches of that step were all padding, see the steps) adds a
    // zero matrix: padding never enters the Gram matrix, as on one rank, where an all-padding micro-batch is skipped.
    const bool shared_gram = opts.prac_shared && ranks > 1;
    bool gram_nothing = false;
    GramReducer gram_allreduce = [&comm, &be, &gram_nothing](float* g, size_t n) {
        if (gram_nothing) be.zero(g, n * sizeof(float));
        if (DeviceComm* d = comm.device_comm()) d->allreduce_avg(g, n, DType::F32);
        else comm.allreduce_avg(g, n);
    };
    if (shared_gram)
        for (auto& s : model.sites) s.reduce_gram = &gram_allreduce;
    // whether the next training forward refreshes a basis: the step asks for it, or a site layer has none yet
    auto refresh_due = [&model]() {
        for (const auto& s : model.sites) {
            if (!s.compressed() || s.external) continue;
            if (model.sched.refresh_q1 || model.sched.refresh_q2) return true;
            for (uint8_t h : s.has_basis)
                if (!h) return true;
        }
        return false;
    };
    if (prac.mode != PracMode::NONE || prac.rso_rank > 0) print_site_table(model.sites, cfg.num_layers);
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
        if (rank == 0) model.dump = {opts.dump_site, opts.dump_layer, opts.dump_step, opts.dump_path};
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
    MetricsLog log(rank == 0 ? opts.log : "");

    if (opts.eval_only) {
        long long seen = 0;
        float loss = evaluate_all(model, val, opts, comm, &seen);
        std::printf("val loss %.4f | perplexity %.3f | %lld tokens\n", loss, std::exp(loss), seen);
        log.eval(0, loss, seen);
        return 0;
    }

    // ---- optimizer: the whole buffer, or this rank's shard under ZeRO-1 (AdamW) ----
    size_t n = model.param_buffer_numel;
    bool sharded = opts.zero == 1 && ranks > 1;
    size_t shard_lo = sharded ? comm.shard_begin(n, rank) : 0, shard_hi = sharded ? comm.shard_end(n, rank) : n;
    std::unique_ptr<Optimizer<Backend>> opt =
        make_optimizer(be, optimizer_choice_from(opts), cfg, model.param_specs, n, shard_lo, shard_hi);
    init_master_weights(be, *opt, model.params_memory, n);
    opt->bind_sites(model.sites);
    size_t opt_bytes = 0;
    for (const OptimizerStateTensor& t : opt->state()) opt_bytes += t.numel * sizeof(float);
    std::printf("memory: parameters %.1f MiB | gradients %.1f MiB | optimizer %.1f MiB | activations %.1f MiB | "
                "live %.1f MiB\n", n * sizeof(typename Backend::act_t) / 1048576.0,
                n * sizeof(typename Backend::grad_t) / 1048576.0, opt_bytes / 1048576.0,
                (model.acts_bytes + model.bases_bytes) / 1048576.0, be.live_bytes / 1048576.0);

    // a checkpoint: gathers the optimizer shards and every rank's PRAC state; rank 0 writes
    auto checkpoint = [&](int64_t completed, const DataLoaderState& data) {
        if (opts.ckpt_dir.empty()) return;
        RunState rs;
        rs.step = completed;
        rs.adam_t = opt->steps();
        rs.data = data;
        rs.ranks = ranks;
        rs.zero = opts.zero;
        rs.prac_shared = opts.prac_shared;
        // optimizer state, whole: ZeRO-1 shards (AdamW's tensors of shard_hi - shard_lo elements) are gathered
        for (const OptimizerStateTensor& t : opt->state()) {
            std::vector<float> full;
            if (sharded) {
                full.assign(n, 0.0f);
                be.download(full.data() + shard_lo, t.data, t.numel * sizeof(float));
                comm.all_gather(full.data(), n);
            } else {
                full.resize(t.numel);
                be.download(full.data(), t.data, t.numel * sizeof(float));
            }
            rs.optim.push_back({t.name, std::move(full)});
        }
        // PRAC: rank r's tensors travel to rank 0 by broadcast (all ranks have the same shapes)
        PracStateBuffers local;
        std::vector<SafeTensorWrite> mine;
        prac_state_tensors(be, model.sites, local, mine);
        int owners = opts.prac_shared ? 1 : ranks;
        for (int r = 0; r < owners; r++) {
            std::string prefix = owners == 1 ? "" : format("rank%d.", r);
            for (const SafeTensorWrite& t : mine) {
                size_t bytes = safetensors_dtype_size(t.dtype);
                for (int64_t d : t.shape) bytes *= (size_t)d;
                std::vector<char> buf(bytes);
                if (rank == r) std::memcpy(buf.data(), t.data, bytes);
                if (ranks > 1) comm.broadcast(buf.data(), bytes, r);
                if (t.dtype == "F32") {
                    rs.prac_buffers.f32.emplace_back((const float*)buf.data(), (const float*)(buf.data() + bytes));
                    rs.prac.push_back({prefix + t.name, t.dtype, t.shape, rs.prac_buffers.f32.back().data()});
                } else {
                    rs.prac_buffers.i64.emplace_back((const int64_t*)buf.data(), (const int64_t*)(buf.data() + bytes));
                    rs.prac.push_back({prefix + t.name, t.dtype, t.shape, rs.prac_buffers.i64.back().data()});
                }
            }
        }
        if (rank == 0) {
            std::string dir = save_train_checkpoint(opts, cfg, model, rs);
            std::printf("checkpoint: %s\n", dir.c_str());
        }
        comm.barrier();  // nobody runs ahead of a checkpoint that is not committed yet
    };

    // ---- resume ----
    int start = 0;
    if (opts.resume) {
        std::string path = checkpoint_resolve(opts.ckpt_dir);
        TrainState st = read_state(path + "/" + CKPT_STATE_FILE);
        for (const auto& [k, v] : resume_keys(opts, cfg)) check_compatible(st, "run." + k, v);
        int saved_ranks = (int)st.get_i64("run.ranks"), saved_zero = (int)st.get_i64("run.zero");
        if ((saved_zero || opts.zero) && saved_ranks != ranks)
            fail("cannot resume %s: it was written by %d ranks with ZeRO-%d, this run has %d ranks with ZeRO-%d; "
                 "ZeRO-1 runs resume only with the same number of ranks\n---> HINT: relaunch with mpirun -np %d",
                 path.c_str(), saved_ranks, saved_zero, ranks, opts.zero, saved_ranks);
        check_compatible(st, "run.prac_shared", (int64_t)opts.prac_shared);
        model.load_weights(path + "/" + CKPT_MODEL_FILE);
        for (const OptimizerStateTensor& t : opt->state()) {
            std::vector<float> full(sharded ? n : t.numel);
            st.get_f32(t.name, full.data(), full.size());
            be.upload(t.data, full.data() + (sharded ? shard_lo : 0), t.numel * sizeof(float));
        }
        opt->steps() = (int)st.adam_t;
        opt->state_loaded();
        SafeTensorsFile f = safetensors_open(path + "/" + CKPT_STATE_FILE);
        // PRAC bases: one set ("prac.") when the subspace was shared or one rank wrote it, else one per rank
        bool one_set = opts.prac_shared || saved_ranks == 1;
        if (one_set || saved_ranks == ranks)
            prac_state_load(be, model.sites, f, one_set ? "prac." : format("rank%d.prac.", rank));
        else
            std::printf("notice: the checkpoint holds per-rank PRAC bases of %d ranks; this run has %d: the bases are "
                        "recomputed at the next step (not a bit-exact continuation)\n", saved_ranks, ranks);
        DataLoaderState d{st.get_i64("data.epoch"), st.get_i64("data.shard_index"), st.get_i64("data.sample_index"),
                          st.get_u64("data.rng_state")};
        train->set_state(d);
        start = (int)st.step;
        std::printf("resumed from %s at step %d of %d\n", path.c_str(), start, opts.steps);
    }

    // ---- steps ----
    // GPU data parallelism (NcclComm): the gradients are averaged on the device. With --overlap-comm 1 and no ZeRO
    // sharding, the last micro-batch's backward starts each layer's average as soon as that layer's gradients are
    // complete (model.on_layer_grads, on NCCL's stream), and the compute stream waits for all of them before the
    // gradient norm and the optimizer. Otherwise one collective after backward: an all-reduce, or under ZeRO-1 a
    // reduce-scatter (its shards are whole-buffer ranges, so ZeRO-1 does not overlap).
    DeviceComm* dcomm = comm.device_comm();
    const bool overlap = dcomm && opts.overlap_comm && !sharded;
    std::vector<std::vector<ElemRange>> layer_ranges;  // [l]: layer l's gradient slices; [L]: the other tensors
    if (overlap) layer_ranges = layer_param_ranges(model.param_specs, cfg.num_layers);
    auto start_layer_average = [&](int l) {
        dcomm->allreduce_avg_start(model.grads_memory, layer_ranges[l < 0 ? cfg.num_layers : l], Backend::grad_dtype);
    };
    if (dcomm)
        std::printf("gradients: averaged on the GPUs by NCCL %s\n",
                    overlap ? "layer by layer during the last micro-batch's backward (--overlap-comm 1)"
                    : sharded ? "with one reduce-scatter after backward (ZeRO-1)"
                              : "with one all-reduce after backward (--overlap-comm 0)");
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
    double total_ms = 0;
    int skipped_in_a_row = 0, skipped_total = 0;
    install_stop_signals();
    for (int step = start; step < opts.steps; step++) {
        int stop_signal = (int)g_stop_signal;
        if (ranks > 1) {  // every rank stops at the same step, whichever one got the signal
            double sig[1] = {(double)stop_signal};
            comm.allreduce_sum(sig, 1);
            stop_signal = sig[0] > 0 ? (stop_signal ? stop_signal : SIGTERM) : 0;
        }
        if (stop_signal) {
            std::printf("received signal %d: stopping after %d of %d steps\n", stop_signal, step, opts.steps);
            checkpoint(step, train->get_state());
            return 128 + stop_signal;
        }
        if (opts.eval_interval > 0 && step > start && step % opts.eval_interval == 0) {
            long long seen = 0;
            float vl = evaluate_all(model, val, opts, comm, &seen);
            std::printf("step %d | val loss %.4f | perplexity %.3f\n", step, vl, std::exp(vl));
            log.eval(step, vl, seen);
        }
        auto t0 = std::chrono::steady_clock::now();
        DataLoaderState data_before = train->get_state();

        // one optimizer step: accumulate the gradients of grad_accum micro-batches, each weighted so that
        // the step minimizes the mean of the micro-batches' mean token losses
        model.zero_grad();
        model.sched.begin_step(prac, step);  // PRAC bases refresh on this step's first micro-batch when due
        float loss = 0;
        bool started = false;  // the per-layer averages of this step were started by the last backward
        for (int micro = 0; micro < opts.grad_accum; micro++) {
            train->next_batch(inputs.data(), targets.data());
            long long valid = count_target_tokens(targets.data(), targets.size());
            if (valid == 0) continue;  // nothing to learn from a micro-batch of padding
            float grad_scale = 1.0f / ((float)valid * opts.grad_accum);
            loss += model.forward(inputs.data(), targets.data(), grad_scale) / opts.grad_accum;
            bool last = overlap && micro == opts.grad_accum - 1;  // no gradient is added after this backward
            if (last) model.on_layer_grads = start_layer_average;
            model.backward();
            if (last) {
                model.on_layer_grads = nullptr;
                started = true;
            }
        }
        // --prac-shared-subspace: a refresh is a collective (every rank's Gram matrix is averaged inside forward, at
        // its first real micro-batch of the step). A rank whose micro-batches of this step were all padding ran no
        // forward: it still joins the refresh, adding nothing, so that every rank issues the same collectives in
        // the same order (before the gradients' below) and ends with the same bases and draw counters. The forward
        // runs on the last (padding) micro-batch: every target is ignored, so its loss is 0 and the head's gradient
        // adds zeros; no backward.
        if (shared_gram && model.sched.first_micro_batch && refresh_due()) {
            gram_nothing = true;
            model.forward(inputs.data(), targets.data(), 1.0f);
            gram_nothing = false;
        }
        // data parallelism: the mean of the ranks' gradients (this rank's shard of it under ZeRO-1)
        float norm;
        if (ranks > 1 || dcomm) {
            if (sharded) {
                if (dcomm) dcomm->reduce_scatter_avg(model.grads_memory, n, Backend::grad_dtype);
                else comm.reduce_scatter_avg(comm_buffer(model.grads_memory), n);
                double ss[1] = {be.sum_squares(model.grads_memory + shard_lo, shard_hi - shard_lo)};
                comm.allreduce_sum(ss, 1);
                norm = (float)std::sqrt(ss[0]);
            } else {
                if (overlap) {
                    // a rank whose last micro-batch was all padding starts the same collectives in the same order
                    if (!started) {
                        for (int l = cfg.num_layers - 1; l >= 0; l--) start_layer_average(l);
                        start_layer_average(-1);
                    }
                    dcomm->wait_all();  // the compute stream waits for every layer's average
                } else if (dcomm) {
                    dcomm->allreduce_avg(model.grads_memory, n, Backend::grad_dtype);
                } else {
                    comm.allreduce_avg(comm_buffer(model.grads_memory), n);
                }
                norm = grad_norm(be, model.grads_memory, n);
            }
            double l[1] = {loss};
            comm.allreduce_sum(l, 1);
            loss = (float)(l[0] / ranks);
        } else {
            norm = grad_norm(be, model.grads_memory, n);
        }
        float lr = lr_schedule(step, opts.steps, opts.warmup, opts.lr, opts.min_lr_frac);
        if (!std::isfinite(loss) || !std::isfinite(norm)) {
            // the parameters are still the last good ones: nothing of this step has been applied
            if (opts.on_nonfinite == "stop" || ++skipped_in_a_row > 10) {
                checkpoint(step, data_before);  // the last good state, to resume from after a fix
                fail("step %d: loss %g, gradient norm %g: training diverged%s\n---> HINT: lower --lr, raise --warmup, "
                     "check the data, or pass --on-nonfinite skip%s", step + 1, loss, norm,
                     skipped_in_a_row > 10 ? " (more than 10 steps in a row skipped)" : "",
                     opts.ckpt_dir.empty() ? "" : "; the last good state is checkpointed in --ckpt-dir");
            }
            std::printf("warning: step %d: loss %g, gradient norm %g: skipping this update (--on-nonfinite skip)\n",
                        step + 1, loss, norm);
            skipped_total++;
        } else {
            skipped_in_a_row = 0;
            opt->step(model.params_memory, model.grads_memory, model.param_specs, lr, clip_scale(norm, opts.grad_clip));
        }
        if (sharded) {  // every rank gets every updated shard
            if (dcomm) dcomm->all_gather(model.params_memory, n, Backend::act_dtype);
            else comm.all_gather(comm_buffer(model.params_memory), n);
        }
        be.synchronize();

        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        total_ms += ms;
        double tok_s = (double)B * T * opts.grad_accum * ranks / (ms / 1000.0);
        double eta = total_ms / (step - start + 1) * (opts.steps - step - 1) / 1000.0;
        if (step % opts.log_interval == 0 || step == opts.steps - 1)
            std::printf("step %5d/%d | loss %.4f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | eta %s\n", step + 1,
                        opts.steps, loss, norm, lr, ms, tok_s, human_duration(eta).c_str());
        std::fflush(stdout);
        log.step(step + 1, loss, lr, norm, tok_s, ms, be.peak_bytes);
        if (opts.ckpt_every > 0 && (step + 1) % opts.ckpt_every == 0 && step + 1 < opts.steps)
            checkpoint(step + 1, train->get_state());
        // tests: die like `kill -9` right after this step (no cleanup, no checkpoint), to test resuming
        if (const char* die = std::getenv("PRAC_TEST_DIE_AFTER_STEP"))
            if (std::atoi(die) == step + 1) std::_Exit(137);
    }

    if (skipped_total) std::printf("warning: %d steps were skipped for non-finite values\n", skipped_total);
    int64_t failures = 0;
    for (const auto& s : model.sites) failures += s.failures;
    if (failures) std::printf("warning: %lld PRAC basis refreshes failed and kept the previous basis (see above)\n",
                              (long long)failures);
    long long seen = 0;
    float vl = evaluate_all(model, val, opts, comm, &seen);
    std::printf("final | val loss %.4f | perplexity %.3f | %lld tokens | %s total\n", vl, std::exp(vl), seen,
                human_duration(total_ms / 1000.0).c_str());
    log.eval(opts.steps, vl, seen);
    checkpoint(opts.steps, train->get_state());
    if (opts.sample > 0 && rank == 0) print_sample(model, opts, cfg.arch);

    if (!opts.save.empty() && rank == 0) {
        model.save_weights(opts.save + "/model.safetensors");
        write_hf_config(opts.save + "/config.json", cfg);
        std::printf("saved %s/model.safetensors and config.json\n", opts.save.c_str());
    }
    return 0;
}

// main() of both binaries: set up the ranks (one process without mpirun), run, and on an error print it and
// end every rank (a rank that returned normally would leave the others waiting in a collective forever).
template <template <class> class Model>
int train_main_checked(Arch arch, const char* program, int argc, char** argv) {
    std::unique_ptr<Comm> comm;
    int code = 0;
    try {
        comm = comm_create(&argc, &argv);
        return train_main<Model>(arch, program, argc, argv, *comm);
    } catch (const UserError& e) {
        std::fprintf(stderr, "%s: error: %s\n", program, e.what());
        code = 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
        code = 2;
    }
    if (comm && comm->size() > 1) comm_abort(*comm, code);
    return code;
}
