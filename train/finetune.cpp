#include "train/finetune.h"

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdlib>  // strtod
#include <filesystem>
#include <stdexcept>
#include <iterator>

#include <unistd.h>  // access

#include <nlohmann/json.hpp>

#include "common/files.h"  // read_file_bytes, write_file_atomic
#include "common/numbers.h"  // typed_as_decimal
#include "common/safetensors.h"
#include "common/strings.h"  // join, to_lower

#pragma GCC diagnostic ignored "-Winvalid-offsetof"  // as train/cli.cpp: offsetof on a struct with strings

namespace {

#define F(name, meta, kind, field, help) {name, meta, FlagKind::kind, help, offsetof(FinetuneOptions, field)}
const FlagDef FLAGS[] = {
    F("--task", "NAME", STR, task, "GLUE task: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte"),
    F("--data-dir", "DIR", STR, data_dir,
      "the task's files: train and dev (MNLI: dev_matched, dev_mismatched), each .tsv (GLUE) or .jsonl"),
    F("--init-from", "DIR", STR, init_from,
      "Hugging Face RoBERTa directory: config.json, model.safetensors, vocab.json + merges.txt or tokenizer.json"),
    F("--epochs", "N", INT, epochs, "training epochs (appendix D: 30)"),
    F("--batch-size", "B", INT, batch_size, "examples per step (appendix D: 16)"),
    F("--max-len", "T", INT, max_len,
      "truncate examples to T tokens (appendix D: 512; default: 512, or the model's positions if fewer, or the "
      "--init-from directory's tokenizer_config.json model_max_length if smaller, as transformers' tokenizer "
      "truncates: in a directory this program saved, the length it was fine-tuned at)"),
    F("--padding", "batch|longest", STR, padding,
      "batch: each batch padded to its longest example (rounded up to 8 tokens); longest: every training and dev batch "
      "to the longest training or dev example (with --predict, the test's batches to the longest of all: the "
      "activation arena's shape, which either way is allocated once for the longest)"),
    F("--grad-accum", "N", INT, grad_accum,
      "micro-batches of --batch-size per optimizer step (the step's gradient: the mean over all their rows), at most "
      "an epoch's batches"),
    F("--lr", "LR", FLOAT, lr, "peak learning rate (default: the paper's for the task: 3e-5 CoLA, STS-B, MRPC, RTE; "
                               "1e-5 SST-2, MNLI, QNLI, QQP)"),
    F("--warmup", "N", INT, warmup, "steps of linear warmup from 0 to --lr (Hugging Face's warmup_steps)"),
    F("--warmup-ratio", "R", STR, warmup_ratio,
      "the warmup as a fraction of the run's steps, rounded up: ceil(steps x R) (Hugging Face's warmup_ratio; in "
      "place of --warmup)"),
    F("--lr-schedule", "linear|cosine|constant_with_warmup|constant", STR, schedule,
      "transformers' lr_scheduler_type: after the warmup, linear (down to 0, which the step after the last would "
      "reach: run_glue's default, get_linear_schedule_with_warmup), cosine (half a cosine down to 0 on the same "
      "steps: get_cosine_schedule_with_warmup) or constant_with_warmup (--lr to the end); constant is --lr from the "
      "first step, without a warmup (get_constant_schedule)"),
    F("--weight-decay", "WD", FLOAT, weight_decay, "decoupled weight decay of the 2-D weights (adamw and rso)"),
    F("--beta1", "B1", FLOAT, beta1, "Adam beta1 (adamw's, and rso's inner Adam)"),
    F("--beta2", "B2", FLOAT, beta2, "Adam beta2 (as --beta1)"),
    F("--adam-eps", "EPS", FLOAT, adam_eps, "Adam epsilon (as --beta1)"),
    F("--grad-clip", "C", FLOAT, grad_clip, "clip the global gradient norm to C (0 = off; Hugging Face: 1)"),
    F("--optimizer", "adamw|rso", STR, optimizer,
      "adamw, or rso (the RSO baseline: random subspaces for the encoder's linear layers, their inputs stored "
      "projected)"),
    F("--optimizer-states", "fp32|8bit", STR, optimizer_states,
      "AdamW's moments: fp32, or 8bit (block-wise quantized, as train_gpt2's; kernels/adamw8.h)"),
    F("--rso-rank", "R", INT, rso_rank, "RSO subspace rank (0: 4, the paper's Table 5)"),
    F("--rso-gap", "T", INT, rso_gap, "RSO: steps per random subspace"),
    F("--seed", "S", LONG, seed, "seed of the new head, the data order and PRAC's draws"),
    F("--prac", "MODE", STR, prac, "activation compression: none, pac (principal only), rac (random only), prac"),
    F("--prac-linear", "F1,F2", STR, prac_linear,
      "ranks r1,r2 of linear sites as fractions of the width, instead of the default absolute ranks (rounded down "
      "to a multiple of 8, at least 8; 0: none)"),
    F("--prac-nonlinear", "F1,F2", STR, prac_nonlinear,
      "ranks r1,r2 of nonlinear sites as fractions of the width, instead of the default absolute ranks"),
    F("--prac-linear-ranks", "R1,R2", STR, prac_linear_ranks,
      "absolute ranks r1,r2 of linear sites (Table 5: 2,2, the paper's r1 + r2 = 4 against RSO's rank 4)"),
    F("--prac-nonlinear-ranks", "R1,R2", STR, prac_nonlinear_ranks, "absolute ranks r1,r2 of nonlinear sites (Table 5: 2,2)"),
    F("--prac-t1", "N", INT, prac_t1, "refresh the principal basis Q1 every N steps (appendix D: 200)"),
    F("--prac-t2", "N", INT, prac_t2, "redraw the random basis Q2 every N steps (appendix D: 200)"),
    F("--prac-refresh", "auto|exact|subspace", STR, prac_refresh,
      "how a refresh finds Q1 (auto: subspace, on both backends)"),
    F("--prac-k-mult", "M", FLOAT, prac_k_mult, "scale k by M (1 = unbiased)"),
    F("--prac-storage", "auto|act|fp8", STR, prac_storage,
      "how PRAC stores a site's X.P: act (the activation dtype) or fp8 (e4m3 with a power-of-two scale per row); "
      "auto: fp8 whenever --prac compresses (the trainers' default)"),
    F("--prac-classes", "LIST", STR, prac_classes, "site classes to compress: linear,nonlinear | linear | nonlinear"),
    F("--recompute", "0|1|2", INT, recompute, "recompute in backward instead of saving (as the trainers' flag)"),
    F("--recompute-attention", "0|1", INT, recompute_attention,
      "1: recompute the attention output O in backward (bitwise the same gradients); 0: save it (as the trainers' flag)"),
    F("--log", "FILE", STR, log,
      "write JSONL records: step, glue_eval (per dev split), memory, final (a resumed run appends)"),
    F("--log-interval", "N", INT, log_interval, "print a progress line every N steps (and at this process's first step and each epoch's end)"),
    F("--ckpt-dir", "DIR", STR, ckpt_dir,
      "checkpoints (weights, optimizer, PRAC, the data position) to DIR/step_NNNNNNNN at every epoch's end, "
      "before its evaluation (the last one also after it)"),
    F("--ckpt-every", "N", INT, ckpt_every, "also every N steps (0: epochs only; on SIGINT/SIGTERM/SIGUSR1 always)"),
    F("--ckpt-keep", "K", INT, ckpt_keep, "keep the newest K complete checkpoints"),
    F("--resume", "", BOOL, resume, "continue bit-exactly from the newest checkpoint in --ckpt-dir"),
    F("--overwrite", "", BOOL, overwrite, "start over where --ckpt-dir, --save or --log holds an earlier run's files "
                                          "(with --eval-only: replace --predict's files; the log is appended to)"),
    F("--save", "DIR", STR, save, "at the end write a Hugging Face directory (config, weights, tokenizer)"),
    F("--eval-only", "", BOOL, eval_only, "only evaluate --init-from (a fine-tuned directory) on the dev split(s)"),
    F("--predict", "DIR", STR, predict,
      "predict the test split(s) of --data-dir (test; MNLI: test_matched, test_mismatched) with the final weights "
      "(with --eval-only: --init-from's) and write GLUE's submission files to DIR: CoLA.tsv, SST-2.tsv, MRPC.tsv, "
      "STS-B.tsv, QQP.tsv, MNLI-m.tsv, MNLI-mm.tsv, QNLI.tsv, RTE.tsv (index, prediction); a test example longer "
      "than the training and dev ones makes the activation arena larger, not their batches"),
    F("--device", "cpu|cuda|auto", STR, device,
      "backend: cpu, cuda (the CUDA backend; tested on an H100 once and emulated in every make test: "
      "docs/VERIFICATION.md), or auto (cuda when a GPU is there and the build has the CUDA backend)"),
    F("--plan", "", BOOL, plan, "print the memory plan at (--batch-size, --max-len) and exit"),
    F("--json", "", BOOL, json, "with --plan: print the plan as JSON"),
    F("--precision", "bf16|fp32", STR, precision,
      "with --plan: the CUDA build to plan for (default: this build's; bf16 where it has no CUDA backend; not with "
      "--device cpu, which plans the CPU's fp32)"),
    F("--help", "", BOOL, help, "print this help"),
};
#undef F

// Hugging Face run_glue's spellings, answered with ours
const FlagSynonym SYNONYMS[] = {
    {"--task-name", "--task"}, {"--model-name-or-path", "--init-from"}, {"--num-train-epochs", "--epochs"},
    {"--max-seq-length", "--max-len"}, {"--max-length", "--max-len"}, {"--seq-len", "--max-len"},
    {"--learning-rate", "--lr"}, {"--warmup-steps", "--warmup"}, {"--per-device-train-batch-size", "--batch-size"},
    {"--output-dir", "--save"}, {"--max-grad-norm", "--grad-clip"}, {"--steps", "--epochs"},
    {"--resume-from-checkpoint", "--resume"}, {"--train-data", "--data-dir"}, {"--glue-dir", "--data-dir"},
    {"--gradient-accumulation-steps", "--grad-accum"}, {"--pad-to-max-length", "--padding"},
    {"--lr-scheduler-type", "--lr-schedule"},
};

}  // namespace

