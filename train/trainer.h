// The parts of a training run that the mains' loops call (train_gpt2.cu, train_llama.cu): setting up data, model,
// optimizer and --resume; the micro-batches; the update with its schedule, clipping and non-finite policy; the
// step's log line and checkpoints; evaluation, stopping on a signal, and the end of the run. The gradient
// averaging over ranks is train/grad_sync.h, evaluation train/evaluate.h, the device choice train/launch.h.
#pragma once
#include <sys/stat.h>  // stat

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>  // std::size
#include <memory>
#include <string>
#include <type_traits>
#include <utility>  // pair
#include <vector>

#include <unistd.h>  // access

#include "common/error.h"
#include "common/files.h"  // StagedDir
#include "common/kill_point.h"
#include "common/strings.h"  // human_duration, run_clock
#include "data/dataloader.h"
#include "model/config.h"
#include "model/hf_export.h"
#include "model/model_common.h"
#include "model/weights.h"
#include "train/run_checkpoint.h"
#include "train/watchdog.h"
#include "train/cli.h"
#include "train/comm.h"
#include "train/data_tokenizer.h"
#include "train/evaluate.h"
#include "train/grad_sync.h"
#include "train/launch.h"
#include "train/metrics_log.h"
#include "train/multiple_choice.h"
#include "train/optimizers.h"

// Resolves --init-from: a .safetensors file, or a directory holding model.safetensors.
std::string resolve_weights_path(const std::string& path);
// --init-from DIR that is one of our checkpoints (a COMPLETE marker): its files must match their checksums, as a
// --resume checks them (a damaged file loaded with exit 0 and gave another score). Other paths pass.
void verify_init_from_checkpoint(const std::string& path);
// Creates DIR (and parents) for an output directory flag (--save, --ckpt-dir), failing with a clear message naming
// the flag when it cannot or DIR is a file: before the run, not when its first output is written.
void prepare_output_dir(const std::string& dir, const char* flag);
// Locks a run's --ckpt-dir (DIR/.lock, held until the process ends) or fails naming it when another run holds it:
// two runs there replaced each other's checkpoints with exit 0. A file system without locks is warned about.
void lock_checkpoint_dir(const std::string& dir);
// Makes --save's directory (prepare_output_dir) and locks it (the directory itself: a model directory gains no lock
// file) until the process ends, or fails naming it when another run holds it: two runs saving there replaced each
// other's model with exit 0. A file system without locks is warned about.
void claim_save_dir(const std::string& dir);
// The directory a run with --ckpt-dir writes (checkpoint_run_dir: the flag may name one checkpoint to resume), made
// and locked first thing when this process writes it (`writes`: rank 0, not --eval-only), so that another run there
// is what a second run is told. A --resume of a directory that is not there is left to checkpoint_resolve's message.
std::string claim_checkpoint_dir(const std::string& ckpt_dir, bool resume, bool writes);
// Fails when an output (PATH of FLAG; empty: none) is where checkpoints live, which are replaced or removed as a run
// goes on and checked file by file on resume. This run's (run_dir, its --ckpt-dir; empty: none): a directory output
// (is_dir_output: --save, --predict) that is run_dir itself or one of its step_NNNNNNNN (or writers' dot) folders, any
// output inside such a folder; other paths inside run_dir (a file beside the checkpoints, a folder of its own) are
// left alone, nothing of the run touches them. Another run's: any output that is (or is inside) a step folder of a
// directory that holds checkpoints or a run's lock (a model saved there was deleted by that run's next checkpoint),
// and a directory output that is such a directory (its files among the step folders, taken for the run's).
void refuse_output_in_checkpoints(const std::string& path, const char* flag, const std::string& run_dir,
                                  bool is_dir_output);
// One output of a run: its path (empty: not written), flag, and for a directory the run writes files into (--save,
// --predict) which names it writes there (null: a file output).
struct RunOutput {
    std::string path;
    const char* flag;
    std::function<bool(const std::string&)> writes_name;
};
// The names --save writes in its directory: a Hugging Face model's files (is_hf_model_file) and its staging folder.
bool save_writes_name(const std::string& name);
// Fails when two file outputs of one run are one path, or a file output is one of the files a directory output
// writes (--log DIR/config.json with --save DIR): the later write replaced the earlier with exit 0 (--log and
// --dump-path on one file lost every record). Other files inside a directory output are left alone, as are two
// directory outputs on one path (their names differ).
void refuse_colliding_outputs(const std::vector<RunOutput>& outputs);
// Fails when an output file is one of the run's input files (`inputs`: path and flag), by file_identity (links to
// it too): with --overwrite, --dump-path on a data shard or the --init-from weights replaced it, exit 0 (a --log
// there was refused as no metrics log, which did not say why).
void refuse_outputs_among_inputs(const std::vector<RunOutput>& outputs,
                                 const std::vector<std::pair<std::string, const char*>>& inputs);
// Fails unless an output file (--dump-path) can be created at PATH: not a directory, in a writable directory, and
// not an existing file (an earlier run's output, which the file does not say) unless `may_replace` (--overwrite),
// nor a pipe or device (replaced by a file, whatever `may_replace`). `may_replace_npy`: an existing .npy file may be
// replaced (a resumed run's dump: its killed run may have written it), not another file.
void check_output_file(const std::string& path, const char* flag, bool may_replace, bool may_replace_npy = false);
// The bytes free for unprivileged users (statvfs) on the filesystem that holds `dir` (or its nearest existing
// parent); -1 where statvfs cannot tell.
double free_space(const std::string& dir);
// Fails when that filesystem has less than `bytes` free for `what`; does nothing where statvfs cannot tell.
void check_free_space(const std::string& dir, double bytes, const char* what);
// How many checkpoints of a run's --ckpt-dir exist at once at most, counting the one being written beside the kept
// ones: `existing` complete ones there, `written` more to come, the newest `keep` (>= 1) kept.
int checkpoints_at_once(int existing, int written, int keep);
// The checkpoints a run of `steps` steps writes from `first` (>= 1) completed steps on: one every --ckpt-every
// `every` (0: none) steps before the last, at `first` too, and one after the last (none past it: a finished run
// resumed).
int checkpoints_from(int first, int steps, int every);
// f(), whose errors are prefixed with the data flag they concern ("--val-data: ...").
template <class F>
auto naming_flag(const char* flag, F&& f) {
    try {
        return f();
    } catch (const UserError& e) {
        throw UserError(std::string(flag) + ": " + e.what());
    }
}

// The loader of --train-data or --val-data (`flag`), whose errors name it: a validation set too small for one
// micro-batch per rank was said as "fewer than one step needs", as if it were the training data.
inline DataLoader data_loader(const char* flag, const std::string& pattern, int B, int T, int rank, int ranks,
                              uint64_t seed, bool shuffle, int vocab) {
    return naming_flag(flag, [&] { return DataLoader(pattern, B, T, rank, ranks, seed, shuffle, vocab); });
}

// The files a data pattern (--train-data / --val-data, named by `flag`) matches; none is an error naming the flag, and
// so is one file matched twice (through hard or symbolic links: its tokens would be read twice in each epoch).
std::vector<std::string> data_files_of(const std::string& pattern, const char* flag);
// A warning line naming the files both --train-data and --val-data match (one file by two paths or links too), ""
// when none: the validation loss of tokens the model trains on measures memorization (prep_data refuses such a
// split; a run may mean it, e.g. to check that a model can overfit). Said with the run's notices, after the checks
// that can fail.
std::string shared_data_files_warning(const std::vector<std::string>& train, const std::vector<std::string>& val);
// A warning line when the training and validation shards have other layouts (flat vs rows, another row length or
// pad), "" when they agree: the validation loss then measures other samples than the training sees.
std::string shard_layouts_warning(const ShardInfo& train, const ShardInfo& val);
// The identity of a run's training data for resume: each file's size and content checksum, in the loader's order
// (the paths are not part of it: the same shards under another spelling are the same data): "size:checksum;...";
// without checksums (which read every byte), "size;...".
std::string data_fingerprint(const std::vector<std::string>& files, bool checksums = true);
// A fingerprint's entries, one per file ("size" or "size:checksum").
std::vector<std::string> fingerprint_entries(const std::string& fingerprint);
// --init-from DIR holding a sharded Hugging Face checkpoint (model.safetensors.index.json, no model.safetensors):
// refused as such (it read as a missing file).
void refuse_sharded_checkpoint(const std::string& dir);
// Default --eval-tokens of a CPU run: the tokens 1e11 forward FLOPs cover (2 x parameters each), rounded down to
// whole micro-batches of B*T (B: all ranks' sequences, ranks x the micro-batch), at least one and at most `tokens`
// (the flag's default).
long long cpu_eval_tokens(size_t parameters, int B, int T, long long tokens);
// An earlier run's files are not replaced by accident: without --resume or --overwrite, a --ckpt-dir that holds
// complete checkpoints refuses the run, and so do a --log with records and a --save directory that holds a model.
void check_no_earlier_run(const TrainOptions& opts);
// Rank `root`'s tensor list (names, dtypes, shapes) on every rank, by broadcast: `mine` on the root, the root's list
// with null data elsewhere. A collective: every rank calls it with the same root.
std::vector<SafeTensorWrite> broadcast_tensor_list(Comm& comm, const std::vector<SafeTensorWrite>& mine, int root);
void print_table(const char* title, const std::vector<std::pair<std::string, std::string>>& rows);

// The PRAC sites of a model: class, width, ranks, k and bytes saved per layer.
template <class Site>
void print_site_table(const std::vector<Site>& sites, int L) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const Site& s : sites)
        rows.push_back({s.name, s.compressed()
                                    ? format("%-9s n=%-5d r1=%-4d r2=%-4d k=%-7.3f kept %.0f%% of the width",
                                             s.cls == SiteClass::LINEAR ? "linear" : "nonlinear", s.n, s.dims.r1,
                                             s.dims.r2, s.dims.k, 100.0 * s.r() / s.n)
                                    : format("%-9s n=%-5d %s", s.cls == SiteClass::LINEAR ? "linear" : "nonlinear",
                                             s.n, s.recompute ? "recomputed in backward (--recompute)" : "exact")});
    print_table(format("PRAC sites (x %d layers)", L).c_str(), rows);
}

// SIGINT / SIGTERM / SIGUSR1: the loop finishes the step in flight, writes a checkpoint when checkpointing is on,
// and exits with 128 + the signal. SIGUSR1 is there for mpirun: Open MPI forwards it to every rank, where a SIGINT or
// SIGTERM to mpirun kills the ranks a second later (odls_base_sigkill_timeout), before any checkpoint is written.
constexpr int STOP_SIGNALS[] = {SIGINT, SIGUSR1, SIGTERM};  // the order in which one is said when ranks got several
extern volatile std::sig_atomic_t g_stop_signal;
void install_stop_signals();
// From here on the first stop signal is acknowledged as one past the run's last step (nothing is cut short but
// --sample), not as a stop at the end of a step.
void stop_signals_at_end();

// One micro-batch: B*T input ids and targets (-1 = ignored) and the weight of its token losses in the step.
struct MicroBatch {
    std::vector<int32_t> inputs, targets;
    long long valid = 0;     // targets that count; 0: a micro-batch of padding, nothing to learn from
    float grad_scale = 0;    // 1 / (valid * grad_accum): the step minimizes the mean of the micro-batches' means
};

