// Fine-tuning a RoBERTa encoder on one GLUE task (issue 17; the PRAC paper's Table 5): the parts finetune_roberta.cu's
// epoch loop calls. Flags (a TrainOptions with the fine-tuning ones added, so the trainer's PRAC, optimizer and
// checkpoint helpers take them as they are), the task's data encoded once with the model directory's tokenizer, the
// model with its fresh or fine-tuned head, AdamW or RSO, the schedule (Hugging Face run_glue's default: linear warmup,
// then linear decay to 0), dev evaluation with the task's metrics (best and final), the activation-memory report
// (planner and arena), checkpoints with the batcher's position for a bit-exact resume, --save as a Hugging Face
// directory. docs/DESIGN.md section 7.5.
#pragma once
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>  // access

#include "common/error.h"
#include "common/files.h"  // StagedDir
#include "common/kill_point.h"
#include "common/strings.h"  // human_duration, run_clock, join
#include "data/glue.h"
#include "data/glue_batches.h"
#include "data/roberta_tokenizer.h"
#include "model/hf_export.h"  // is_hf_model_file
#include "model/roberta.h"
#include "prac/prac_state.h"
#include "train/checkpoint.h"
#include "train/cli.h"
#include "train/glue_metrics.h"
#include "train/metrics_log.h"
#include "train/optimizers.h"
#include "train/planner.h"
#include "train/run_checkpoint.h"  // resume_keys
#include "train/trainer.h"         // signals, print_table, print_site_table, check_no_earlier_run, data_fingerprint

struct FinetuneOptions : TrainOptions {
    std::string task;      // cola | sst2 | mrpc | stsb | qqp | mnli | qnli | rte
    std::string data_dir;  // the task's train and dev files (TSV or JSONL)
    int epochs = 30;       // appendix D
    int max_len = 512;     // tokens per example after truncation (appendix D)
    std::string padding = "batch";  // batch: each batch to its longest row (rounded up); longest: to the data's
    std::string predict;   // a directory for GLUE's submission files of the test split(s); "": no predictions
    std::string schedule = "linear";  // --lr-schedule: linear | cosine | constant_with_warmup | constant (finetune_lr)
    std::string warmup_ratio;         // --warmup-ratio as typed, and its value (parsed as Python's float would)
    double warmup_ratio_value = 0;
    FinetuneOptions();     // the fine-tuning defaults (appendix D, Hugging Face's run_glue)
};

// Parses and checks the flags (UserError with a hint on bad ones); --help text.
void parse_finetune_options(FinetuneOptions& o, int argc, char** argv);
std::string finetune_help(const char* program);
std::vector<std::string> finetune_flag_names();  // every flag of the table (tests check the hints against them)
// The paper's learning rate for a task (appendix D): 3e-5 for CoLA, STS-B, MRPC, RTE; 1e-5 for SST-2, MNLI, QNLI, QQP.
float paper_lr(GlueTask task);
// The learning rate at optimizer step `step` (0-based) of `total`, as Hugging Face's schedules give it (their
// lr_lambda times lr): `warmup` steps rising linearly from 0, then `schedule`: linear
// (get_linear_schedule_with_warmup), cosine (get_cosine_schedule_with_warmup, half a cosine) or
// constant_with_warmup (get_constant_schedule_with_warmup); constant is lr throughout, warmup or not
// (get_constant_schedule, as transformers' get_scheduler("constant") ignores warmup_steps).
float finetune_lr(int step, int total, int warmup, float lr, const std::string& schedule);
// --warmup-ratio's steps in a run of `total`: ceil(total x ratio) in double, as TrainingArguments.get_warmup_steps.
int warmup_of_ratio(double ratio, int total);
// The checkpoints a run with --ckpt-dir still writes after the progress line of step `step` (1-based, this step's
// own included): end_step's and end_epoch's, one per step, at each step before the last that --ckpt-every divides
// or that ends an epoch, end_epoch's at the last (before the final evaluation) and finish()'s after it.
int finetune_checkpoints_due(int step, int total_steps, int steps_per_epoch, int ckpt_every);
// The checks --init-from must pass (config.json, model.safetensors, tokenizer files; a classification head, when
// it has one, with the task's number of outputs), each with a hint. --plan reads config.json alone.
void check_model_dir(const std::string& dir, const GlueTaskInfo& task);
// The rows of a fine-tuned head in the task's label order, as run_glue maps them: when its config.json names the
// task's classes (in any case) in another order (roberta-large-mnli: contradiction, neutral, entailment), the task's
// class i is the head's row returned[i]. Empty when the order is the task's already, for a regression, and for names
// that are not the task's (transformers' LABEL_0, ... among them): run_glue then takes the rows as they are, and
// so do we; *note says so for names of other classes.
std::vector<int> head_rows_in_task_order(const std::vector<std::string>& head_names, const GlueTaskInfo& task,
                                         std::string* note);
// The split's files in DIR: DIR/SPLIT.tsv and DIR/SPLIT.jsonl, those that exist (glue_split_path picks one).
std::vector<std::string> glue_split_files(const std::string& dir, const std::string& split);
// Whether DIR holds the split as a readable .tsv or .jsonl.
bool glue_split_exists(const std::string& dir, const std::string& split);
// Copies the tokenizer files of `from` (those that exist) into `to`, so --save is a complete model directory, with
// tokenizer_config.json's model_max_length set to max_len (the file written when `from` has none): the length the
// model was fine-tuned at, which --eval-only of it then takes (transformers' tokenizers truncate to it too).
void copy_tokenizer_files(const std::string& from, const std::string& to, int max_len);
// tokenizer_config.json's model_max_length in DIR; 0 when there is none (no file, no key, beyond INT_MAX:
// transformers writes 1e30 for "no limit"), or with a warning on `notes` when the file or the value is unusable.
int tokenizer_max_length(const std::string& dir, FILE* notes);
// Fails unless max_len leaves a token of each text beside the task's special tokens (pair 6, single-sentence 3);
// `from` says where a value the user did not type came from (" (tokenizer_config.json's model_max_length)").
void check_max_len_holds_text(int max_len, GlueTask task, const std::string& from);

// --predict DIR: made when missing; a file of another run's predictions in it is refused without --overwrite (or
// --resume, whose run writes them at its end).
void claim_predict_dir(const FinetuneOptions& o, const GlueTaskInfo& task);

// The dev metrics of one evaluation: per split, the task's metrics in GLUE's order.
struct DevScores {
    std::vector<std::string> splits;
    std::vector<std::vector<std::pair<std::string, double>>> metrics;
    std::vector<double> split_loss;  // the mean loss of each split
    double loss = 0;                 // over all the splits' examples
    double primary() const { return metrics.at(0).at(0).second; }  // the first metric of the first split
    std::string text() const;                                     // "dev_matched: accuracy 0.8100 | ..."
};