FinetuneOptions::FinetuneOptions() {
    batch_size = 16;     // appendix D
    lr = 0;              // 0: paper_lr(task)
    warmup = 0;          // Hugging Face's default warmup_steps
    weight_decay = 0;    // Hugging Face's default
    beta2 = 0.999f;      // Hugging Face's AdamW default
    prac_t1 = prac_t2 = 200;  // appendix D: PRAC interval 200
    prac_linear_ranks = prac_nonlinear_ranks = "2,2";  // Table 5 (r1 = r2 = 2); --prac-linear's fractions replace them
    prac_initial_spread = "0";  // every first refresh on the first step (no flag: the ranks are tiny, Table 5: 2,2)
    log_interval = 10;
}

float paper_lr(GlueTask task) {
    switch (task) {
        case GlueTask::COLA:
        case GlueTask::STSB:
        case GlueTask::MRPC:
        case GlueTask::RTE: return 3e-5f;
        default: return 1e-5f;
    }
}

float finetune_lr(int step, int total, int warmup, float lr, const std::string& schedule) {
    if (schedule == "constant") return lr;  // (transformers' get_constant_schedule: no warmup)
    if (step < warmup) return lr * (float)step / (float)std::max(1, warmup);
    if (schedule == "constant_with_warmup") return lr;
    const float span = (float)std::max(1, total - warmup);
    if (schedule == "cosine")
        return lr * std::max(0.0f, 0.5f * (1.0f + std::cos((float)M_PI * (float)(step - warmup) / span)));
    return lr * std::max(0.0f, (float)(total - step) / span);
}