template <template <class> class ModelT, class Backend>
struct Trainer {
    using Model = ModelT<Backend>;
    Backend& be;
    TrainOptions& opts;
    const ModelConfig& cfg;
    PracOptions prac;
    Comm& comm;
    const int rank, ranks, B, T;
    std::string resume_path;  // --resume: the checkpoint to continue (declared before val: set while val is built)
    std::string data_warning;  // files both data flags match, other layouts (shared_data_files_warning,
                               // shard_layouts_warning), said in announce(); idem
    DataLoader val;
    std::unique_ptr<DataLoader> train_data;  // none with --eval-only
    Model model;
    MetricsLog log;
    std::unique_ptr<Optimizer<Backend>> opt;
    GradientSync<Backend> grads;
    const std::string cpu_threads;  // the ranks' OpenMP threads as checkpoints record them (RunSetup; "" on CUDA)
    int start_step = 0;  // 0, or the step --resume continues from
    static constexpr bool cpu_backend = std::is_same<Backend, CpuBackend>::value;

    // the step in flight
    MicroBatch batch;
    DataLoaderState data_before;  // the data position at the start of the step (checkpointed on divergence)
    std::chrono::steady_clock::time_point t0;
    float loss = 0, norm = 0, lr = 0;
    double total_ms = 0;       // the training steps' time
    double first_step_ms = 0;  // this process's first step's (the start-up's: left out of the ETA's mean)
    // the clock of the whole run: training and every evaluation (the total and the ETA count both)
    std::chrono::steady_clock::time_point run_start;
    double eval_ms = 0;  // evaluations' time so far
    int evals_timed = 0;
    double ckpt_ms = 0;  // and the periodic checkpoints'
    int ckpts_timed = 0;
    std::string train_shards;  // data_fingerprint of the training files (with --ckpt-dir)
    int skipped_in_a_row = 0, skipped_total = 0;  // --on-nonfinite skip (checkpointed: a resume counts on)
    int padding_micro_batches = 0;  // this step's micro-batches on this rank with no target to score
    float step_scale = 1;           // all micro-batches of the step / those with a target (step_loss)
    bool nothing_scored = false;    // every micro-batch of the step, on every rank, was padding (step_loss)
    int padding_steps = 0;          // steps of this process with nothing scored (no update)
    bool skipped_step = false;                      // this step's update was skipped
    int64_t last_checkpoint = -1;                   // the step this process last checkpointed (not twice)
    int64_t logged_step = -1;                       // the last step record's step and loss (MetricsLog::num), which
    std::string logged_loss;                        // a checkpoint at that step records (a resume compares its log)
    std::vector<std::string> log_unwritten;         // --resume: the records its checkpoint kept (fail_unwritable_log)
    // --prac-shared-subspace: a rank that only joins a refresh adds a zero Gram matrix (see join_shared_refresh)
    bool gram_nothing = false;
    GramReducer gram_allreduce;
    std::unique_ptr<Watchdog> watchdog;  // --watchdog: ends the job when this rank makes no progress
    int steps_done = 0;                  // steps done so far (the resumed ones included)
    bool wrote_checkpoint = false;       // this process has written one (--overwrite's first removes the others)
    bool eval_stoppable = false, eval_cut = false;  // a periodic evaluation runs / a stop signal ended it (evaluate)
    int eval_due_at = -1;  // the step whose evaluation a stop signal cut: its checkpoint records it, a resume runs it
    std::vector<ChoiceExample> hellaswag;  // --hellaswag's examples (read at the start: a bad file fails then)
    long long hellaswag_rows = 0;          // their endings: the rows of forward an evaluation adds (all ranks')

    Trainer(Backend& be, RunSetup& s)
        : be(be), opts(s.opts), cfg(s.cfg), prac(s.prac), comm(*s.comm), rank(comm.rank()), ranks(comm.size()),
          B(opts.batch_size), T(opts.seq_len),
          val(data_loader("--val-data", check_before_start(), B, T, rank, ranks, (uint64_t)opts.seed, false,
                          cfg.vocab_size)),
          train_data(opts.eval_only ? nullptr
                                    : new DataLoader(data_loader("--train-data", opts.train_data, B, T, rank, ranks,
                                                                 (uint64_t)opts.seed, opts.shuffle, cfg.vocab_size))),
          model(be, cfg, prac, opts.recompute_options()),
          log(rank == 0 ? opts.log : "", opts.overwrite && !opts.eval_only),
          grads(be, comm, model.param_specs, cfg.num_layers, model.param_buffer_numel, opts.zero == 1 && ranks > 1,
                opts.zero == 1 && ranks > 1 ? comm.shard_begin(model.param_buffer_numel, rank) : 0,
                opts.zero == 1 && ranks > 1 ? comm.shard_end(model.param_buffer_numel, rank)
                                            : model.param_buffer_numel,
                opts.overlap_comm),
          cpu_threads(s.cpu_threads) {
        if (train_data && !opts.ckpt_dir.empty()) train_shards = data_fingerprint(train_data->files());
        log.keep_failed_records = train_data && !opts.ckpt_dir.empty();  // (stop_requested, stop)
        if (train_data) check_ranks_read_the_same_data(train_data->files(), train_shards, "--train-data");
        if (train_data && rank == 0) data_warning += shard_layouts_warning(train_data->info(), val.info());
        check_ranks_read_the_same_data(val.files(), "", "--val-data", true);
        check_ranks_build_the_same_model();
        if (opts.resume) check_resume();
        check_prac_compresses(compressed_sites(model.sites), prac.mode, opts.prac, opts.prac_classes, opts.recompute);
        // a bad token fails now, not at the first evaluation (maybe after the training), and the training data's:
        // a bad token in a later shard ended the run there, with nothing checkpointed since the last --ckpt-every
        // (each rank reads its share of the files, a second read of them from the page cache where the fingerprint
        // above read every byte; a rank's error ends the job and names the rank)
        naming_flag("--val-data", [&] { val.check_every_token(); });
        if (train_data) naming_flag("--train-data", [&] { train_data->check_every_token(rank, ranks); });
        if (!opts.hellaswag.empty()) {
            check_ranks_read_the_same_data({opts.hellaswag}, "", "--hellaswag", true);
            std::unique_ptr<Tokenizer> tok;  // (HellaSwag's text; llm.c's eval file holds GPT-2 ids)
            if (choice_file_is_text(opts.hellaswag))
                tok = naming_flag("--hellaswag", [&] { return data_tokenizer(cfg.arch, opts); });
            hellaswag = read_choice_examples(opts.hellaswag, tok.get(), cfg.arch == Arch::GPT2, T, cfg.vocab_size,
                                             opts.hellaswag_examples);
            for (const ChoiceExample& e : hellaswag) hellaswag_rows += (long long)e.endings.size();
        }
        prac.initial_spread = prac_initial_spread_steps(opts, prac.mode);  // auto: the warmup (the run's on --resume)
        // the default evaluation budget of a CPU run suits the model (a large model's 65536 tokens take minutes)
        // (in whole steps of all ranks' micro-batches, ranks x B x T: the count the evaluation reads, which the
        // table shows)
        if (cpu_backend && !opts.was_given("--eval-tokens"))
            opts.eval_tokens = cpu_eval_tokens(model.num_parameters, ranks * B, T, opts.eval_tokens);
        if (!opts.save.empty() && rank == 0)
            check_free_space(opts.save, 4.0 * model.num_parameters + (1 << 20), "--save (model.safetensors, fp32)");
        announce(s);  // the tables come after everything that can be checked before the run
        if (train_data) {
            // how much of the data the run reads: one step takes ranks x B x --grad-accum samples of an epoch's whole
            // micro-batches (a step that needs more than an epoch gives repeats some of them inside the step)
            const long long per_step = (long long)ranks * B * opts.grad_accum,
                            per_epoch = train_data->steps_per_epoch() * ranks * B;
            const double epochs = (double)per_step * opts.steps / per_epoch;  // (%.3g wrote 1234 as 1.23e+03)
            // an epoch's last samples that fill no micro-batch on every rank are not read (the epoch's order decides
            // which): said, as the validation data's are (10 of 22 samples on 3 ranks of B 4 went without a word)
            const long long left_over = train_data->samples_per_epoch() - per_epoch;
            std::printf("train data: %zu shard(s), %lld samples of %d tokens per epoch%s%s; the run reads %s epochs\n",
                        train_data->files().size(), (long long)train_data->samples_per_epoch(), T,
                        s.builtin ? " (built-in corpus)" : "",
                        left_over > 0 ? format(", of which %lld fill the micro-batches of every rank (%lld left over "
                                               "in each epoch's order)", per_epoch, left_over).c_str()
                                      : "",
                        format(epochs < 1000 ? "%.3g" : "%.0f", epochs).c_str());
            if (per_step > per_epoch)
                std::printf("notice: one step reads %lld samples (%d rank(s) x B %d x --grad-accum %d), more than the "
                            "%lld of an epoch: each step repeats samples it already read\n", per_step, ranks, B,
                            opts.grad_accum, per_epoch);
        }
        std::printf("val data:   %zu shard(s), %lld samples per epoch\n", val.files().size(),
                    (long long)val.samples_per_epoch());
        if (!hellaswag.empty())
            std::printf("hellaswag:  %zu example(s) from %s: %lld rows (an ending after its context) per evaluation, "
                        "in micro-batches of %d%s\n", hellaswag.size(), opts.hellaswag.c_str(), hellaswag_rows, B,
                        ranks > 1 ? format(", the examples split over %d ranks", ranks).c_str() : "");
        const long long epoch_tokens = (long long)val.steps_per_epoch() * ranks * B * T;  // what all ranks can read
        // the samples past the last micro-batch that every rank fills are not read (so the score of a small set
        // depends on the ranks and B): said, it was "reads all of it"
        const long long unread = val.samples_per_epoch() - (long long)val.steps_per_epoch() * ranks * B;
        if (epoch_tokens < opts.eval_tokens)
            std::printf("note: the validation data gives %lld tokens (%lld micro-batch(es) of %d x %d on each of %d "
                        "rank(s)), fewer than --eval-tokens %lld: each evaluation reads all of it once%s\n",
                        epoch_tokens, (long long)val.steps_per_epoch(), B, T, ranks, opts.eval_tokens,
                        unread > 0 ? format(", less its last %lld sample(s), which fill no micro-batch on every rank",
                                            unread).c_str()
                                   : "");
        setup_model();
        batch.inputs.resize((size_t)B * T);
        batch.targets.resize((size_t)B * T);
        // The watchdog, --eval-only's too (its evaluation is a collective), watching from here: the optimizer's
        // set-up, --resume's reads and the collectives before the first step too (a rank stopped there hung the job
        // for good: nothing was watched before the first step's mark). Alone, it ends the process at once: exit()
        // from its thread would run the destructors of libraries (OpenBLAS) the main thread is still inside, a crash
        // instead of the status 124.
        const int stall_s = opts.watchdog >= 0 ? opts.watchdog : ranks > 1 ? 1800 : 0;
        // (every rank done with its share of the data's checks first: a rank with less to read waited for the others
        // in the next collective, watched, and a short --watchdog ended a healthy job)
        if (stall_s > 0 && ranks > 1) {
            double together = 0;
            comm.allreduce_sum(&together, 1);
        }
        if (stall_s > 0)
            watchdog = std::make_unique<Watchdog>(stall_s, rank, [this] {
                Watchdog::flush_unless_busy(stdout);
                if (ranks > 1) comm_abort(comm, 124);
                std::_Exit(124);
            });
        progress("start-up", 0);
        kill_point("train.set_up");  // tests: a rank stopped before its first step
        if (opts.eval_only) return;
        setup_optimizer();
        if (opts.resume) {
            progress("--resume", 0);
            resume();  // (before the disk-space check: a resumed run writes the checkpoints left)
            progress("start-up", 0);
        }
        if (!opts.ckpt_dir.empty() && rank == 0) {
            size_t opt_bytes = 0;
            for (const OptimizerStateTensor& t : opt->state()) opt_bytes += t.nbytes();
            const double one = 4.0 * model.num_parameters + opt_bytes + (1 << 20);
            check_free_space(opts.ckpt_dir, one, "--ckpt-dir (one checkpoint: weights and optimizer state)");
            // the kept ones too, said now rather than by a checkpoint that meets a full disk hours into the run; the
            // run writes one every --ckpt-every steps before the last, and one after the last (from its resume on)
            const int existing = (int)checkpoint_steps(opts.ckpt_dir).size(),
                      written = checkpoints_from(start_step + 1, opts.steps, opts.ckpt_every),
                      more = checkpoints_at_once(existing, written, opts.ckpt_keep) - existing;
            const bool rotates = existing + written > opts.ckpt_keep;
            const double free_bytes = free_space(opts.ckpt_dir);
            if (free_bytes >= 0 && free_bytes < more * one)
                std::printf("warning: --ckpt-dir's filesystem has %.1f MiB free, room for %d more checkpoint(s) of "
                            "%.1f MiB, and this run needs %d more (--ckpt-keep %d%s): a later checkpoint would fail "
                            "on a full disk\n---> HINT: free space%s\n", free_bytes / 1048576.0,
                            (int)(free_bytes / one), one / 1048576.0, more, opts.ckpt_keep,
                            rotates ? ", and one more while the newest is written" : "",
                            rotates && opts.ckpt_keep > 1 ? ", or keep fewer (--ckpt-keep K needs room for K + 1)"
                                                          : "");
        }
        if (const char* how = grads.description()) std::printf("gradients: averaged on the GPUs by NCCL %s\n", how);
        install_stop_signals();
        run_start = std::chrono::steady_clock::now();
        // the one a stop signal cut before the checkpoint (at the run's last step: finish()'s final evaluation)
        if (eval_due_at == start_step && start_step < opts.steps) evaluate(start_step);
    }

