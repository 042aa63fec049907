// Command-line flags, the same for train_gpt2 and train_llama. One table drives parsing and --help, so every
// flag is documented and nothing parses a flag the help does not show.
#pragma once
#include <algorithm>
#include <cstddef>
#include <functional>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/sites.h"  // Recompute
#include "prac/prac.h"

// --on-nonfinite skip: more non-finite steps than this in a row stop the run (it diverged; skipping is for spikes)
inline constexpr int MAX_SKIPPED_IN_A_ROW = 10;

struct TrainOptions {
    std::string model;          // name or config.json
    std::string init_from;      // safetensors file or directory with model.safetensors
    std::string train_data;     // shard glob; empty = built-in corpus
    std::string val_data;       // shard glob; empty = built-in corpus (when train_data is empty too)
    int batch_size = 4;         // micro-batch B
    int seq_len = 0;            // T; 0 = per-model default (GPT-2 1024, LLaMA 256, capped by max_seq_len)
    int grad_accum = 1;
    int global_batch = 0;       // --global-batch: sequences per step over all ranks (sets grad_accum); 0 = not given
    int steps = 100;
    float lr = 6e-4f;
    int warmup = -1;            // steps; -1 = 10% of steps (the paper)
    float min_lr_frac = 0.1f;   // decay floor as a fraction of lr (the paper: 10%)
    std::string lr_schedule = "cosine";  // cosine | linear | constant | wsd (optim_adamw.h's LrShape)
    float cooldown_frac = 0.2f;          // wsd: the fraction of the steps in the final decay
    float weight_decay = 0.1f;
    float beta1 = 0.9f, beta2 = 0.95f, adam_eps = 1e-8f;
    float grad_clip = 1.0f;     // 0 = off
    std::string optimizer = "adamw";  // adamw | muon | adam-mini | galore
    std::string optimizer_states = "fp32";  // AdamW's moments: fp32 | 8bit (block-wise quantized)
    int galore_rank = 0;              // 0: GaLore's rank for the model size
    int galore_gap = 200;
    float galore_scale = 0.25f;
    float muon_momentum = 0.95f;
    int rso_rank = 0;                        // 0: the paper's / GaLore's rank for the model (optim_rso.h)
    int rso_gap = 200;
    float rso_prox = 0.0f;
    std::string rso_activations = "projected";  // projected | full (ablation: store the linear inputs whole)
    long long seed = 42;
    long long sample_seed = -1;  // --sample's draws; -1: --seed
    int eval_interval = 0;      // steps; 0 = only at the end
    long long eval_tokens = 65536;
    std::string save;           // directory for model.safetensors + config.json at the end
    std::string device = "auto";
    std::string log;            // JSONL metrics file
    bool eval_only = false;
    std::string eval_protocol = "tokens";  // tokens | galore
    std::string hellaswag;        // --hellaswag: HellaSwag's JSON lines or llm.c's eval file, scored at evaluations
    int hellaswag_examples = 0;   // its first N examples (0: all)
    std::string on_nonfinite = "stop";     // stop | skip: what a NaN/Inf loss or gradient norm does
    bool shuffle = true;
    int log_interval = 1;
    bool help = false;
    std::set<std::string> given;  // the flags given on the command line (defaults that depend on the run: warmup,
                                  // eval_tokens are resolved only where the user did not choose)
    bool was_given(const char* flag) const { return given.count(flag) != 0; }
    // the flags given more than once with different values (numbers by value), each as "--lr 0.001, then 0.0003"
    // (text quoted); the last is used (a script's extra flags override its own; the run says so, with the notices of
    // unused flags)
    std::vector<std::string> repeated;

    // PRAC activation compression
    std::string prac = "none";               // none | pac | rac | prac
    std::string prac_linear = "0.3,0.3";     // r1,r2 of linear sites as fractions of the width
    std::string prac_nonlinear = "0.2,0.2";  // r1,r2 of nonlinear sites
    std::string prac_linear_ranks;           // absolute r1,r2: override the fractions
    std::string prac_nonlinear_ranks;
    int prac_t1 = 500, prac_t2 = 500;        // refresh intervals of Q1 and Q2 (steps)
    std::string prac_refresh = "auto";  // how Q1 is found: subspace | exact | auto (subspace, on both backends)
    // the sites' first refreshes over K steps (0, 1: all on the first); auto: the warmup's steps (prac only)
    std::string prac_initial_spread = "auto";
    int prac_refresh_overlap = 0;  // PracOptions::overlap (steps)
    float prac_k_mult = 1.0f;                // k = k_mult * (n - r1) / r2
    std::string prac_classes = "linear,nonlinear";
    // packed projections: act (the activation dtype) | fp8 (e4m3, per-row scale) | auto (fp8 when PRAC compresses)
    std::string prac_storage = "auto";
    std::string prac_storage_resolved() const {
        return prac_storage != "auto" ? prac_storage : prac != "none" ? "fp8" : "act";
    }
    int recompute = 0;  // llm.c -r: 1 recompute GeLU/SwiGLU outputs in backward, 2 also the norm outputs
    int recompute_attention = 1;  // 1: recompute the attention output O in backward instead of saving it
    int hidden_align = 1;  // LLaMA: (N, F) activation rows at a stride of F rounded up to a multiple of this
    Recompute recompute_options() const { return Recompute(recompute, recompute_attention == 1); }

