// Saving and restoring a whole training run (train/checkpoint.h does the atomic directories): weights in Hugging
// Face layout, the optimizer's state (AdamW's moments, fp32 or 8-bit codes and scales, and master weights), its
// step, PRAC bases and refresh counters, the data loader's position, and the settings a bit-exact continuation
// depends on, which a resume checks.
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "common/strings.h"  // format, join, split_at
#include "data/dataloader.h"
#include "model/config.h"
#include "prac/prac_state.h"
#include "train/checkpoint.h"
#include "train/cli.h"
#include "train/optim_adamw.h"
#include "train/optim_galore.h"
#include "train/optimizers.h"  // Optimizer (master_weights_from_fp32_weights)

// How and when PRAC's bases are refreshed (they change the arithmetic from the next refresh on), as the flags that
// set them: the method of Q1 (rac has no Q1), the first refreshes' spread (resolved: auto is the warmup's steps)
// and the overlap's delay. (A checkpoint written before this key was recorded still has prac_state.h's refusal of
// refreshes in flight that this run's delay cannot hold.)
inline std::string prac_refresh_key(const TrainOptions& o) {
    const PracOptions p = prac_options_from(o);
    if (p.mode == PracMode::NONE) return "none";
    return (prac_uses_q1(p.mode) ? format("--prac-refresh %s ", prac_refresh_name(p.refresh)) : std::string()) +
           format("--prac-initial-spread %d --prac-refresh-overlap %d", p.initial_spread, p.overlap);
}

// The run.prac resume key as checkpoints before run.key_spelling 3 spelled it (the flags as given; now
// prac_key_canonical), for comparing those. The absolute ranks follow their fractions after " ranks " (older checkpoints joined them
// without one, so "0.3,0.31" + "6,16" read as "0.3,0.3" + "16,16": `joined` spells that, which they still match;
// for them that ambiguity stays, and the PRAC state's shapes refuse such a resume later); storage act is not
// spelled (checkpoints from before fp8 storage match).
inline std::string prac_key(const TrainOptions& o, bool joined = false) {
    auto ranks = [&](const std::string& r) { return r.empty() || joined ? r : " ranks " + r; };
    return format("%s lin %s%s nonlin %s%s t1 %d t2 %d k %g classes %s", o.prac.c_str(), o.prac_linear.c_str(),
                  ranks(o.prac_linear_ranks).c_str(), o.prac_nonlinear.c_str(), ranks(o.prac_nonlinear_ranks).c_str(),
                  o.prac_t1, o.prac_t2, o.prac_k_mult, o.prac_classes.c_str()) +
           (o.prac_storage_resolved() == "act" ? "" : " storage " + o.prac_storage_resolved());
}

// The run.prac key since run.key_spelling 3: what the run's PRAC computes, not how its flags were spelled. Only what
// the mode uses (prac_uses_*: the flags unused_flags_notice calls inert left out, and the ranks of a class not
// compressed), fractions and k as the float's nine
// digits (0.30 and 0.3 are one setting; six digits made --prac-k-mult 1.2000005 pass for 1.2), the classes in one
// order. Checkpoints of earlier spellings are compared with prac_key.
inline std::string prac_key_canonical(const TrainOptions& o) {
    const PracOptions p = prac_options_from(o);
    if (p.mode == PracMode::NONE) return "none";
    auto rank = [](int abs, float frac) { return abs >= 0 ? format("r%d", abs) : format("%.9g", (double)frac); };
    std::string k = prac_mode_name(p.mode);
    if (p.linear) k += " lin " + rank(p.linear_r1_abs, p.linear_r1) + "," + rank(p.linear_r2_abs, p.linear_r2);
    if (p.nonlinear)
        k += " nonlin " + rank(p.nonlinear_r1_abs, p.nonlinear_r1) + "," + rank(p.nonlinear_r2_abs, p.nonlinear_r2);
    if (prac_uses_t1(p.mode, p.overlap > 0)) k += format(" t1 %d", p.t1);
    if (prac_uses_t2(p.mode, p.overlap > 0)) k += format(" t2 %d", p.t2);
    if (prac_uses_k(p.mode)) k += format(" k %.9g", (double)p.k_mult);
    return k + (o.prac_storage_resolved() == "act" ? "" : " storage " + o.prac_storage_resolved());
}