template <class Backend>
struct FineTuner {
    Backend& be;
    FinetuneOptions& opts;
    const GlueTaskInfo& info;
    ModelConfig cfg;
    PracOptions prac;
    RobertaTokenizer tok;
    std::vector<GlueExample> train_examples;
    std::vector<std::vector<GlueExample>> dev_examples;  // one per dev split
    std::vector<std::vector<GlueExample>> test_examples;  // --predict: one per test split (info.test_splits)
    GlueEncoded train_set;
    std::vector<GlueEncoded> dev_sets, test_sets;
    const int B;
    int T = 0;  // the longest encoded example of train and dev, at most --max-len; each of their batches is
                // (B, padded_len(its longest row)), <= T
    int T_arena = 0;  // the arena's (B, T_arena): T, or --predict's longest test example if longer (the test
                      // batches' cap; the training's arithmetic and T do not depend on --predict)
    std::string resume_path;  // --resume: the checkpoint (set with T by check_data_first, before the model)
    int resumed_at = -1;      // --resume: the checkpoint's step (the times this process reports start there)
    std::unique_ptr<GlueBatcher> batcher;
    Roberta<Backend> model;
    MetricsLog log;
    std::unique_ptr<Optimizer<Backend>> opt;
    int steps_per_epoch = 0, total_steps = 0;
    int step = 0;  // optimizer steps done
    double best = -INFINITY;
    int best_epoch = 0;
    std::string train_fingerprint;
    std::string dev_fingerprint;  // the dev files' sizes and checksums: a resume's best score was measured on them
    std::string tokenizer_fingerprint;  // --init-from's tokenizer files, by content (the data's encoding)
    bool wrote_checkpoint = false;      // this process has written one (--overwrite's first removes the others)
    int checkpointed_step = -1;         // the step of the newest checkpoint (written or resumed from): not twice
    bool eval_stoppable = false, eval_cut = false;  // end_epoch's evaluation runs / a stop signal ended it
    int evaluated_step = -1;  // the step of the last epoch's evaluation this process finished

    // the step in flight: its --grad-accum micro-batches, each as the model takes it (B rows; rows past the data's
    // are one-token padding rows with no label, so the arena is allocated once, for (B, T))
    std::vector<GlueBatch> micro;  // this step's micro-batches (fewer at an epoch's end)
    GlueBatchState before_batch;   // the batcher's position before the step's first micro-batch was drawn
    std::vector<int32_t> ids, mask;  // (B, Tb) inputs of the micro-batch in flight, in buffers of (B, T)
    std::vector<float> labels;
    EncoderBatch enc;
    int labelled = 0;     // labelled rows of the step (all its micro-batches)
    int64_t tokens = 0;   // padded tokens of the step
    float loss = 0, norm = 0, lr = 0;
    std::chrono::steady_clock::time_point t0, run_start;
    double train_ms = 0, eval_ms = 0, first_step_ms = 0;  // (this process's first step: the start-up's)
    double ckpt_ms = 0;  // the checkpoints this process wrote
    int steps_timed = 0, evals_timed = 0, ckpts_timed = 0;
    int64_t padded_tokens = 0, padded_rows = 0;  // this process's training batches: their (B, Tb) summed

    FineTuner(Backend& backend, FinetuneOptions& o, const ModelConfig& config, const PracOptions& p)
        : be(backend), opts(o), info(glue_task_info(glue_task_from_name(o.task))), cfg(config), prac(p),
          tok(o.init_from), B(o.batch_size), model(be, check_data_first(), prac, o.recompute_options()),
          log(o.log, o.overwrite && !o.eval_only) {
        check_prac_compresses(compressed_sites(model.sites), prac.mode, opts.prac, opts.prac_classes, opts.recompute);
        std::printf("task %s: %zu training examples, %s; tokenized with %s\n", info.name,
                    train_examples.size(), dev_text().c_str(), tok.name().c_str());
        for (size_t d = 0; d < test_examples.size(); d++)
            std::printf("--predict: %s, %zu examples, into %s/%s at the end%s\n", info.test_splits[d].c_str(),
                        test_examples[d].size(), opts.predict.c_str(), info.submission_files[d].c_str(),
                        test_examples[d][0].index.empty() ? " (the file has no index: its rows are numbered from 0)"
                                                          : "");
        const long long cut_dev = count_truncated(dev_sets), cut_test = count_truncated(test_sets);
        if (train_set.truncated || cut_dev || cut_test)
            std::printf("notice: %lld training%s examples were truncated to --max-len %d tokens\n",
                        (long long)train_set.truncated,
                        (test_sets.empty() ? format(" and %lld dev", cut_dev)
                                           : format(", %lld dev and %lld test (--predict)", cut_dev, cut_test)).c_str(),
                        opts.max_len);
        if (prac.mode != PracMode::NONE || prac.rso_rank > 0) print_site_table(model.sites, cfg.num_layers);
        std::printf("%s", unused_flags_notice(opts, 1).c_str());
        std::printf("parameters: %zu (%.2fM)\n", model.num_parameters, model.num_parameters / 1e6);
        // a head whose config.json orders the task's classes otherwise is read in the task's order (run_glue's too)
        std::string names_note;
        base_config = read_file_bytes(opts.init_from + "/config.json");
        const std::vector<int> head_rows = head_rows_in_task_order(
            model_config_load(Arch::ROBERTA, opts.init_from + "/config.json").label_names, info, &names_note);
        bool head = model.load_pretrained(opts.init_from, (uint64_t)opts.seed, false, head_rows);
        if (resume_path.empty())
            std::printf("loaded %s/model.safetensors: %s\n", opts.init_from.c_str(),
                        head ? "encoder and its classification head"
                             : "the encoder; the classification head is new (initialized as transformers does)");
        else  // (it said the head was new while the checkpoint's trained one replaced it)
            std::printf("read %s/model.safetensors for its shapes: the weights are the checkpoint's (%s)\n",
                        opts.init_from.c_str(), resume_path.c_str());
        if (cfg.config_dropout > 0 && !opts.eval_only)  // (evaluation has none in transformers either)
            std::printf("notice: %s/config.json sets dropout (up to %g); this trainer has none, so this fine-tuning "
                        "differs from transformers' (run_glue trains with the config's dropout)\n",
                        opts.init_from.c_str(), cfg.config_dropout);
        if (head && !head_rows.empty())
            std::printf("notice: its config.json orders the classes otherwise: the head's rows %s are the task's %s\n",
                        join(head_rows).c_str(), join(info.label_names).c_str());
        if (head && !names_note.empty()) std::printf("warning: %s\n", names_note.c_str());
        if (opts.eval_only && !head)
            std::printf("warning: --eval-only with a new, untrained head: the scores are those of a random head\n");
        model.allocate_activations(B, T_arena);
        ids.assign((size_t)B * T_arena, 0);
        mask.assign((size_t)B * T_arena, 0);
        labels.assign(B, NAN);
        enc = {ids.data(), mask.data(), nullptr, labels.data()};
        memory_report();
        if (opts.eval_only) {
            log.record("memory", memory_record);
            return;
        }
        batcher = std::make_unique<GlueBatcher>(train_set, B, true, (uint64_t)opts.seed);
        // a step never spans epochs: more micro-batches than an epoch has would be allocated and never drawn
        CHECK_USER(opts.grad_accum <= batcher->batches_per_epoch(),
                   "--grad-accum %d is more than the %lld batches of an epoch (%zu examples, --batch-size %d)\n"
                   "---> HINT: pass --grad-accum %lld (one step per epoch) or less", opts.grad_accum,
                   (long long)batcher->batches_per_epoch(), train_examples.size(), B,
                   (long long)batcher->batches_per_epoch());
        steps_per_epoch = (int)((batcher->batches_per_epoch() + opts.grad_accum - 1) / opts.grad_accum);
        CHECK_USER((long long)steps_per_epoch * opts.epochs <= INT_MAX, "--epochs %d of %d steps each make more than "
                   "%d steps\n---> HINT: pass --epochs %d or less", opts.epochs, steps_per_epoch, INT_MAX,
                   INT_MAX / steps_per_epoch);
        total_steps = steps_per_epoch * opts.epochs;
        opts.steps = total_steps;
        if (opts.was_given("--warmup-ratio")) {
            opts.warmup = warmup_of_ratio(opts.warmup_ratio_value, total_steps);
            std::printf("warmup: %d steps (--warmup-ratio %s of the run's %d)\n", opts.warmup,
                        opts.warmup_ratio.c_str(), total_steps);
        }
        if (opts.schedule == "constant" && opts.warmup > 0)  // (as transformers' get_scheduler("constant") does)
            std::printf("notice: --lr-schedule constant has no warmup: --warmup %d changes nothing (transformers' "
                        "constant ignores warmup_steps; constant_with_warmup warms up)\n", opts.warmup);
        // not inert, but likely not meant (as the pretraining trainers say it): a warmup longer than the run
        else if (opts.warmup > total_steps)
            std::printf("notice: --warmup %d is longer than the run's %d steps (%d epoch(s) of %d): the learning rate "
                        "rises the whole run and ends at %g, short of --lr %g\n", opts.warmup, total_steps,
                        opts.epochs, steps_per_epoch,
                        finetune_lr(total_steps - 1, total_steps, opts.warmup, opts.lr, opts.schedule), opts.lr);
        std::printf("%s", schedule_notices(opts).c_str());  // (--lr 0, an RSO gap as long as the run)
        opt = make_optimizer(be, optimizer_choice_from(opts), cfg, model.param_specs, model.param_buffer_numel, 0,
                             model.param_buffer_numel);
        init_master_weights(be, *opt, model.params_memory, model.param_buffer_numel);
        opt->bind_sites(model.sites);
        if (!opts.ckpt_dir.empty()) {
            train_fingerprint = data_fingerprint({glue_split_path(opts.data_dir, "train")});
            std::vector<std::string> dev_files;
            for (const std::string& split : info.dev_splits) dev_files.push_back(glue_split_path(opts.data_dir, split));
            dev_fingerprint = data_fingerprint(dev_files);
            std::vector<std::string> tokenizer_files;
            for (const char* f : {"tokenizer.json", "vocab.json", "merges.txt"})
                if (access((opts.init_from + "/" + f).c_str(), R_OK) == 0)
                    tokenizer_files.push_back(opts.init_from + "/" + f);
            tokenizer_fingerprint = data_fingerprint(tokenizer_files);
        }
        if (opts.resume) resume();
        // the run's first record, after every refusal: --overwrite empties the log there (a refused run emptied it),
        // and a refused --resume appended it to the run's log
        log.record("memory", memory_record);
        install_stop_signals();
        run_start = std::chrono::steady_clock::now();
    }

