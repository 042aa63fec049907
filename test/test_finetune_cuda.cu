// GPU test through the real ./finetune_roberta on the CUDA backend: a tiny RoBERTa (C 32, 2 heads of 16, 2 layers;
// random, then fine-tuned on the CPU) fine-tuned further on the synthetic MRPC of scripts/repro/make_tiny_roberta.py
// (32 training and 16 dev examples, batches of 8, 2 epochs: 8 steps, 2 evaluations), against the same binary's CPU
// backend run of the same flags:
//   (a) cpu: every step's loss and gradient norm, each epoch's dev loss and dev metrics (accuracy, F1), and the
//       saved weights. Tolerances: FP32 1e-4 relative (test_step_cuda's whole-step tolerance of the fp32 build; the
//       metrics then must be equal), BF16 5e-2 (the same test's bf16 tolerance: bf16 storage rounds every saved
//       activation and weight to 8 bits of mantissa; a dev prediction may flip, so the metrics may differ by at
//       most 2 of the 16 examples' worth). Weights (L2 over every tensor but the key biases, see weight_distance):
//       |w_cuda - w_cpu| <= tol x |w_cpu - w_init| (the backends' difference against how far these 8 steps moved
//       the weights) + the storage's rounding of the saved weights (bf16: 2^-9 x |w_cpu|). Each batch is padded to
//       its own longest row (--padding batch), so the batches' T differ.
//   (b) resume: PRAC on (bases refreshed every 3 / 2 steps, so they are part of the checkpoint) and two
//       micro-batches of 4 per step (--grad-accum 2), killed right after step 5 (checkpoints every 3 steps and after
//       each epoch: the newest is step 4's), --resume'd: the same step records, final scores and --save weights,
//       byte for byte, as an uninterrupted run (the CPU backend's finetune.cli checks the same there).
// Exit 77 without a GPU (REQUIRE_GPU=1: fail instead).
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/safetensors.h"
#include "test/gpu/gpu_test.h"
#include "test/run_shell.h"

static std::string bin() { return std::string(PRAC_TRAINER_DIR) + "/finetune_roberta"; }
static std::string tail(const std::string& s) { return s.size() > 3000 ? s.substr(s.size() - 3000) : s; }
static bool has(const std::string& out, const char* what) { return out.find(what) != std::string::npos; }

// the number after "key": in a JSONL record (NaN when absent)
static double field(const std::string& rec, const std::string& key) {
    size_t p = rec.find("\"" + key + "\":");
    return p == std::string::npos ? NAN : std::strtod(rec.c_str() + p + key.size() + 3, nullptr);
}

// "step N" -> the step record, "eval N" -> the dev evaluation after step N; the last record wins (a resumed run logs
// the replayed steps again)
static std::map<std::string, std::string> records(const std::string& jsonl) {
    std::map<std::string, std::string> m;
    std::ifstream f(jsonl);
    std::string line;
    while (std::getline(f, line)) {
        int step = (int)field(line, "step");
        if (has(line, "\"type\":\"step\""))  // timing and memory fields left out: they differ between runs
            m["step " + std::to_string(step)] = line.substr(0, line.find(",\"tokens_per_s\""));
        else if (has(line, "\"type\":\"glue_eval\""))
            m["eval " + std::to_string(step)] = line;
    }
    return m;
}

static bool same_file(const std::string& a, const std::string& b) { return run_shell("cmp -s " + a + " " + b) == 0; }