    // checkpoints and data parallelism
    std::string ckpt_dir;   // checkpoints go to DIR/step_NNNNNNNN (empty = none)
    int ckpt_every = 0;     // steps between checkpoints (0 = only at the end, on a signal, or before a NaN stop)
    int ckpt_keep = 3;      // complete checkpoints kept
    bool resume = false;    // continue from the newest checkpoint in ckpt_dir
    bool overwrite = false; // start over where an earlier run's checkpoints (ckpt_dir) or model (save) are
    int zero = 0;           // 1: shard AdamW state over ranks (ZeRO-1)
    bool prac_shared = false;  // one PRAC subspace for all ranks (all-reduced Gram matrix)
    std::string comm = "auto";  // auto | nccl | mpi: the gradient communicator (auto: NCCL on GPUs with ranks > 1)
    int overlap_comm = 1;       // NCCL: average each layer's gradients during backward (0: one call after it)
    int watchdog = -1;          // seconds without progress that end the job (-1: 1800 with 2+ ranks, else off)

    // text samples at the end of training
    int sample = 0;             // tokens to generate (0 = none)
    std::string prompt;         // --sample continues this text (empty: as a document starts: print_sample)
    float temperature = 1.0f;   // --sample: logits / T (0: the most likely token)
    int top_k = 0;              // --sample: among the K most likely tokens (0: all)
    std::string spm_model;      // SentencePiece model to decode LLaMA samples (default: the built-in corpus's)

    // activation dump for prac_analyze
    std::string dump_site;  // site name (resid, ln1, resid_mid, ln2, GPT-2 fch fch_gelu, LLaMA fch_gate fch_up fch_act)
    int dump_layer = 0;
    int dump_step = 0;
    std::string dump_path = "activation.npy";

    // memory planning (--plan prints the plan and exits; no GPU needed)
    bool plan = false;
    bool json = false;
    float gpu_mem_gib = 0;           // also print the largest micro-batch that fits this GPU size
    int plan_ranks = 1;              // --plan --zero 1: plan one of this many data-parallel ranks
    std::string precision = "bf16";  // plan for the CUDA backend's bf16 or fp32 build (the mains start it at their
                                     // build's: plan_precision_of_this_build, train/launch.h)
};

// One flag of a table that drives both parsing and --help (train/cli.cpp's FLAGS, train/finetune.cpp's).
enum class FlagKind { STR, INT, LONG, FLOAT, BOOL };
struct FlagDef {
    const char* name;
    const char* metavar;  // "" for boolean switches
    FlagKind kind;
    const char* help;
    size_t offset;  // of the field in the options struct the table describes
};
using FlagSynonym = std::pair<const char*, const char*>;  // another tool's spelling, ours
// Parses argv into the struct at `opts` (each flag's offset into it) and records the flags given. Unknown flags fail
// with our spelling when they are one of `synonyms`, else with the nearest flag; --no-X switches clear their field.
// Checks the values' syntax only (numbers, non-empty strings); ranges are the caller's. A flag given twice takes the
// last value; those given with different values are listed in `repeated` (TrainOptions::repeated).
void parse_flag_table(const FlagDef* flags, size_t num_flags, const FlagSynonym* synonyms, size_t num_synonyms,
                      void* opts, std::set<std::string>& given, std::vector<std::string>& repeated, int argc,
                      char** argv);
// --help's width: every line of the programs' help fits HELP_COLUMNS columns, as prep_data's and prac_analyze's
// hand-set help does (a terminal's soft wrap would continue a flag's text at column 0, under the flag names).
constexpr size_t HELP_COLUMNS = 120;
// TEXT's words after `column` columns already used on the line, wrapped at HELP_COLUMNS; continuation lines are
// indented by `indent` spaces. Explicit newlines in TEXT are kept. A word longer than a line stays whole.
std::string wrap_help(const std::string& text, size_t column, size_t indent);
// The --help lines of a table: "  --flag META   help [default]" wrapped by wrap_help under the help column,
// defaults read from the struct at `defaults`; default_text may replace a flag's "[default]" text (return "?" to
// keep it).
std::string flag_table_help(const FlagDef* flags, size_t num_flags, const void* defaults,
                            const std::function<std::string(const FlagDef&)>& default_text = nullptr);

