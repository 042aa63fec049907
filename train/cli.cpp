#include "train/cli.h"
#include "train/optimizers.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>

#include "common/error.h"
#include "common/numbers.h"  // typed_as_decimal
#include "common/strings.h"  // closest_name
#include "data/byte_bpe.h"    // utf8_first_invalid

// TrainOptions holds std::string members; offsetof on it is fine with GCC/Clang, only not guaranteed by the
// standard, hence the silenced warning.
#pragma GCC diagnostic ignored "-Winvalid-offsetof"

namespace {

using Kind = FlagKind;
using Flag = FlagDef;

#define F(name, meta, kind, field, help) {name, meta, Kind::kind, help, offsetof(TrainOptions, field)}
const Flag FLAGS[] = {
    F("--model", "NAME|FILE", STR, model, "model size by name, or a Hugging Face config.json"),
    F("--init-from", "PATH", STR, init_from,
      "start from these weights (safetensors file, or a directory holding model.safetensors; the config.json beside "
      "them is the model without --model)"),
    F("--train-data", "GLOB", STR, train_data, "training token shards: a glob pattern (quoted), or a file named as it is "
      "(default: the built-in corpus)"),
    F("--val-data", "GLOB", STR, val_data, "validation token shards: a pattern or a file, as --train-data (default: the "
      "built-in corpus)"),
    F("--batch-size", "B", INT, batch_size, "micro-batch size (sequences per forward/backward)"),
    F("--seq-len", "T", INT, seq_len, "sequence length (default: GPT-2 1024, LLaMA 256, capped by the model)"),
    F("--grad-accum", "K", INT, grad_accum, "micro-batches per optimizer step"),
    F("--global-batch", "N", INT, global_batch,
      "sequences per optimizer step over all ranks (the PRAC paper's global batch size, 512), instead of --grad-accum: "
      "it sets --grad-accum to N / (ranks x --batch-size), which must be whole, so that one command trains the same "
      "steps on every number of GPUs that divides it into micro-batches (mpirun -np R); a --resume on another rank "
      "count keeps it (each step reads the run's next N samples up to the epoch's end, split otherwise: not "
      "bit-exact) (default: ranks x B x --grad-accum)"),
    F("--steps", "N", INT, steps,
      "optimizer steps; with --resume it may differ from the checkpoint's run (extend or shorten it): the steps still "
      "to come follow the schedule over the new --steps (warmup stays the run's), so extending 6 -> 10 raises the lr "
      "at step 7 from the 6-step cosine's end to the 10-step cosine's value, and a wsd run's cooldown moves to the "
      "new end"),
    F("--lr", "LR", FLOAT, lr, "peak learning rate"),
    F("--warmup", "N", INT, warmup, "linear warmup steps (default: 10% of --steps)"),
    F("--lr-schedule", "cosine|linear|constant|wsd", STR, lr_schedule,
      "the learning rate after the warmup: cosine (half a cosine down to the floor, the PRAC paper's), linear (a "
      "straight line down to it), constant (the peak to the end), wsd (warmup-stable-decay: the peak until the last "
      "--cooldown-frac of the steps, then down to the floor as 1 - sqrt of the cooldown's part done; Hagele et al. "
      "2024). Each decay reaches the floor one step after the last"),
    F("--cooldown-frac", "F", FLOAT, cooldown_frac,
      "wsd: the fraction of --steps in the final decay (rounded to whole steps; a --resume with more --steps keeps "
      "the peak longer, so a run can be continued from a checkpoint of its stable phase)"),
    F("--min-lr-frac", "F", FLOAT, min_lr_frac, "the decay's floor as a fraction of --lr"),
    F("--weight-decay", "WD", FLOAT, weight_decay, "decoupled weight decay of the 2-D weights (every optimizer)"),
    F("--beta1", "B1", FLOAT, beta1, "Adam beta1: AdamW's, and the Adam parts of muon, adam-mini, galore and rso"),
    F("--beta2", "B2", FLOAT, beta2, "Adam beta2 (as --beta1)"),
    F("--adam-eps", "EPS", FLOAT, adam_eps, "Adam epsilon (as --beta1)"),
    F("--grad-clip", "C", FLOAT, grad_clip, "clip the global gradient norm to C (0 = off)"),
    F("--optimizer", "NAME", STR, optimizer,
      "adamw | muon (Newton-Schulz on hidden matrices, AdamW elsewhere) | adam-mini | galore (low-rank projected Adam) "
      "| rso (random-subspace optimization; stores the linear layers' inputs projected)"),
    F("--optimizer-states", "fp32|8bit", STR, optimizer_states,
      "AdamW's moments m, v: fp32, or 8bit (block-wise dynamic quantization, Dettmers et al. 2022: one byte per "
      "element and one fp32 scale per 2048; 2 instead of 8 bytes per parameter; tensors under 4096 elements, norms "
      "and biases, keep fp32 moments, as bitsandbytes; master weights stay fp32)"),
    F("--galore-rank", "R", INT, galore_rank, "GaLore rank (0: the model's: GPT-2 124M 256, 355M 512 as in the PRAC paper; LLaMA 60M 128, 130M/350M 256, 1B 512 as in GaLore; other models their width / 4)"),
    F("--galore-gap", "T", INT, galore_gap, "GaLore: recompute the projections every T steps"),
    F("--galore-scale", "A", FLOAT, galore_scale, "GaLore: scale alpha of the projected update"),
    F("--muon-momentum", "MU", FLOAT, muon_momentum, "Muon: Nesterov momentum"),
    F("--rso-rank", "R", INT, rso_rank, "RSO subspace rank (0: GaLore's default for the model: GPT-2 124M 256, 355M 512; LLaMA 60M 128, 130M/350M 256, 1B 512)"),
    F("--rso-gap", "T", INT, rso_gap, "RSO: inner steps per random subspace (a new draw every T steps)"),
    F("--rso-prox", "C", FLOAT, rso_prox, "RSO: proximal coefficient, adds (C/2)||B||^2 to each subproblem"),
    F("--rso-activations", "projected|full", STR, rso_activations,
      "RSO: store the linear layers' inputs as X*P (the method) or whole (ablation: the same subspace gradients, "
      "more memory)"),
    F("--seed", "S", LONG, seed, "seed for initialization and data order"),
    F("--eval-interval", "N", INT, eval_interval, "evaluate every N steps (0 = only at the end)"),
    F("--eval-tokens", "N", LONG, eval_tokens,
      "validation tokens per evaluation (default on the CPU backend: at most this many, as many whole micro-batches "
      "(one on every rank) as 1e11 forward FLOPs cover at 2 x parameters per token, at least one: gpt2-124m one "
      "micro-batch)"),
    F("--save", "DIR", STR, save, "at the end write a Hugging Face model directory: weights, config, tokenizer"),
    F("--device", "cpu|cuda|auto", STR, device, "backend (auto: cuda when a GPU and the CUDA backend exist)"),
    F("--log", "FILE", STR, log, "write JSONL metrics (one object per step and per evaluation; a resumed run appends)"),
    F("--log-interval", "N", INT, log_interval, "print the line of the first step, every N-th and the last"),
    F("--eval-protocol", "tokens|galore", STR, eval_protocol,
      "tokens: ceil(--eval-tokens / (B*T)) micro-batches (with R ranks, ceil(--eval-tokens / (R*B*T)) on each, at "
      "least one), mean over their tokens; galore: batches until more than "
      "--eval-tokens non-pad input tokens, all ranks' (GaLore's C4 protocol: 10000000), mean of the batch means; "
      "both read at most the validation data once"),
    F("--hellaswag", "FILE", STR, hellaswag,
      "at every evaluation (and --eval-only) also score HellaSwag in completion style, as llm.c: each ending after its "
      "context, the right one having the lowest loss: acc_norm (mean per token, llm.c's number) and acc (sum). FILE: "
      "HellaSwag's hellaswag_val.jsonl (github.com/rowanz/hellaswag; encoded with the model's tokenizer, an ending "
      "after a space) or llm.c's hellaswag_val.bin (GPT-2 ids)"),
    F("--hellaswag-examples", "N", INT, hellaswag_examples,
      "score --hellaswag's first N examples only (0: all, 10042 in the validation split; 4 rows of forward each)"),
    F("--on-nonfinite", "stop|skip", STR, on_nonfinite,
      "a NaN/Inf loss or gradient norm stops the run (after a checkpoint of the weights before that step) or skips the step "
      "(more than 10 non-finite steps in a row stop it)"),
    F("--eval-only", "", BOOL, eval_only, "only evaluate (usually with --init-from) and print loss and perplexity"),
    F("--no-shuffle", "", BOOL, shuffle, "read training shards in order (default: shuffled with --seed)"),
    F("--prac", "MODE", STR, prac, "activation compression: none, pac (principal only), rac (random only), prac"),
    F("--prac-linear", "F1,F2", STR, prac_linear,
      "ranks r1,r2 of linear sites as fractions of the width (rounded down to a multiple of 8, at least 8; 0: none)"),
    F("--prac-nonlinear", "F1,F2", STR, prac_nonlinear, "ranks r1,r2 of nonlinear sites as fractions of the width"),
    F("--prac-linear-ranks", "R1,R2", STR, prac_linear_ranks, "absolute ranks of linear sites (override fractions)"),
    F("--prac-nonlinear-ranks", "R1,R2", STR, prac_nonlinear_ranks, "absolute ranks of nonlinear sites"),
    F("--prac-t1", "N", INT, prac_t1, "refresh the principal basis Q1 every N steps"),
    F("--prac-t2", "N", INT, prac_t2, "redraw the random basis Q2 every N steps (also whenever Q1 changes)"),
    F("--prac-refresh", "auto|exact|subspace", STR, prac_refresh,
      "how a refresh finds Q1: subspace (warm-started subspace iteration) or exact (full eigensolver; where one "
      "direction holds nearly all the energy its fp32 Gram matrix can leave more tail than subspace does: README); "
      "auto: subspace (on both backends)"),
    F("--prac-initial-spread", "auto|K", STR, prac_initial_spread,
      "spread the sites' first basis computations over the first K steps (at most ceil(sites x layers / K) per step; "
      "K capped at sites x layers) instead of all on the first step, which they would make the slowest; until its "
      "first refresh a site compresses with a random orthonormal basis (unbiased; more variance in those early "
      "steps). auto: K = the warmup's steps, while the learning rate is still small (prac; pac and rac: 0). 0: all "
      "on the first step"),
    F("--prac-refresh-overlap", "D", INT, prac_refresh_overlap,
      "D >= 1: a refresh of a site that has a basis takes effect at the end of the D-th step from the one it is due "
      "on (those steps compress with the basis they started with), so that the CUDA backend solves it on a second "
      "stream beside them instead of stalling its step; costs one pending basis copy per refresh in flight (--plan "
      "shows it); D <= --prac-t1, --prac-t2. 0: off"),
    F("--prac-k-mult", "M", FLOAT, prac_k_mult, "scale k by M (1 = unbiased; the paper's k ablation)"),
    F("--prac-classes", "LIST", STR, prac_classes, "site classes to compress: linear,nonlinear | linear | nonlinear"),
    F("--prac-storage", "auto|act|fp8", STR, prac_storage,
      "how the compressed projections X*P are stored: act (the activation dtype: bf16 in the CUDA bf16 build, fp32 "
      "otherwise) or fp8 (e4m3 with a per-row power-of-two scale, stochastically rounded: unbiased, 1 byte per "
      "value plus 4 per row); auto: fp8 whenever --prac compresses (README: within seed noise of act)"),
    F("--recompute", "0|1|2", INT, recompute,
      "recompute in backward instead of saving (llm.c -r): 1 the GeLU/SwiGLU output, 2 also the norm outputs; "
      "recomputed sites are never PRAC-compressed, and 2 needs the residual sites uncompressed"),
    F("--recompute-attention", "0|1", INT, recompute_attention,
      "1: recompute the attention output O in backward from the exact q, k, v (one more attention forward per "
      "layer; the same gradients, bitwise) instead of saving it for every layer; 0: save O"),
    F("--hidden-align", "A", INT, hidden_align,
      "LLaMA: store the (N, F) MLP activations with rows F rounded up to a multiple of A elements apart (8: 16-byte "
      "rows in bf16, so cuBLAS can use its aligned kernels when F is not a multiple of 8, e.g. llama-1b's 5461). Only "
      "storage changes: the model, weights and checkpoints are the same, and so are the results on the CPU backend, bit "
      "for bit (a GPU may pick other GEMM kernels, which round differently); 1 (default) keeps rows F apart. "
      "build/tools/bench_gpu_stride says whether it pays"),
    F("--ckpt-dir", "DIR", STR, ckpt_dir, "write checkpoints to DIR/step_NNNNNNNN (weights, optimizer, PRAC, data state)"),
    F("--ckpt-every", "N", INT, ckpt_every, "checkpoint every N steps (0: only at the end, on SIGINT/SIGTERM/SIGUSR1, before a NaN stop)"),
    F("--ckpt-keep", "K", INT, ckpt_keep, "keep the newest K complete checkpoints"),
    F("--resume", "", BOOL, resume, "continue bit-exactly from the newest checkpoint in --ckpt-dir"),
    F("--overwrite", "", BOOL, overwrite,
      "start over in a --ckpt-dir that holds an earlier run's checkpoints, a --save DIR that holds a model's files or a "
      "--log that holds records, or replace a --dump-path file (without it such a run refuses; --resume continues the "
      "earlier run instead)"),
    F("--zero", "0|1", INT, zero, "1: shard AdamW state over data-parallel ranks (ZeRO-1)"),
    F("--watchdog", "SEC", INT, watchdog,
      "end the job when a rank makes no progress for SEC seconds: a stopped or hung rank leaves the others waiting "
      "in a collective forever (default: 1800 with 2+ ranks, off with one; 0: off)"),
    F("--prac-shared-subspace", "", BOOL, prac_shared,
      "data parallelism: one PRAC subspace for all ranks from the all-reduced Gram matrix (default: per rank)"),
    F("--comm", "auto|nccl|mpi", STR, comm,
      "gradient communicator: nccl (GPU buffers; GPUs need it with ranks > 1), mpi (host buffers: the CPU backend); "
      "auto: nccl on the CUDA backend when ranks > 1, else mpi; nccl with one rank runs NCCL's path alone (tests)"),
    F("--overlap-comm", "0|1", INT, overlap_comm,
      "with nccl: 1 averages each layer's gradients as soon as its backward is done, overlapping the rest of "
      "backward; 0 one all-reduce after backward. Not with --zero 1 (one reduce-scatter after backward)"),
    F("--sample", "N", INT, sample,
      "after training (or --eval-only), generate N tokens (seed --sample-seed) and print them decoded"),
    F("--sample-seed", "S", LONG, sample_seed,
      "seed of --sample's draws (default: --seed, which also sets the initialization and data order: another "
      "--sample-seed resamples the same training run)"),
    F("--prompt", "TEXT", STR, prompt,
      "--sample continues this text (encoded with the shards' tokenizer, in which <|endoftext|>, or </s> for LLaMA, is "
      "the end-of-text token), started as the training data starts a "
      "document: after an end-of-text token (flat shards) or with nothing before it (rows); the printed sample begins "
      "with it (default: after an end of text alone; on rows at a document's first token drawn from the data)"),
    F("--temperature", "T", FLOAT, temperature,
      "--sample draws from the softmax of the logits / T: below 1 sharper, above 1 flatter; 0: always the most "
      "likely token (the seed then only draws the document a sample from row shards starts at)"),
    F("--top-k", "K", INT, top_k,
      "--sample draws among the K most likely tokens only (and those tied with the K-th, as transformers' top-k); 0: "
      "among all"),
    F("--spm-model", "FILE", STR, spm_model,
      "SentencePiece model of LLaMA shards, for --sample and --save (default: the one that made the shards, found by "
      "its hash next to them; a model of another hash is refused)"),
    F("--dump-site", "NAME", STR, dump_site,
      "write this site's input activation (N, n) to --dump-path as .npy (sites: resid ln1 resid_mid ln2, GPT-2 fch fch_gelu, LLaMA fch_gate fch_up fch_act)"),
    F("--dump-layer", "L", INT, dump_layer, "layer of --dump-site"),
    F("--dump-step", "S", INT, dump_step, "step (0-based) of --dump-site; its first micro-batch with --grad-accum"),
    F("--dump-path", "FILE", STR, dump_path, "output of --dump-site (an existing file: --overwrite replaces it; --resume an .npy file only)"),
    F("--plan", "", BOOL, plan, "print the exact memory plan for this config and exit (no GPU needed; with --prac-refresh-overlap give the run's --steps too: the warmup's spread of first refreshes sets how many bases wait)"),
    F("--json", "", BOOL, json, "with --plan: print the plan as JSON"),
    F("--gpu-mem", "GIB", FLOAT, gpu_mem_gib,
      "with --plan: also print the largest micro-batch that fits a GPU of this many GiB (CUDA plans; nvidia-smi's MiB "
      "/ 1024: an H100 80GB has 79.65, an A100 80GB 80, an H200 140.4)"),
    F("--precision", "bf16|fp32", STR, precision,
      "with --plan: the CUDA backend build to plan for (default: this build's; bf16 where it has no CUDA backend; "
      "--device cpu plans the CPU)"),
    F("--plan-ranks", "R", INT, plan_ranks,
      "with --plan and --zero 1: plan one of R data-parallel ranks (AdamW state and master weights sharded R ways; "
      "under mpirun: the job's ranks)"),
    F("--help", "", BOOL, help, "print this help"),
};
#undef F

// Other trainers' spellings of our flags (Hugging Face, llm.c, nanoGPT, Megatron): an unknown flag that is one of
// them is answered with our spelling, not with the nearest name by edit distance (--out is nearest to --lr).
const FlagSynonym SYNONYMS[] = {
    {"--learning-rate", "--lr"}, {"--max-lr", "--lr"}, {"--peak-lr", "--lr"},
    {"--max-steps", "--steps"}, {"--num-steps", "--steps"}, {"--total-steps", "--steps"}, {"--train-steps", "--steps"},
    {"--max-iters", "--steps"}, {"--iters", "--steps"}, {"--num-iterations", "--steps"}, {"--train-iters", "--steps"},
    {"--out", "--save"}, {"--output", "--save"}, {"--output-dir", "--save"}, {"--out-dir", "--save"},
    {"--save-dir", "--save"},
    {"--lr-warmup", "--warmup"}, {"--lr-warmup-steps", "--warmup"}, {"--warmup-steps", "--warmup"},
    {"--warmup-iters", "--warmup"}, {"--lr-warmup-iters", "--warmup"},
    {"--micro-batch-size", "--batch-size"}, {"--per-device-train-batch-size", "--batch-size"}, {"--bs", "--batch-size"},
    {"--gradient-accumulation-steps", "--grad-accum"}, {"--grad-accum-steps", "--grad-accum"},
    {"--accumulation-steps", "--grad-accum"}, {"--global-batch-size", "--global-batch"},
    {"--total-batch-size", "--global-batch"},
    {"--seq-length", "--seq-len"}, {"--sequence-length", "--seq-len"}, {"--max-seq-len", "--seq-len"},
    {"--block-size", "--seq-len"}, {"--context-length", "--seq-len"}, {"--max-length", "--seq-len"},
    {"--min-lr", "--min-lr-frac"}, {"--lr-min", "--min-lr-frac"}, {"--wd", "--weight-decay"},
    {"--lr-scheduler", "--lr-schedule"}, {"--lr-scheduler-type", "--lr-schedule"}, {"--scheduler", "--lr-schedule"},
    {"--lr-decay-style", "--lr-schedule"}, {"--cooldown", "--cooldown-frac"}, {"--decay-frac", "--cooldown-frac"},
    {"--max-grad-norm", "--grad-clip"}, {"--clip-grad", "--grad-clip"}, {"--gradient-clipping", "--grad-clip"},
    {"--adam-beta1", "--beta1"}, {"--adam-beta2", "--beta2"}, {"--adam-epsilon", "--adam-eps"}, {"--eps", "--adam-eps"},
    {"--checkpoint-dir", "--ckpt-dir"}, {"--save-every", "--ckpt-every"}, {"--save-interval", "--ckpt-every"},
    {"--checkpoint-every", "--ckpt-every"}, {"--checkpoint-interval", "--ckpt-every"},
    {"--eval-every", "--eval-interval"}, {"--eval-steps", "--eval-interval"}, {"--val-every", "--eval-interval"},
    {"--val-interval", "--eval-interval"}, {"--val-tokens", "--eval-tokens"}, {"--val-loss-tokens", "--eval-tokens"},
    {"--config", "--model"}, {"--model-config", "--model"}, {"--model-name", "--model"},
    {"--data", "--train-data"}, {"--train", "--train-data"}, {"--train-bin", "--train-data"},
    {"--input-bin", "--train-data"}, {"--val", "--val-data"}, {"--input-val-bin", "--val-data"},
    {"--init", "--init-from"}, {"--load", "--init-from"}, {"--pretrained", "--init-from"},
    {"--resume-from-checkpoint", "--resume"}, {"--resume-from", "--resume"},
    {"--log-file", "--log"}, {"--output-log", "--log"}, {"--print-every", "--log-interval"},
    {"--zero-stage", "--zero"}, {"--generate", "--sample"}, {"--max-new-tokens", "--sample"},
    {"--gen-tokens", "--sample"}, {"--sample-every", "--sample"}, {"--val-loss-every", "--eval-interval"},
    {"--eval-iters", "--eval-tokens"}, {"--val-steps", "--eval-tokens"}, {"--val-max-steps", "--eval-tokens"},
};

// What a synonym's HINT adds where our flag counts in another unit or does something else than theirs.
std::string synonym_note(const std::string& theirs, const std::string& ours) {
    if (ours == "--min-lr-frac") return ", a fraction of --lr, not a rate";
    if (theirs.find("total") != std::string::npos)  // (llm.c's -d: tokens)
        return ", in sequences, not tokens: llm.c's total batch size in tokens / --seq-len";
    if (theirs == "--steps")  // (finetune_roberta's synonym for --epochs)
        return ", a count of passes over the training split, not of steps";
    if (ours == "--eval-tokens")  // (nanoGPT's --eval-iters, llm.c's --val-max-steps: micro-batches)
        return ", in tokens, not batches: batches x --batch-size x --seq-len";
    if (theirs == "--sample-every") return ", once after training: there is no sampling during it";
    return "";
}

}  // namespace

