// train_gpt2: pretrain GPT-2 (OpenWebText-style token shards, or the built-in corpus), on the CPU or a GPU,
// on one rank or many (mpirun). One optimizer step reads top to bottom in train_gpt2() below.
// Where each part lives:
//   flags, config, device and ranks    train/launch.h (train_main)
//   data, model, optimizer, --resume   train/trainer.h (Trainer's constructor); evaluation train/evaluate.h
//   forward and backward               model/gpt2.h (the PRAC sites inside: prac/site.h, model/sites.h)
//   the gradients' mean over ranks     train/grad_sync.h (one rank, MPI, NCCL, ZeRO-1, per-layer overlap)
//   the update                         Trainer::update (schedule, clipping, non-finite policy), train/optim_*.h
//   the ops                            kernels/ (CPU twins *.h, CUDA *.cu)
#include "model/gpt2.h"
#include "train/launch.h"
#include "train/trainer.h"

template <class Backend>
int train_gpt2(Backend& be, RunSetup& setup) {
    Trainer<GPT2, Backend> run(be, setup);  // data, model, optimizer, --resume
    GPT2<Backend>& model = run.model;
    const TrainOptions& opts = run.opts;
    if (opts.eval_only) return run.evaluate_only();

    for (int step = run.start_step; step < opts.steps; step++) {
        if (int signal = run.stop_requested()) return run.stop(step, signal);  // checkpoint, exit 128 + signal
        run.begin_step(step);  // zero grads, PRAC schedule, timer

        // accumulate the gradients of grad_accum micro-batches (nothing here waits for the device: the loss
        // is summed on it)
        for (int micro = 0; micro < opts.grad_accum; micro++) {
            const MicroBatch& mb = run.next_batch();
            if (mb.valid == 0) continue;  // nothing to learn from a micro-batch of padding
            model.train_forward(mb.inputs.data(), mb.targets.data(), mb.grad_scale, opts.grad_accum);
            run.grads.watch_backward(model, micro == opts.grad_accum - 1);  // overlap: averages start in backward
            model.backward();
        }
        run.join_shared_refresh();  // --prac-shared-subspace: a rank with only padding still joins the refresh

        float norm = run.grads.average(model);  // mean over the ranks; the global gradient norm
        float loss = run.step_loss();           // the step's mean loss over the ranks (one 4-byte readout)
        model.install_refreshes();              // --prac-refresh-overlap D: refreshes D - 1 steps old take effect
        run.update(step, loss, norm);           // lr schedule, clipping, non-finite policy, optimizer
        run.end_step(step);                     // log line and metrics, evaluation, checkpoint every --ckpt-every
    }
    return run.finish();  // last checkpoint, final evaluation, --save, sample
}

int main(int argc, char** argv) {
    return train_main(Arch::GPT2, "train_gpt2", argc, argv,
                      [](auto& backend, RunSetup& setup) { return train_gpt2(backend, setup); });
}