// The run.schedule and run.optimizer resume keys: every float to the float's nine digits (with six, --lr 1e-3 and
// 1.0000005e-3 were one setting and the resume another run), each optimizer's own flags only with it (an inert
// --galore-rank blocked a resume that the run itself called unaffected). GaLore's rank is spelled as `galore_rank`
// says: resume_keys gives the resolved one (--galore-rank 0 and the model's default rank are one setting);
// checkpoints written before spelled the flag (0 for the default), which check_resume_keys still matches. `legacy`
// spells the keys as checkpoints written before run.key_spelling did (six digits; GaLore's and Muon's flags always):
// a checkpoint without it is compared in that spelling.
// A schedule other than cosine adds its shape (a cosine run's key is spelled as before there were others, and every
// checkpoint of an earlier spelling is one); constant leaves out the floor it never reaches, wsd adds its cooldown.
inline std::string schedule_key(const TrainOptions& o, bool legacy = false) {
    std::string k = format(legacy ? "lr %g warmup %d" : "lr %.9g warmup %d", o.lr, o.warmup);
    if (o.lr_schedule != "constant") k += format(legacy ? " min %g" : " min %.9g", o.min_lr_frac);
    if (o.lr_schedule != "cosine") k += " shape " + o.lr_schedule;
    if (o.lr_schedule == "wsd") k += format(" cooldown %.9g", o.cooldown_frac);
    return k;
}
inline std::string optimizer_key(const TrainOptions& o, int galore_rank, bool legacy = false) {
    const char* g = legacy ? "%g" : "%.9g";
    auto num = [&](double v) { return format(g, v); };
    std::string k = o.optimizer + " wd " + num(o.weight_decay) + " b1 " + num(o.beta1) + " b2 " + num(o.beta2) +
                    " eps " + num(o.adam_eps) + " clip " + num(o.grad_clip);
    if (legacy || o.optimizer == "galore")
        k += format(" galore %d/%d/", galore_rank, o.galore_gap) + num(o.galore_scale);
    if (legacy || o.optimizer == "muon") k += " muon " + num(o.muon_momentum);
    if (o.optimizer == "rso")
        k += format(" rso %d/%d/", o.rso_rank, o.rso_gap) + num(o.rso_prox) + "/" + o.rso_activations;
    if (o.optimizer_states != "fp32") k += " states " + o.optimizer_states;
    return k;
}

// The settings a continuation must share with the run that wrote the checkpoint (anything that changes the
// arithmetic or the data order). Keys are stored as metadata and compared on resume. Not among them: --steps (a
// resume may extend or shorten the run: the schedule of the steps to come spans the new --steps), and the training
// data's pattern (its files' contents are compared instead: RunState::train_shards).
inline int galore_rank_resolved(const TrainOptions& o, const ModelConfig& c) {
    return galore_rank_for(o.galore_rank, c);
}

inline std::vector<std::pair<std::string, std::string>> resume_keys(const TrainOptions& o, const ModelConfig& c) {
    return {
        {"model", format("%s L%d NH%d C%d F%d V%d", o.model.c_str(), c.num_layers, c.num_heads, c.channels, c.hidden,
                         c.vocab_size)},
        {"batch_size", std::to_string(o.batch_size)},
        {"seq_len", std::to_string(o.seq_len)},
        {"grad_accum", std::to_string(o.grad_accum)},
        // the spelling of schedule, optimizer (2 and 3; absent: the earlier one) and prac (3) below
        {"key_spelling", "3"},
        {"schedule", schedule_key(o)},
        {"optimizer", optimizer_key(o, galore_rank_resolved(o, c))},
        {"seed", std::to_string(o.seed)},
        {"shuffle", o.shuffle ? "1" : "0"},
        {"prac", prac_key_canonical(o)},
        {"recompute", std::to_string(o.recompute)},
        {"prac_refresh", prac_refresh_key(o)},
        // what the model key's shape leaves out (a config's rope_theta and eps; named configs fix both)
        {"model_numerics", format("norm_eps %.9g rope_theta %.9g", c.norm_eps, c.rope_theta)},
    };
}