std::vector<std::string> train_flag_names() {
    std::vector<std::string> out;
    for (const Flag& f : FLAGS) out.push_back(f.name);
    return out;
}

std::vector<std::pair<std::string, std::string>> train_flag_synonyms() {
    std::vector<std::pair<std::string, std::string>> out;
    for (const FlagSynonym& y : SYNONYMS) out.push_back({y.first, y.second});
    return out;
}

std::vector<std::string> numeric_train_flags() {
    std::vector<std::string> out;
    for (const Flag& f : FLAGS)
        if (f.kind == Kind::INT || f.kind == Kind::LONG || f.kind == Kind::FLOAT) out.push_back(f.name);
    return out;
}

void parse_flag_table(const FlagDef* flags, size_t num_flags, const FlagSynonym* synonyms, size_t num_synonyms,
                      void* opts, std::set<std::string>& given, std::vector<std::string>& repeated, int argc,
                      char** argv) {
    const FlagDef* flags_end = flags + num_flags;
    std::vector<std::pair<const Flag*, std::vector<std::string>>> values;  // each valued flag's, in the order given
    for (int i = 1; i < argc; i++) {
        std::string arg = argv[i], value;
        bool has_inline = false;
        size_t eq = arg.find('=');
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_inline = true;
        }
        const Flag* flag = nullptr;
        for (const Flag* f = flags; f < flags_end; f++)
            if (arg == f->name) flag = f;
        // a bare "--" (the end of the options to many programs; here there is nothing after them): it got "did you
        // mean --lr?"
        if (arg == "--")
            fail("\"--\" is not a flag, and this program takes no arguments after its flags\n---> HINT: drop it "
                 "(--help lists every flag)");
        if (!flag) {
            // what was typed without its dashes (-lr, lr and --lr are all matched against "lr")
            size_t first = arg.find_first_not_of('-');
            std::string bare = first == std::string::npos ? "" : arg.substr(first);
            const char* dashes = arg.rfind("-", 0) == 0 ? "" : " (flags start with --)";
            for (const FlagSynonym* y = synonyms; y < synonyms + num_synonyms; y++)
                if (bare == y->first + 2)
                    fail("unknown flag \"%s\"%s\n---> HINT: this trainer spells it %s%s (--help lists every flag)",
                         arg.c_str(), dashes, y->second, synonym_note(y->first, y->second).c_str());
            // else suggest the flag closest to what was typed
            std::vector<std::string> names;
            for (const Flag* f = flags; f < flags_end; f++) names.push_back(f->name);
            const std::string best = bare == "h" || bare == "?" ? "--help" : closest_name("--" + bare, names);
            fail("unknown flag \"%s\"%s\n---> HINT: did you mean %s? (--help lists every flag)", arg.c_str(), dashes,
                 best.c_str());
        }
        char* field = (char*)opts + flag->offset;
        given.insert(flag->name);
        if (flag->kind == Kind::BOOL) {
            if (has_inline) fail("flag %s takes no value", flag->name);
            // --no-X switches clear the field they name; the others set theirs
            *(bool*)field = std::strncmp(flag->name, "--no-", 5) != 0;
            continue;
        }
        if (!has_inline) {
            if (i + 1 >= argc) fail("flag %s needs a value (%s)", flag->name, flag->metavar);
            // the next flag is not the value (--save --overwrite saved into a folder named "--overwrite", exit 0)
            if (std::strncmp(argv[i + 1], "--", 2) == 0)
                fail("flag %s needs a value (%s), and %s is a flag\n---> HINT: give its value; one that starts with -- "
                     "goes as %s=VALUE", flag->name, flag->metavar, argv[i + 1], flag->name);
            value = argv[++i];
        }
        auto seen = std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == flag; });
        if (seen == values.end()) seen = values.insert(values.end(), {flag, {}});
        seen->second.push_back(value);
        char* end = nullptr;
        errno = 0;
        // strtoll/strtof skip leading white space: " 5" (a quoting slip) is not a number as typed
        const bool spaced = !value.empty() && std::isspace((unsigned char)value[0]);
        switch (flag->kind) {
            case Kind::STR:
                if (value.empty()) fail("flag %s needs a non-empty value (%s)", flag->name, flag->metavar);
                *(std::string*)field = value;
                break;
            case Kind::INT:
            case Kind::LONG: {
                long long v = std::strtoll(value.c_str(), &end, 10);
                if (value.empty() || spaced || *end || (errno && errno != ERANGE))
                    fail("flag %s needs an integer, got \"%s\"", flag->name, value.c_str());
                if (errno == ERANGE) fail("flag %s: %s is out of range", flag->name, value.c_str());
                if (flag->kind == Kind::INT) {
                    if (v < -2147483647LL || v > 2147483647LL) fail("flag %s: %s is out of range", flag->name, value.c_str());
                    *(int*)field = (int)v;
                } else {
                    *(long long*)field = v;
                }
                break;
            }
            case Kind::FLOAT: {
                float v = std::strtof(value.c_str(), &end);
                // beyond a float's range (3.4e38) is a number too large, not one that is not finite
                const bool overflow = errno == ERANGE && std::isinf(v) && !*end;
                if (!typed_as_decimal(value) || *end || (errno && errno != ERANGE) || (!std::isfinite(v) && !overflow))
                    fail("flag %s needs a finite decimal number, got \"%s\"", flag->name, value.c_str());
                if (errno == ERANGE && !overflow)  // below fp32's smallest normal number
                    fail("flag %s: %s is too small for a float (below 1.2e-38)", flag->name, value.c_str());
                // no real-valued setting means anything beyond 1e9 (a typo such as 1e20 for 1e-2 is not a setting)
                if (overflow || std::fabs(v) > 1e9f) fail("flag %s: %s is out of range (|value| <= 1e9)", flag->name, value.c_str());
                *(float*)field = v;
                break;
            }
            case Kind::BOOL:
                break;
        }
    }
    repeated.clear();
    for (const auto& flag_values : values) {
        const Flag* flag = flag_values.first;
        const std::vector<std::string>& typed = flag_values.second;
        // numbers by value (1e-3 and 0.001 are one setting); text quoted (a --prompt may hold commas)
        const bool text = flag->kind == Kind::STR;
        auto same = [&](const std::string& v) {
            return text ? v == typed[0] : std::strtod(v.c_str(), nullptr) == std::strtod(typed[0].c_str(), nullptr);
        };
        if (std::all_of(typed.begin(), typed.end(), same)) continue;
        auto shown = [&](const std::string& v) { return text ? "\"" + v + "\"" : v; };
        std::string said = std::string(flag->name) + " " + shown(typed[0]);
        for (size_t k = 1; k < typed.size(); k++) said += ", then " + shown(typed[k]);
        repeated.push_back(said);
    }
}