// L2 of (a - b), of (b - init) and of b over the tensors of `init`, but the key biases: their true gradient is 0 (a key
// bias adds the same q.b to every score of a query, which the softmax ignores), so each backend's is its own rounding
// noise, which Adam's normalization turns into steps of about lr in either direction (test_roberta_step_cuda
// compares their gradients on the query biases' scale for the same reason)
static void weight_distance(const std::string& a, const std::string& b, const std::string& init, double* diff,
                            double* moved, double* norm) {
    SafeTensorsFile fa = safetensors_open(a), fb = safetensors_open(b), fi = safetensors_open(init);
    double d2 = 0, m2 = 0, n2 = 0;
    for (const std::string& name : fi.names()) {
        if (name.find("attention.self.key.bias") != std::string::npos) continue;
        size_t n = 1;
        for (int64_t s : fi.shape(name)) n *= (size_t)s;
        std::vector<float> va(n), vb(n), vi(n);
        fa.read_f32(name, va.data(), n);
        fb.read_f32(name, vb.data(), n);
        fi.read_f32(name, vi.data(), n);
        for (size_t i = 0; i < n; i++) {
            d2 += ((double)va[i] - vb[i]) * ((double)va[i] - vb[i]);
            m2 += ((double)vb[i] - vi[i]) * ((double)vb[i] - vi[i]);
            n2 += (double)vb[i] * vb[i];
        }
    }
    *diff = std::sqrt(d2);
    *moved = std::sqrt(m2);
    *norm = std::sqrt(n2);
}

// (a) the CUDA run against the CPU backend's run of the same flags
static void cuda_follows_cpu(const std::string& dir, const std::string& model, const std::string& args) {
#if defined(PRAC_FP32)
    const double tol = 1e-4, metric_tol = 0, storage_eps = 0x1p-24;
#else
    const double tol = 5e-2, metric_tol = 2.0 / 16;  // two of the 16 dev predictions
    const double storage_eps = 0x1p-9;  // --save writes the bf16 weights: each within 2^-9 relative of its fp32 master
#endif
    for (const char* device : {"cuda", "cpu"}) {
        std::string out;
        int rc = run_shell(bin() + args + " --device " + device + " --log " + dir + "/" + device + ".jsonl --save " +
                               dir + "/" + device,
                           &out);
        if (!check(rc == 0, "the --device %s run succeeds (rc %d)", device, rc)) std::printf("%s\n", tail(out).c_str());
        if (std::string(device) == "cuda")
            check(has(out, "device: CUDA GPU 0") && has(out, "planned") && has(out, "cuda ("),
                  "the CUDA run names its device and plans the activations for the CUDA build");
        // the masked attention's kernels, after the first step (cuDNN may decline a padded shape: Auto falls back)
#if defined(PRAC_FP32)
        const char* attention = "attention kernels so far (forward and backward): cuDNN 0, MMA 0, SIMT ";
#else
        const char* attention = "attention kernels so far (forward and backward): cuDNN ";
#endif
        check(has(out, attention) == (std::string(device) == "cuda"), "--device %s: %s the attention kernels", device,
              std::string(device) == "cuda" ? "names" : "(the CPU backend) does not name");
    }
    auto g = records(dir + "/cuda.jsonl"), c = records(dir + "/cpu.jsonl");
    int steps = 0, evals = 0;
    double worst_loss = g.size() == c.size() && !c.empty() ? 0 : INFINITY, worst_norm = worst_loss;
    double worst_dev = worst_loss, worst_metric = worst_loss;
    for (const auto& kv : c) {  // (no structured binding: clang's C++17 refuses capturing one)
        const std::string &key = kv.first, &rec = kv.second, &got = g[key];
        if (got.empty()) continue;
        auto rel = [&](const char* k) { return std::fabs(field(got, k) - field(rec, k)) / std::fabs(field(rec, k)); };
        if (key.rfind("step ", 0) == 0) {
            steps++;
            worst_loss = worst_of(worst_loss, rel("loss"));
            worst_norm = worst_of(worst_norm, rel("grad_norm"));
        } else {
            evals++;
            worst_dev = worst_of(worst_dev, rel("val_loss"));
            for (const char* m : {"accuracy", "f1"})
                worst_metric = worst_of(worst_metric, std::fabs(field(got, m) - field(rec, m)));
        }
    }
    check(steps == 8 && evals == 2, "8 step and 2 dev records on both backends (%d, %d)", steps, evals);
    check(worst_loss <= tol, "every step's loss within %.0e of the CPU backend's (worst %.3g)", tol, worst_loss);
    check(worst_norm <= tol, "every step's gradient norm within %.0e (worst %.3g)", tol, worst_norm);
    check(worst_dev <= tol, "each epoch's dev loss within %.0e (worst %.3g)", tol, worst_dev);
    check(worst_metric <= metric_tol, "each epoch's dev accuracy and F1 within %.3g (worst %.3g)", metric_tol,
          worst_metric);
    double diff = INFINITY, moved = 0, norm = 0;
    try {
        weight_distance(dir + "/cuda/model.safetensors", dir + "/cpu/model.safetensors", model + "/model.safetensors",
                        &diff, &moved, &norm);
    } catch (const std::exception& e) {
        check_exception(e);
    }
    check(moved > 0 && diff <= tol * moved + storage_eps * norm, "saved weights: |cuda - cpu| = %.3g <= %.0e x the "
          "update |cpu - init| (%.3g) + the storage rounding %.3g x |cpu| (%.3g)", diff, tol, moved, storage_eps, norm);
}