// The model key's shape part ("L12 NH12 C768 ..."): the name before it is how the run spelled its model (a named
// config, or a config.json's path, which --init-from DIR makes the model), not what it is.
inline std::string model_key_shape(const std::string& v) {
    size_t at = v.rfind(" L");
    return at == std::string::npos ? v : v.substr(at + 1);
}

// check_compatible of every resume key, with one hint of its own: a checkpoint written before fp8 storage became
// the default (--prac-storage auto) stored X*P in the activation dtype, and resuming it needs that said.
inline void check_resume_keys(const TrainState& st, const TrainOptions& o, const ModelConfig& c,
                              const std::vector<std::pair<std::string, std::string>>& keys) {
    const int galore_rank = galore_rank_resolved(o, c);
    for (const auto& [k, v] : keys) {
        if (k == "key_spelling") continue;  // how the keys are spelled, not a setting
        // written before they were recorded
        if ((k == "prac_refresh" || k == "model_numerics" || k == "tokenizer") && !st.has_meta("run." + k)) continue;
        if (k == "model" && st.has_meta("run.model") && model_key_shape(st.get("run.model")) == model_key_shape(v))
            continue;
        // a checkpoint of an earlier spelling is compared (and a refusal worded) in its own spelling
        const bool legacy = !st.has_meta("run.key_spelling");
        const bool prac_as_given = legacy || st.get("run.key_spelling") == "2";  // run.prac: the flags as spelled
        if (k == "prac") {
            if (prac_as_given && st.has_meta("run.prac") && st.get("run.prac") == prac_key(o, true)) continue;
            // (--prac none computes nothing of the ranks its old spelling held: finetune_roberta's changed default)
            if (prac_as_given && st.has_meta("run.prac") && st.get("run.prac").rfind("none ", 0) == 0 && v == "none")
                continue;
            const std::string mine = prac_as_given ? prac_key(o) : v;
            // (both spellings end with " storage fp8" where fp8, and spell act by leaving it out)
            if (o.prac_storage == "auto" && st.has_meta("run.prac") && st.get("run.prac") + " storage fp8" == mine)
                fail("cannot resume from %s: it stores PRAC's projections in the activation dtype, and this run "
                     "would store them as fp8 (--prac-storage auto, the default since fp8 storage became it)\n---> "
                     "HINT: add --prac-storage act to continue it as it was written",
                     st.path.empty() ? "the checkpoint" : st.path.c_str());
            check_compatible(st, "run.prac", mine);
            continue;
        }
        // written before GaLore's rank was resolved in it: "galore 0/" is the model's default rank as it was then
        // (GPT-2's was channels / 4 before the PRAC paper's 256 / 512 for 124M / 355M)
        const int default_then = c.arch == Arch::GPT2 ? std::max(1, c.channels / 4) : galore_default_rank(c);
        if (k == "optimizer" && st.has_meta("run.optimizer") && galore_rank == default_then &&
            st.get("run.optimizer") == optimizer_key(o, 0, legacy))
            continue;
        if (legacy && (k == "schedule" || k == "optimizer")) {
            check_compatible(st, "run." + k,
                             k == "schedule" ? schedule_key(o, true) : optimizer_key(o, galore_rank, true));
            continue;
        }
        check_compatible(st, "run." + k, v);
    }
}