void check_decay_keeps_the_sign(const TrainOptions& o) {
    CHECK_USER((double)o.lr * o.weight_decay < 1,
               "--weight-decay %g with --lr %g: each step would multiply every decayed weight by 1 - lr * wd = %g, "
               "flipping its sign or zeroing it (the decay is decoupled: W *= 1 - lr * wd)\n---> HINT: weight decay "
               "is usually 0 to 0.1",
               o.weight_decay, o.lr, 1 - (double)o.lr * o.weight_decay);
}

void check_storage_options(const TrainOptions& opts) {
    CHECK_USER(opts.prac_storage == "auto" || opts.prac_storage == "act" || opts.prac_storage == "fp8",
               "--prac-storage must be auto, act (the activation dtype) or fp8 (got \"%s\")",
               opts.prac_storage.c_str());
    CHECK_USER(opts.prac_storage != "fp8" || opts.prac != "none" || opts.optimizer != "rso",
               "--prac-storage fp8 stores PRAC's compressed projections; --optimizer rso stores its projections X*P "
               "in the activation dtype (and goes with --prac none)\n---> HINT: drop --prac-storage");
    CHECK_USER(opts.prac_storage != "fp8" || opts.prac != "none",
               "--prac-storage fp8 stores PRAC's compressed projections, and --prac none compresses nothing\n"
               "---> HINT: add --prac prac (or pac, rac), or drop --prac-storage");
    CHECK_USER(opts.optimizer_states == "fp32" || opts.optimizer_states == "8bit",
               "--optimizer-states must be fp32 or 8bit (got \"%s\")", opts.optimizer_states.c_str());
    CHECK_USER(opts.optimizer_states == "fp32" || opts.optimizer == "adamw",
               "--optimizer-states 8bit quantizes AdamW's moments; --optimizer %s keeps its own fp32 state\n"
               "---> HINT: use --optimizer adamw, or drop --optimizer-states", opts.optimizer.c_str());
}