    // --eval-only: the validation loss of the loaded weights, then --sample's text from them
    int evaluate_only() {
        long long seen = 0;
        float loss = validation_loss(&seen);
        const ChoiceScore hs = hellaswag_score();
        std::printf("val loss %.4f | perplexity %.3f | %lld tokens\n", loss, std::exp((double)loss), seen);
        log.eval(0, loss, seen, /*eval_only=*/true, hellaswag_said(hs, ""));
        install_stop_signals();  // a long --sample stops on a stop signal with the tokens so far
        stop_signals_at_end();
        sample();
        const int stopped = stop_at_end();
        return stopped ? 128 + stopped : 0;
    }

    // A stop signal during the run's end on any rank: rank 0's during its --save or --sample, another rank's while it
    // waited for them (it was lost: exit 0, a scheduler's stop reported as a finished job). One last collective, which
    // the other ranks wait in unwatched while rank 0 saves and samples, as they waited in MPI_Finalize after it.
    int stop_at_end() {
        if (rank != 0) watchdog.reset();
        kill_point("train.run_end");  // tests: a signal there, on one rank
        return stop_requested();
    }

    // --sample's text, on rank 0 (each token is progress for the watchdog; a stop signal ends it, and stop_at_end
    // says it). It starts as the training data starts a document (--eval-only: as the validation data does).
    void sample() {
        if (opts.sample <= 0 || rank != 0) return;
        const DataLoader& docs = train_data ? *train_data : val;
        SampleStart start{docs.info().layout == SHARD_LAYOUT_ROWS,
                          [&docs](uint64_t draw) { return docs.document_start(draw); },
                          train_data ? "--train-data" : "--val-data"};
        print_sample(model, opts, cfg.arch, start, g_stop_signal, [this] { progress("--sample", steps_done); });
    }

    // the watchdog's progress mark (nothing without one)
    void progress(const char* what, int step) {
        if (watchdog) watchdog->beat(what, step);
    }

    // The validation loss (every rank's share, averaged). A non-finite loss over real tokens ends the run with an
    // error, as a diverged training step does: a broken model gets no score.
    float validation_loss(long long* seen) {
        progress("evaluation", steps_done);
        // every micro-batch is progress: an evaluation longer than --watchdog (GaLore's 10M tokens on the CPU) ended
        // the job as a hung rank
        float vl = evaluate_all(model, val, opts, comm, seen, [this] { return eval_goes_on("evaluation"); });
        if (eval_cut) return NAN;  // (the caller asks the ranks: evaluation_stopped)
        // (a loss over no token is 0 / 0: said as such, not printed as nan with exit 0)
        if (*seen == 0)
            fail("the validation data has no token to score: every target the evaluation read is padding\n---> HINT: "
                 "check --val-data: a row of a row-layout shard needs a token after its first (prep_data writes no "
                 "empty document)");
        if (!std::isfinite(vl))
            fail("validation loss is %g over %lld tokens: the model produces non-finite values (NaN or Inf), so it "
                 "gets no score\n---> HINT: %s", vl, *seen,
                 opts.eval_only ? "check the weights (--init-from): do they hold NaN or Inf values?"
                                : "training diverged: lower --lr or raise --warmup; the checkpoints already written "
                                  "in --ckpt-dir are kept");
        return vl;
    }

    // A resume that evaluates otherwise than the run it continues (another --val-data, --eval-tokens or
    // --eval-protocol: the training is the same, so it is no refusal) says so: the log's evaluations before and after
    // it are of two validation sets (a tester's final val loss moved by 0.006 without a word).
    void evaluation_notice(const TrainState& st, const std::string& path) {
        if (!st.has_meta("run.val_sizes")) return;  // (written before these were recorded)
        std::vector<std::string> changed;
        if (st.get("run.val_sizes") != data_fingerprint(val.files(), false))
            changed.push_back("--val-data (its files' sizes differ)");
        if (st.get_i64("run.eval_tokens") != opts.eval_tokens)
            changed.push_back(format("--eval-tokens (%lld then, %lld now)", (long long)st.get_i64("run.eval_tokens"),
                                     (long long)opts.eval_tokens));
        if (st.get("run.eval_protocol") != opts.eval_protocol)
            changed.push_back(format("--eval-protocol (%s then, %s now)", st.get("run.eval_protocol").c_str(),
                                     opts.eval_protocol.c_str()));
        if (!changed.empty())
            std::printf("notice: this run evaluates otherwise than the one that wrote %s: %s; the training goes on "
                        "as it was, but its evaluations from here on are not comparable with the earlier ones (one "
                        "--log holds both)\n", path.c_str(), join(changed, ", ").c_str());
    }

    // A stop signal on any rank: the signal, or 0. Every rank stops at the same step, whichever got it, and says
    // (and exits with) the same signal: the first of STOP_SIGNALS that some rank got. A --log that rank 0 could not
    // write (a full disk, with a --ckpt-dir: MetricsLog::keep_failed_records) stops the run as well: LOG_UNWRITABLE.
    static constexpr int LOG_UNWRITABLE = -1;
    int stop_requested() {
        const int sig = (int)g_stop_signal;
        const bool log_failed = !log.write_error.empty();
        if (ranks == 1) return log_failed ? LOG_UNWRITABLE : sig;
        constexpr int K = (int)std::size(STOP_SIGNALS);
        double got[K + 1];
        for (int i = 0; i < K; i++) got[i] = sig == STOP_SIGNALS[i];
        got[K] = log_failed;
        comm.allreduce_sum(got, K + 1);
        if (got[K] > 0) return LOG_UNWRITABLE;
        for (int i = 0; i < K; i++)
            if (got[i] > 0) return STOP_SIGNALS[i];
        return 0;
    }
    // The checkpoint of `step` steps, then exit 128 + the signal, or, for LOG_UNWRITABLE, the log's error (exit 1):
    // that checkpoint keeps the records the log could not take, and a --resume writes them first.
    int stop(int step, int sig) {
        if (sig == LOG_UNWRITABLE) {
            checkpoint(step, train_data->get_state());
            if (rank == 0) fail_unwritable_log(step);
            return 1;  // (rank 0's error ends the job)
        }
        std::printf("received signal %d: stopping after %d of %d steps%s\n", sig, step, opts.steps,
                    opts.ckpt_dir.empty() ? "; nothing is saved (no --ckpt-dir to checkpoint into)" : "");
        checkpoint(step, train_data->get_state());
        return 128 + sig;
    }

    // A --log write failed: the run ends with the error, after `step` steps, whose checkpoint is written (the stop's;
    // the final one, before the final evaluation) and keeps the records that failed (a due evaluation's: redone).
    [[noreturn]] void fail_unwritable_log(int step) {
        log.unwritten_saved = log.unwritten.size();  // (kept by that checkpoint, or redone by the resume)
        fail("cannot write the metrics log %s: %s\nthe run stopped after %d of %d steps, at its checkpoint %s: a "
             "--resume writes the records that the log lacks first, then goes on\n---> HINT: free space there, or "
             "--resume with another --log (then: cat OLD NEW > joined.jsonl for one file of the run)",
             opts.log.c_str(), log.write_error.c_str(), step, opts.steps, checkpoint_path(opts.ckpt_dir, step).c_str());
    }

    // An evaluation after `step` steps (end_step, before that step's checkpoint): every --eval-interval steps
    bool eval_due(int step) const { return opts.eval_interval > 0 && step > 0 && step % opts.eval_interval == 0; }
    // A stop signal during an evaluation ends it at its next micro-batch (a scheduler's SIGTERM before its SIGKILL
    // waited 94 s for a long one, and with it the checkpoint): the step's checkpoint records the evaluation as due
    // (run.eval_due_at), and the resume runs it first. Each rank ends its own share; the ranks then agree
    // (evaluation_stopped: one collective, after the evaluation's own, which every rank still reaches).
    bool eval_goes_on(const char* what) {
        progress(what, steps_done);
        if (g_stop_signal && eval_stoppable) eval_cut = true;
        return !eval_cut;
    }
    bool evaluation_stopped() {
        double cut = eval_cut;
        if (ranks > 1) comm.allreduce_sum(&cut, 1);
        eval_cut = false;
        return cut > 0;
    }
    void evaluate(int step) {
        long long seen = 0;
        auto e0 = std::chrono::steady_clock::now();
        eval_stoppable = true;
        float vl = validation_loss(&seen);
        const ChoiceScore hs = hellaswag_score();
        eval_stoppable = false;
        if (evaluation_stopped()) {
            eval_due_at = step;
            std::printf("step %d | evaluation stopped by a signal: %s\n", step,
                        opts.ckpt_dir.empty() ? "no record of it (no --ckpt-dir to resume from)"
                                              : "the checkpoint of this step has it due, and --resume runs it first");
            return;
        }
        eval_due_at = -1;
        count_eval_time(e0);
        std::printf("step %d | val loss %.4f | perplexity %.3f\n", step, vl, std::exp((double)vl));
        log.eval(step, vl, seen, false, hellaswag_said(hs, format("step %d | ", step)));
    }