// (b) killed after step 5 and resumed = uninterrupted
static void resume_is_bit_exact(const std::string& dir, const std::string& args) {
    std::string a = dir + "/a", b = dir + "/b", out;
    int rc = run_shell(bin() + args + " --save " + a + " --log " + a + ".jsonl", &out);
    if (!check(rc == 0, "the uninterrupted run succeeds (rc %d)", rc)) std::printf("%s\n", tail(out).c_str());
    std::string final_a = out.substr(out.find("final |") == std::string::npos ? 0 : out.find("final |"));
    std::string ck = " --ckpt-dir " + b + "_ck --ckpt-every 3 --save " + b + " --log " + b + ".jsonl";
    rc = run_shell("PRAC_TEST_DIE_AFTER_STEP=5 " + bin() + args + ck, &out);
    check(rc == 137, "the second run dies right after step 5 (rc %d, want 137)", rc);
    const std::string c = dir + "/c";  // (its checkpoints and log, for the resume on the CPU below)
    run_shell("cp -r " + b + "_ck " + c + "_ck && cp " + b + ".jsonl " + c + ".jsonl", &out);
    rc = run_shell(bin() + args + ck + " --resume", &out);
    if (!check(rc == 0 && has(out, "at step 4 of 8"),
               "--resume continues from the newest checkpoint, epoch 1's at step 4 (rc %d)", rc))
        std::printf("%s\n", tail(out).c_str());
    std::string final_b = out.substr(out.find("final |") == std::string::npos ? 0 : out.find("final |"));
    auto ra = records(a + ".jsonl"), rb = records(b + ".jsonl");
    check(ra.size() == 10 && ra == rb, "every step record and both dev evaluations equal (%zu records)", ra.size());
    auto first_line = [](const std::string& t) { return t.substr(0, t.find('\n')); };
    check(final_a.rfind("final |", 0) == 0 && first_line(final_a) == first_line(final_b), "final scores equal: %s",
          first_line(final_a).c_str());
    check(same_file(a + "/model.safetensors", b + "/model.safetensors"), "--save model.safetensors byte-identical");
    // the same checkpoint resumed on the CPU backend continues; in the bf16 build its fp32 weights are the
    // checkpoint's fp32 master weights, not their bf16 roundings in model.safetensors (those were taken, unsaid)
    std::string cpu = args + " --ckpt-dir " + c + "_ck --ckpt-every 3 --save " + c + " --log " + c + ".jsonl --resume";
    cpu.replace(cpu.find("--device cuda"), 13, "--device cpu");
    rc = run_shell(bin() + cpu, &out);
#if defined(PRAC_FP32)
    const bool master = !has(out, "master weights ('");  // (the fp32 build keeps none)
    const char* also = "";
#else
    const bool master = has(out, "notice: the checkpoint holds its run's fp32 master weights ('adamw.master'): this "
                                 "run's weights are them (model.safetensors holds them rounded to bf16)");
    const char* also = ", its weights the fp32 master weights";
#endif
    if (!check(rc == 0 && has(out, "at step 4 of 8") && master,
               "the checkpoint resumes on the CPU backend%s (rc %d)", also, rc))
        std::printf("%s\n", tail(out).c_str());
}