int warmup_of_ratio(double ratio, int total) { return (int)std::ceil((double)total * ratio); }

int finetune_checkpoints_due(int step, int total_steps, int steps_per_epoch, int ckpt_every) {
    int n = 2;
    for (int s = step; s < total_steps; s++) n += (ckpt_every > 0 && s % ckpt_every == 0) || s % steps_per_epoch == 0;
    return n;
}

void check_max_len_holds_text(int max_len, GlueTask task, const std::string& from) {
    const bool pair = glue_task_info(task).pair;
    const int least = pair ? 6 : 3;  // <s> A </s></s> B </s> with a token of each, or <s> A </s>
    CHECK_USER(max_len >= least, "--max-len %d%s is too short: %s's %s layout has %d special tokens and %s, so it "
               "needs at least %d", max_len, from.c_str(), glue_task_info(task).name,
               pair ? "pair" : "single-sentence", pair ? 4 : 2,
               pair ? "a token of each sentence" : "a token of text", least);
}

void parse_finetune_options(FinetuneOptions& o, int argc, char** argv) {
    parse_flag_table(FLAGS, std::size(FLAGS), SYNONYMS, std::size(SYNONYMS), &o, o.given, o.repeated, argc,
                     argv);
    if (o.help) return;
    // the values given first, then what is missing: a bad value is said whatever else the command line lacks
    if (!o.task.empty()) glue_task_from_name(o.task);  // fails listing the eight
    CHECK_USER(o.epochs >= 1, "--epochs must be at least 1 (got %d)", o.epochs);
    CHECK_USER(o.batch_size >= 1, "--batch-size must be positive (got %d)", o.batch_size);
    CHECK_USER(o.grad_accum >= 1, "--grad-accum must be at least 1 (got %d)", o.grad_accum);
    CHECK_USER(o.seed >= 0, "--seed must be >= 0 (got %lld)", o.seed);
    CHECK_USER(o.padding == "batch" || o.padding == "longest", "--padding must be batch or longest (got \"%s\")",
               o.padding.c_str());
    // (each named alone: an unset --lr is 0 here, the task's default later)
    CHECK_USER(o.lr >= 0, "--lr must be >= 0 (got %g)", o.lr);
    CHECK_USER(o.warmup >= 0, "--warmup must be >= 0 (got %d)", o.warmup);
    CHECK_USER(o.schedule == "linear" || o.schedule == "cosine" || o.schedule == "constant_with_warmup" ||
                   o.schedule == "constant",
               "--lr-schedule must be linear, cosine, constant_with_warmup or constant (got \"%s\")%s",
               o.schedule.c_str(),
               o.schedule == "wsd" ? "\n---> HINT: wsd is the pretraining trainers' (train_gpt2, train_llama)" : "");
    if (o.was_given("--warmup-ratio")) {
        char* end = nullptr;
        const char* text = o.warmup_ratio.c_str();
        o.warmup_ratio_value = std::strtod(text, &end);  // a double, as Python's float(): ceil(steps x R) the same
        CHECK_USER(typed_as_decimal(o.warmup_ratio) && *end == 0 && o.warmup_ratio_value >= 0 &&
                       o.warmup_ratio_value <= 1,
                   "--warmup-ratio must be a decimal number in [0, 1] (got \"%s\")", text);
        CHECK_USER(!o.was_given("--warmup"), "--warmup %d and --warmup-ratio %s both set the warmup\n---> HINT: pass "
                   "one of them", o.warmup, text);
    }
    CHECK_USER(o.weight_decay >= 0, "--weight-decay must be >= 0 (got %g)", o.weight_decay);
    CHECK_USER(o.grad_clip >= 0, "--grad-clip must be >= 0 (got %g)", o.grad_clip);
    CHECK_USER(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 && o.adam_eps > 0,
               "--beta1/--beta2 must be in [0, 1) and --adam-eps positive (got %.9g, %.9g and %g%s)", o.beta1,
               o.beta2, o.adam_eps,
               o.beta1 == 1.0f || o.beta2 == 1.0f ? "; as float32, values above 0.99999997 are 1" : "");
    CHECK_USER(o.optimizer == "adamw" || o.optimizer == "rso",
               "finetune_roberta's optimizers are adamw and rso (got \"%s\")\n---> HINT: the pretraining optimizers "
               "(muon, adam-mini, galore) are train_gpt2's and train_llama's", o.optimizer.c_str());
    CHECK_USER(o.optimizer != "rso" || o.prac == "none", "--optimizer rso stores its own projections of the linear "
               "layers' inputs and cannot be combined with --prac %s\n---> HINT: use --prac none with --optimizer rso",
               o.prac.c_str());
    CHECK_USER(o.rso_rank >= 0 && o.rso_gap >= 1, "--rso-rank must be >= 0 and --rso-gap >= 1");
    check_storage_options(o);
    CHECK_USER(o.recompute >= 0 && o.recompute <= 2, "--recompute must be 0, 1 or 2 (got %d)", o.recompute);
    CHECK_USER(o.recompute_attention == 0 || o.recompute_attention == 1, "--recompute-attention must be 0 or 1 (got %d)",
               o.recompute_attention);
    CHECK_USER(o.log_interval > 0 && o.ckpt_every >= 0 && o.ckpt_keep >= 1,
               "--log-interval must be positive, --ckpt-every >= 0 and --ckpt-keep >= 1");
    CHECK_USER(!o.resume || !o.ckpt_dir.empty(), "--resume needs --ckpt-dir (where the checkpoints are)");
    CHECK_USER(!(o.resume && o.overwrite), "--resume continues the run in --ckpt-dir and --overwrite starts it over: "
               "pass one of them");
    check_flag_partners(o);
    // with --eval-only, --overwrite replaces --predict's files (an earlier evaluation's); its log is appended to
    CHECK_USER(!(o.eval_only && o.overwrite && o.predict.empty()), "--eval-only has nothing for --overwrite to "
               "replace: it appends its evaluation to --log, and --overwrite replaces --predict's files\n"
               "---> HINT: drop "
               "--overwrite (remove the log first for one that holds only this evaluation)");
    CHECK_USER(o.device == "auto" || o.device == "cpu" || o.device == "cuda",
               "--device must be cpu, cuda or auto (got \"%s\")", o.device.c_str());
    CHECK_USER(o.precision == "bf16" || o.precision == "fp32", "--precision must be bf16 or fp32");
    CHECK_USER(o.plan || !o.json, "--json goes with --plan");
    CHECK_USER(!o.init_from.empty(), "--init-from is required: the Hugging Face RoBERTa directory to fine-tune\n"
               "---> HINT: download roberta-base (config.json, model.safetensors, vocab.json, merges.txt) and pass "
               "its directory");
    CHECK_USER(!o.task.empty(), "--task is required (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte)");
    GlueTask task = glue_task_from_name(o.task);  // fails listing the eight
    CHECK_USER(o.plan || !o.data_dir.empty(), "--data-dir is required: the directory with the task's train and dev "
               "files\n---> HINT: e.g. glue_data/MRPC (train.tsv, dev.tsv)");
    check_max_len_holds_text(o.max_len, task, "");
    if (o.lr == 0 && !o.was_given("--lr")) o.lr = paper_lr(task);
    check_decay_keeps_the_sign(o);
    if (o.optimizer == "rso" && o.rso_rank == 0) o.rso_rank = 4;  // Table 5: RSO (rank=4)
    // a class's fractions given without its ranks replace Table 5's default ranks (ranks given override fractions)
    if (o.was_given("--prac-linear") && !o.was_given("--prac-linear-ranks")) o.prac_linear_ranks.clear();
    if (o.was_given("--prac-nonlinear") && !o.was_given("--prac-nonlinear-ranks")) o.prac_nonlinear_ranks.clear();
    o.model = o.init_from;  // the trainer's resume keys name the model by it
    o.steps = 0;            // set from the data: epochs x batches per epoch
}