bool options_train(const TrainOptions& o) {
    return !o.eval_only && (o.plan || !o.ckpt_dir.empty() || !(o.was_given("--steps") && o.steps == 0));
}

void resolve_global_batch(TrainOptions& o, int ranks) {
    if (o.global_batch == 0 || !options_train(o)) return;  // (unused: said by unused_flags_notice)
    const long long N = o.global_batch, per_micro = (long long)ranks * o.batch_size;
    if (N % per_micro != 0) {
        // the largest micro-batch up to --batch-size that divides N on these ranks (what still fits the memory)
        int fits = 0;
        for (int b = std::min<long long>(o.batch_size, N / ranks); b >= 1 && !fits; b--)
            if (N % ((long long)ranks * b) == 0) fits = b;
        const std::string where = ranks > 1 ? format("%d ranks x --batch-size %d", ranks, o.batch_size)
                                            : format("--batch-size %d", o.batch_size);
        fail("--global-batch %lld is not a whole number of micro-batches: %s take%s %lld sequences each\n---> HINT: %s",
             N, where.c_str(), ranks > 1 ? "" : "s", per_micro,
             fits ? format("pass --batch-size %d (--grad-accum %lld)%s", fits, N / ((long long)ranks * fits),
                           ranks > 1 ? ", or run on a number of ranks that divides it" : "").c_str()
                  : format("%lld sequences do not split over %d ranks: run on a number of ranks that divides it", N,
                           ranks).c_str());
    }
    const long long k = N / per_micro;
    CHECK_USER(!o.was_given("--grad-accum") || o.grad_accum == k, "--grad-accum %d disagrees with --global-batch "
               "%lld, which takes %lld micro-batch(es) of %lld sequences (%s)\n---> HINT: drop --grad-accum: "
               "--global-batch sets it", o.grad_accum, N, k, per_micro,
               ranks > 1 ? format("%d ranks x --batch-size %d", ranks, o.batch_size).c_str()
                         : format("--batch-size %d", o.batch_size).c_str());
    o.grad_accum = (int)k;
}

void check_flag_partners(const TrainOptions& o) {
    CHECK_USER(!o.ckpt_dir.empty() || !(o.was_given("--ckpt-every") || o.was_given("--ckpt-keep")),
               "--ckpt-every and --ckpt-keep go with --ckpt-dir (where the checkpoints are written)\n---> HINT: add "
               "--ckpt-dir DIR, or drop them");
    CHECK_USER(!(o.eval_only && !o.save.empty()), "--eval-only trains nothing: --save would have nothing new to save\n"
               "---> HINT: drop --save (the weights evaluated are those of --init-from)");
    CHECK_USER(!(o.eval_only && (!o.ckpt_dir.empty() || o.resume)),
               "--eval-only trains nothing: --ckpt-dir and --resume go with training\n---> HINT: evaluate a "
               "checkpoint with --init-from DIR/step_NNNNNNNN (a model directory)");
    // (the plan counted a training run's optimizer state and master weights, 15 GiB at llama-1b, and no PRAC)
    CHECK_USER(!(o.plan && o.eval_only), "--plan plans a training run, and --eval-only keeps no optimizer state or "
               "master weights (and compresses nothing): the plan would overstate it\n---> HINT: drop --eval-only to "
               "plan the training run");
    CHECK_USER(!(o.eval_only && !o.dump_site.empty()),
               "--dump-site dumps an activation of a training step, and --eval-only takes none\n---> HINT: drop "
               "--eval-only and pass --steps with --dump-step below it");
    CHECK_USER(!o.dump_site.empty() ||
                   !(o.was_given("--dump-layer") || o.was_given("--dump-step") || o.was_given("--dump-path")),
               "--dump-layer, --dump-step and --dump-path go with --dump-site (which activation to dump)");
    // (said before the model and the data tables are built: it was said after them, without the values)
    CHECK_USER(o.dump_site.empty() || o.dump_step < o.steps,
               "--dump-step %d is not a step of this run: steps count from 0, below --steps %d\n---> HINT: pass "
               "--dump-step below --steps, or more --steps", o.dump_step, o.steps);
    // a run computes in its build's precision (make PRECISION=BF16|FP32): --precision only says which build --plan
    // plans for, and a CPU plan is fp32 whatever it says
    CHECK_USER(!o.was_given("--precision") || o.plan, "--precision goes with --plan (the CUDA build to plan for); a "
               "run computes in the precision of the build it runs\n---> HINT: build the fp32 CUDA backend with make "
               "PRECISION=FP32, or drop --precision");
    CHECK_USER(!o.was_given("--precision") || o.device != "cpu", "--precision chooses the CUDA build to plan for, and "
               "--device cpu plans the CPU backend (fp32)\n---> HINT: drop --device cpu to plan a CUDA build, or drop "
               "--precision");
    CHECK_USER(o.prac_refresh == "auto" || o.prac_refresh == "exact" || o.prac_refresh == "subspace",
               "--prac-refresh must be auto, exact or subspace (got \"%s\")", o.prac_refresh.c_str());
    CHECK_USER(!o.hellaswag.empty() || !o.was_given("--hellaswag-examples"), "--hellaswag-examples goes with "
               "--hellaswag (the file of examples)");
}