// The backend and precision that compute a run ("cpu fp32", "cuda bf16", "cuda fp32"), as a checkpoint records it.
template <class Backend>
std::string backend_of_run() {
    return format("%s %s", Backend::name, Backend::act_dtype == DType::BF16 ? "bf16" : "fp32");
}

// The OpenMP threads of a run's ranks as a checkpoint records them: run.cpu_threads, rank 0's count (an integer, as
// builds before per-rank counts read it), and run.cpu_threads_per_rank, each rank's ("1,2"), where they differ.
// `threads`: cpu_threads_of_ranks' spelling ("2", or "1,2"; "" on the CUDA backend, recorded as 0).
inline void record_cpu_threads(TrainState& st, const std::string& threads) {
    st.set("run.cpu_threads", threads.empty() ? "0" : threads.substr(0, threads.find(',')));
    if (threads.find(',') != std::string::npos) st.set("run.cpu_threads_per_rank", threads);
}

// A resume computes what the run that wrote the checkpoint would have only on its backend and precision and, on the
// CPU backend, with its thread counts (the sums are split over the threads; docs/DESIGN.md section 2); otherwise a
// notice says the continuation is not bit-exact. `backend`: backend_of_run's; `threads`: this run's OpenMP threads
// (cpu_threads_of_ranks: "2", or each rank's "1,2"; "" or "0": the CUDA backend). A checkpoint written before
// run.backend was recorded is compared by its threads alone.
inline void notice_other_arithmetic(const TrainState& st, const std::string& backend, const std::string& threads) {
    if (st.has_meta("run.backend") && st.get("run.backend") != backend) {
        const std::string& saved = st.get("run.backend");
        auto precision = [](const std::string& b) { return b.substr(b.find(' ') + 1); };  // "cuda bf16" -> "bf16"
        std::printf("notice: the checkpoint was written by the %s backend, this run computes on %s: the continuation "
                    "is not bit-exact (other kernels%s)\n", saved.c_str(), backend.c_str(),
                    precision(saved) != precision(backend) ? ", another precision" : "");
        return;
    }
    const std::string saved = st.has_meta("run.cpu_threads_per_rank") ? st.get("run.cpu_threads_per_rank")
                              : st.has_meta("run.cpu_threads")        ? st.get("run.cpu_threads")
                                                                      : "0";
    if (threads.empty() || threads == "0" || saved == "0" || saved == threads) return;
    const bool uniform = saved.find(',') == std::string::npos && threads.find(',') == std::string::npos;
    // "2" -> "2 on every rank", "1,2" -> "1 on rank 0, 2 on rank 1"
    auto per_rank = [](const std::string& t) {
        const std::vector<std::string> n = split_at(t, ',');
        if (n.size() == 1) return t + " on every rank";
        std::vector<std::string> each;
        for (size_t r = 0; r < n.size(); r++) each.push_back(format("%s on rank %zu", n[r].c_str(), r));
        return join(each);
    };
    const std::string was = uniform ? saved + " CPU threads" : "CPU threads " + per_rank(saved),
                      now = uniform ? threads : per_rank(threads), fix = uniform ? saved : per_rank(saved);
    std::printf("notice: the checkpoint was written with %s, this run has %s: the CPU backend's sums depend on the "
                "thread count, so the continuation is not bit-exact (OMP_NUM_THREADS=%s makes it so)\n", was.c_str(),
                now.c_str(), fix.c_str());
}