void claim_predict_dir(const FinetuneOptions& o, const GlueTaskInfo& task) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const std::string target = link_target_that_is_not_a_dir(o.predict);
    CHECK_USER(target.empty(), "--predict %s is a symbolic link to %s, which is not a directory (or does not exist)\n"
               "---> HINT: create the link's target directory, or pass another path", o.predict.c_str(),
               target.c_str());
    if (fs::exists(o.predict, ec) && !fs::is_directory(o.predict, ec))
        fail("--predict %s is a file, not a directory\n---> HINT: pass a directory for GLUE's submission files (%s)",
             o.predict.c_str(), join(task.submission_files).c_str());
    fs::create_directories(o.predict, ec);
    CHECK_USER(!ec, "--predict %s: cannot create the directory (%s)", o.predict.c_str(), ec.message().c_str());
    const int err = probe_create(o.predict);  // (root passes access(W_OK) where the filesystem refuses: /proc)
    CHECK_USER(err == 0, "--predict %s: cannot create a file there (%s)\n---> HINT: choose another directory",
               o.predict.c_str(), std::strerror(err));
    if (o.overwrite || o.resume) return;
    for (const std::string& name : task.submission_files)
        CHECK_USER(!fs::exists(o.predict + "/" + name, ec), "--predict %s already holds %s (an earlier run's "
                   "predictions); this run would replace it\n---> HINT: pass --overwrite to replace it, or choose another "
                   "--predict directory", o.predict.c_str(), name.c_str());
}