    // --hellaswag's score over every rank's share of the examples (none without it)
    ChoiceScore hellaswag_score() {
        if (hellaswag.empty()) return {};
        progress("hellaswag", steps_done);
        ChoiceScore s = score_choices(
            hellaswag, B, T, rank, ranks,
            [this](const int32_t* in, const int32_t* tg, float* losses) { model.eval_token_losses(in, tg, losses); },
            [this] { return eval_goes_on("hellaswag"); });
        double counts[3] = {(double)s.examples, (double)s.correct, (double)s.correct_norm};
        comm.allreduce_sum(counts, 3);
        return {(long long)counts[0], (long long)counts[1], (long long)counts[2]};
    }
    // prints the score after `lead` and returns it as the evaluation record's fields ("" without --hellaswag)
    std::string hellaswag_said(const ChoiceScore& s, const std::string& lead) {
        if (s.examples == 0) return "";
        std::printf("%shellaswag acc_norm %.4f (%lld/%lld) | acc %.4f\n", lead.c_str(), s.acc_norm(), s.correct_norm,
                    s.examples, s.acc());
        return format(",\"hellaswag_acc_norm\":%s,\"hellaswag_acc\":%s,\"hellaswag_examples\":%lld",
                      MetricsLog::num(s.acc_norm()).c_str(), MetricsLog::num(s.acc()).c_str(), s.examples);
    }

    // The start of an optimizer step: zero gradients, the PRAC schedule (bases refresh on this step's first
    // micro-batch when due), the timer, and the data position to checkpoint should the step diverge.
    void begin_step(int step) {
        progress("training step", step + 1);
        t0 = std::chrono::steady_clock::now();
        data_before = train_data->get_state();
        model.zero_grad();
        model.sched.begin_step(prac, step);
        padding_micro_batches = 0;
    }

    const MicroBatch& next_batch() {
        train_data->next_batch(batch.inputs.data(), batch.targets.data());
        batch.valid = count_target_tokens(batch.targets.data(), batch.targets.size());
        batch.grad_scale = batch.valid ? 1.0f / ((float)batch.valid * opts.grad_accum) : 0.0f;
        padding_micro_batches += batch.valid == 0;
        return batch;
    }

    // --prac-shared-subspace: a refresh is a collective (every rank's Gram matrix is averaged inside forward, at
    // its first real micro-batch of the step). A rank whose micro-batches of this step were all padding ran no
    // forward: it still joins the refresh, adding nothing, so that every rank issues the same collectives in the
    // same order (before the gradients') and ends with the same bases and draw counters. The forward runs on the
    // last (padding) micro-batch: every target is ignored, so its loss is 0 and the head's gradient adds zeros;
    // no backward.
    void join_shared_refresh() {
        if (!(opts.prac_shared && ranks > 1 && model.sched.first_micro_batch && refresh_due())) return;
        gram_nothing = true;
        model.train_forward(batch.inputs.data(), batch.targets.data(), 1.0f, opts.grad_accum);  // adds a loss of 0
        gram_nothing = false;
    }

    // The step's loss, the mean over the ranks of the micro-batches' mean losses / grad_accum that train_forward
    // summed on the device: one 4-byte readout per step, after the gradient norm's (the stream is idle by then).
    // A micro-batch of padding has no mean loss: the step's mean is over the micro-batches (of every rank) that
    // have one, so its loss, and in update() its gradient, are scaled by step_scale = all / those (they counted it
    // as 0: a step with one of two micro-batches all padding logged half its loss and took half its gradient).
    float step_loss() {
        const float loss = be.loss_read();
        double l[2] = {loss, (double)padding_micro_batches};
        if (ranks > 1 || comm.device_comm()) {
            comm.allreduce_sum(l, 2);
            l[0] /= comm.size();
        }
        const double all = (double)opts.grad_accum * comm.size(), scored = all - l[1];
        step_scale = scored > 0 && scored < all ? (float)(all / scored) : 1.0f;
        nothing_scored = scored <= 0;  // (loss and gradient 0: update() takes no step)
        return (float)(l[0] * step_scale);  // (one rank, scale 1: the float loss itself, exactly)
    }

    // The update with the averaged gradients: learning-rate schedule, clipping, and the non-finite policy (stop
    // with a checkpoint of the last good state, or skip the update), then the optimizer (this rank's shard under
    // ZeRO-1, gathered back to every rank).
    void update(int step, float step_loss, float grad_norm) {
        loss = step_loss;
        norm = grad_norm * step_scale;  // the norm of the gradient the update takes (step_loss)
        LrShape shape = LrShape::COSINE;
        lr_shape_parse(opts.lr_schedule, &shape);  // (a name it is not was refused with the flags)
        lr = lr_schedule(step, opts.steps, opts.warmup, opts.lr, opts.min_lr_frac, shape, opts.cooldown_frac);
        skipped_step = !std::isfinite(loss) || !std::isfinite(norm);
        if (skipped_step) {
            // the parameters are still the last good ones: nothing of this step has been applied
            const bool skipping = opts.on_nonfinite == "skip";
            if (!skipping || skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW) {
                log_step(step);                 // the step that stops the run, its update left out as a skip's
                checkpoint(step, data_before);  // the weights before this step
                // a resume continues the same settings only: another --lr or --warmup is a new run from its weights,
                // which the last finite step's update may have broken already (--lr 1e9: finite, 1e9 large)
                std::string fix = opts.ckpt_dir.empty()
                                      ? "lower --lr or raise --warmup"
                                      : format("start a new run with a lower --lr or a longer --warmup from the weights "
                                               "before this step (--init-from %s, another --ckpt-dir; if that run's "
                                               "first loss is not finite either, the update before this step broke "
                                               "them: take an earlier checkpoint, or start afresh)",
                                               checkpoint_path(opts.ckpt_dir, step).c_str());
                fail("step %d: loss %g, gradient norm %g: training diverged%s\n---> HINT: %s, or check the data%s",
                     step + 1, printable(loss), printable(norm),
                     skipping ? format(" (more than %d non-finite steps in a row)", MAX_SKIPPED_IN_A_ROW).c_str()
                              : "",
                     fix.c_str(),
                     skipping             ? ""
                     : opts.ckpt_dir.empty() ? "; --on-nonfinite skip skips such steps"
                                             : "; --resume --on-nonfinite skip continues it skipping such steps");
            }
            std::printf("warning: step %d: loss %g, gradient norm %g: skipping this update (--on-nonfinite skip)\n",
                        step + 1, printable(loss), printable(norm));
            skipped_in_a_row++;
            skipped_total++;
        } else if (nothing_scored) {  // (an update of zero gradients would still decay the weights and move them
                                      // by the moments)
            if (rank == 0)
                std::printf("warning: step %d: every micro-batch was padding, nothing to learn: no update\n", step + 1);
            padding_steps++;
        } else {
            skipped_in_a_row = 0;
            opt->step(model.params_memory, model.grads_memory, model.param_specs, lr,
                      clip_scale(norm, opts.grad_clip) * step_scale);
        }
        grads.gather_params(model);
        be.synchronize();
    }

