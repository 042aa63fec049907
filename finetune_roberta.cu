// finetune_roberta: fine-tune a Hugging Face RoBERTa on one GLUE task (the PRAC paper's Table 5), on the CPU or a GPU.
// One epoch and one optimizer step read top to bottom in finetune_roberta() below. Where each part lives:
//   flags, data, model, optimizer, --resume, evaluation, memory report   train/finetune.h (FineTuner)
//   forward and backward, the PRAC sites                                 model/roberta.h
//   tokenizer, GLUE files, batches                                       data/roberta_tokenizer.h, data/glue*.h
//   the update                                                           train/optim_adamw.h, train/optim_rso.h
//   the device (the CUDA backend when a GPU is there or asked for)       train/launch.h (run_on_one_device)
#include <algorithm>

#include "model/config.h"
#include "train/comm.h"  // comm_launcher_size, comm_launcher_rank
#include "train/finetune.h"
#include "train/launch.h"

template <class Backend>
int finetune_roberta(Backend& be, FinetuneOptions& opts, const ModelConfig& cfg, const PracOptions& prac) {
    FineTuner<Backend> run(be, opts, cfg, prac);  // tokenizer, data, model and head, optimizer, --resume
    Roberta<Backend>& model = run.model;
    if (opts.eval_only) return run.evaluate_only();

    for (int epoch = run.epoch(); epoch < opts.epochs; epoch++) {
        while (run.next_step()) {  // this epoch's shuffled batches, from where --resume left it
            if (int signal = run.stop_requested()) return run.stop(signal);  // checkpoint, exit 128 + signal
            run.begin_step();                                                // zero grads, PRAC schedule, timer
            // accumulate the gradients of the step's micro-batches (--grad-accum), each padded to its longest row;
            // every labelled row weighs 1 / the step's labelled rows
            for (int m = 0; m < run.micro_batches(); m++) {
                run.load_micro_batch(m);
                model.train_forward(run.enc, run.grad_scale(), run.loss_divisor(m));  // loss: the step's rows' mean
                model.backward();
            }
            float norm = grad_norm(be, model.grads_memory, model.param_buffer_numel);
            float loss = be.loss_read();
            run.update(loss, norm);  // linear schedule, clipping, AdamW or RSO
            run.end_step();          // progress line with ETA, JSONL, --ckpt-every
        }
        run.end_epoch(epoch);  // dev metrics, best so far, checkpoint
    }
    return run.finish();  // best and final scores, last checkpoint, --save
}

int main(int argc, char** argv) {
    const char* program = "finetune_roberta";
    file_size_limit_as_error();
    try {
        FinetuneOptions opts;
        opts.precision = plan_precision_of_this_build();  // (the default: a --precision flag replaces it)
        parse_finetune_options(opts, argc, argv);
        if (opts.help) {
            std::printf("%s", finetune_help(program).c_str());
            check_stdout_written("the help");
            return 0;
        }
        // one process on one device: copies started by mpirun would each train the same run into the same files
        // (a PMIx launcher such as srun --mpi=pmix says no size, -1: a copy of rank 1 or more is one of several and
        // says so; rank 0, which may be alone, runs)
        const int copies = comm_launcher_size();
        if (copies > 1 && comm_launcher_rank() > 0) return 1;  // the refusal below is said once, by rank 0
        CHECK_USER(copies >= 0 || comm_launcher_rank() <= 0, "finetune_roberta runs as one process on one device, "
                   "and the launcher started this one as rank %d of several: each copy would train the same run and "
                   "write the same --log, checkpoints and --save (rank 0 goes on)\n---> HINT: run it as a single task of "
                   "the launcher, or without one", comm_launcher_rank());
        CHECK_USER(copies <= 1, "finetune_roberta runs as one process on one device, and the launcher started %d "
                   "(mpirun -np %d?): each would train the same run and write the same --log, checkpoints and --save"
                   "\n---> HINT: run it without mpirun (a GLUE task fits one GPU); data-parallel training is "
                   "train_gpt2's and train_llama's", copies, copies);
        const GlueTaskInfo& task = glue_task_info(glue_task_from_name(opts.task));
        if (!opts.plan) check_model_dir(opts.init_from, task);  // --plan reads config.json alone
        ModelConfig cfg = model_config_load(Arch::ROBERTA, opts.init_from + "/config.json");
        cfg.num_labels = task.num_labels;
        cfg.label_names = task.label_names;  // --save's id2label, as run_glue names the classes
        if (!opts.was_given("--max-len")) {
            opts.max_len = std::min(opts.max_len, cfg.max_seq_len);
            // the tokenizer's model_max_length, as transformers' tokenizer truncates (a directory this program saved
            // records the length it was fine-tuned at: its scores again)
            FILE* notes = opts.json ? stderr : stdout;  // (--plan --json: stdout is the JSON alone)
            const int tuned = tokenizer_max_length(opts.init_from, notes);
            if (tuned > 0 && tuned < opts.max_len) {
                opts.max_len = tuned;
                std::fprintf(notes, "--max-len %d: %s/tokenizer_config.json's model_max_length (transformers' "
                             "tokenizer truncates there too; pass --max-len for another)\n", tuned,
                             opts.init_from.c_str());
            }
            // (an older build saved lengths down to 4 for every task: a pair then kept no text, exit 0)
            check_max_len_holds_text(opts.max_len, task.task, " (the model's positions or its "
                                     "tokenizer_config.json's model_max_length)");
        }
        CHECK_USER(opts.max_len <= cfg.max_seq_len, "--max-len %d exceeds the model's %d positions (config.json's "
                   "max_position_embeddings minus the padding offset)\n---> HINT: pass --max-len %d or less",
                   opts.max_len, cfg.max_seq_len, cfg.max_seq_len);
        PracOptions prac = prac_options_from(opts);
        if (opts.optimizer == "rso") prac.rso_rank = opts.rso_rank;  // the linear sites store X·P (optim_rso.h)
        // --eval-only saves no activations: no compressed sites, buffers or refreshes (the flags' notice says so)
        if (opts.eval_only) prac.mode = PracMode::NONE, prac.rso_rank = 0;
        if (opts.plan) {
            opts.seq_len = opts.max_len;
            std::fputs(plan_unused_flags_notice(opts).c_str(), opts.json ? stderr : stdout);
            return print_plan(opts, cfg, prac);
        }
        closed_stdout_as_error();  // (after --help and --plan, which end quietly in a closed pipe, as filters do)
        const int code = run_on_one_device(opts, [&](auto& be) { return finetune_roberta(be, opts, cfg, prac); });
        // what the run printed is a result too (--eval-only's scores): lost to a full disk, not exit 0
        if (code == 0) check_stdout_written("the run's output");
        return code;
    } catch (const UserError& e) {
        say_error(nullptr, program, "error", e.what());
        remove_made_output_dirs_left_empty();  // (--save's, --ckpt-dir's, made by a run refused before it wrote them)
        return 1;
    } catch (const std::bad_alloc&) {
        say_error(nullptr, program, "error", OUT_OF_HOST_MEMORY);
        remove_made_output_dirs_left_empty();
        return 1;
    } catch (const std::exception& e) {
        say_error(nullptr, program, "internal error", e.what());
        remove_made_output_dirs_left_empty();
        return 2;
    }
}