std::vector<std::string> finetune_flag_names() {
    std::vector<std::string> out;
    for (const FlagDef& f : FLAGS) out.push_back(f.name);
    return out;
}

std::string finetune_help(const char* program) {
    FinetuneOptions defaults;
    std::string s = format("usage: %s --task NAME --data-dir DIR --init-from MODEL_DIR [flags]\n\n", program);
    s += wrap_help(
        "Fine-tunes a Hugging Face RoBERTa (RobertaForSequenceClassification) on one GLUE task: AdamW or RSO, optional "
        "PRAC activation compression, dev evaluation with the task's metrics after every epoch (best and final "
        "printed), checkpoints with a bit-exact --resume, --save as a Hugging Face directory. Nothing is downloaded.\n"
        "Schedule: linear warmup over --warmup steps (or --warmup-ratio of the run's steps), then --lr-schedule: by "
        "default linear decay toward 0, which the step after the last would reach (run_glue's default).", 0, 0) +
        "\n\n";
    s += flag_table_help(FLAGS, std::size(FLAGS), &defaults, [](const FlagDef& f) -> std::string {
        const std::string name = f.name;  // (fractions are used only when given: no default)
        return name == "--lr" || name == "--precision" || name == "--prac-linear" || name == "--prac-nonlinear" ? ""
                                                                                                               : "?";
    });
    s += format("\nExample (the paper's MRPC PRAC row):\n  %s --task mrpc --data-dir glue_data/MRPC --init-from "
                "roberta-base --prac prac \\\n      --prac-storage act --save mrpc-prac   # Table 5's ranks (2,2) are the default\n",
                program);
    return s;
}