// Parses argv into opts. Throws UserError for unknown flags (with the closest known flag), missing or
// malformed values. program is "train_gpt2" or "train_llama".
void parse_train_options(TrainOptions& opts, int argc, char** argv);
// Flags that mean something only beside another (--ckpt-every without --ckpt-dir, --save with --eval-only, the
// --dump-* details without --dump-site) are refused rather than ignored; and --prac-refresh's value. Both trainers'
// parsers call it.
void check_flag_partners(const TrainOptions& opts);
// Whether the options train (and a checkpoint records their training flags): not --eval-only, and not --steps 0 unless
// --plan or --ckpt-dir (whose step-0 checkpoint a resume continues).
bool options_train(const TrainOptions& o);
// --global-batch N on `ranks` ranks: --grad-accum becomes N / (ranks x --batch-size), which must be whole (refused
// with the micro-batch sizes that divide it), and a --grad-accum given beside it must be that. Without it, or where
// the options do not train: nothing.
void resolve_global_batch(TrainOptions& o, int ranks);
std::string train_options_help(Arch arch, const char* program);

struct OptimizerChoice;
// The optimizer of the flags.
OptimizerChoice optimizer_choice_from(const TrainOptions& o);
// The flags that take a number (integer or real), for tests that drive the parser with bad numbers.
std::vector<std::string> numeric_train_flags();
// Every flag of the table, and the other trainers' spellings an unknown flag is matched against (theirs, ours).
std::vector<std::string> train_flag_names();
std::vector<std::pair<std::string, std::string>> train_flag_synonyms();

// Every optimizer's weight decay is decoupled (as PyTorch's AdamW): W *= 1 - lr * wd at each step, at most at the
// peak lr. UserError when lr * wd >= 1 (each step would flip or zero the decayed weights); shared with finetune_roberta.
void check_decay_keeps_the_sign(const TrainOptions& o);
// The checks of --prac-storage and --optimizer-states (their values, and what they combine with), shared by the
// trainers' and finetune_roberta's parsers (UserError with a hint).
void check_storage_options(const TrainOptions& o);
// The PRAC options of the flags (UserError on malformed pairs or unknown classes).
PracOptions prac_options_from(const TrainOptions& o);
// --prac-initial-spread resolved for PracOptions::initial_spread: K as given, or auto: the warmup's steps (o.warmup,
// resolved), so that sites compress with provisional random bases only while the learning rate ramps up; 0 for
// pac (no random part), rac (no Q1 to compute) and none. PracSchedule caps it at the sites x layers.
int prac_initial_spread_steps(const TrainOptions& o, PracMode mode);
// Notices (one line each) for flags given to a run they change nothing in: PRAC's without PRAC (--prac none), pac's
// and rac's missing parts, another optimizer's, --prac-shared-subspace on one rank, and flags given more than once with
// different values (TrainOptions::repeated); "" when there are none. Not errors: a table's script passes its --prac-t1
// to every run, the baseline too, and its --extra flags after its own.
std::string unused_flags_notice(const TrainOptions& o, int ranks);
// The notices of a --plan: flags given more than once with different values, and the run's flags --plan leaves
// unused (--save, --log, --ckpt-dir, ...: nothing is written); "" when there are none. unused_flags_notice starts
// with it.
std::string plan_unused_flags_notice(const TrainOptions& o);
// Notices of a run of o.steps steps (none before the count is known, o.steps 0): --lr 0, a --galore-gap/--rso-gap as
// long as the run. unused_flags_notice includes them; finetune_roberta prints them once its step count is known.
std::string schedule_notices(const TrainOptions& o);
// "notice: WARMUP is longer than --steps N: ..." when o.warmup exceeds o.steps, else "" (WARMUP: where it came from)
std::string long_warmup_notice(const TrainOptions& o, const std::string& warmup);
// Micro-batches of B x T each of `ranks` ranks reads in an evaluation of protocol "tokens": ceil(eval_tokens /
// (ranks*B*T)), so that R ranks of B read what one rank of R*B reads; at most one epoch of the validation data.
inline long long eval_batches_per_rank(long long eval_tokens, int B, int T, int ranks, long long steps_per_epoch) {
    const long long per_step = (long long)ranks * B * T;
    // (eval_tokens + per_step - 1 overflowed for a --eval-tokens near 2^63: no batch read, a NaN loss)
    return std::min(eval_tokens / per_step + (eval_tokens % per_step != 0), steps_per_epoch);
}

// Every setting as (name, value) rows for the start-of-run table.
std::vector<std::pair<std::string, std::string>> train_options_rows(const TrainOptions& o, const ModelConfig& cfg,
                                                                    int ranks = 1);