void parse_train_options(TrainOptions& opts, int argc, char** argv) {
    parse_flag_table(FLAGS, sizeof(FLAGS) / sizeof(FLAGS[0]), SYNONYMS, sizeof(SYNONYMS) / sizeof(SYNONYMS[0]), &opts,
                     opts.given, opts.repeated, argc, argv);
    if (opts.help) return;
    CHECK_USER(opts.batch_size > 0, "--batch-size must be positive (got %d)", opts.batch_size);
    // (0 and -1 are the defaults' markers, "the model's" and "10% of --steps": not values a user may give)
    CHECK_USER(opts.seq_len >= 0 && (opts.seq_len > 0 || !opts.was_given("--seq-len")), "--seq-len must be positive "
               "(got %d)", opts.seq_len);
    CHECK_USER(opts.grad_accum > 0, "--grad-accum must be positive (got %d)", opts.grad_accum);
    CHECK_USER(opts.global_batch > 0 || !opts.was_given("--global-batch"), "--global-batch must be positive (got %d)",
               opts.global_batch);
    CHECK_USER(opts.hellaswag_examples >= 0, "--hellaswag-examples must be >= 0 (0: all; got %d)",
               opts.hellaswag_examples);
    CHECK_USER(opts.watchdog >= 0 || !opts.was_given("--watchdog"), "--watchdog must be >= 0 seconds (0: off; got %d)",
               opts.watchdog);
    CHECK_USER(opts.recompute >= 0 && opts.recompute <= 2, "--recompute must be 0, 1 or 2 (got %d)", opts.recompute);
    CHECK_USER(opts.recompute_attention == 0 || opts.recompute_attention == 1,
               "--recompute-attention must be 0 or 1 (got %d)", opts.recompute_attention);
    CHECK_USER(opts.hidden_align >= 1 && opts.hidden_align <= 256,
               "--hidden-align must be between 1 and 256 elements (got %d)\n---> HINT: 8 makes bf16 rows 16-byte aligned",
               opts.hidden_align);
    CHECK_USER(opts.steps >= 0, "--steps must be >= 0 (got %d)", opts.steps);
    CHECK_USER(opts.lr >= 0, "--lr must be >= 0 (got %g)", opts.lr);
    CHECK_USER(opts.warmup >= 0 || (opts.warmup == -1 && !opts.was_given("--warmup")), "--warmup must be >= 0 (got %d)",
               opts.warmup);
    CHECK_USER(opts.min_lr_frac >= 0 && opts.min_lr_frac <= 1, "--min-lr-frac must be in [0, 1] (got %g)",
               opts.min_lr_frac);
    LrShape shape;
    CHECK_USER(lr_shape_parse(opts.lr_schedule, &shape),
               "--lr-schedule must be cosine, linear, constant or wsd (got '%s')", opts.lr_schedule.c_str());
    CHECK_USER(opts.cooldown_frac > 0 && opts.cooldown_frac <= 1,
               "--cooldown-frac must be in (0, 1] (got %g)\n---> HINT: --lr-schedule constant keeps the peak to the end",
               opts.cooldown_frac);
    CHECK_USER(opts.beta1 >= 0 && opts.beta1 < 1 && opts.beta2 >= 0 && opts.beta2 < 1,
               "--beta1/--beta2 must be in [0, 1) (got %.9g, %.9g%s)", opts.beta1, opts.beta2,
               opts.beta1 == 1.0f || opts.beta2 == 1.0f ? "; as float32, values above 0.99999997 are 1" : "");
    CHECK_USER(opts.adam_eps > 0, "--adam-eps must be positive (got %g)", opts.adam_eps);
    CHECK_USER(opts.weight_decay >= 0, "--weight-decay must be >= 0 (got %g)", opts.weight_decay);
    check_decay_keeps_the_sign(opts);
    CHECK_USER(opts.grad_clip >= 0, "--grad-clip must be >= 0 (0: off; got %g)", opts.grad_clip);
    CHECK_USER(opts.eval_interval >= 0, "--eval-interval must be >= 0 (0: at the end only; got %d)", opts.eval_interval);
    CHECK_USER(opts.eval_tokens > 0, "--eval-tokens must be positive (got %lld)", opts.eval_tokens);
    CHECK_USER(opts.log_interval > 0, "--log-interval must be positive (got %d)", opts.log_interval);
    CHECK_USER(opts.seed >= 0, "--seed must be >= 0 (got %lld)", opts.seed);
    CHECK_USER(opts.sample_seed >= 0 || !opts.was_given("--sample-seed"), "--sample-seed must be >= 0 (got %lld)",
               opts.sample_seed);
    CHECK_USER(opts.galore_scale > 0, "--galore-scale must be positive (got %g)", opts.galore_scale);
    CHECK_USER(opts.dump_layer >= 0 && opts.dump_step >= 0, "--dump-layer and --dump-step must be >= 0 (got %d, %d)",
               opts.dump_layer, opts.dump_step);
    CHECK_USER(opts.optimizer == "adamw" || opts.optimizer == "muon" || opts.optimizer == "adam-mini" ||
                   opts.optimizer == "galore" || opts.optimizer == "rso",
               "--optimizer must be adamw, muon, adam-mini, galore or rso (got \"%s\")", opts.optimizer.c_str());
    // (each flag on its own: "(got 0, 0)" of two flags did not say which was wrong)
    CHECK_USER(opts.rso_rank >= 0, "--rso-rank must be >= 0 (got %d)", opts.rso_rank);
    CHECK_USER(opts.rso_gap >= 1, "--rso-gap must be >= 1 (got %d)", opts.rso_gap);
    CHECK_USER(opts.rso_prox >= 0, "--rso-prox must be >= 0 (got %g)", opts.rso_prox);
    CHECK_USER(opts.rso_activations == "projected" || opts.rso_activations == "full",
               "--rso-activations must be projected or full (got \"%s\")", opts.rso_activations.c_str());
    CHECK_USER(opts.optimizer != "rso" || opts.prac == "none",
               "--optimizer rso stores its own projections of the linear layers' inputs and cannot be combined with "
               "--prac %s\n---> HINT: use --prac none with --optimizer rso", opts.prac.c_str());
    check_storage_options(opts);
    CHECK_USER(opts.galore_rank >= 0, "--galore-rank must be >= 0 (got %d)", opts.galore_rank);
    CHECK_USER(opts.galore_gap >= 1, "--galore-gap must be >= 1 (got %d)", opts.galore_gap);
    CHECK_USER(opts.muon_momentum >= 0 && opts.muon_momentum < 1, "--muon-momentum must be in [0, 1) (got %g)",
               opts.muon_momentum);
    CHECK_USER(opts.zero == 0 || opts.optimizer == "adamw", "--zero 1 shards AdamW only (got --optimizer %s)",
               opts.optimizer.c_str());
    CHECK_USER(opts.optimizer_states == "fp32" || opts.zero == 0,
               "--optimizer-states 8bit does not combine with --zero 1 yet (its checkpoints hold whole-buffer block "
               "scales)\n---> HINT: drop --zero 1, or keep --optimizer-states fp32");
    CHECK_USER(opts.sample >= 0, "--sample must be >= 0 (got %d)", opts.sample);
    CHECK_USER(opts.temperature >= 0, "--temperature must be >= 0 (got %g)\n---> HINT: 0 takes the most likely "
               "token, 1 the model's own distribution", opts.temperature);
    CHECK_USER(opts.top_k >= 0, "--top-k must be >= 0 (got %d; 0: every token)", opts.top_k);
    // before the run, not at --sample's end (where it failed after training, naming no flag)
    const size_t bad_byte = utf8_first_invalid(opts.prompt);
    CHECK_USER(bad_byte == std::string::npos, "--prompt is not UTF-8 text: byte %zu (0x%02x) of its %zu starts no "
               "valid UTF-8 character\n---> HINT: pass the prompt as UTF-8 text (iconv converts a terminal's other "
               "encoding)", bad_byte,
               bad_byte == std::string::npos ? 0u : (unsigned)(unsigned char)opts.prompt[bad_byte], opts.prompt.size());
    CHECK_USER(opts.ckpt_every >= 0, "--ckpt-every must be >= 0 (0: at the end only; got %d)", opts.ckpt_every);
    CHECK_USER(opts.ckpt_keep >= 1, "--ckpt-keep must be >= 1 (got %d)\n---> HINT: --ckpt-keep 1 keeps the newest "
               "checkpoint alone (the one --resume takes); without --ckpt-dir none is written", opts.ckpt_keep);
    CHECK_USER(!opts.resume || !opts.ckpt_dir.empty(), "--resume needs --ckpt-dir (where the checkpoints are)");
    CHECK_USER(!(opts.resume && opts.overwrite), "--resume continues the run in --ckpt-dir and --overwrite starts it "
               "over: pass one of them");
    check_flag_partners(opts);
    CHECK_USER(!(opts.eval_only && opts.overwrite), "--eval-only appends its evaluation to --log, and --overwrite "
               "starts a run over\n---> HINT: drop --overwrite (remove the log first for one that holds only this "
               "evaluation)");
    CHECK_USER(opts.zero == 0 || opts.zero == 1, "--zero must be 0 or 1 (got %d): ZeRO-1 is the only sharding", opts.zero);
    CHECK_USER(opts.comm == "auto" || opts.comm == "nccl" || opts.comm == "mpi",
               "--comm must be auto, nccl or mpi (got \"%s\")", opts.comm.c_str());
    CHECK_USER(opts.overlap_comm == 0 || opts.overlap_comm == 1, "--overlap-comm must be 0 or 1 (got %d)",
               opts.overlap_comm);
    CHECK_USER(opts.eval_protocol == "tokens" || opts.eval_protocol == "galore",
               "--eval-protocol must be tokens or galore (got \"%s\")", opts.eval_protocol.c_str());
    CHECK_USER(opts.on_nonfinite == "stop" || opts.on_nonfinite == "skip",
               "--on-nonfinite must be stop or skip (got \"%s\")", opts.on_nonfinite.c_str());
    CHECK_USER(opts.device == "auto" || opts.device == "cpu" || opts.device == "cuda",
               "--device must be cpu, cuda or auto (got \"%s\")", opts.device.c_str());
    CHECK_USER(opts.precision == "bf16" || opts.precision == "fp32", "--precision must be bf16 or fp32 (got \"%s\")",
               opts.precision.c_str());
    CHECK_USER(opts.gpu_mem_gib >= 0, "--gpu-mem must be >= 0 (got %g)", opts.gpu_mem_gib);
    CHECK_USER(opts.plan || (!opts.json && opts.gpu_mem_gib == 0 && opts.plan_ranks == 1),
               "--json, --gpu-mem and --plan-ranks go with --plan");
    CHECK_USER(!(opts.gpu_mem_gib > 0 && opts.device == "cpu"),
               "--gpu-mem asks which micro-batch fits a GPU, and --device cpu plans the CPU backend's memory (fp32, no "
               "CUDA context)\n---> HINT: drop --device cpu to plan the CUDA backend (this build's precision; --precision "
               "bf16|fp32 for another build)");
    CHECK_USER(opts.plan_ranks >= 1 && opts.plan_ranks <= 65536, "--plan-ranks must be 1..65536 (got %d)", opts.plan_ranks);
    CHECK_USER(opts.plan_ranks == 1 || opts.zero == 1,
               "--plan-ranks %d without --zero 1: every rank holds the whole optimizer state, so the plan is the "
               "one-rank plan\n---> HINT: add --zero 1 to plan ZeRO-1's sharded state", opts.plan_ranks);
    // with no data flags the built-in corpus is used; with one, its partner must be given too
    if (opts.eval_only) {
        CHECK_USER(!(opts.val_data.empty() && !opts.train_data.empty()),
                   "--eval-only evaluates on --val-data, which is missing (--train-data is not used)\n"
                   "---> HINT: pass --val-data GLOB");
    } else {
        CHECK_USER(opts.train_data.empty() == opts.val_data.empty(),
                   "%s given without %s\n---> HINT: pass both --train-data GLOB and --val-data GLOB, or neither for "
                   "the built-in corpus", opts.train_data.empty() ? "--val-data" : "--train-data",
                   opts.train_data.empty() ? "--train-data" : "--val-data");
    }
}