void check_model_dir(const std::string& dir, const GlueTaskInfo& task) {
    auto readable = [](const std::string& p) { return access(p.c_str(), R_OK) == 0; };
    CHECK_USER(std::filesystem::is_directory(dir), "--init-from %s is not a directory\n---> HINT: pass a Hugging Face "
               "model directory (config.json, model.safetensors, vocab.json + merges.txt or tokenizer.json)",
               dir.c_str());
    refuse_sharded_checkpoint(dir);
    verify_init_from_checkpoint(dir);  // one of our checkpoints: its files against the marker's checksums
    for (const char* f : {"config.json", "model.safetensors"})
        CHECK_USER(readable(dir + "/" + f), "--init-from %s has no readable %s\n---> HINT: a Hugging Face RoBERTa "
                   "directory holds config.json and model.safetensors (transformers' save_pretrained writes both; "
                   "convert a pytorch_model.bin with save_pretrained(..., safe_serialization=True))", dir.c_str(), f);
    model_config_load(Arch::ROBERTA, dir + "/config.json");  // another architecture said first (not its tokenizer)
    CHECK_USER(readable(dir + "/tokenizer.json") || (readable(dir + "/vocab.json") && readable(dir + "/merges.txt")),
               "--init-from %s has no tokenizer: neither tokenizer.json nor vocab.json + merges.txt\n---> HINT: copy "
               "roberta-base's tokenizer files into it", dir.c_str());
    // a head fine-tuned for another task: said as such (the loader would name a tensor shape and the model config)
    SafeTensorsFile weights = safetensors_open(dir + "/model.safetensors");
    if (const SafeTensor* head = weights.find("classifier.out_proj.weight")) {
        const long long outputs = head->shape.empty() ? 0 : (long long)head->shape[0];
        CHECK_USER(outputs == task.num_labels,
                   "--init-from %s has a classification head of %lld outputs, fine-tuned for another task; --task %s "
                   "needs %d\n---> HINT: pass the task it was fine-tuned on, or fine-tune from the pretrained "
                   "encoder (a model directory without the classifier.* tensors)", dir.c_str(), outputs, task.name,
                   task.num_labels);
    }
}