    // The step's --log record; returns its time (ms) and tokens/s.
    std::pair<double, double> log_step(int step) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const double tok_s = (double)B * T * opts.grad_accum * ranks / (ms / 1000.0);
        // a step of padding alone has no loss (its 0 is no mean of anything): null, and "padding":true, in the log
        const float logged = nothing_scored ? NAN : loss;
        log.step(step + 1, logged, lr, norm, tok_s, ms, be.peak_bytes, skipped_step, nothing_scored);
        logged_step = step + 1, logged_loss = MetricsLog::num(logged);
        return {ms, tok_s};
    }

    // The end of a step: its log line (loss, norm, lr, time, tokens/s, ETA) and metrics, and a checkpoint every
    // --ckpt-every steps.
    void end_step(int step) {
        steps_done = step + 1;
        const auto [ms, tok_s] = log_step(step);
        total_ms += ms;
        if (step == start_step) first_step_ms = ms;
        double eta = eta_seconds(step);
        // this process's first step (a run's, a resume's), every N-th (steps N, 2N, ... as the evaluations count
        // them) and the last
        if (step == start_step || (step + 1) % opts.log_interval == 0 || step == opts.steps - 1)
            std::printf("step %5d/%d | loss %s | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | eta %s\n", step + 1,
                        opts.steps, nothing_scored ? "   n/a" : format("%.4f", printable(loss)).c_str(),
                        printable(norm), lr, ms, tok_s, human_duration(eta).c_str());
        if constexpr (!cpu_backend) be.say_attention_calls_once();
        std::fflush(stdout);
        // the evaluation after this step comes before its checkpoint: a run stopped (or killed) after the checkpoint
        // has it, and the resume goes on from the next one (evaluated at the top of the next step, it was lost to a
        // stop there, which checkpoints before it); the last step's is finish()'s final evaluation
        if (step + 1 < opts.steps && eval_due(step + 1)) evaluate(step + 1);
        if (opts.ckpt_every > 0 && (step + 1) % opts.ckpt_every == 0 && step + 1 < opts.steps) {
            const auto c0 = std::chrono::steady_clock::now();
            checkpoint(step + 1, train_data->get_state());
            ckpt_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
            ckpts_timed++;
        }
        // tests: die like `kill -9` right after this step (no cleanup, no checkpoint), to test resuming
        if (const char* die = std::getenv("PRAC_TEST_DIE_AFTER_STEP"))
            if (std::atoi(die) == step + 1) std::_Exit(137);
        kill_point("train.step_done");  // tests: a signal between two steps (common/kill_point.h)
        progress("start", step + 2);    // (the ranks' signal check comes before the next step)
        // tests: rank PRAC_TEST_NUDGE_RANK flips the lowest bit of its first parameter after this step, to test
        // check_replicas
        if (const char* nudge = std::getenv("PRAC_TEST_NUDGE_AFTER_STEP"))
            if (std::atoi(nudge) == step + 1 && rank == std::atoi(std::getenv("PRAC_TEST_NUDGE_RANK") ?: "0")) {
                unsigned char first[sizeof(*model.params_memory)];
                be.download(first, model.params_memory, sizeof first);
                first[0] ^= 1;
                be.upload(model.params_memory, first, sizeof first);
            }
    }

    // After the last step: warnings, the last checkpoint, the final evaluation, --save, a sample (the sample last: one
    // that fails, or is stopped by a signal, loses nothing).
    int finish() {
        stop_signals_at_end();
        if (skipped_total) std::printf("warning: %d steps were skipped for non-finite values\n", skipped_total);
        // a run of padding alone trained nothing: not a result (the validation data's refusal of the same data is
        // an error too)
        CHECK_USER(padding_steps == 0 || padding_steps < steps_done - start_step,
                   "every one of this run's %d steps was padding: nothing was learned\n---> HINT: the training data "
                   "(--train-data) has no token to learn from; check its rows (prep_data's row shards of empty "
                   "documents are all padding)", steps_done - start_step);
        if (padding_steps && rank == 0)
            std::printf("warning: %d of this run's %d steps were padding alone and made no update\n", padding_steps,
                        steps_done - start_step);
        int64_t failures = 0;
        for (const auto& s : model.sites) failures += s.failures;
        if (failures) std::printf("warning: %lld PRAC basis refreshes failed and kept the previous basis (see above)\n",
                                  (long long)failures);
        check_replicas(opts.steps);  // before the final evaluation: copies that parted get no score
        // a stop signal during the last step: as between steps (checkpoint, exit 128 + signal; a --resume of it runs
        // the final evaluation). Without a --ckpt-dir that would lose the whole run: it goes on, and says so at the end.
        int stopped = stop_requested();
        if (stopped && !opts.ckpt_dir.empty()) return stop(opts.steps, stopped);
        // the last checkpoint before the final evaluation, which may be long: a kill during it loses nothing
        checkpoint(opts.steps, train_data->get_state());
        long long seen = 0;
        auto e0 = std::chrono::steady_clock::now();
        float vl = validation_loss(&seen);
        const ChoiceScore hs = hellaswag_score();
        count_eval_time(e0);
        double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
        // a resumed process's time is its own (the earlier processes' are in their outputs and the log's steps)
        std::printf("final | val loss %.4f | perplexity %.3f | %lld tokens | %s %s (evaluation %s)\n", vl,
                    std::exp((double)vl), seen, run_clock(wall).c_str(),
                    start_step ? format("in this process, resumed at step %d", start_step).c_str() : "total",
                    run_clock(eval_ms / 1000.0).c_str());
        // the memory the run held at its peak, PRAC's point (it was in --log's records alone)
        std::printf("memory | peak %.1f MiB allocated %s%s (what --plan's total counts)\n", be.peak_bytes / 1048576.0,
                    cpu_backend ? "in host memory" : "on the GPU, the CUDA context's and libraries' own aside",
                    ranks > 1 ? ", by rank 0" : "");
        // (a resume of a finished run, to --save again or sample, evaluates again: its log has the record once; one
        // killed during the final evaluation gets it)
        const std::string more = hellaswag_said(hs, "final | ");
        if (start_step < opts.steps || !log.ends_with(MetricsLog::eval_record(opts.steps, vl, seen, false, more)))
            log.eval(opts.steps, vl, seen, false, more);
        if (!log.write_error.empty()) fail_unwritable_log(opts.steps);  // (a resume evaluates again)
        // a stop signal during the final evaluation (a collective: every rank is here); one during --save or the
        // sample, which rank 0 alone runs, after them (stop_at_end)
        if (!stopped) stopped = stop_requested();
        if (!opts.save.empty() && rank == 0) {
            progress("--save", opts.steps);
            std::vector<std::string> removed;
            try {
                StagedDir out(opts.save);  // a failure leaves the directory as it was
                model.save_weights(out.file("model.safetensors"));
                kill_point("save.weights_written");  // tests: a failure between the files (common/kill_point.h)
                write_hf_export(out.tmp, cfg, data_tokenizer_file(cfg.arch, opts, builtin_data_dir()));
                removed = out.commit("model.safetensors", is_hf_model_file);
            } catch (const UserError& e) {  // after the whole training: say where its weights still are
                fail("%s\n--save failed after the training: %s", e.what(),
                     opts.ckpt_dir.empty()
                         ? "its weights were in this process alone and are lost with it (a --ckpt-dir keeps them: "
                           "its final checkpoint can be --resume'd to save again)"
                         : format("its weights are in the final checkpoint in %s: run the same command with "
                                  "--resume%s to save again", opts.ckpt_dir.c_str(),
                                  opts.overwrite ? " in place of --overwrite" : "").c_str());
            }
            std::printf("saved %s: model.safetensors, config.json, generation_config.json and the tokenizer (a Hugging "
                        "Face model directory)\n%s", opts.save.c_str(), earlier_files_removed(removed).c_str());
        }
        sample();  // (a stop signal ends it with the tokens so far)
        // a stop signal during the run's end: what it writes was written; said, and its exit code (a scheduler's
        // stop is not reported as a finished job)
        if (!stopped) stopped = stop_at_end();
        if (stopped) {
            std::string written = opts.ckpt_dir.empty() ? "" : "the final checkpoint";
            if (!opts.save.empty()) written += written.empty() ? "--save" : " and --save";
            std::printf("received signal %d during the run's end: its evaluation and saves finished%s; exit %d\n", stopped,
                        written.empty() ? " (nothing is saved: no --ckpt-dir or --save)"
                                        : (": " + written + " written").c_str(), 128 + stopped);
        }
        return stopped ? 128 + stopped : 0;
    }

    // A checkpoint after `completed` steps with the data at `data`: gathers the optimizer shards and every rank's
    // PRAC state; rank 0 writes.
    void checkpoint(int64_t completed, const DataLoaderState& data) {
        // a stop right after a periodic checkpoint (a signal, a divergence) would write the same one again
        if (opts.ckpt_dir.empty() || completed == last_checkpoint) return;
        last_checkpoint = completed;
        progress("checkpoint", (int)completed);
        check_replicas(completed);
        const size_t n = model.param_buffer_numel;
        RunState rs;
        rs.step = completed;
        rs.adam_t = opt->steps();
        rs.data = data;
        rs.ranks = ranks;
        rs.zero = opts.zero;
        rs.prac_shared = opts.prac_shared;
        rs.backend = backend_of_run<Backend>();
        rs.cpu_threads = cpu_threads;
        rs.skipped_in_a_row = skipped_in_a_row;
        rs.skipped_total = skipped_total;
        rs.eval_due_at = eval_due_at == completed ? eval_due_at : -1;
        rs.replaces_earlier_run = opts.overwrite && !wrote_checkpoint;
        wrote_checkpoint = true;
        rs.train_shards = train_shards;
        rs.val_sizes = data_fingerprint(val.files(), false);
        rs.logged_loss = logged_step == completed ? logged_loss : "";  // (not at a NaN stop: it logged the next step)
        rs.log_unwritten = log.unwritten;
        // optimizer state, whole: ZeRO-1 shards (AdamW's tensors of shard_hi - shard_lo elements) are gathered
        for (const OptimizerStateTensor& t : opt->state()) {
            if (t.u8) {  // 8-bit AdamW's codes (make_optimizer refuses to shard them)
                std::vector<uint8_t> bytes(t.numel);
                be.download(bytes.data(), t.u8, t.numel);
                rs.optim_u8.push_back({t.name, std::move(bytes)});
                continue;
            }
            std::vector<float> full;
            if (grads.sharded) {
                full.assign(n, 0.0f);
                be.download(full.data() + grads.shard_lo, t.data, t.numel * sizeof(float));
                comm.all_gather(full.data(), n);
            } else {
                full.resize(t.numel);
                be.download(full.data(), t.data, t.numel * sizeof(float));
            }
            rs.optim.push_back({t.name, std::move(full)});
        }
        // PRAC: rank r's tensors travel to rank 0 by broadcast, their list first: ranks may hold different ones (with
        // --prac-refresh-overlap, a rank whose micro-batches of a refresh step were all padding began no refresh
        // there, so it has no refresh in flight where the others have)
        PracStateBuffers local;
        std::vector<SafeTensorWrite> mine;
        prac_state_tensors(be, model.sites, local, mine);
        int owners = opts.prac_shared ? 1 : ranks;
        for (int r = 0; r < owners; r++) {
            std::string prefix = owners == 1 ? "" : format("rank%d.", r);
            std::vector<SafeTensorWrite> theirs = ranks > 1 ? broadcast_tensor_list(comm, mine, r) : mine;
            for (size_t i = 0; i < theirs.size(); i++) {
                const SafeTensorWrite& t = theirs[i];
                size_t bytes = safetensors_dtype_size(t.dtype);
                for (int64_t d : t.shape) bytes *= (size_t)d;
                std::vector<char> buf(bytes);
                if (rank == r) std::memcpy(buf.data(), mine[i].data, bytes);
                if (ranks > 1) comm.broadcast(buf.data(), bytes, r);
                if (rank != 0) continue;  // only rank 0 writes: the others keep no copy of every rank's bases
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
            log.unwritten_saved = rs.log_unwritten.size();
        }
        comm.barrier();  // nobody runs ahead of a checkpoint that is not committed yet
    }

    // --prac-refresh-overlap D on the GPU: the refresh worker solves one refresh at a time, and staggered site-layers
    // begin theirs every T / units steps, so a solve has at most that many steps before the next begin waits for it:
    // a larger D only puts its install off. Said once, before the run (the begin that waits slows its step).
    void notice_overlap_gap() const {
        if (prac.mode == PracMode::NONE || prac.overlap < 2 || !prac.stagger) return;
        const int units = model.sched.units, gap = std::min(prac.t1, prac.t2) / units;
        if (prac.overlap <= std::max(gap, 1)) return;
        if (gap == 0)
            std::printf("notice: --prac-refresh-overlap %d: with T1 = %d, T2 = %d and %d refresh units, several "
                        "site-layers begin a refresh on one step, and the GPU's refresh worker solves one at a time, "
                        "so each begin waits for the solve before it: the overlap hides little (raise --prac-t1/t2)\n",
                        prac.overlap, prac.t1, prac.t2, units);
        else
            std::printf("notice: --prac-refresh-overlap %d: with T1 = %d, T2 = %d and %d refresh units, a site-layer "
                        "begins a refresh every %d step(s), and the GPU's refresh worker solves one at a time, so a "
                        "solve has at most %d step(s) before the next begin waits for it: --prac-refresh-overlap %d "
                        "gives it the same time and installs it sooner\n",
                        prac.overlap, prac.t1, prac.t2, units, gap, gap, gap);
    }

    // Every rank's parameters (and, without ZeRO, its optimizer state) must be the same bits after every step: nothing
    // in an update depends on the rank (its data and PRAC bases enter only through the averaged gradients). But a GPU
    // library that is bitwise reproducible only on one GPU model (cuBLAS and cuSOLVER in Muon and GaLore) on a mixed
    // cluster, or a bug, would let them part without a sign, and a checkpoint holds rank 0's alone. So before each
    // checkpoint and at the end of a run the ranks compare checksums of theirs; a difference stops the run (every
    // rank fails alike) before anything is written.
    int64_t replicas_checked_at = -1;
    void check_replicas(int64_t completed) {
        if (ranks == 1 || replicas_checked_at == completed) return;
        replicas_checked_at = completed;
        auto checksum = [&](const void* p, size_t bytes, uint64_t h) {  // in 16 MiB pieces: no host copy of it all
            std::vector<unsigned char> piece(std::min<size_t>(bytes, 16u << 20));
            for (size_t off = 0; off < bytes; off += piece.size()) {
                size_t len = std::min(piece.size(), bytes - off);
                be.download(piece.data(), (const unsigned char*)p + off, len);
                h = state_checksum(piece.data(), len) ^ (h * 0x9e3779b97f4a7c15ULL + len);
            }
            return h;
        };
        uint64_t params = checksum(model.params_memory, model.param_buffer_numel * sizeof(*model.params_memory), 1);
        uint64_t state = 2;
        if (!grads.sharded && opt)  // ZeRO-1: each rank holds its own shard of the state (--steps 0: none)
            for (const OptimizerStateTensor& t : opt->state()) state = checksum(t.ptr(), t.nbytes(), state);
        std::vector<std::string> all = all_gather_string(comm, format("%016llx %016llx", (unsigned long long)params,
                                                                      (unsigned long long)state));
        std::string differ, sums = "rank 0 " + all[0];
        bool params_differ = false;
        for (int r = 1; r < ranks; r++)
            if (all[r] != all[0]) {
                differ += format("%s%d", differ.empty() ? "" : ", ", r);
                sums += format(", rank %d %s", r, all[r].c_str());
                params_differ |= all[r].substr(0, 16) != all[0].substr(0, 16);
            }
        if (differ.empty()) return;
        fail("the ranks' copies of the model parted by step %lld: rank(s) %s hold other %s than rank 0 (checksums "
             "of parameters and optimizer state: %s); nothing was written for this step\n---> HINT: %sif it "
             "happens again, run every rank %s, and report it with the command line",
             (long long)completed, differ.c_str(), params_differ ? "parameters" : "optimizer state", sums.c_str(),
             opts.ckpt_dir.empty() ? "" : "resume from the last checkpoint (its replicas agreed); ",
             cpu_backend ? "with one build of this program and its libraries (OpenBLAS) and one OMP_NUM_THREADS"
                         : "on one GPU model");
    }

    // Seconds left: the remaining steps at the mean step time so far, the evaluations still due (periodic ones and
    // the final one) at the mean evaluation time so far, before the first evaluation its forward-only micro-batches
    // estimated at a third of a training micro-batch's forward and backward, and the checkpoints still due (periodic
    // ones, of this step too, and the last) at the mean of those written (none before the first). The mean step
    // leaves out this process's first once there are others: the start-up's (allocations, every PRAC site's first
    // refresh: 5.8 s against 0.3 s a step on gpt2-tiny made the ETA at step 10 six times too long).
    double eta_seconds(int step) const {
        const int done = step - start_step + 1, left = opts.steps - step - 1;
        const double step_ms = done > 1 ? (total_ms - first_step_ms) / (done - 1) : total_ms;
        const int ckpts_left = opts.ckpt_dir.empty() ? 0 : checkpoints_from(step + 1, opts.steps, opts.ckpt_every);
        const double ckpts_ms = ckpts_timed ? ckpt_ms / ckpts_timed * ckpts_left : 0;
        int evals_left = 1;
        for (int s = step + 1; s < opts.steps; s++) evals_left += eval_due(s);
        double one_eval_ms = evals_timed ? eval_ms / evals_timed : 0;
        if (!evals_timed) {
            const long long batches = eval_batches_per_rank(opts.eval_tokens, B, T, ranks, val.steps_per_epoch()) +
                                      (hellaswag_rows + (long long)ranks * B - 1) / ((long long)ranks * B);
            one_eval_ms = step_ms / opts.grad_accum * batches / 3.0;
        }
        return (step_ms * left + one_eval_ms * evals_left + ckpts_ms) / 1000.0;
    }
    void count_eval_time(std::chrono::steady_clock::time_point since) {
        eval_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
        evals_timed++;
    }

  private:
    // What can fail before the run starts, checked before anything is printed (an error is the last thing a failed
    // run prints): earlier runs' files, --save, the data patterns, --init-from, the checkpoint to resume. Returns the
    // validation data's path for the member initializer that follows.
    std::string check_before_start() {
        const std::string run_dir = claim_checkpoint_dir(opts.ckpt_dir, opts.resume, !opts.eval_only && rank == 0);
        refuse_output_in_checkpoints(opts.save, "--save", run_dir, true);
        refuse_output_in_checkpoints(opts.log, "--log", run_dir, false);
        if (!opts.dump_site.empty()) refuse_output_in_checkpoints(opts.dump_path, "--dump-path", run_dir, false);
        refuse_colliding_outputs({{opts.save, "--save", save_writes_name},
                                  {opts.log, "--log", nullptr},
                                  {opts.dump_site.empty() ? "" : opts.dump_path, "--dump-path", nullptr}});
        check_no_earlier_run(opts);
        const std::vector<std::string> train_files =
            opts.eval_only ? std::vector<std::string>() : data_files_of(opts.train_data, "--train-data");
        const std::vector<std::string> val_files = data_files_of(opts.val_data, "--val-data");
        if (rank == 0) data_warning = shared_data_files_warning(train_files, val_files);
        std::vector<std::pair<std::string, const char*>> inputs;
        if (!opts.init_from.empty() && !opts.resume) {  // (a resume continues with the checkpoint's weights)
            std::string w = resolve_weights_path(opts.init_from);
            inputs.push_back({w, "--init-from"});
            refuse_sharded_checkpoint(opts.init_from);
            verify_init_from_checkpoint(opts.init_from);
            struct stat st;  // (a named pipe's open waits for a writer: said here, before the run's tables)
            if (stat(w.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
                fail("--init-from %s is not a regular file (a pipe or a device)\n---> HINT: pass a .safetensors file or "
                     "a directory holding model.safetensors (what --save writes)", w.c_str());
            if (access(w.c_str(), R_OK) != 0) {
                const int why = errno;
                const std::string torch = dir_of(w) + "/pytorch_model.bin";
                fail("--init-from: cannot open %s (%s)\n---> HINT: %s", w.c_str(), std::strerror(why),
                     access(torch.c_str(), F_OK) == 0
                         ? format("the directory holds %s, PyTorch's format: convert it with transformers' "
                                  "save_pretrained(DIR, safe_serialization=True)", torch.c_str()).c_str()
                         : "pass a .safetensors file or a directory holding model.safetensors (what --save writes)");
            }
        }
        for (const std::string& f : train_files) inputs.push_back({f, "--train-data"});
        for (const std::string& f : val_files) inputs.push_back({f, "--val-data"});
        refuse_outputs_among_inputs({{opts.log, "--log", nullptr},
                                     {opts.dump_site.empty() ? "" : opts.dump_path, "--dump-path", nullptr}},
                                    inputs);
        if (!opts.save.empty() && rank == 0) claim_save_dir(opts.save);
        if (opts.resume) resume_path = resume_checkpoint();
        opts.ckpt_dir = run_dir;
        // (rank 0 writes it; a resumed run writes the same dump its killed run may have written)
        if (!opts.dump_site.empty() && rank == 0)
            check_output_file(opts.dump_path, "--dump-path", opts.overwrite, opts.resume);
        return opts.val_data;
    }
    // Every rank must read one data set. Their flags are the same, but node-local copies (or another working
    // directory) can hold other files under those names, and the ranks then trained on a mix with exit 0 (a
    // checkpoint records rank 0's files alone). The ranks compare their files' sizes and, where the resume key has
    // them (`fingerprint`: data_fingerprint, with --ckpt-dir) or `checksums` asks for them, their checksums; a
    // difference fails on every rank. (Validation files and --hellaswag's are read whole by every rank: their
    // checksums cost a read from the page cache, and same-size copies that differ gave a validation loss of two data
    // sets, exit 0.)
    void check_ranks_read_the_same_data(const std::vector<std::string>& files, const std::string& fingerprint,
                                        const char* flag, bool checksums = false) {
        if (ranks == 1) return;
        const std::vector<std::string> all =
            all_gather_string(comm, fingerprint.empty() ? data_fingerprint(files, checksums) : fingerprint);
        const std::vector<std::string> first = fingerprint_entries(all[0]);
        for (int r = 1; r < ranks; r++) {
            const std::vector<std::string> other = fingerprint_entries(all[r]);
            if (other == first) continue;
            std::string what = format("rank 0 has %zu file(s), rank %d %zu", first.size(), r, other.size());
            for (size_t i = 0; i < std::min(first.size(), other.size()) && i < files.size(); i++)
                if (first[i] != other[i]) {
                    const std::string size0 = first[i].substr(0, first[i].find(':'));
                    const std::string size1 = other[i].substr(0, other[i].find(':'));
                    what = size0 != size1 ? format("%s is %s bytes on rank 0, %s on rank %d", files[i].c_str(),
                                                   size0.c_str(), size1.c_str(), r)
                                          : format("%s has other content on rank %d than on rank 0 (size:checksum "
                                                   "%s vs %s)", files[i].c_str(), r, other[i].c_str(),
                                                   first[i].c_str());
                    break;
                }
            fail("%s: the ranks read other data: %s\n---> HINT: every rank must see the same files (copy the data "
                 "to every node alike, or use a shared file system; run every rank in one working directory)", flag,
                 what.c_str());
        }
    }
    // Every rank must build one model from one set of weights: a --model config.json or an --init-from directory
    // is read by each rank, and node-local copies that differ made a mix of models with exit 0 (another eps), or an
    // MPI error with no word of why (another layer count), or a run whose ranks parted at its first check (other
    // weights). The ranks compare the config they built and the --init-from file's size and checksum.
    void check_ranks_build_the_same_model() {
        if (ranks == 1) return;
        const std::string config = format("vocab %d (padded %d), %d layers, %d heads, width %d, MLP width %d, %d "
                                          "positions, norm eps %.9g, rope_theta %.9g, tied embeddings %d",
                                          cfg.vocab_size, cfg.padded_vocab_size, cfg.num_layers, cfg.num_heads,
                                          cfg.channels, cfg.hidden, cfg.max_seq_len, cfg.norm_eps, cfg.rope_theta,
                                          (int)cfg.tied_embeddings);
        const std::string weights = opts.init_from.empty() || opts.resume
                                        ? "" : data_fingerprint({resolve_weights_path(opts.init_from)}, true);
        const std::vector<std::string> configs = all_gather_string(comm, config), files = all_gather_string(comm, weights);
        for (int r = 1; r < ranks; r++) {
            if (configs[r] != configs[0])
                fail("--model %s: the ranks built other models: rank 0 has %s; rank %d has %s\n---> HINT: every rank "
                     "must read the same config.json (copy it to every node alike, or use a shared file system)",
                     opts.model.c_str(), configs[0].c_str(), r, configs[r].c_str());
            if (files[r] != files[0])
                fail("--init-from %s: the ranks read other weights (size:checksum %s on rank 0, %s on rank %d)\n---> "
                     "HINT: every rank must read the same file (copy it to every node alike, or use a shared file "
                     "system)", resolve_weights_path(opts.init_from).c_str(), files[0].c_str(), files[r].c_str(), r);
        }
    }
    // --resume's checkpoint: rank 0 picks it (checkpoint_resolve, which also tidies the directory) and tells the
    // others. Ranks that picked their own could see different directories (a node that has not seen a rename yet,
    // a node-local --ckpt-dir) and would then run different steps' collectives: a hang, not an error.
    std::string resume_checkpoint() {
        std::string path;
        if (rank == 0) path = checkpoint_resolve(opts.ckpt_dir);
        if (ranks > 1) broadcast_string(comm, path, 0);
        CHECK_USER(access((path + "/" + CKPT_STATE_FILE).c_str(), R_OK) == 0, "rank %d cannot read %s/%s, the "
                   "checkpoint rank 0 resumes from (%s)\n---> HINT: every rank must see --ckpt-dir (a shared file "
                   "system, or the same copy on every node)", rank, path.c_str(), CKPT_STATE_FILE, std::strerror(errno));
        // each rank loads its own copy: node-local copies that differ trained copies of the model that parted, said
        // at the first checkpoint or the end, the steps since the resume lost. The marker lists every file's size
        // and checksum: the ranks compare it.
        if (ranks > 1) {
            const std::vector<std::string> markers =
                all_gather_string(comm, read_file_bytes(path + "/" + CKPT_COMPLETE_FILE));
            for (int r = 1; r < ranks; r++)
                CHECK_USER(markers[r] == markers[0], "rank %d sees another checkpoint at %s than rank 0 does (its %s "
                           "marker, which lists each file's size and checksum, differs)\n---> HINT: every rank must "
                           "see the same --ckpt-dir (a shared file system, or the same copy on every node)", r,
                           path.c_str(), CKPT_COMPLETE_FILE);
            // The same marker over a damaged file (a node-local copy that went bad): its rank trained another model,
            // said at the next checkpoint, where resuming again met the same copy. Each copy is checked against the
            // marker's checksums once: checkpoint_resolve did rank 0's; a rank whose directory is that one (this
            // host, the same device and inode) or an earlier rank's skips it.
            struct stat st{};
            const std::string copy = stat(path.c_str(), &st) == 0
                                         ? format("%s:%llu:%llu", host_tag().c_str(), (unsigned long long)st.st_dev,
                                                  (unsigned long long)st.st_ino)
                                         : format("rank %d", rank);  // (unreadable: its own, checked and failing)
            const std::vector<std::string> copies = all_gather_string(comm, copy);
            std::string why;
            if (rank > 0 && std::find(copies.begin(), copies.begin() + rank, copy) == copies.begin() + rank &&
                !checkpoint_verify(path, &why) && why.empty())
                why = "it does not verify";
            const std::vector<std::string> whys = all_gather_string(comm, why);
            for (int r = 1; r < ranks; r++)
                CHECK_USER(whys[r].empty(), "rank %d's copy of the checkpoint %s is damaged: %s\n---> HINT: copy rank "
                           "0's checkpoint to that node again (or use a shared file system)", r, path.c_str(),
                           whys[r].c_str());
        }
        return path;
    }

    // --resume: the checkpoint's settings and training data must be this run's (a bit-exact continuation); its
    // warmup is kept when --warmup is not given (the default, 10% of --steps, would change with a new --steps).
    void check_resume() {
        // the other trainer's checkpoint: said as such (the hint to resume with its settings could not be followed)
        try {
            model_config_load(cfg.arch, resume_path + "/" + CKPT_CONFIG_FILE);
        } catch (const UserError& e) {
            fail("cannot resume %s: its %s: %s", resume_path.c_str(), CKPT_CONFIG_FILE, e.what());
        }
        TrainState st = read_state(resume_path + "/" + CKPT_STATE_FILE);
        // first: a log that ends before the checkpoint says the checkpoint is an earlier run's (an --overwrite run
        // stopped before its first one); that run's settings, compared next, were a hint to follow into this refusal.
        // A run stopped by a log it could not write kept the records from the failed one on (resume() writes them):
        // its log ends a step early when the step's own record failed.
        if (st.has_meta("run.log_unwritten")) log_unwritten = split_at(st.get("run.log_unwritten"), '\n');
        const bool lacks_step = !log_unwritten.empty() && log_unwritten[0].rfind("{\"type\":\"step\",", 0) == 0;
        log.check_resume_at((int)st.step - lacks_step, resume_path,
                            st.meta.count("run.logged_loss") && !lacks_step ? st.meta.at("run.logged_loss") : "");
        if (!opts.was_given("--warmup") && st.meta.count("run.warmup")) {
            int64_t w = st.get_i64("run.warmup");
            CHECK_USER(w >= 0 && w <= INT32_MAX, "%s: run.warmup = %lld is not a step count", resume_path.c_str(),
                       (long long)w);
            opts.warmup = (int)w;
        }
        CHECK_USER(st.step >= 0 && st.step <= opts.steps,
                   "cannot resume %s: it is a checkpoint after step %lld, beyond --steps %d\n---> HINT: pass --steps "
                   "%lld or more (--steps may extend a run, not end it before its checkpoint)", resume_path.c_str(),
                   (long long)st.step, opts.steps, (long long)st.step);
        // every other setting first (a checkpoint of another model is refused as such), then the step's samples
        check_resume_keys(st, opts, cfg, resume_keys_but("grad_accum"));
        if (!same_step_samples(st)) check_compatible(st, "run.grad_accum", std::to_string(opts.grad_accum));
        if (st.meta.count("run.train_shards")) check_same_data(st);
        else check_compatible(st, "run.train_data", opts.train_data);  // a checkpoint of an older build
    }

    // The resume keys without one (a setting compared otherwise).
    std::vector<std::pair<std::string, std::string>> resume_keys_but(const char* key) const {
        std::vector<std::pair<std::string, std::string>> keys = resume_keys(opts, cfg);
        keys.erase(std::remove_if(keys.begin(), keys.end(), [&](const auto& k) { return k.first == key; }), keys.end());
        return keys;
    }

    // The checkpoint's step and this run's take the same samples (ranks x --grad-accum x --batch-size, as
    // --global-batch keeps it) with another --grad-accum: the step reads the same data, split over other ranks (up to
    // the epoch's end, whose dropped remainder depends on ranks x B), and --grad-accum is compared as that. Refused,
    // in sequences per step, where --global-batch is given and differs from the run's, or where another --grad-accum
    // on other ranks changes it too; false where --grad-accum alone is compared (the same --grad-accum on other
    // ranks is accepted: a step then takes the new ranks' samples, as resume()'s notice says).
    bool same_step_samples(const TrainState& st) const {
        if (!st.has_meta("run.grad_accum") || !st.has_meta("run.ranks")) return false;
        const int64_t saved_k = st.get_i64("run.grad_accum"), saved_ranks = st.get_i64("run.ranks");
        // (values out of range are refused by the key compare and by resume())
        if (saved_k < 1 || saved_k > INT32_MAX || saved_ranks < 1 || saved_ranks > (1 << 20)) return false;
        const __int128 saved_n = (__int128)saved_ranks * saved_k * B, n = (__int128)ranks * opts.grad_accum * B;
        if (saved_n == n) return saved_k != opts.grad_accum;
        if (!opts.global_batch && (saved_k == opts.grad_accum || saved_ranks == ranks))
            return false;  // (the keys say "--grad-accum 2, this run has 3"; the same K on other ranks: the notice)
        auto split = [&](int64_t r, int64_t k) {
            return format("%lld rank(s) x --grad-accum %lld x --batch-size %d", (long long)r, (long long)k, B);
        };
        const bool fits = saved_n % ((int64_t)ranks * B) == 0 && saved_n <= INT32_MAX;
        fail("cannot resume from %s: its steps took %lld sequences each (%s), this run's would take %lld (%s)\n"
             "---> HINT: resume with --global-batch %lld%s, or start a new run in another checkpoint directory",
             resume_path.c_str(), (long long)saved_n, split(saved_ranks, saved_k).c_str(), (long long)n,
             split(ranks, opts.grad_accum).c_str(), (long long)saved_n,
             fits ? format(" (--grad-accum %lld here)", (long long)(saved_n / ((int64_t)ranks * B))).c_str()
                  : format(" on a number of ranks that divides it into micro-batches of %d", B).c_str());
    }

    void check_same_data(const TrainState& st) {
        const std::string& saved = st.get("run.train_shards");
        if (saved == train_shards) return;
        std::vector<std::string> theirs = fingerprint_entries(saved), ours = fingerprint_entries(train_shards);
        std::string saved_pattern = st.meta.count("run.train_data") ? st.meta.at("run.train_data") : "?";
        size_t i = 0;
        while (i < theirs.size() && i < ours.size() && theirs[i] == ours[i]) i++;
        std::string what = theirs.size() != ours.size()
                               ? format("it read %zu shard file(s) (--train-data %s), this run matches %zu",
                                        theirs.size(), saved_pattern.c_str(), ours.size())
                               : format("shard %zu of %zu differs: %s is not the file it read (size:checksum %s, this "
                                        "file %s)", i + 1, ours.size(), train_data->files()[i].c_str(),
                                        theirs[i].c_str(), ours[i].c_str());
        fail("cannot resume from %s: the training data differs from its run's: %s\n---> HINT: pass --train-data "
             "naming the same files (any path spelling of them works), or start a new run in another --ckpt-dir",
             resume_path.c_str(), what.c_str());
    }

    // The run's banner: the data-parallel line, the config and options tables.
    void announce(const RunSetup& s) {
        if (ranks > 1)
            std::printf("data parallel: %d ranks (%s), ZeRO-%d%s\n", ranks, comm.name(), opts.zero,
                        prac.mode == PracMode::NONE ? ""
                        : opts.prac_shared          ? ", PRAC subspace shared"
                                                    : ", PRAC subspace per rank");
        print_table(s.program, model_config_rows(cfg));
        print_table(opts.eval_only ? "evaluation" : "training", train_options_rows(opts, cfg, ranks));
        std::printf("%s%s", unused_flags_notice(opts, ranks).c_str(), data_warning.c_str());
        // (with one rank unused_flags_notice says it; with more it depends on the communicator, known here)
        if (ranks > 1 && opts.was_given("--overlap-comm") && (!comm.device_comm() || grads.sharded))
            std::printf("notice: --overlap-comm changes nothing in this run: %s\n",
                        !comm.device_comm() ? "the mpi communicator averages the gradients after backward (the "
                                              "overlap is NCCL's, --comm nccl on GPUs)"
                                            : "--zero 1 averages with one reduce-scatter after backward");
    }

    // Sites (shared subspace, --dump-site), weights (--init-from or fresh), the activation arena.
    void setup_model() {
        // --prac-shared-subspace: the Gram matrix of every refresh is averaged over the ranks before the
        // eigensolver (on the host through MPI for the CPU backend, on the device through NCCL for the CUDA
        // backend). A rank that only joins a refresh (gram_nothing: its micro-batches of that step were all
        // padding) adds a zero matrix: padding never enters the Gram matrix, as on one rank, where an all-padding
        // micro-batch is skipped.
        gram_allreduce = [this](float* g, size_t n) {
            if (gram_nothing) be.zero(g, n * sizeof(float));
            if (DeviceComm* d = comm.device_comm()) d->allreduce_avg(g, n, DType::F32);
            else comm.allreduce_avg(g, n);
        };
        if (opts.prac_shared && ranks > 1)
            for (auto& s : model.sites) s.reduce_gram = &gram_allreduce;
        if (prac.mode != PracMode::NONE || prac.rso_rank > 0) print_site_table(model.sites, cfg.num_layers);
        if (int k = prac_spread_steps(prac.initial_spread, model.sched.units); k > 1 && prac.mode != PracMode::NONE) {
            const int units = model.sched.units;
            std::printf("PRAC first refreshes: spread over steps 0-%d, at most %d of the %d site-layers a step "
                        "(--prac-initial-spread %s%s); %s\n",
                        k - 1, (units + k - 1) / k, units, opts.prac_initial_spread.c_str(),
                        opts.prac_initial_spread == "auto" ? format(": the %d warmup steps", opts.warmup).c_str() : "",
                        prac.mode == PracMode::RAC ? "rac's bases are all random: this spreads their first draws alone"
                                                   : "until its own, a site-layer compresses with a random basis");
            // unit u's first refresh is on step floor(u k / units) (PracSchedule::first_refresh)
            int never = 0;
            for (int u = 0; u < units; u++) never += (int64_t)u * k / units >= opts.steps;
            if (never > 0 && prac.mode == PracMode::PRAC)  // (rac's bases are random anyway)
                std::printf("notice: the spread is longer than the run: %d of the %d site-layers have their first "
                            "refresh after its last step (--steps %d) and compress with a random basis throughout "
                            "(RAC's estimator, not PRAC's)\n---> HINT: lower --prac-initial-spread (at most %d "
                            "refreshes every site-layer in this run)\n", never, units, opts.steps, opts.steps);
        }
        if (std::strcmp(Backend::name, "cuda") == 0) notice_overlap_gap();
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
            if (rank == 0) model.dump = {opts.dump_site, opts.dump_layer, opts.dump_step, opts.dump_path};
        }
        const size_t padding = cfg.vocab_padding_parameters();
        std::printf("parameters: %zu (%.2fM)%s\n", model.num_parameters, model.num_parameters / 1e6,
                    padding ? format("; %zu as Hugging Face counts them, without the %d padded vocabulary rows",
                                     model.num_parameters - padding, cfg.padded_vocab_size - cfg.vocab_size).c_str()
                            : "");
        if (cfg.hidden_stride() != cfg.hidden)
            std::printf("MLP activations: rows %d elements apart for F = %d (--hidden-align %d)\n", cfg.hidden_stride(),
                        cfg.hidden, cfg.hidden_align);
        if (!opts.init_from.empty() && opts.resume) {  // (it said "loaded", then the checkpoint's replaced them)
            std::printf("notice: --resume continues with the checkpoint's weights; --init-from %s is not loaded\n",
                        opts.init_from.c_str());
            model.init_weights((uint64_t)opts.seed);  // replaced by resume()
        } else if (!opts.init_from.empty()) {
            std::string path = resolve_weights_path(opts.init_from);
            model.load_weights(path);
            std::printf("loaded weights from %s\n", path.c_str());
        } else {
            model.init_weights((uint64_t)opts.seed);
        }
        model.allocate_activations(B, T);
    }

    // The optimizer over the whole buffer, or this rank's shard under ZeRO-1 (AdamW); the memory line. None for
    // --steps 0 without --ckpt-dir or --plan (an evaluation, and --save, of the initial weights): its state (AdamW's
    // twice the parameters in fp32) was allocated and never read.
    void setup_optimizer() {
        size_t n = model.param_buffer_numel;
        const size_t live_before = be.live_bytes;  // what the optimizer allocates: state, master weights, scratch
        if (options_train(opts)) {
            opt = make_optimizer(be, optimizer_choice_from(opts), cfg, model.param_specs, n, grads.shard_lo,
                                 grads.shard_hi);
            init_master_weights(be, *opt, model.params_memory, n);
            opt->bind_sites(model.sites);
        }
        const size_t opt_bytes = be.live_bytes - live_before;
        std::printf("memory: parameters %.1f MiB | gradients %.1f MiB | optimizer %s | activations %.1f MiB | "
                    "live %.1f MiB\n", n * sizeof(typename Backend::act_t) / 1048576.0,
                    n * sizeof(typename Backend::grad_t) / 1048576.0,
                    !opt ? "none (--steps 0 trains nothing)"
                         : format("%.1f MiB%s", opt_bytes / 1048576.0,
                                  Backend::master_weights ? " (with fp32 master weights)" : "").c_str(),
                    (model.arena.acts_bytes + model.arena.bases_bytes) / 1048576.0, be.live_bytes / 1048576.0);
    }

    // --resume: weights, optimizer state (this rank's shard), PRAC bases, data position and step of the newest
    // complete checkpoint in --ckpt-dir; refuses a checkpoint of another configuration.
    void resume() {
        const size_t n = model.param_buffer_numel;
        const std::string& path = resume_path;
        TrainState st = read_state(path + "/" + CKPT_STATE_FILE);  // check_resume compared its settings
        const int64_t ranks_saved = st.get_i64("run.ranks"), zero_saved = st.get_i64("run.zero");
        CHECK_USER(ranks_saved >= 1 && ranks_saved <= (1 << 20) && (zero_saved == 0 || zero_saved == 1),
                   "corrupt checkpoint state %s/%s: run.ranks = %lld, run.zero = %lld (ranks in [1, 2^20], ZeRO 0 or "
                   "1)\n---> HINT: resume from an older checkpoint (pass its step_NNNNNNNN directory)", path.c_str(),
                   CKPT_STATE_FILE, (long long)ranks_saved, (long long)zero_saved);
        // (a checkpoint holds the optimizer state whole, ZeRO-1's shards gathered: any ranks, any --zero resume it)
        int saved_ranks = (int)ranks_saved, saved_zero = (int)zero_saved;
        // --prac-shared-subspace changes something only with PRAC on 2+ ranks: compared where both runs had those
        const bool saved_shared = st.has_meta("run.prac_shared") && st.get_i64("run.prac_shared") != 0;
        if (prac.mode != PracMode::NONE && saved_ranks > 1 && ranks > 1 && saved_shared != opts.prac_shared)
            fail("cannot resume %s: its %d ranks %s, this run's would %s\n---> HINT: resume %s "
                 "--prac-shared-subspace, as the run that wrote it", path.c_str(), saved_ranks,
                 saved_shared ? "shared one PRAC subspace" : "had a PRAC subspace each",
                 opts.prac_shared ? "share one" : "have one each", saved_shared ? "with" : "without");
        model.load_weights(path + "/" + CKPT_MODEL_FILE);
        weights_from_master_weights(be, st, model.params_memory, n);
        refuse_adamw8_of_every_tensor(st, *opt, path);
        for (const OptimizerStateTensor& t : opt->state()) {
            if (master_weights_from_fp32_weights(st, *opt, t)) {
                init_master_weights(be, *opt, model.params_memory, n);
                continue;
            }
            if (t.u8) {  // 8-bit AdamW's codes (never sharded)
                std::vector<uint8_t> bytes(t.numel);
                st.get_u8(t.name, bytes.data(), bytes.size());
                be.upload(t.u8, bytes.data(), t.numel);
                continue;
            }
            std::vector<float> full(grads.sharded ? n : t.numel);
            st.get_f32(t.name, full.data(), full.size());
            be.upload(t.data, full.data() + (grads.sharded ? grads.shard_lo : 0), t.numel * sizeof(float));
        }
        opt->steps() = (int)st.adam_t;
        opt->state_loaded();
        SafeTensorsFile f = safetensors_open(path + "/" + CKPT_STATE_FILE);
        // PRAC bases: one set ("prac.") when the subspace was shared or one rank wrote it, else one per rank. A rank
        // continues the set that is its own (the shared one, or its rank's); a rank the writer did not have draws
        // its bases at the next step from its own seed (never a copy of rank 0's: the ranks' draws must be
        // independent), continuing rank 0's refresh counters.
        const bool one_set = saved_shared || saved_ranks == 1;
        const bool has_own = one_set ? (opts.prac_shared || rank == 0) : rank < saved_ranks;
        prac_state_load(be, model.sites, f, one_set ? "prac." : format("rank%d.prac.", has_own ? rank : 0),
                        has_own);
        const int first_new = one_set ? 1 : saved_ranks;
        const bool several = ranks - first_new > 1;
        if (prac.mode != PracMode::NONE && !opts.prac_shared && ranks > first_new)
            std::printf("notice: the checkpoint holds the PRAC bases of %d rank(s); this run has %d: rank%s %d%s "
                        "draw%s new bases at the next step, the others continue theirs\n", first_new, ranks,
                        several ? "s" : "", first_new, several ? format("-%d", ranks - 1).c_str() : "",
                        several ? "" : "s");
        if (saved_ranks == ranks && ranks > 1 && saved_zero != opts.zero)
            std::printf("notice: the checkpoint was written with --zero %d, this run has --zero %d: the gradient norm "
                        "is summed in another order (ZeRO-1 per shard), so the continuation is not bit-exact "
                        "(--zero %d makes it so)\n", saved_zero, opts.zero, saved_zero);
        // (check_resume accepted another --grad-accum only with the step's samples kept: same_step_samples)
        const int64_t saved_k = st.get_i64("run.grad_accum"), saved_n = saved_ranks * saved_k * B,
                      step_n = (int64_t)ranks * opts.grad_accum * B;
        const std::string samples =
            saved_k != opts.grad_accum
                ? format("each step reads the run's next %lld samples as before (up to the epoch's end), split as %d "
                         "rank(s) x --grad-accum %d instead of %d x %lld, and sums them in another order (not "
                         "bit-exact)", (long long)step_n, ranks, opts.grad_accum, saved_ranks, (long long)saved_k)
                : format("a step now takes %lld sample%s instead of %lld (the data goes on from where it stopped%s)",
                         (long long)step_n, step_n == 1 ? "" : "s", (long long)saved_n,
                         saved_n % ((int64_t)ranks * B) == 0
                             ? format("; --global-batch %lld keeps the run's", (long long)saved_n).c_str()
                             : "");
        if (saved_ranks != ranks)
            std::printf("notice: the checkpoint was written by %d rank(s), this run has %d: %s%s\n", saved_ranks, ranks,
                        samples.c_str(),
                        (saved_zero && saved_ranks > 1) || grads.sharded
                            ? format("; the optimizer state, %s there, is %s here",
                                     saved_zero && saved_ranks > 1
                                         ? format("split over %d ranks (ZeRO-1)", saved_ranks).c_str()
                                         : "whole",
                                     grads.sharded ? format("split over %d", ranks).c_str() : "whole")
                                  .c_str()
                            : "");
        DataLoaderState d{st.get_i64("data.epoch"), st.get_i64("data.shard_index"), st.get_i64("data.sample_index"),
                          st.get_u64("data.rng_state")};
        train_data->set_state(d);
        start_step = steps_done = (int)st.step;
        last_checkpoint = start_step;  // (not written again by a stop before the next step, or a finished run resumed)
        if (st.has_meta("run.eval_due_at") && st.get_i64("run.eval_due_at") == start_step) eval_due_at = start_step;
        if (!log_unwritten.empty() && opts.log.empty() && rank == 0)
            std::printf("notice: %s keeps %zu record(s) that its run's --log could not take; this run has no --log, "
                        "so they are dropped (its checkpoints do not keep them)\n---> HINT: to keep them, --resume from "
                        "that checkpoint with --log (the run's, or a new file)\n", path.c_str(), log_unwritten.size());
        log.write_kept(log_unwritten);  // (check_resume: the records a log that could not be written lacks)
        if (st.has_meta("run.skipped_total")) {  // (written since the count was checkpointed)
            skipped_in_a_row = (int)st.get_i64("run.skipped_in_a_row");
            skipped_total = (int)st.get_i64("run.skipped_total");
        }
        notice_other_arithmetic(st, backend_of_run<Backend>(), cpu_threads);
        evaluation_notice(st, path);
        if (!opts.dump_site.empty() && opts.dump_step < start_step)
            std::printf("warning: --dump-step %d is before step %d, where this run resumes: nothing will be dumped\n",
                        opts.dump_step, start_step);
        else if (!opts.dump_site.empty() && !opts.overwrite && access(opts.dump_path.c_str(), F_OK) == 0)
            std::printf("notice: --dump-path %s exists: this resumed run replaces it at step %d (a redo of the stopped "
                        "run's dump of that step; a dump of another step there is lost)\n", opts.dump_path.c_str(),
                        opts.dump_step);  // (it was replaced without a word)
        std::string planned = st.meta.count("run.steps") ? st.meta.at("run.steps") : "";
        std::printf("resumed from %s at step %d of %d%s\n", path.c_str(), start_step, opts.steps,
                    !planned.empty() && planned != std::to_string(opts.steps)
                        ? format(" (the run was planned for %s steps: the schedule now spans %d, warmup %d)",
                                 planned.c_str(), opts.steps, opts.warmup).c_str()
                        : "");
        if (!opts.was_given("--warmup"))  // (the checkpoint's: a given one was said with the flags)
            std::printf("%s", long_warmup_notice(opts, format("the checkpoint's warmup of %d steps", opts.warmup)).c_str());
    }

    // whether the next training forward refreshes a basis: the step asks for it, or a site layer has none yet
    bool refresh_due() const {
        for (const auto& s : model.sites) {
            if (!s.compressed() || s.external) continue;
            if (model.sched.refresh_q1 || model.sched.refresh_q2 || model.sched.any_first_due()) return true;
            for (uint8_t h : s.has_basis)
                if (!h) return true;
        }
        return false;
    }
};