// argv[1], optional: the one part to run, "cpu" (a) or "resume" (b); without it, both.
int main(int argc, char** argv) {
    const std::string part = argc > 1 ? argv[1] : "all";
    if (part != "all" && part != "cpu" && part != "resume") {
        std::fprintf(stderr, "usage: test_finetune_cuda [cpu|resume]\n");
        return 2;
    }
    if (int rc = gpu_unavailable_exit_code("test_finetune_cuda"); rc >= 0) return rc;
    char tmpl[] = "/tmp/prac_finetune_cuda_XXXXXX";
    if (!mkdtemp(tmpl)) {
        check(false, "mkdtemp");
        return gpu_test_summary("test_finetune_cuda");
    }
    // the fixture: a tiny random RoBERTa and the synthetic MRPC (96 training, 16 dev examples), fine-tuned first
    // for 3 epochs on the CPU backend (to dev accuracy 1 there): from the random head, the logits of every row are
    // equal to ~1e-4 and the loss gradient p - y is below bf16's resolution at p = 0.5, so the bf16 build's first
    // steps would be rounding noise amplified by Adam's normalization. The comparison fine-tunes that model further
    // on the first 32 training examples.
    const std::string d = tmpl, model = d + "/model", data = d + "/data", warm = d + "/warm";
    const std::string common = " --task mrpc --max-len 32 --batch-size 8 --lr 3e-3 --log-interval 1";
    std::string out;
    int rc = run_shell("python3 " + std::string(PRAC_SOURCE_DIR) + "/scripts/repro/make_tiny_roberta.py --model-dir " +
                           model + " --data-dir " + data + " --hidden 32 --heads 2 --layers 2 --max-len 32 --train 96 "
                           "--dev 16 && mkdir -p " + data + "/small && head -33 " + data + "/mrpc/train.tsv > " + data +
                           "/small/train.tsv && cp " + data + "/mrpc/dev.tsv " + data + "/small/ && " + bin() + common +
                           " --data-dir " + data + "/mrpc --init-from " + model + " --epochs 3 --device cpu --save " +
                           warm,
                       &out);
    if (!check(rc == 0 && has(out, "final | dev: f1 1.0000 accuracy 1.0000"),
               "the fixture: generated, and fine-tuned on the CPU to dev accuracy 1 (rc %d)", rc)) {
        std::printf("%s\n", tail(out).c_str());
        return gpu_test_summary("test_finetune_cuda");
    }
    const std::string args = common + " --data-dir " + data + "/small --init-from " + warm + " --epochs 2";
    auto sub = [&](const char* name) {
        std::string s = d + "/" + name;
        mkdir(s.c_str(), 0755);
        return s;
    };
    if (part == "all" || part == "cpu") cuda_follows_cpu(sub("cpu"), warm, args);
    if (part == "all" || part == "resume")
        resume_is_bit_exact(sub("resume"), args + " --device cuda --batch-size 4 --grad-accum 2 --prac prac "
                                                  "--prac-linear-ranks 2,2 --prac-nonlinear-ranks 2,2 --prac-t1 3 "
                                                  "--prac-t2 2");
    int failed = g_gpu_failures;
    if (!failed) run_shell("rm -rf " + d);
    else std::printf("kept %s for inspection\n", d.c_str());
    return gpu_test_summary("test_finetune_cuda");
}