// A checkpoint of an fp32 backend ("cpu fp32", "cuda fp32") holds no master weights: its weights are them. True when
// `t` is the optimizer's master tensor and the checkpoint, written so, lacks it: the caller then starts the master
// weights from the loaded weights (init_master_weights, as a run from --init-from does) and says so (a resume of a CPU
// checkpoint on the bf16 build was refused: "has no tensor 'adamw.master'", with a hint to change settings that were
// the same). A lacking tensor of any other checkpoint is left to TrainState::get_f32's refusal.
template <class Backend>
bool master_weights_from_fp32_weights(const TrainState& st, const Optimizer<Backend>& opt,
                                      const OptimizerStateTensor& t) {
    if (!t.data || t.data != opt.master() || st.has(t.name) || !st.has_meta("run.backend")) return false;
    const std::string& saved = st.get("run.backend");
    if (saved.size() < 5 || saved.compare(saved.size() - 5, 5, " fp32") != 0) return false;
    std::printf("notice: the checkpoint (%s) holds no master weights: this run's fp32 master weights start from its "
                "weights as this build stores them (%s)\n", saved.c_str(), dtype_name(Backend::act_dtype));
    return true;
}

// 8-bit AdamW states written before tensors of fewer than ADAMW8_MIN_TENSOR elements kept fp32 moments (every tensor
// was 8-bit; 2026-11-27 to 12-04) have codes for them and no fp32 moments: refused with what changed (TrainState's
// refusal named a missing tensor only).
template <class Backend>
void refuse_adamw8_of_every_tensor(const TrainState& st, const Optimizer<Backend>& opt, const std::string& path) {
    for (const OptimizerStateTensor& t : opt.state())
        if (t.name == "adamw.m" && st.has("adamw.m8") && !st.has(t.name))
            fail("cannot resume %s: its 8-bit AdamW states quantize every tensor, as this program's did before "
                 "2026-12-04; tensors of fewer than %zu elements (norms, biases) now keep fp32 moments, as "
                 "bitsandbytes' do\n---> HINT: resume it with the build that wrote it, or start a run from its "
                 "weights (--init-from %s)", path.c_str(), ADAMW8_MIN_TENSOR, path.c_str());
}

// A bf16 run's checkpoint holds its weights twice: rounded to bf16 in model.safetensors (what it computed with) and
// as its optimizer's fp32 master weights ("master" or "<optimizer>.master", the parameter buffer), where its
// updates accumulate. A backend with fp32 weights keeps no master weights: its resume takes the master weights as its
// weights (model.safetensors' would lose up to half a bf16 ulp of every weight's progress, without a word) and says
// so. Nothing for a checkpoint without master weights, or on a backend that keeps its own (the optimizer loads them).
template <class Backend>
void weights_from_master_weights(Backend& be, const TrainState& st, typename Backend::act_t* params, size_t n) {
    if constexpr (!Backend::master_weights && std::is_same_v<typename Backend::act_t, float>) {
        for (const auto& [name, t] : st.tensors) {
            const bool master = name == "master" || (name.size() > 7 && name.compare(name.size() - 7, 7, ".master") == 0);
            if (!master || t.dtype != "F32" || t.numel() == 0 || t.numel() > n) continue;
            std::vector<float> w(t.numel());  // (the buffer's parameters: an optimizer's may end before its padding)
            st.get_f32(name, w.data(), w.size());
            be.upload(params, w.data(), w.size() * sizeof(float));
            std::printf("notice: the checkpoint holds its run's fp32 master weights ('%s'): this run's weights are "
                        "them (%s holds them rounded to bf16)\n", name.c_str(), CKPT_MODEL_FILE);
            return;
        }
    }
}