    int epoch() const { return (int)batcher->epoch(); }

    // The epoch's next step: up to --grad-accum micro-batches drawn (the epoch's last step may have fewer); false at
    // the end of the epoch. They are drawn before any runs so that every row's weight is 1 / the step's labelled
    // rows: the step's gradient is that of the mean loss over all its rows, as one batch of them would give.
    bool next_step() {
        before_batch = batcher->state();
        micro.resize(opts.grad_accum);
        int n = 0;
        GlueBatchState drawn = before_batch;
        while (n < opts.grad_accum && batcher->next(micro[n])) drawn = batcher->state(), n++;
        // A step cut short by the epoch's end leaves the batcher at that end, where a full step leaves it: the next
        // call then ends the epoch (next() moved on to the next epoch, and the epoch loop would never end), and a
        // checkpoint taken now resumes before the epoch's evaluation.
        if (n > 0 && n < opts.grad_accum) batcher->set_state(drawn);
        micro.resize(n);
        labelled = 0;
        for (const GlueBatch& b : micro) labelled += b.B;
        return n > 0;
    }
    int micro_batches() const { return (int)micro.size(); }
    // Micro-batch m of the step as the model's input, (B, its padded length)
    void load_micro_batch(int m) { fill_input(micro[m], T); }

    // a stop signal (STOP_SIGNALS: SIGINT, SIGUSR1, SIGTERM), or 0
    int stop_requested() const { return (int)g_stop_signal; }
    int stop(int sig) {
        std::printf("received signal %d: stopping after %d of %d steps%s\n", sig, step, total_steps,
                    opts.ckpt_dir.empty() ? "; nothing is saved (no --ckpt-dir to checkpoint into)" : "");
        // the batch just drawn was not trained on: a resume draws it again (and from the checkpoint the epoch's end or
        // --ckpt-every just wrote at this step, the same one: not written twice, unless the epoch's evaluation came
        // after it: then again, past the evaluation, which the resume would otherwise run a second time)
        if (checkpointed_step != step || evaluated_step == step) checkpoint(before_batch);
        return 128 + sig;
    }

    void begin_step() {
        t0 = std::chrono::steady_clock::now();
        tokens = 0;
        model.zero_grad();
        model.sched.begin_step(prac, step);
    }
    // one row's weight in the step's mean loss (the labelled rows of all its micro-batches)
    float grad_scale() const { return 1.0f / (float)labelled; }
    // micro-batch m's mean loss / this = its rows' share of the step's mean loss (the epoch's last micro-batch may
    // have fewer rows: the step's count of micro-batches would weigh its rows more)
    float loss_divisor(int m) const { return (float)labelled / (float)micro[m].B; }

    // The update: the schedule, then the optimizer with the gradient clipped to --grad-clip. A non-finite loss or
    // gradient stops the run (the parameters are still the last good ones).
    void update(float step_loss, float grad_norm) {
        loss = step_loss;
        norm = grad_norm;
        lr = finetune_lr(step, total_steps, opts.warmup, opts.lr, opts.schedule);
        if (!std::isfinite(loss) || !std::isfinite(norm))
            fail("step %d: loss %g, gradient norm %g: training diverged\n---> HINT: lower --lr or raise --warmup%s",
                 step + 1, printable(loss), printable(norm),
                 opts.ckpt_dir.empty() ? "" : "; the checkpoints in --ckpt-dir are kept");
        opt->step(model.params_memory, model.grads_memory, model.param_specs, lr, clip_scale(norm, opts.grad_clip));
        be.synchronize();
    }

    // The step's progress line (with the ETA of the whole run, evaluations included), its log record, and a
    // checkpoint every --ckpt-every steps.
    void end_step() {
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        train_ms += ms;
        if (++steps_timed == 1) first_step_ms = ms;
        padded_tokens += tokens;
        padded_rows += (int64_t)B * micro_batches();
        step++;
        if (step > total_steps)  // never: each epoch runs steps_per_epoch steps (a run past its end would go on forever)
            throw std::logic_error(format("step %d of %d: an epoch ran more steps than planned", step, total_steps));
        // this process's first step (a run's, a resume's), every N-th, each epoch's last
        if (steps_timed == 1 || step % opts.log_interval == 0 || step == total_steps || step % steps_per_epoch == 0)
            std::printf("epoch %d/%d | step %d/%d | loss %.4f | norm %.4f | lr %.2e | %.1f ms | %.1f examples/s | "
                        "eta %s\n", (step - 1) / steps_per_epoch + 1, opts.epochs, step, total_steps,
                        printable(loss), printable(norm), lr, ms, labelled / (ms / 1000.0),
                        human_duration(eta_seconds()).c_str());
        if constexpr (!std::is_same<Backend, CpuBackend>::value) be.say_attention_calls_once();
        std::fflush(stdout);
        log.step(step, loss, lr, norm, (double)tokens / (ms / 1000.0), ms, be.peak_bytes);
        if (opts.ckpt_every > 0 && step % opts.ckpt_every == 0 && step < total_steps) checkpoint();
        // tests: die like `kill -9` right after this step (no cleanup, no checkpoint), to test resuming
        if (const char* die = std::getenv("PRAC_TEST_DIE_AFTER_STEP"))
            if (std::atoi(die) == step) std::_Exit(137);
        kill_point("train.step_done");  // tests: a signal between two steps (common/kill_point.h)
    }