OptimizerChoice optimizer_choice_from(const TrainOptions& o) {
    OptimizerChoice c;
    c.kind = o.optimizer;
    c.beta1 = o.beta1;
    c.beta2 = o.beta2;
    c.eps = o.adam_eps;
    c.weight_decay = o.weight_decay;
    c.galore_rank = o.galore_rank;
    c.galore_gap = o.galore_gap;
    c.galore_scale = o.galore_scale;
    c.muon_momentum = o.muon_momentum;
    c.rso_rank = o.rso_rank;
    c.rso_gap = o.rso_gap;
    c.rso_prox = o.rso_prox;
    c.rso_seed = (uint64_t)o.seed;
    c.zero_ranks = o.zero == 1 ? o.plan_ranks : 1;
    c.adam_states = o.optimizer_states == "8bit" ? AdamStates::Q8 : AdamStates::F32;
    return c;
}

// "a,b" -> two numbers
static void parse_pair(const std::string& flag, const std::string& v, double* a, double* b) {
    char* end = nullptr;
    size_t comma = v.find(',');
    if (comma == std::string::npos) fail("%s needs two numbers separated by a comma (got \"%s\")", flag.c_str(), v.c_str());
    std::string s1 = v.substr(0, comma), s2 = v.substr(comma + 1);
    *a = std::strtod(s1.c_str(), &end);
    bool ok = !s1.empty() && !*end;
    *b = std::strtod(s2.c_str(), &end);
    ok = ok && !s2.empty() && !*end;
    ok = ok && typed_as_decimal(s1) && typed_as_decimal(s2);  // as the single-value flags
    if (!ok || !std::isfinite(*a) || !std::isfinite(*b) || *a < 0 || *b < 0)
        fail("%s needs two non-negative numbers separated by a comma (got \"%s\")", flag.c_str(), v.c_str());
}

// "r1,r2" -> two whole ranks in [0, 2^30] (a site's width bounds them further when the model is built)
static void parse_rank_pair(const std::string& flag, const std::string& v, int* a, int* b) {
    size_t comma = v.find(',');
    auto rank = [&](const std::string& t, int* out) {
        char* end = nullptr;
        errno = 0;
        long long x = std::strtoll(t.c_str(), &end, 10);
        if (t.empty() || std::isspace((unsigned char)t[0]) || *end || errno || x < 0 || x > (1LL << 30))
            fail("%s needs two whole ranks in [0, %lld] separated by a comma (got \"%s\")", flag.c_str(), 1LL << 30,
                 v.c_str());
        *out = (int)x;
    };
    if (comma == std::string::npos) fail("%s needs two ranks separated by a comma (got \"%s\")", flag.c_str(), v.c_str());
    rank(v.substr(0, comma), a);
    rank(v.substr(comma + 1), b);
}

PracOptions prac_options_from(const TrainOptions& o) {
    PracOptions p;
    p.mode = prac_mode_parse(o.prac);
    double a, b;
    // a positive fraction stays positive in float32 (1e-300 became 0, rank 0, where 1e-5 is the least rank, 8)
    auto fraction = [](double f) { return f > 0 ? std::max((float)f, FLT_MIN) : (float)f; };
    parse_pair("--prac-linear", o.prac_linear, &a, &b);
    CHECK_USER(a < 1 && b < 1, "--prac-linear fractions must be below 1 (got %s)", o.prac_linear.c_str());
    p.linear_r1 = fraction(a);
    p.linear_r2 = fraction(b);
    parse_pair("--prac-nonlinear", o.prac_nonlinear, &a, &b);
    CHECK_USER(a < 1 && b < 1, "--prac-nonlinear fractions must be below 1 (got %s)", o.prac_nonlinear.c_str());
    p.nonlinear_r1 = fraction(a);
    p.nonlinear_r2 = fraction(b);
    if (!o.prac_linear_ranks.empty())
        parse_rank_pair("--prac-linear-ranks", o.prac_linear_ranks, &p.linear_r1_abs, &p.linear_r2_abs);
    if (!o.prac_nonlinear_ranks.empty())
        parse_rank_pair("--prac-nonlinear-ranks", o.prac_nonlinear_ranks, &p.nonlinear_r1_abs, &p.nonlinear_r2_abs);
    CHECK_USER(o.prac_t1 > 0 && o.prac_t2 > 0, "--prac-t1 and --prac-t2 must be positive (got %d, %d)", o.prac_t1, o.prac_t2);
    p.t1 = o.prac_t1;
    p.t2 = o.prac_t2;
    // auto: subspace on both backends (the CUDA backend's runs on the device, prac_refresh_cuda)
    p.refresh = o.prac_refresh == "auto" ? PracRefresh::SUBSPACE : prac_refresh_parse(o.prac_refresh);
    p.initial_spread = prac_initial_spread_steps(o, p.mode);
    p.overlap = o.prac_refresh_overlap;
    CHECK_USER(p.overlap >= 0 && p.overlap <= std::min(p.t1, p.t2),
               "--prac-refresh-overlap %d: must be between 0 (off) and the refresh interval (--prac-t1 %d, --prac-t2 "
               "%d), so that a refresh takes effect before the next one of its site is due", p.overlap, p.t1, p.t2);
    CHECK_USER(!p.overlap || p.mode != PracMode::NONE,
               "--prac-refresh-overlap: with --prac none no site refreshes a basis, so there is nothing to overlap\n"
               "---> HINT: add --prac prac (or pac, rac), or drop --prac-refresh-overlap");
    CHECK_USER(o.prac_k_mult > 0, "--prac-k-mult must be positive (got %g)", o.prac_k_mult);
    p.k_mult = o.prac_k_mult;
    const std::string& c = o.prac_classes;
    CHECK_USER(c == "linear,nonlinear" || c == "nonlinear,linear" || c == "linear" || c == "nonlinear",
               "--prac-classes must be linear,nonlinear or linear or nonlinear (got \"%s\")", c.c_str());
    p.linear = c.find("linear") == 0 || c.find(",linear") != std::string::npos;
    p.nonlinear = c.find("nonlinear") != std::string::npos;
    p.seed = (uint64_t)o.seed;
    p.storage = prac_storage_parse(o.prac_storage_resolved());
    return p;
}

int prac_initial_spread_steps(const TrainOptions& o, PracMode mode) {
    const std::string& v = o.prac_initial_spread;
    if (v == "auto") return mode == PracMode::PRAC ? std::max(o.warmup, 0) : 0;  // rac's Q1 is empty: nothing to spread
    errno = 0;
    char* end = nullptr;
    const long k = std::strtol(v.c_str(), &end, 10);
    CHECK_USER(!v.empty() && !*end, "--prac-initial-spread must be auto or a number of steps >= 0 (got \"%s\")",
               v.c_str());
    CHECK_USER(!errno && k >= 0 && k <= INT32_MAX, "--prac-initial-spread %s is out of range (0 .. %d steps)", v.c_str(),
               INT32_MAX);
    CHECK_USER(k <= 1 || mode != PracMode::PAC,
               "--prac-initial-spread %ld: pac keeps no random part, so its provisional random basis would be biased "
               "(it would drop most of each activation)\n---> HINT: use --prac prac or rac, or drop "
               "--prac-initial-spread (auto spreads nothing for pac)", k);
    return (int)k;
}

std::string wrap_help(const std::string& text, size_t column, size_t indent) {
    std::string out;
    size_t col = column, i = 0;
    bool line_has_words = false;
    while (i < text.size()) {
        if (text[i] == '\n') {  // an explicit line break: the next line starts under the indent
            out += '\n' + std::string(indent, ' ');
            col = indent, line_has_words = false, i++;
            continue;
        }
        if (text[i] == ' ') { i++; continue; }
        size_t end = text.find_first_of(" \n", i);
        if (end == std::string::npos) end = text.size();
        const size_t len = end - i;
        if (line_has_words && col + 1 + len > HELP_COLUMNS) {
            out += '\n' + std::string(indent, ' ');
            col = indent, line_has_words = false;
        }
        if (line_has_words) out += ' ', col++;
        out.append(text, i, len);
        col += len, line_has_words = true, i = end;
    }
    return out;
}

std::string flag_table_help(const FlagDef* flags, size_t num_flags, const void* defaults,
                            const std::function<std::string(const FlagDef&)>& default_text) {
    const size_t help_column = 31;  // "  " + a 28-column flag column + " "
    std::string s;
    for (const FlagDef* f = flags; f < flags + num_flags; f++) {
        std::string left = std::string(f->name) + (f->metavar[0] ? std::string(" ") + f->metavar : "");
        std::string def = default_text ? default_text(*f) : "?";
        const char* field = (const char*)defaults + f->offset;
        if (def == "?") {  // the default of the field
            def = "";
            switch (f->kind) {
                case Kind::STR: {
                    const std::string& v = *(const std::string*)field;
                    if (!v.empty()) def = " [" + v + "]";
                    break;
                }
                case Kind::INT: def = format(" [%d]", *(const int*)field); break;
                case Kind::LONG: def = format(" [%lld]", *(const long long*)field); break;
                case Kind::FLOAT: def = format(" [%g]", *(const float*)field); break;
                case Kind::BOOL: break;
            }
        }
        // a flag wider than its column has its help on the next line
        s += left.size() <= help_column - 3 ? format("  %-28s ", left.c_str())
                                             : "  " + left + "\n" + std::string(help_column, ' ');
        s += wrap_help(f->help + def, help_column, help_column) + "\n";
    }
    return s;
}