// Everything a checkpoint holds besides the model, gathered on the host (full optimizer state even under ZeRO-1;
// PRAC state of every rank, or of rank 0 when the subspace is shared).
struct RunState {
    int64_t step = 0;  // completed optimizer steps
    int adam_t = 0;                                                 // the optimizer's completed steps
    std::vector<std::pair<std::string, std::vector<float>>> optim;  // its state tensors, whole (gathered)
    std::vector<std::pair<std::string, std::vector<uint8_t>>> optim_u8;  // its byte tensors (8-bit AdamW)
    std::vector<SafeTensorWrite> prac;  // names already carry their rank prefix
    PracStateBuffers prac_buffers;
    DataLoaderState data;
    int ranks = 1, zero = 0;
    bool prac_shared = false;
    std::string backend;       // backend_of_run
    std::string cpu_threads;   // the CPU backend's OpenMP threads (its sums' order): cpu_threads_of_ranks; "" on CUDA
    int skipped_in_a_row = 0, skipped_total = 0;  // --on-nonfinite skip's counts (its limit goes on counting)
    int64_t eval_due_at = -1;  // `step` when a stop signal cut its evaluation: the resume runs it first
    bool replaces_earlier_run = false;  // --overwrite's first checkpoint: the others in the directory are removed
    std::string train_shards;  // data_fingerprint of the training files (train/trainer.h)
    std::string logged_loss;   // the loss of step `step` as its --log record says it (MetricsLog::num); "" if none
    std::string val_sizes;     // the validation files' sizes (data_fingerprint without checksums): evaluation_notice
    std::vector<std::string> log_unwritten;  // the --log records that could not be written (MetricsLog::unwritten)
};

// Writes the checkpoint (rank 0 only) into opts.ckpt_dir and rotates old ones; returns its directory.
template <class Model>
std::string save_train_checkpoint(const TrainOptions& opts, const ModelConfig& cfg, Model& model, const RunState& rs) {
    CheckpointWriter w(opts.ckpt_dir, rs.step);
    model.save_weights(w.file(CKPT_MODEL_FILE));
    write_hf_config(w.file(CKPT_CONFIG_FILE), cfg);
    TrainState st;
    st.step = rs.step;
    st.adam_t = rs.adam_t;
    for (const auto& [k, v] : resume_keys(opts, cfg)) st.set("run." + k, v);
    // what the run was, for messages and an extension's warmup (not compared: see resume_keys)
    st.set_i64("run.steps", opts.steps);
    st.set_i64("run.warmup", opts.warmup);
    st.set("run.train_data", opts.train_data);
    st.set("run.train_shards", rs.train_shards);
    if (!rs.logged_loss.empty()) st.set("run.logged_loss", rs.logged_loss);
    if (!rs.log_unwritten.empty()) st.set("run.log_unwritten", join(rs.log_unwritten, "\n"));
    // how the run evaluates (not compared: the training is the same whatever it is; a resume says a change)
    st.set("run.val_sizes", rs.val_sizes);
    st.set_i64("run.eval_tokens", opts.eval_tokens);
    st.set("run.eval_protocol", opts.eval_protocol);
    st.set_i64("run.ranks", rs.ranks);
    st.set_i64("run.zero", rs.zero);
    st.set_i64("run.prac_shared", rs.prac_shared);
    st.set("run.backend", rs.backend);
    record_cpu_threads(st, rs.cpu_threads);
    st.set_i64("run.skipped_in_a_row", rs.skipped_in_a_row);
    st.set_i64("run.skipped_total", rs.skipped_total);
    if (rs.eval_due_at >= 0) st.set_i64("run.eval_due_at", rs.eval_due_at);
    for (const auto& [name, data] : rs.optim) st.add_f32(name, data.data(), {(int64_t)data.size()});
    for (const auto& [name, data] : rs.optim_u8) st.add_u8(name, data.data(), {(int64_t)data.size()});
    for (const SafeTensorWrite& t : rs.prac) {
        if (t.dtype == "F32") st.add_f32(t.name, (const float*)t.data, t.shape);
        else st.add_i64(t.name, (const int64_t*)t.data, t.shape);
    }
    st.set_i64("data.epoch", rs.data.epoch);
    st.set_i64("data.shard_index", rs.data.shard_index);
    st.set_i64("data.sample_index", rs.data.sample_index);
    st.set_u64("data.rng_state", rs.data.rng_state);
    write_state(w.file(CKPT_STATE_FILE), st);
    std::string dir = w.commit(rs.replaces_earlier_run);
    checkpoint_rotate(opts.ckpt_dir, opts.ckpt_keep, rs.step, rs.replaces_earlier_run);
    return dir;
}