std::vector<int> head_rows_in_task_order(const std::vector<std::string>& head_names, const GlueTaskInfo& task,
                                         std::string* note) {
    note->clear();
    const size_t n = task.label_names.size();
    if (n < 2 || head_names.size() != n) return {};
    bool defaults = true;  // transformers' LABEL_0, LABEL_1, ...: no order to map
    for (size_t i = 0; i < n; i++) defaults = defaults && head_names[i] == "LABEL_" + std::to_string(i);
    if (defaults) return {};
    std::vector<int> rows(n);
    for (size_t i = 0; i < n; i++) {
        std::vector<int> named;  // the head's rows of the task's class i
        for (size_t h = 0; h < n; h++)
            if (to_lower(head_names[h]) == to_lower(task.label_names[i])) named.push_back((int)h);
        if (named.size() != 1) {
            *note = format("its config.json names the head's classes %s, not the task's (%s): its rows are taken in "
                           "the task's order, as run_glue does", join(head_names).c_str(),
                           join(task.label_names).c_str());
            return {};
        }
        rows[i] = named[0];
    }
    for (size_t i = 0; i < n; i++)
        if (rows[i] != (int)i) return rows;
    return {};
}

std::vector<std::string> glue_split_files(const std::string& dir, const std::string& split) {
    std::vector<std::string> files;
    for (const char* ext : {".tsv", ".jsonl"})
        if (access((dir + "/" + split + ext).c_str(), F_OK) == 0) files.push_back(dir + "/" + split + ext);
    return files;
}

bool glue_split_exists(const std::string& dir, const std::string& split) {
    for (const std::string& f : glue_split_files(dir, split))
        if (access(f.c_str(), R_OK) == 0) return true;
    return false;
}

void copy_tokenizer_files(const std::string& from, const std::string& to, int max_len) {
    for (const char* f : {"vocab.json", "merges.txt", "tokenizer.json", "special_tokens_map.json"}) {
        std::string src = from + "/" + f;
        if (access(src.c_str(), R_OK) != 0) continue;
        std::string bytes = read_file_bytes(src);
        write_file_atomic(to + "/" + f, bytes);
    }
    nlohmann::json config = nlohmann::json::object();
    const std::string src = from + "/tokenizer_config.json";
    if (access(src.c_str(), R_OK) == 0) {  // (a broken one is not copied: at the end of a run, not a reason to fail)
        config = nlohmann::json::parse(read_file_bytes(src), nullptr, false);
        if (!config.is_object()) {
            std::printf("warning: %s is not a JSON object: the copy written holds model_max_length alone\n",
                        src.c_str());
            config = nlohmann::json::object();
        }
    }
    config["model_max_length"] = max_len;
    write_file_atomic(to + "/tokenizer_config.json", config.dump(2) + "\n");
}

int tokenizer_max_length(const std::string& dir, FILE* notes) {
    const std::string path = dir + "/tokenizer_config.json";
    if (access(path.c_str(), R_OK) != 0) return 0;
    const nlohmann::json config = nlohmann::json::parse(read_file_bytes(path), nullptr, false);
    // a value that says no length is ignored as transformers would fail on it: said, not silently
    auto ignored = [&](const std::string& what) {
        std::fprintf(notes, "warning: %s %s: no length limit is taken from it (--max-len from the model's "
                     "positions)\n", path.c_str(), what.c_str());
        return 0;
    };
    if (!config.is_object()) return ignored("is not a JSON object");
    if (!config.contains("model_max_length") || config["model_max_length"].is_null()) return 0;
    const nlohmann::json& v = config["model_max_length"];
    // transformers writes int(1e30) for "no limit" (a float 1e30 once read by another parser): beyond INT_MAX
    if (v.is_number() && v.get<double>() > INT_MAX) return 0;
    if (!v.is_number_integer() || v.get<long long>() < 1)
        return ignored("gives model_max_length " + v.dump() + ", not a whole number from 1");
    return (int)v.get<long long>();
}

std::string DevScores::text() const {
    std::string s;
    for (size_t d = 0; d < splits.size(); d++) {
        s += (d ? " | " : "") + splits[d] + ":";
        for (const auto& [name, v] : metrics[d])  // NaN: a correlation of constant predictions (a collapsed model)
            s += std::isnan(v) ? format(" %s undefined (constant predictions)", name.c_str())
                               : format(" %s %.4f", name.c_str(), v);
    }
    return s;
}