std::string train_options_help(Arch arch, const char* program) {
    const std::string names = join(model_config_names(arch));
    std::string s = format("usage: %s [flags]\n\n", program);
    s += wrap_help(format("Trains a %s model (CPU or CUDA backend) on token shards; with no data flags, on the built-in "
                          "corpus.\nModels: %s, or a Hugging Face config.json.", arch == Arch::GPT2 ? "GPT-2" : "LLaMA",
                          names.c_str()), 0, 0) + "\n\n";
    TrainOptions defaults;
    std::vector<FlagDef> shown(std::begin(FLAGS), std::end(FLAGS));
    s += flag_table_help(shown.data(), shown.size(), &defaults, [arch](const FlagDef& f) -> std::string {
        if (std::string(f.name) == "--model") return arch == Arch::GPT2 ? " [gpt2-124m]" : " [llama-130m]";
        // defaults that depend on the model or the ranks, said in the flag's help
        for (const char* said : {"--warmup", "--seq-len", "--watchdog", "--precision", "--global-batch", "--sample-seed"})
            if (std::string(f.name) == said) return "";
        return "?";
    });
    s += "\nExamples:\n";
    if (arch == Arch::GPT2)
        s += format("  %s --model gpt2-mini --steps 200 --device cpu     # built-in corpus on a CPU\n"
                    "  %s --model gpt2-124m --train-data 'owt_gpt2_train_*.bin' --val-data 'owt_gpt2_val_*.bin' \\\n"
                    "      --batch-size 64 --global-batch 512 --steps 50000    # mpirun -np R: the same steps on R GPUs\n", program, program);
    else
        s += format("  %s --model llama-mini --steps 200 --device cpu    # built-in corpus on a CPU\n"
                    "  %s --model llama-130m --train-data 'c4_llama_train_*.bin' --val-data 'c4_llama_val_*.bin' \\\n"
                    "      --batch-size 128 --global-batch 512 --steps 20000 --lr 1e-3\n", program, program);
    return s;
}

static std::string repeated_flags_notice(const TrainOptions& o) {
    std::string out;
    for (const std::string& r : o.repeated)
        out += format("notice: flag given more than once: %s; the last is used\n", r.c_str());
    return out;
}

std::string plan_unused_flags_notice(const TrainOptions& o) {
    const std::string repeated = repeated_flags_notice(o);
    std::string names;
    int n = 0;
    for (const char* f : {"--epochs", "--data-dir", "--save", "--log", "--ckpt-dir", "--ckpt-every", "--ckpt-keep",
                          "--resume", "--overwrite", "--sample", "--sample-seed", "--predict", "--dump-site",
                          "--dump-path", "--hellaswag", "--hellaswag-examples"})
        if (o.was_given(f)) names += (n++ ? " " : "") + std::string(f);
    if (!n) return repeated;
    return repeated + format("notice: %s %s nothing: --plan prints the memory plan and exits (nothing is trained or "
                             "written)\n", names.c_str(), n == 1 ? "changes" : "change");
}

std::string unused_flags_notice(const TrainOptions& o, int ranks) {
    using Flags = std::vector<std::string>;
    auto given = [&](const char* prefix, const Flags& except = {}) {  // the flags given that start with prefix
        Flags out;
        for (const std::string& f : o.given)
            if (f.rfind(prefix, 0) == 0 && std::find(except.begin(), except.end(), f) == except.end())
                out.push_back(f);
        return out;
    };
    auto given_of = [&](std::initializer_list<const char*> names) {
        Flags out;
        for (const char* f : names)
            if (o.was_given(f)) out.push_back(f);
        return out;
    };
    std::string out = o.plan ? plan_unused_flags_notice(o) : repeated_flags_notice(o);
    auto notice = [&](const Flags& flags, const std::string& why) {
        if (flags.empty()) return;
        std::string names;
        for (const std::string& f : flags) names += (names.empty() ? "" : " ") + f;
        out += format("notice: %s %s nothing in this run: %s\n", names.c_str(),
                      flags.size() == 1 ? "changes" : "change", why.c_str());
    };
    if (o.sample == 0)
        notice(given_of({"--prompt", "--temperature", "--top-k", "--sample-seed"}),
               "--sample is 0: no text is generated");
    else if (o.temperature == 0)
        notice(given_of({"--top-k"}), "--temperature 0 takes the most likely token");
    // --eval-only, or --steps 0 (an evaluation, and --save, of the initial weights): the flags of training are inert;
    // not with --plan (the plan's rows follow them) or --ckpt-dir (its step-0 checkpoint records them: a resume of it
    // must pass them again)
    if (!options_train(o)) {  // (with --eval-only the flags that go only with training are refused: check_flag_partners)
        Flags f = given_of({"--epochs", "--lr", "--warmup", "--warmup-ratio", "--lr-schedule", "--cooldown-frac",
                            "--min-lr-frac", "--weight-decay", "--beta1", "--beta2", "--adam-eps", "--grad-clip",
                            "--grad-accum", "--global-batch", "--optimizer", "--optimizer-states", "--on-nonfinite",
                            "--no-shuffle", "--eval-interval", "--log-interval", "--recompute", "--recompute-attention",
                            "--zero", "--overlap-comm"});
        if (o.eval_only && o.was_given("--steps")) f.insert(f.begin(), "--steps");
        if (o.eval_only && o.was_given("--train-data")) f.insert(f.begin(), "--train-data");  // (not even opened)
        for (const char* family : {"--galore-", "--muon-", "--rso-"})
            for (const std::string& g : given(family)) f.push_back(g);
        const char* why = o.eval_only ? "--eval-only trains nothing" : "--steps 0 trains nothing";
        notice(f, why);
        notice(given("--prac"), std::string(why) + " (an evaluation saves no activations to compress)");
        return out;
    }
    // --prac-storage fp8 without PRAC is refused (check_storage_options). What a mode uses: prac_uses_* (prac.h),
    // which the resume key follows too.
    const PracMode mode = prac_mode_parse(o.prac);
    const bool overlap = o.prac_refresh_overlap > 0;
    if (mode == PracMode::NONE)
        notice(given("--prac-", {"--prac-storage"}), "PRAC is off (--prac none); pass --prac prac (or pac, rac) to "
               "compress");
    auto inert = [&](std::initializer_list<std::pair<const char*, bool>> uses) {
        Flags out;
        for (const auto& [flag, used] : uses)
            if (!used && o.was_given(flag)) out.push_back(flag);
        return out;
    };
    if (mode == PracMode::PAC)
        notice(inert({{"--prac-k-mult", prac_uses_k(mode)}, {"--prac-t2", prac_uses_t2(mode, overlap)}}),
               "pac keeps no random part (no Q2, no k)");
    if (mode == PracMode::RAC)
        notice(inert({{"--prac-t1", prac_uses_t1(mode, overlap)}, {"--prac-refresh", prac_uses_q1(mode)}}),
               "rac computes no Q1 (its whole rank is random)");
    if (o.prac != "none" && o.prac_classes == "linear")
        notice(given("--prac-nonlinear"), "--prac-classes linear compresses no nonlinear site");
    if (o.prac != "none" && o.prac_classes == "nonlinear")
        notice(given("--prac-linear"), "--prac-classes nonlinear compresses no linear site");
    // absolute ranks override the class's fractions (which were dropped without a word)
    for (const char* cls : {"linear", "nonlinear"}) {
        const std::string fractions = std::string("--prac-") + cls, ranks = fractions + "-ranks";
        if (mode != PracMode::NONE && o.was_given(ranks.c_str()))
            notice(given_of({fractions.c_str()}), format("%s %s sets that class's ranks", ranks.c_str(),
                                                         (cls == std::string("linear") ? o.prac_linear_ranks
                                                                                       : o.prac_nonlinear_ranks).c_str()));
    }
    if (o.eval_interval >= o.steps)  // (eval_due: steps 1 .. --steps - 1 that it divides)
        notice(given_of({"--eval-interval"}), format("it is not below --steps %d: the final evaluation is the only one",
                                                     o.steps));
    if (o.lr_schedule == "constant") notice(given_of({"--min-lr-frac"}), "--lr-schedule constant does not decay");
    if (o.lr_schedule != "wsd")
        notice(given_of({"--cooldown-frac"}), format("the schedule is %s, not wsd", o.lr_schedule.c_str()));
    for (const char* opt : {"galore", "muon", "rso"})
        if (o.optimizer != opt)
            notice(given(format("--%s-", opt).c_str()),
                   format("the optimizer is %s, not %s", o.optimizer.c_str(), opt));
    // RSO's proximal term adds C·B to each subproblem's gradient, and with one step per subproblem B is always 0
    if (o.optimizer == "rso" && o.rso_gap == 1)
        notice(given_of({"--rso-prox"}), "with --rso-gap 1 every subproblem takes one step from B = 0, where the "
               "proximal term's gradient C·B is zero");
    if (ranks == 1 && !o.plan && o.prac != "none")  // (without PRAC it is named above)
        notice(given("--prac-shared-subspace"), "one rank has no other subspace to share");
    if (ranks == 1 && !o.plan) notice(given_of({"--overlap-comm"}), "one rank has no gradients to average");
    // (a checkpoint holds the state whole: a resume on more ranks shards it by its own --zero)
    if (ranks == 1 && !o.plan) notice(given_of({"--zero"}), "one rank keeps the whole optimizer state");
    // not inert, but likely not meant: a warmup longer than the run never reaches the peak
    if (o.was_given("--warmup")) out += long_warmup_notice(o, format("--warmup %d", o.warmup));
    return out + schedule_notices(o);
}