    // After each epoch: a checkpoint when checkpointing is on, the dev evaluation, the best score so far. The
    // checkpoint comes first, with the batcher at the epoch's end (as --ckpt-every's of that step): a kill during a
    // long evaluation lost the epoch (it came after), and a resume runs the evaluation again (log_eval logs it once).
    // With a --ckpt-dir, a stop signal ends the evaluation at its next batch: the checkpoint is there, the stop at
    // the next step's start (or at finish()) writes none (without one, the run goes on to its end, --save and
    // --predict included, as before: a stop would lose it all).
    void end_epoch(int e) {
        if (checkpointed_step != step) checkpoint(before_batch);
        auto e0 = std::chrono::steady_clock::now();
        eval_stoppable = !opts.ckpt_dir.empty();
        DevScores s = evaluate();
        eval_stoppable = false;
        if (eval_cut) {
            std::printf("epoch %d/%d | evaluation stopped by a signal: --resume runs it again from the checkpoint of "
                        "this step\n", e + 1, opts.epochs);
            return;
        }
        evaluated_step = step;
        eval_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - e0).count();
        evals_timed++;
        if (s.primary() > best) best = s.primary(), best_epoch = e + 1;
        std::string best_text = best_epoch ? format("%.4f (epoch %d)", best, best_epoch) : "undefined so far";
        std::printf("epoch %d/%d | dev loss %.4f | %s | best %s %s\n", e + 1, opts.epochs, s.loss, s.text().c_str(),
                    s.metrics[0][0].first.c_str(), best_text.c_str());
        log_eval(s, e + 1);
    }

    // --eval-only: the dev metrics of the loaded weights
    int evaluate_only() {
        DevScores s = evaluate();
        std::printf("dev loss %.4f | %s\n", s.loss, s.text().c_str());
        log_eval(s, 0);
        if (!opts.predict.empty()) predict("--init-from's weights");
        return 0;
    }

    // The end: best and final scores, the memory report again, the last checkpoint, --save.
    int finish() {
        if (eval_cut) return stop((int)g_stop_signal);  // the last epoch's evaluation, ended by a stop signal
        stop_signals_at_end();
        const bool ran = !last_scores.splits.empty();  // false: resumed at the end of a finished run
        if (!ran) {
            std::printf("notice: %s is the run's last step (%d of %d): nothing left to train; its weights are "
                        "evaluated again\n", resume_path.c_str(), step, total_steps);
            evaluate();
        }
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
        DevScores last = last_scores;
        std::printf("final | %s (after epoch %d)\n", last.text().c_str(), opts.epochs);
        if (best_epoch == 0)  // every epoch's score undefined (constant predictions)
            std::printf("best  | %s undefined in every epoch\n", last.metrics[0][0].first.c_str());
        else
            std::printf("best  | %s %.4f (epoch %d of %d; tables usually report the best epoch's dev score, "
                        "GaLore's and the PRAC paper's among them)\n", last.metrics[0][0].first.c_str(), best,
                        best_epoch, opts.epochs);
        double mean_len = (double)padded_tokens / (double)std::max<int64_t>(1, padded_rows);
        if (padded_rows)
            std::printf("padding | %s: %.1f tokens per row on average over this run's training batches (the longest "
                        "example: %d)\n", opts.padding.c_str(), mean_len, T);
        // a resumed process's times are its own: the earlier processes' are in their outputs (and the log's steps)
        std::printf("time  | %s %s (evaluation %s)\n", run_clock(wall).c_str(),
                    resumed_at < 0 ? "total" : format("in this process, resumed at step %d", resumed_at).c_str(),
                    run_clock(eval_ms / 1000.0).c_str());
        if (ran) {  // (else the run's log holds its final record, and its last checkpoint is the one resumed from)
            std::vector<std::pair<std::string, double>> fields = {{"step", (double)step}, {"best", best},
                {"best_epoch", (double)best_epoch}, {"final", last.primary()}, {"seconds", wall}};
            if (resumed_at >= 0) fields.push_back({"resumed_at_step", (double)resumed_at});  // seconds: since then
            log.record("final", fields, {{"metric", last.metrics[0][0].first}});
            checkpoint();
        }
        if (!opts.save.empty()) {
            StagedDir out(opts.save);  // a failure leaves the directory as it was
            model.save_pretrained(out.tmp, base_config);
            kill_point("save.weights_written");  // tests: a failure between the files (common/kill_point.h)
            copy_tokenizer_files(opts.init_from, out.tmp, opts.max_len);
            const std::vector<std::string> removed = out.commit("model.safetensors", is_hf_model_file);
            std::printf("saved %s: config.json, model.safetensors and the tokenizer (a Hugging Face directory: "
                        "RobertaForSequenceClassification.from_pretrained loads it)\n%s", opts.save.c_str(),
                        earlier_files_removed(removed).c_str());
        }
        if (!opts.predict.empty()) predict(format("the final weights (epoch %d)", opts.epochs));
        // a stop signal during the last evaluation, --save or the predictions: all written; said, and its exit code
        if (int sig = stop_requested()) {
            std::printf("received signal %d during the run's end: its evaluation and saves finished; exit %d\n", sig,
                        128 + sig);
            return 128 + sig;
        }
        return 0;
    }

    // Peak activation bytes, as Table 5 lists them: the planner's figure for this run's (B, T), on this backend
    // (the CPU's fp32, or this CUDA build's storage) and on the CUDA bf16 build, and on the CPU the arena this run
    // allocated (planned == allocated).
    void memory_report() {
        OptimizerChoice choice = optimizer_choice_from(opts);
        auto activations = [](const MemoryPlan& p) {
            size_t a = 0;
            for (const char* k : {"inputs", "saved_exact", "saved_linear", "saved_nonlinear", "transient", "loss",
                                  "prac_bases"})
                a += p.bytes(k);
            return a;
        };
        auto saved = [](const MemoryPlan& p) {
            return p.bytes("saved_exact") + p.bytes("saved_linear") + p.bytes("saved_nonlinear") + p.bytes("prac_bases");
        };
        const bool cpu_backend = std::is_same<Backend, CpuBackend>::value;
        const PlanTarget here = cpu_backend                        ? PlanTarget::CPU_FP32
                                : Backend::act_dtype == DType::F32 ? PlanTarget::CUDA_FP32
                                                                   : PlanTarget::CUDA_BF16;
        MemoryPlan plan_here = plan_memory(cfg, prac, B, T_arena, here, &choice, opts.recompute_options());
        MemoryPlan plan_bf16 =
            plan_memory(cfg, prac, B, T_arena, PlanTarget::CUDA_BF16, &choice, opts.recompute_options());
        size_t arena = model.arena.acts_bytes + model.arena.bases_bytes;
        // the peak: the arena is allocated once for (B, T), and a batch of the longest example fills it
        std::printf("activation memory at B=%d T=%d (the peak, at the longest example): planned %.2f MiB on this "
                    "backend (%s; saved for backward %.2f MiB), %.2f MiB in the CUDA bf16 build (saved %.2f MiB)",
                    B, T_arena, activations(plan_here) / 1048576.0, plan_target_name(here), saved(plan_here) / 1048576.0,
                    activations(plan_bf16) / 1048576.0, saved(plan_bf16) / 1048576.0);
        if (cpu_backend)
            std::printf(" | measured: the CPU arena %.2f MiB (%s the plan)", arena / 1048576.0,
                        arena == activations(plan_here) ? "equal to" : "DIFFERENT FROM");
        std::printf("\n");
        // --prac-storage auto takes fp8 whenever PRAC compresses; at Table 5's ranks (2 + 2) a row's codes and its
        // 4-byte scale are no smaller than the row itself, so the rounding would buy nothing
        if (opts.prac_storage == "auto" && prac.storage == PracStorage::FP8 && prac.mode != PracMode::NONE) {
            PracOptions exact = prac;
            exact.storage = PracStorage::ACT;
            const size_t act_bytes = activations(plan_memory(cfg, exact, B, T_arena, here, &choice,
                                                             opts.recompute_options()));
            if (act_bytes <= activations(plan_here))
                std::printf("note: --prac-storage auto stores PRAC's projections as fp8 (e4m3), which at these ranks "
                            "saves nothing on this backend (%.2f MiB planned, %.2f MiB with act) and rounds them\n"
                            "---> HINT: --prac-storage act keeps them exact (Table 5's runs, "
                            "scripts/repro/table5.py)\n", activations(plan_here) / 1048576.0, act_bytes / 1048576.0);
        }
        memory_record = {{"B", (double)B}, {"T", (double)T_arena},
                         {"planned_activation_bytes", (double)activations(plan_here)},
                         {"planned_saved_bytes", (double)saved(plan_here)},
                         {"planned_activation_bytes_cuda_bf16", (double)activations(plan_bf16)},
                         {"planned_saved_bytes_cuda_bf16", (double)saved(plan_bf16)},
                         {"arena_bytes", cpu_backend ? (double)arena : NAN},
                         {"backend_peak_bytes", (double)be.peak_bytes}};
    }

  private:
    DevScores last_scores;
    std::vector<std::pair<std::string, double>> memory_record;  // memory_report's figures, logged once the run starts
    // --init-from's config.json, read at the start: the saved configs keep its other keys (write_hf_config)
    std::string base_config;

    // What can fail before the model is built: --init-from's files, the task's data (read, encoded, T chosen),
    // checkpoint and --save directories. Returns the config for the model's member initializer.
    const ModelConfig& check_data_first() {
        const std::string run_dir = claim_checkpoint_dir(opts.ckpt_dir, opts.resume, !opts.eval_only);
        refuse_output_in_checkpoints(opts.save, "--save", run_dir, true);
        refuse_output_in_checkpoints(opts.predict, "--predict", run_dir, true);
        refuse_output_in_checkpoints(opts.log, "--log", run_dir, false);
        refuse_colliding_outputs({{opts.save, "--save", save_writes_name},
                                  {opts.predict, "--predict",
                                   [&](const std::string& name) {
                                       const std::vector<std::string>& written = info.submission_files;
                                       return std::find(written.begin(), written.end(), name) != written.end();
                                   }},
                                  {opts.log, "--log", nullptr}});
        std::vector<std::pair<std::string, const char*>> inputs = {
            {resolve_weights_path(opts.init_from), "--init-from"}};
        std::vector<std::string> splits = info.dev_splits;
        splits.insert(splits.end(), info.test_splits.begin(), info.test_splits.end());
        splits.push_back("train");
        for (const std::string& split : splits)  // (the files there: which one a split reads is decided later)
            for (const std::string& f : glue_split_files(opts.data_dir, split)) inputs.push_back({f, "--data-dir"});
        refuse_outputs_among_inputs({{opts.log, "--log", nullptr}}, inputs);
        // nor a split's file that is not there yet: the run's start writes the log, and --data-dir would then hold
        // that split twice (or a split it had not), which every later run on it refuses or reads as data
        if (!opts.log.empty() && file_identity(dir_of(opts.log)) == file_identity(opts.data_dir)) {
            const std::string name = opts.log.substr(opts.log.rfind('/') + 1);  // (npos + 1 = 0: a bare name)
            for (const std::string& split : splits)
                for (const char* ext : {".tsv", ".jsonl"})
                    CHECK_USER(name != split + ext, "--log %s has the name of --data-dir's %s split: the run would "
                               "write its log there, and later runs on --data-dir would read it as that split or "
                               "refuse two files of it\n---> HINT: pass a --log outside --data-dir, or another name",
                               opts.log.c_str(), split.c_str());
        }
        check_no_earlier_run(opts);
        // a token id past the embedding table would fail at the first forward, naming neither file
        CHECK_USER(tok.vocab_size() <= cfg.vocab_size, "the tokenizer of --init-from %s has %d tokens, more than the "
                   "%d of its config.json's vocab_size: their ids have no embedding row\n---> HINT: the tokenizer "
                   "files and the model come from different models; copy the model's own tokenizer files into %s",
                   opts.init_from.c_str(), tok.vocab_size(), cfg.vocab_size, opts.init_from.c_str());
        // the tokenizer's <pad> is the id the model's positions skip and its attention masks (config.json's
        // pad_token_id): another id would pad with a real token and number positions from the wrong offset, silently
        CHECK_USER((int)tok.pad_id == cfg.pad_token_id, "the tokenizer of --init-from %s has <pad> at id %u, but its "
                   "config.json says pad_token_id %d\n---> HINT: the tokenizer files and the model come from different "
                   "models; copy the model's own tokenizer files into %s", opts.init_from.c_str(), tok.pad_id,
                   cfg.pad_token_id, opts.init_from.c_str());
        GlueTask task = info.task;
        auto encode = [&](const std::vector<GlueExample>& examples, const std::string& split, bool labeled = true) {
            const std::string path = glue_split_path(opts.data_dir, split);
            try {
                return encode_glue(tok, task, examples, opts.max_len, labeled);
            } catch (const UserError& e) {
                throw UserError(path + ": " + e.what());  // encode_glue names the example and its line
            }
        };
        auto read_train = [&] {
            train_examples = read_glue_file(task, glue_split_path(opts.data_dir, "train"));
            train_set = encode(train_examples, "train");
        };
        // --eval-only reads the training split too when it is there: T (and so the arithmetic's blocking) is then
        // the training run's, and the scores are the ones it printed, to the last digit; one it cannot read costs
        // only those digits
        if (!opts.eval_only) {
            read_train();
        } else if (glue_split_exists(opts.data_dir, "train")) {
            try {
                read_train();
            } catch (const UserError& e) {
                train_examples.clear();
                std::printf("warning: --eval-only cannot use the training split (%s); the padded length comes from "
                            "the dev splits alone, so the scores may differ from the training run's in the last "
                            "digits\n", e.what());
            }
        }
        for (const std::string& split : info.dev_splits) {
            dev_examples.push_back(read_glue_file(task, glue_split_path(opts.data_dir, split)));
            // STS-B's correlations of a constant target are undefined: said now, not after the first epoch (an
            // unlabeled example, a test split's, is left to encode's "has no score" instead)
            const std::vector<GlueExample>& d = dev_examples.back();
            if (info.num_labels == 1 && !d.empty() &&
                std::all_of(d.begin(), d.end(), [&](const GlueExample& x) { return x.label >= 0; }) &&
                std::all_of(d.begin(), d.end(), [&](const GlueExample& x) { return x.score == d[0].score; }))
                fail("%s: every score is %g; the Pearson and Spearman correlations of a constant target are "
                     "undefined\n---> HINT: use the task's real %s split (its scores vary from 0 to 5)",
                     glue_split_path(opts.data_dir, split).c_str(), d[0].score, split.c_str());
        }
        for (size_t d = 0; d < dev_examples.size(); d++) {
            dev_sets.push_back(encode(dev_examples[d], info.dev_splits[d]));
            warn_if_metric_is_blind(dev_sets.back().labels, info.dev_splits[d]);
        }
        // --predict: the test splits now, so that a missing or broken file is said before the training, not after
        if (!opts.predict.empty()) {
            for (const std::string& split : info.test_splits) {
                const std::string path = glue_split_path(opts.data_dir, split);
                test_examples.push_back(read_glue_file(task, path));
                check_unique_index(test_examples.back(), path);
                test_sets.push_back(encode(test_examples.back(), split, false));
            }
        }
        size_t longest = 2;
        for (const auto& r : train_set.ids) longest = std::max(longest, r.size());
        for (const GlueEncoded& d : dev_sets)
            for (const auto& r : d.ids) longest = std::max(longest, r.size());
        T = (int)longest;
        for (const GlueEncoded& d : test_sets)
            for (const auto& r : d.ids) longest = std::max(longest, r.size());
        T_arena = (int)longest;
        CHECK_USER(T_arena <= cfg.max_seq_len, "the longest example has %d tokens, more than the model's %d positions\n"
                   "---> HINT: pass --max-len %d or less", T_arena, cfg.max_seq_len, cfg.max_seq_len);
        CHECK_USER(opts.eval_only || (int64_t)train_examples.size() >= 1, "%s: the training split is empty",
                   opts.data_dir.c_str());
        size_t largest = train_examples.size();  // a batch beyond every split only sizes the memory for rows never used
        for (const auto& d : dev_examples) largest = std::max(largest, d.size());
        for (const auto& d : test_examples) largest = std::max(largest, d.size());
        CHECK_USER((size_t)B <= largest, "--batch-size %d is more than the %zu examples of the largest split in %s\n"
                   "---> HINT: pass --batch-size %zu or less", B, largest, opts.data_dir.c_str(), largest);
        if (!opts.predict.empty()) claim_predict_dir(opts, info);
        if (!opts.save.empty()) claim_save_dir(opts.save);
        if (opts.resume) resume_path = checkpoint_resolve(opts.ckpt_dir);
        opts.ckpt_dir = run_dir;
        opts.seq_len = T;  // for resume_keys and the planner
        return cfg;
    }
    // A dev split whose labels leave the task's metric blind: one class gives Matthews correlation 0 (sklearn's), no
    // positive gives F1 0, for every prediction. Said at the start: each epoch would score alike and the "best epoch"
    // be the first, whatever was learned. (A perfect prediction scores as a wrong one; STS-B's constant target, an
    // undefined correlation, is refused above.)
    void warn_if_metric_is_blind(const std::vector<int>& labels, const std::string& split) const {
        if (info.num_labels < 2 || labels.empty()) return;
        std::vector<int> wrong(labels.size());
        for (size_t i = 0; i < labels.size(); i++) wrong[i] = (labels[i] + 1) % info.num_labels;
        const auto right = glue_metrics(info.task, labels, labels)[0], miss = glue_metrics(info.task, wrong, labels)[0];
        if (right.second == miss.second)
            std::printf("warning: %s: its labels leave %s blind (%g for the right predictions and for wrong ones): "
                        "every epoch scores alike\n---> HINT: use the task's real %s split (it has every class)\n",
                        glue_split_path(opts.data_dir, split).c_str(), right.first.c_str(), right.second,
                        split.c_str());
    }
    static long long count_truncated(const std::vector<GlueEncoded>& sets) {
        long long n = 0;
        for (const GlueEncoded& d : sets) n += d.truncated;
        return n;
    }
    std::string dev_text() const {
        std::string s;
        for (size_t i = 0; i < dev_sets.size(); i++)
            s += format("%s%s %zu", i ? ", " : "", info.dev_splits[i].c_str(), dev_examples[i].size());
        return s + format(" examples; batches of (%d, <= %d)", B, T);
    }

    // The length a batch whose longest row has `longest` tokens is padded to: --padding longest: `cap` (T for the
    // training and dev batches: every batch the arena's shape, as before dynamic padding; T_arena for the test's);
    // batch: `longest` rounded up to a multiple of 8, at most `cap`. The hand-written CUDA attention takes any length;
    // cuDNN's builds and caches a graph per (B, T): rounding bounds them to T / 8 per run.
    int padded_len(int longest, int cap) const {
        constexpr int multiple = 8;
        if (opts.padding == "longest") return cap;
        return std::min(cap, (longest + multiple - 1) / multiple * multiple);
    }

    // A GlueBatch into the host buffers as (B, Tb), Tb = padded_len(its longest, cap): its rows, then padding rows
    // <s> </s> with no label; the model takes (B, Tb) next.
    void fill_input(const GlueBatch& b, int cap) {
        const int Tb = padded_len(b.T, cap);
        model.set_seq_len(Tb);
        tokens += (int64_t)B * Tb;
        std::fill(ids.begin(), ids.end(), (int32_t)tok.pad_id);
        std::fill(mask.begin(), mask.end(), 0);
        for (int r = 0; r < B; r++) {
            int32_t* row = ids.data() + (size_t)r * Tb;
            int32_t* m = mask.data() + (size_t)r * Tb;
            if (r < b.B) {
                std::copy(b.ids.begin() + (size_t)r * b.T, b.ids.begin() + (size_t)(r + 1) * b.T, row);
                std::fill(m, m + b.kv_len[r], 1);
                labels[r] = b.scores.empty() ? (float)b.labels[r] : b.scores[r];
            } else {
                row[0] = (int32_t)tok.cls_id;
                row[1] = (int32_t)tok.sep_id;
                m[0] = m[1] = 1;
                labels[r] = NAN;
            }
        }
    }

    // The model's outputs for every example of `data`, in file order, its batches padded up to `cap` at most:
    // pred (the argmax) and score (the first logit: STS-B's score); returns the sum of the rows' losses (0 when
    // unlabeled). Non-finite logits end the run: a broken model gets no score. `what` names the split in that error.
    double forward_all(const GlueEncoded& data, bool labeled, int cap, const char* what, std::vector<int>& pred,
                       std::vector<double>& score) {
        std::vector<float> logits((size_t)B * cfg.num_labels);
        pred.assign(data.ids.size(), -1);
        score.assign(data.ids.size(), 0.0);
        double loss_sum = 0;
        GlueBatcher batches(data, B, false, 0);
        GlueBatch b;
        while (batches.next(b)) {
            if (eval_stoppable && g_stop_signal) {  // (end_epoch's evaluation: the checkpoint before it has it due)
                eval_cut = true;
                break;
            }
            fill_input(b, cap);
            if (!labeled) std::fill(labels.begin(), labels.end(), NAN);  // no loss: a test split has no labels
            loss_sum += (double)model.eval_forward(enc) * b.B;
            model.logits(logits.data());
            for (int r = 0; r < b.B; r++) {
                const float* l = logits.data() + (size_t)r * cfg.num_labels;
                for (int k = 0; k < cfg.num_labels; k++)
                    if (!std::isfinite(l[k]))
                        fail("the model's output for %s example %lld is %g: the model produces non-finite values, "
                             "so it gets no score\n---> HINT: %s", what, (long long)b.example[r], l[k],
                             opts.eval_only ? "check the weights (--init-from) for NaN or Inf"
                                            : "training diverged: lower --lr or raise --warmup");
                const int64_t i = b.example[r];
                pred[i] = (int)(std::max_element(l, l + cfg.num_labels) - l);
                score[i] = l[0];
            }
            kill_point("eval.batch");  // tests: a signal or a kill during an evaluation (common/kill_point.h)
        }
        return loss_sum;
    }

    // The dev split(s): predictions of every example (the argmax, or STS-B's score), the task's metrics, the mean
    // loss.
    DevScores evaluate() {
        DevScores s;
        double loss_sum = 0;
        long long rows = 0;
        for (size_t d = 0; d < dev_sets.size(); d++) {
            const GlueEncoded& data = dev_sets[d];
            std::vector<int> pred;
            std::vector<double> score, target(data.scores.begin(), data.scores.end());
            const double split_sum = forward_all(data, true, T, "dev", pred, score);
            if (eval_cut) return s;  // (no metrics of the examples it had: CoLA's refused their unset predictions)
            const long long split_rows = (long long)data.ids.size();
            loss_sum += split_sum;
            rows += split_rows;
            s.splits.push_back(info.dev_splits[d]);
            s.split_loss.push_back(split_sum / (double)std::max(1LL, split_rows));
            s.metrics.push_back(glue_metrics(info.task, pred, data.labels, score, target));
        }
        s.loss = loss_sum / (double)std::max(1LL, rows);
        if (!eval_cut) last_scores = s;
        return s;
    }

    // --predict: each test split's predictions with `weights` (what the model holds now) into GLUE's file.
    void predict(const std::string& weights) {
        for (size_t d = 0; d < test_sets.size(); d++) {
            std::vector<int> pred;
            std::vector<double> score;
            forward_all(test_sets[d], false, T_arena, "test", pred, score);
            const std::string path = opts.predict + "/" + info.submission_files[d];
            write_file_atomic(path, glue_submission_text(info, test_examples[d], pred, score));
            std::string summary;  // what was predicted, at a glance: a constant prediction is seen at once
            if (info.num_labels == 1) {
                auto [lo, hi] = std::minmax_element(score.begin(), score.end());
                double mean = 0;
                for (double x : score) mean += x / (double)score.size();
                summary = format("scores %.3f..%.3f, mean %.3f", *lo, *hi, mean);
            } else {
                for (int k = 0; k < cfg.num_labels; k++)
                    summary += format("%s%s %lld", k ? ", " : "", info.label_names[k].c_str(),
                                      (long long)std::count(pred.begin(), pred.end(), k));
            }
            std::printf("predicted %s: %zu examples with %s (%s) -> %s\n", info.test_splits[d].c_str(), pred.size(),
                        weights.c_str(), summary.c_str(), path.c_str());
        }
    }

    void log_eval(const DevScores& s, int e) {
        for (size_t d = 0; d < s.splits.size(); d++) {
            std::vector<std::pair<std::string, double>> f = {{"step", (double)step}, {"epoch", (double)e},
                                                             {"val_loss", s.split_loss[d]}};
            for (const auto& m : s.metrics[d]) f.push_back(m);
            // an --eval-only evaluation (epoch 0) is of --init-from's weights, which may be another run's: marked,
            // plot_runs.py and the Table 5 summary keep it apart from the log's training run (it was its final score)
            log.record_once("glue_eval", f, {{"task", info.name}, {"split", s.splits[d]}}, opts.eval_only);
        }
    }

    // Seconds left: the remaining steps at the mean step time, the evaluations still due (one per epoch) at the
    // mean evaluation time (before the first, its batches at a third of a training step each), and the checkpoints
    // still due at the mean of those written (none before the first).
    double eta_seconds() const {
        // (the first step left out once there are others: it holds the start-up, every PRAC site's first refresh)
        double step_ms = steps_timed > 1 ? (train_ms - first_step_ms) / (steps_timed - 1) : train_ms;
        // (after step `step`: epochs whose last step is at or after it; a resume's earlier ones were evaluated)
        int evals_left = opts.epochs - (step - 1) / steps_per_epoch;
        double one_eval = evals_timed ? eval_ms / evals_timed : dev_batches() * step_ms / 3.0;
        double ckpts = ckpts_timed && !opts.ckpt_dir.empty()
                           ? ckpt_ms / ckpts_timed * finetune_checkpoints_due(step, total_steps, steps_per_epoch,
                                                                             opts.ckpt_every)
                           : 0;
        return ((total_steps - step) * step_ms + std::max(0, evals_left) * one_eval + ckpts) / 1000.0;
    }
    long long dev_batches() const {
        long long n = 0;
        for (const GlueEncoded& d : dev_sets) n += ((long long)d.ids.size() + B - 1) / B;
        return n;
    }

    // The settings a continuation must share: the trainer's (model, B, T, schedule, optimizer, seed, PRAC), and the
    // task, epochs, --max-len and the training file's contents.
    std::vector<std::pair<std::string, std::string>> keys() const {
        std::vector<std::pair<std::string, std::string>> k = resume_keys(opts, cfg);
        // the schedule's shape beside the trainer's key, linear's unsaid (as every checkpoint before --lr-schedule)
        if (opts.schedule != "linear")
            for (auto& [name, value] : k)
                if (name == "schedule") value += " shape " + opts.schedule;
        // first: another task also changes T and the data, and the task is what a refusal should name
        k.insert(k.begin(), {"task", format("%s epochs %d max_len %d padding %s", info.name, opts.epochs, opts.max_len,
                                            opts.padding.c_str())});
        k.push_back({"train_data", train_fingerprint});
        k.push_back({"dev_data", dev_fingerprint});
        // the data's encoding: --init-from's tokenizer files by content (the model key compares the model's shape,
        // not --init-from's spelling: "model/" resumes a run started with "model", and so does a copy elsewhere)
        k.push_back({"tokenizer", tokenizer_fingerprint});
        for (auto& [name, value] : k) {
            // finetune_roberta has no --prac-initial-spread or --prac-refresh-overlap (both fixed at 0): its key
            // names only what its user can set, so a refusal never asks for a flag it does not have
            if (name == "prac_refresh" && value != "none") {
                const PracOptions p = prac_options_from(opts);
                value = p.mode == PracMode::RAC ? "rac" : format("--prac-refresh %s", prac_refresh_name(p.refresh));
            }
        }
        return k;
    }

    // The CPU backend's OpenMP threads (the order of its sums) as run.cpu_threads spells them, "0" on the CUDA backend.
    static std::string cpu_threads() {
        return std::to_string(std::is_same<Backend, CpuBackend>::value ? omp_get_max_threads() : 0);
    }

    // A checkpoint of the run so far: weights (Hugging Face layout), optimizer state, PRAC bases, the batcher's
    // position and the best score (so a resumed run reports the same best).
    void checkpoint() { checkpoint(batcher->state()); }
    void checkpoint(const GlueBatchState& g) {
        if (opts.ckpt_dir.empty()) return;
        const auto c0 = std::chrono::steady_clock::now();
        CheckpointWriter w(opts.ckpt_dir, step);
        model.save_weights(w.file(CKPT_MODEL_FILE));
        write_hf_config(w.file(CKPT_CONFIG_FILE), cfg, base_config);
        copy_tokenizer_files(opts.init_from, w.tmpdir, opts.max_len);  // a model directory: --init-from it --eval-only
        TrainState st;
        st.step = step;
        st.adam_t = opt->steps();
        for (const auto& [k, v] : keys()) st.set("run." + k, v);
        st.set("run.backend", backend_of_run<Backend>());
        record_cpu_threads(st, cpu_threads());
        for (const OptimizerStateTensor& t : opt->state()) {
            if (t.u8) {  // --optimizer-states 8bit: AdamW's codes
                std::vector<uint8_t> bytes(t.numel);
                be.download(bytes.data(), t.u8, t.numel);
                st.add_u8(t.name, bytes.data(), {(int64_t)t.numel});
                continue;
            }
            float* dst = st.alloc_f32(t.name, {(int64_t)t.numel});
            be.download(dst, t.data, t.numel * sizeof(float));
        }
        PracStateBuffers buf;
        std::vector<SafeTensorWrite> pt;
        prac_state_tensors(be, model.sites, buf, pt);
        for (const SafeTensorWrite& t : pt) {
            if (t.dtype == "F32") st.add_f32(t.name, (const float*)t.data, t.shape);
            else st.add_i64(t.name, (const int64_t*)t.data, t.shape);
        }
        st.set_i64("glue.epoch", g.epoch);
        st.set_i64("glue.position", g.position);
        st.set_f64("glue.best", best);
        st.set_i64("glue.best_epoch", best_epoch);
        write_state(w.file(CKPT_STATE_FILE), st);
        const bool replaces_earlier_run = opts.overwrite && !wrote_checkpoint;
        std::string dir = w.commit(replaces_earlier_run);
        checkpoint_rotate(opts.ckpt_dir, opts.ckpt_keep, step, replaces_earlier_run);
        wrote_checkpoint = true;
        checkpointed_step = step;
        ckpt_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
        ckpts_timed++;
        std::printf("checkpoint: %s\n", dir.c_str());
    }

    void resume() {
        TrainState st = read_state(resume_path + "/" + CKPT_STATE_FILE);
        // T is the longest example of the splits, which no flag sets: compared after the keys that change it (task,
        // --max-len, tokenizer, training data), a difference is the dev data's, said as such (the key's refusal asked
        // for a run.seq_len the user cannot pass)
        std::vector<std::pair<std::string, std::string>> k = keys();
        k.erase(std::remove_if(k.begin(), k.end(),
                               [](const auto& kv) {
                                   return kv.first == "seq_len" || kv.first == "dev_data" || kv.first == "train_data" ||
                                          kv.first == "tokenizer";
                               }),
                k.end());
        // (a checkpoint spelled before run.key_spelling is compared by the trainer's old spelling, shape unsaid)
        CHECK_USER(opts.schedule == "linear" || st.has_meta("run.key_spelling"), "cannot resume from %s: it was "
                   "written before --lr-schedule, with the linear schedule\n---> HINT: resume without --lr-schedule %s",
                   resume_path.c_str(), opts.schedule.c_str());
        // --warmup-ratio's steps against the checkpoint's warmup, where the task's key (its epochs: the steps) is
        // the same: the key's refusal would ask for a --warmup, which goes with no --warmup-ratio
        if (opts.was_given("--warmup-ratio") && st.has_meta("run.schedule") && st.has_meta("run.task") &&
            st.get("run.task") == k.front().second) {
            std::istringstream words(st.get("run.schedule"));
            int saved = -1;
            for (std::string w; words >> w;)
                if (w == "warmup") words >> saved;
            CHECK_USER(saved < 0 || saved == opts.warmup, "cannot resume from %s: it was written with a warmup of %d "
                       "steps, and --warmup-ratio %s gives %d of this run's %d\n---> HINT: pass --warmup %d in place "
                       "of --warmup-ratio %s", resume_path.c_str(), saved, opts.warmup_ratio.c_str(), opts.warmup,
                       total_steps, saved, opts.warmup_ratio.c_str());
        }
        check_resume_keys(st, opts, cfg, k);
        // (said as the files, not as the key's size:hash, which the user can neither pass nor compare)
        if (st.has_meta("run.tokenizer") && st.get("run.tokenizer") != tokenizer_fingerprint)
            fail("cannot resume from %s: the tokenizer files of --init-from %s (tokenizer.json, vocab.json, merges.txt, "
                 "those it has) are not those of the run that wrote it (their sizes or contents differ), and the "
                 "run's examples were encoded with those\n---> HINT: resume with the --init-from of the run that wrote "
                 "it, or start a new run in another --ckpt-dir", resume_path.c_str(), opts.init_from.c_str());
        if (st.has_meta("run.train_data") && st.get("run.train_data") != train_fingerprint)
            fail("cannot resume from %s: the training file %s is not that of the run that wrote it (its size or "
                 "contents differ), and the run's example order and epochs are of that file\n---> HINT: resume with "
                 "the training file of the run that wrote it, or start a new run in another --ckpt-dir",
                 resume_path.c_str(), glue_split_path(opts.data_dir, "train").c_str());
        if (st.has_meta("run.seq_len") && st.get("run.seq_len") != std::to_string(T))
            fail("cannot resume from %s: its run's longest example (of the training and dev splits, within --max-len) "
                 "had %s tokens, this data's has %d: the dev data changed since\n---> HINT: resume with the dev "
                 "files of the run that wrote it, or start a new run in another --ckpt-dir", resume_path.c_str(),
                 st.get("run.seq_len").c_str(), T);
        // other dev files at the same longest example (checkpoints written before run.dev_data: the check above only)
        if (st.has_meta("run.dev_data") && st.get("run.dev_data") != dev_fingerprint)
            fail("cannot resume from %s: the dev files in %s are not those of the run that wrote it (their sizes or "
                 "contents differ), and its best dev score so far was measured on those\n---> HINT: resume with the dev "
                 "files of the run that wrote it, or start a new run in another --ckpt-dir",
                 resume_path.c_str(), opts.data_dir.c_str());
        notice_other_arithmetic(st, backend_of_run<Backend>(), cpu_threads());
        model.load_weights(resume_path + "/" + CKPT_MODEL_FILE);
        weights_from_master_weights(be, st, model.params_memory, model.param_buffer_numel);
        refuse_adamw8_of_every_tensor(st, *opt, resume_path);
        for (const OptimizerStateTensor& t : opt->state()) {
            if (master_weights_from_fp32_weights(st, *opt, t)) {
                init_master_weights(be, *opt, model.params_memory, model.param_buffer_numel);
                continue;
            }
            if (t.u8) {  // --optimizer-states 8bit: AdamW's codes
                std::vector<uint8_t> bytes(t.numel);
                st.get_u8(t.name, bytes.data(), bytes.size());
                be.upload(t.u8, bytes.data(), t.numel);
                continue;
            }
            std::vector<float> host(t.numel);
            st.get_f32(t.name, host.data(), host.size());
            be.upload(t.data, host.data(), t.numel * sizeof(float));
        }
        opt->steps() = (int)st.adam_t;
        opt->state_loaded();
        prac_state_load(be, model.sites, safetensors_open(resume_path + "/" + CKPT_STATE_FILE), "prac.");
        batcher->set_state({st.get_i64("glue.epoch"), st.get_i64("glue.position")});
        best = st.get_f64("glue.best");
        best_epoch = (int)st.get_i64("glue.best_epoch");
        step = checkpointed_step = resumed_at = (int)st.step;
        CHECK_USER(step >= 0 && step <= total_steps, "cannot resume %s: step %d is outside this run's %d steps",
                   resume_path.c_str(), step, total_steps);
        log.check_resume_at(step, resume_path);
        const long long epoch = st.get_i64("glue.epoch");  // (epochs completed)
        std::printf("resumed from %s at step %d of %d (%s)\n", resume_path.c_str(), step, total_steps,
                    step == total_steps
                        ? format("the run's end: its %lld epoch%s done", epoch, epoch == 1 ? "" : "s").c_str()
                        : format("epoch %lld, example %lld of its order", epoch + 1,
                                 (long long)st.get_i64("glue.position")).c_str());
    }
};