// The 0-based step where the learning rate's decay starts: the warmup's end, or wsd's cooldown. The decay's first
// step is at the peak (lr_schedule: its part done is 0), so a run needs two steps from here for one below it.
static int decay_start(const TrainOptions& o) {
    const int warmup = std::max(o.warmup, 0);
    return o.lr_schedule == "wsd" ? wsd_cooldown_start(o.steps, warmup, o.cooldown_frac) : warmup;
}

std::string schedule_notices(const TrainOptions& o) {
    std::string out;
    if (o.steps <= 0) return out;
    const int start = decay_start(o), decay_steps = std::max(o.steps - start, 0);
    if (o.was_given("--min-lr-frac") && o.lr_schedule != "constant" && decay_steps < 2)
        out += format("notice: --min-lr-frac changes nothing in this run: no step of it is below the peak (%s)\n",
                      decay_steps == 1                ? "its decay is the last step alone, which is at the peak"
                      : start > std::max(o.warmup, 0) ? "wsd's cooldown rounds to no step"
                                                      : "the warmup lasts the whole run");
    // a basis refreshed every --galore-gap / --rso-gap steps from step 1: a gap as long as the run refreshes none
    for (const auto& [opt, flag, gap] : {std::tuple{"galore", "--galore-gap", o.galore_gap},
                                         std::tuple{"rso", "--rso-gap", o.rso_gap}})
        if (o.optimizer == opt && o.was_given(flag) && gap >= o.steps)
            out += format("notice: %s %d is as long as the run (%d steps): the subspace chosen at step 1 is never "
                          "changed in it\n", flag, gap, o.steps);
    if (o.was_given("--lr") && o.lr == 0)
        out += "notice: --lr 0: no step changes a weight (every optimizer's update, weight decay too, is scaled by the "
               "learning rate)\n";
    return out;
}

std::string long_warmup_notice(const TrainOptions& o, const std::string& warmup) {
    if (o.steps <= 0 || o.warmup <= o.steps) return "";
    return format("notice: %s is longer than --steps %d: the learning rate rises the whole run and ends at %g, short "
                  "of --lr %g\n", warmup.c_str(), o.steps, o.lr * (double)o.steps / o.warmup, o.lr);
}

// The schedule's row of the run's table: its shape, and where wsd's cooldown falls (steps numbered from 1, as the
// step lines number them; the cooldown's first step is at the peak: decay_start).
static std::string lr_schedule_text(const TrainOptions& o) {
    if (o.lr_schedule != "wsd" || o.steps <= 0) return o.lr_schedule;
    const int start = decay_start(o), cooldown = o.steps - start;
    if (cooldown >= 2) return format("wsd (the peak through step %d, then down over steps %d-%d)", start + 1, start + 2, o.steps);
    if (o.warmup >= o.steps) return "wsd (no cooldown: the warmup lasts the whole run)";
    const std::string after = start == std::max(o.warmup, 0) && start > 0 ? format(" after a warmup of %d", start) : "";
    if (cooldown == 1)
        return format("wsd (the peak to the end: --cooldown-frac %g of %d steps%s is a cooldown of 1 step, which is at "
                      "the peak)", o.cooldown_frac, o.steps, after.c_str());
    return format("wsd (the peak to the end: --cooldown-frac %g of %d steps%s is no cooldown)", o.cooldown_frac,
                  o.steps, after.c_str());
}

std::vector<std::pair<std::string, std::string>> train_options_rows(const TrainOptions& o, const ModelConfig& cfg,
                                                                    int ranks) {
    // an evaluation of protocol "tokens" reads whole batches of B x T per rank (evaluate.h), at most an epoch's
    // (said after the table when the data has fewer): up to these tokens. (T is 0 here until the model's default.)
    const long long eval_batch = (long long)o.batch_size * o.seq_len * ranks;
    const long long eval_read =
        eval_batch > 0 && o.eval_tokens <= LLONG_MAX - eval_batch
            ? eval_batches_per_rank(o.eval_tokens, o.batch_size, o.seq_len, ranks, LLONG_MAX) * eval_batch
            : o.eval_tokens;
    const std::string eval_tokens =
        std::to_string(o.eval_tokens) +
        (o.eval_protocol == "tokens" && eval_read != o.eval_tokens ? format(" (up to %lld: whole batches)", eval_read)
                                                                   : "");
    if (o.eval_only)  // only what an evaluation uses: the training rows would read as if they applied
        return {
            {"init_from", o.init_from.empty() ? "(random init)" : o.init_from},
            {"val_data", o.val_data},
            {"batch_size (B)", std::to_string(o.batch_size) + (ranks > 1 ? " per rank" : "")},
            {"seq_len (T)", std::to_string(o.seq_len)},
            {"eval tokens", eval_tokens},
            {"eval protocol", o.eval_protocol},
            {"log", o.log.empty() ? "(no)" : o.log},
        };
    const long long tokens = (long long)o.batch_size * o.seq_len * o.grad_accum * ranks;
    return {
        {"init_from", o.init_from.empty() ? "(random init)" : o.init_from},
        {"train_data", o.train_data},
        {"val_data", o.val_data},
        {"batch_size (B)", std::to_string(o.batch_size) + (ranks > 1 ? " per rank" : "")},
        {"seq_len (T)", std::to_string(o.seq_len)},
        {"grad_accum", std::to_string(o.grad_accum) + (o.global_batch ? format(" (--global-batch %d)", o.global_batch)
                                                                      : "")},
        {"tokens per step",
         std::to_string(tokens) + (ranks > 1 ? format(" (B x T x grad_accum x %d ranks)", ranks) : "")},
        {"steps", std::to_string(o.steps)},
        {"lr (peak)", float_text(o.lr)},
        {"warmup steps", std::to_string(o.warmup)},
        {"lr schedule", lr_schedule_text(o)},
        {"min lr", o.lr_schedule == "constant"
                       ? std::string("(constant: no decay)")
                       : format("%s (%s x lr)", float_text(o.lr * o.min_lr_frac).c_str(), float_text(o.min_lr_frac).c_str())},
        {"weight_decay", float_text(o.weight_decay)},
        // a rank of 0 is the model's default: the row shows the number the run uses
        {"optimizer", o.optimizer == "galore"
                          ? format("galore (rank %d, gap %d, scale %g)",
                                   galore_rank_for(o.galore_rank, cfg), o.galore_gap,
                                   o.galore_scale)
                      : o.optimizer == "muon" ? format("muon (momentum %g)", o.muon_momentum)
                      : o.optimizer == "rso"
                          ? format("rso (rank %d, gap %d, prox %g, %s activations)",
                                   rso_rank_for(o.rso_rank, cfg), o.rso_gap, o.rso_prox,
                                   o.rso_activations.c_str())
                                              : o.optimizer + (o.optimizer_states == "8bit" ? " (8-bit states)" : "")},
        {"adam betas / eps",
         format("%s, %s / %s", float_text(o.beta1).c_str(), float_text(o.beta2).c_str(), float_text(o.adam_eps).c_str())},
        {"grad_clip", float_text(o.grad_clip)},
        {"seed", std::to_string(o.seed)},
        {"eval interval / tokens", format("%d / %s", o.eval_interval, eval_tokens.c_str())},
        {"shuffle", o.shuffle ? "yes" : "no"},
        {"eval protocol", o.eval_protocol},
        {"on non-finite", o.on_nonfinite},
        {"save", o.save.empty() ? "(no)" : o.save},
        {"log", o.log.empty() ? "(no)" : o.log},
        {"prac", o.prac},
        {"prac ranks linear / nonlinear",
         (o.prac_linear_ranks.empty() ? o.prac_linear : o.prac_linear_ranks + " (abs)") + " / " +
             (o.prac_nonlinear_ranks.empty() ? o.prac_nonlinear : o.prac_nonlinear_ranks + " (abs)")},
        {"prac T1 / T2 / k mult", format("%d / %d / %g", o.prac_t1, o.prac_t2, o.prac_k_mult)},
        {"prac classes", o.prac_classes},
        {"prac storage", (o.prac_storage_resolved() == "fp8" ? "fp8 (e4m3, per-row scale, stochastic rounding)" : "act") +
                             std::string(o.prac_storage == "auto" ? " (auto)" : "")},
        {"prac refresh", (o.prac_refresh == "auto" ? "auto (subspace)" : o.prac_refresh) +
                             (o.prac == "none" ? ""
                                               : "; initial spread " + o.prac_initial_spread +
                                                     (o.prac_initial_spread == "auto"  // the steps it resolved to
                                                          ? format(" (%d steps)", prac_initial_spread_steps(
                                                                                      o, prac_mode_parse(o.prac)))
                                                          : "")) +
                             (o.prac_refresh_overlap
                                  ? format("; overlapped, in effect after %d step%s (--prac-refresh-overlap)",
                                           o.prac_refresh_overlap, o.prac_refresh_overlap > 1 ? "s" : "")
                                  : "")},
        {"recompute", std::string(o.recompute == 0   ? "0 (off)"
                                  : o.recompute == 1 ? "1 (activation output)"
                                                     : "2 (activation + norm outputs)") +
                          (o.recompute_attention ? "; attention output recomputed" : "; attention output saved")},
        {"checkpoints", o.ckpt_dir.empty() ? "(no)" : format("%s every %d keep %d%s", o.ckpt_dir.c_str(), o.ckpt_every,
                                                               o.ckpt_keep, o.resume ? " (resume)" : "")},
        {"zero", std::to_string(o.zero)},
        {"comm", o.comm + (o.comm == "mpi" ? "" : format(" (overlap %d)", o.overlap_comm))},
    };
}
