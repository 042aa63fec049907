// Tests of what a training run is configured with: flag parsing, --help and the option rows (train/cli.h), and
// the model configs (model/config.h): the named sizes, parameter counts by formula, Hugging Face config.json
// files and their bad variants, the write_hf_config round trip. In-process; the binaries themselves are driven
// by test_trainer.cpp, the safetensors loading and saving is test_trainer_weights.cpp.
// Every suite is named Trainer*, so `ctest -R Trainer` runs all the trainer tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/strings.h"  // float_text
#include "data/byte_bpe.h"   // printable_text
#include "data/gpt2_tokenizer.h"
#include "data/spm_tokenizer.h"
#include "kernels/cpu_backend.h"
#include "model/config.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "train/cli.h"
#include "train/finetune.h"  // finetune_flag_names, head_rows_in_task_order
#include "train/optimizers.h"  // OptimizerChoice
#include "train/evaluate.h"  // sample_text
#include "train/multiple_choice.h"
#include "train/trainer.h"     // check_free_space, cpu_eval_tokens
#include "test/test_util.h"
#include "test/trainer_test_util.h"

namespace {

// parse_train_options over a list of arguments (argv[0] is added).
TrainOptions parse(std::vector<std::string> args) {
    args.insert(args.begin(), "train_gpt2");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    TrainOptions o;
    parse_train_options(o, (int)args.size(), argv.data());
    return o;
}

// ---------------------------------------------------------------------------------------------------------
// Parameter counts by formula, independent of the models' layout code.
size_t gpt2_param_count(int V, int L, int C, int F, int maxT) {
    size_t per_layer = 2 * (size_t)C              // ln_1
                       + 3 * (size_t)C * C + 3 * C  // c_attn
                       + (size_t)C * C + C          // attn.c_proj
                       + 2 * (size_t)C              // ln_2
                       + (size_t)F * C + F          // c_fc
                       + (size_t)C * F + C;         // mlp.c_proj
    return (size_t)V * C + (size_t)maxT * C + L * per_layer + 2 * (size_t)C;
}
size_t llama_param_count(int V, int L, int C, int F) {
    size_t per_layer = (size_t)C                 // input_layernorm
                       + 4 * (size_t)C * C       // q, k, v, o
                       + (size_t)C               // post_attention_layernorm
                       + 3 * (size_t)C * F;      // gate, up, down
    return 2 * (size_t)V * C + L * per_layer + C;  // embed_tokens + lm_head untied, final norm
}
size_t formula_count(const ModelConfig& c) {
    // our buffers hold the padded vocabulary (rows beyond V are zero and unused)
    return c.arch == Arch::GPT2 ? gpt2_param_count(c.padded_vocab_size, c.num_layers, c.channels, c.hidden,
                                                   c.max_seq_len)
                                : llama_param_count(c.padded_vocab_size, c.num_layers, c.channels, c.hidden);
}

}  // namespace

// =========================================================================================================
// 1. Flags
// =========================================================================================================

TEST(TrainerCli, DefaultsWithoutArguments) {
    TrainOptions o = parse({});
    EXPECT_EQ(o.model, "");
    EXPECT_EQ(o.batch_size, 4);
    EXPECT_EQ(o.seq_len, 0);
    EXPECT_EQ(o.steps, 100);
    EXPECT_EQ(o.warmup, -1);
    EXPECT_EQ(o.device, "auto");
    EXPECT_TRUE(o.shuffle);
    EXPECT_FALSE(o.eval_only);
    EXPECT_FALSE(o.help);
}

TEST(TrainerCli, ParsesSpaceAndEqualsForms) {
    TrainOptions o = parse({"--steps", "7", "--batch-size=3", "--lr=3e-3", "--model=gpt2-tiny", "--seed",
                            "123456789012", "--eval-tokens=4096", "--no-shuffle", "--eval-only", "--beta2", "0.99",
                            "--device=cpu", "--log", "a=b.jsonl", "--warmup", "0"});
    EXPECT_EQ(o.steps, 7);
    EXPECT_EQ(o.batch_size, 3);
    EXPECT_FLOAT_EQ(o.lr, 3e-3f);
    EXPECT_EQ(o.model, "gpt2-tiny");
    EXPECT_EQ(o.seed, 123456789012LL);  // --seed is 64-bit
    EXPECT_EQ(o.eval_tokens, 4096);
    EXPECT_FALSE(o.shuffle);
    EXPECT_TRUE(o.eval_only);
    EXPECT_FLOAT_EQ(o.beta2, 0.99f);
    EXPECT_EQ(o.device, "cpu");
    EXPECT_EQ(o.log, "a=b.jsonl");  // an '=' in a separate value is part of the value
    EXPECT_EQ(o.warmup, 0);
    // a later flag wins
    EXPECT_EQ(parse({"--steps", "5", "--steps=9"}).steps, 9);
    // --flag=value keeps everything after the first '='
    EXPECT_EQ(parse({"--save=out=dir"}).save, "out=dir");
}

TEST(TrainerCli, UnknownFlagSuggestsClosest) {
    EXPECT_USER_ERROR(parse({"--stpes", "3"}), "unknown flag \"--stpes\"", "did you mean --steps?");
    EXPECT_USER_ERROR(parse({"--batchsize", "3"}), "\"--batchsize\"", "--batch-size");
    EXPECT_USER_ERROR(parse({"--init_from", "x"}), "--init-from");
    EXPECT_USER_ERROR(parse({"--evalonly"}), "--eval-only");
    EXPECT_USER_ERROR(parse({"--seqlen=64"}), "\"--seqlen\"", "--seq-len");  // the name without its value
    EXPECT_USER_ERROR(parse({"--warmpu", "3"}), "--warmup");
    // the start of a flag's name means that flag (--batch suggested --beta1, two edits away, over --batch-size)
    EXPECT_USER_ERROR(parse({"--batch", "3"}), "did you mean --batch-size?");
    EXPECT_USER_ERROR(parse({"--seq", "64"}), "did you mean --seq-len?");
    EXPECT_USER_ERROR(parse({"--eval-o"}), "did you mean --eval-only?");
    // (several that start so are all named, shortest first: the shortest alone hid the others)
    EXPECT_USER_ERROR(parse({"--eval", "3"}),
                      "did you mean --eval-only, --eval-tokens, --eval-interval or --eval-protocol?");
    EXPECT_USER_ERROR(parse({"--warm", "2"}), "did you mean --warmup?");
    // a bare word is named as such
    EXPECT_USER_ERROR(parse({"steps", "3"}), "unknown flag \"steps\"", "flags start with --", "--steps");
}

// "-h" is the first thing many users type; the suggestion should be --help (today it is --lr, the flag
// with the smallest raw edit distance).
TEST(TrainerCli, ShortHelpSuggestsHelp) {
    EXPECT_USER_ERROR(parse({"-h"}), "unknown flag \"-h\"", "did you mean --help?");
    EXPECT_USER_ERROR(parse({"-steps", "3"}), "did you mean --steps?");
}

TEST(TrainerCli, MissingValue) {
    EXPECT_USER_ERROR(parse({"--steps"}), "--steps needs a value");
    EXPECT_USER_ERROR(parse({"--batch-size", "2", "--model"}), "--model needs a value");
    // the next flag is not a value: --save --overwrite saved into "./--overwrite", --log --no-shuffle logged into
    // "--no-shuffle" and shuffled (exit 0 both)
    EXPECT_USER_ERROR(parse({"--save", "--overwrite"}), "--save needs a value (DIR), and --overwrite is a flag");
    EXPECT_USER_ERROR(parse({"--log", "--no-shuffle"}), "--log needs a value (FILE), and --no-shuffle is a flag");
    EXPECT_EQ(parse({"--save=--odd-name"}).save, "--odd-name");
}

TEST(TrainerCli, NonNumericValues) {
    EXPECT_USER_ERROR(parse({"--steps", "abc"}), "--steps", "integer", "\"abc\"");
    EXPECT_USER_ERROR(parse({"--steps", "3.5"}), "--steps", "integer", "\"3.5\"");
    EXPECT_USER_ERROR(parse({"--steps="}), "--steps", "integer");
    EXPECT_USER_ERROR(parse({"--batch-size", "4x"}), "--batch-size", "\"4x\"");
    EXPECT_USER_ERROR(parse({"--seed", "x"}), "--seed", "integer");
    EXPECT_USER_ERROR(parse({"--lr", "abc"}), "--lr", "number", "\"abc\"");
    EXPECT_USER_ERROR(parse({"--lr", "1e-3x"}), "--lr", "\"1e-3x\"");
    EXPECT_USER_ERROR(parse({"--lr="}), "--lr", "number");
    EXPECT_USER_ERROR(parse({"--steps", "99999999999"}), "--steps", "out of range");
    EXPECT_USER_ERROR(parse({"--seed", "18446744073709551615"}), "--seed", "out of range");  // beyond long long
    EXPECT_USER_ERROR(parse({"--lr", "1e99"}), "--lr");  // overflows float (ERANGE)
}

TEST(TrainerCli, SwitchTakesNoValue) {
    EXPECT_USER_ERROR(parse({"--eval-only=1"}), "--eval-only takes no value");
    EXPECT_USER_ERROR(parse({"--no-shuffle=yes"}), "--no-shuffle takes no value");
}

TEST(TrainerCli, RejectsOutOfRangeValues) {
    EXPECT_USER_ERROR(parse({"--batch-size", "0"}), "--batch-size must be positive");
    EXPECT_USER_ERROR(parse({"--batch-size", "-2"}), "--batch-size");
    EXPECT_USER_ERROR(parse({"--seq-len", "-1"}), "--seq-len");
    EXPECT_USER_ERROR(parse({"--grad-accum", "0"}), "--grad-accum");
    EXPECT_USER_ERROR(parse({"--steps", "-1"}), "--steps");
    EXPECT_USER_ERROR(parse({"--lr", "-0.1"}), "--lr");
    EXPECT_USER_ERROR(parse({"--lr", "nan"}), "--lr");
    EXPECT_USER_ERROR(parse({"--warmup", "-2"}), "--warmup");
    EXPECT_USER_ERROR(parse({"--min-lr-frac", "1.5"}), "--min-lr-frac");
    EXPECT_USER_ERROR(parse({"--beta1", "-0.1"}), "--beta1");
    EXPECT_USER_ERROR(parse({"--beta2", "1.0"}), "--beta2");
    // each of GaLore's and RSO's flags on its own (a tester's --galore-gap 0 read "--galore-rank must be >= 0 and
    // --galore-gap >= 1 (got 0, 0)": which?)
    EXPECT_USER_ERROR(parse({"--galore-gap", "0"}), "--galore-gap must be >= 1 (got 0)");
    EXPECT_USER_ERROR(parse({"--galore-rank", "-1"}), "--galore-rank must be >= 0 (got -1)");
    EXPECT_USER_ERROR(parse({"--rso-gap", "0"}), "--rso-gap must be >= 1 (got 0)");
    EXPECT_USER_ERROR(parse({"--rso-rank", "-1"}), "--rso-rank must be >= 0 (got -1)");
    EXPECT_USER_ERROR(parse({"--rso-prox", "-1"}), "--rso-prox must be >= 0 (got -1)");
    // a value that rounds to 1 in float32 says so; a subnormal is too small, not "not finite"; hexadecimal is refused
    EXPECT_USER_ERROR(parse({"--beta2", "0.99999999"}), "(got 0.899999976, 1; as float32, values above 0.99999997 are 1)");
    EXPECT_USER_ERROR(parse({"--adam-eps", "1e-40"}), "--adam-eps: 1e-40 is too small for a float (below 1.2e-38)");
    EXPECT_USER_ERROR(parse({"--lr", "0x10"}), "--lr needs a finite decimal number");
    // beyond a float's range is too large (it said "needs a finite decimal number"); infinity is not finite
    EXPECT_USER_ERROR(parse({"--lr", "1e39"}), "--lr: 1e39 is out of range (|value| <= 1e9)");
    EXPECT_USER_ERROR(parse({"--lr", "inf"}), "--lr needs a finite decimal number");
    // leading white space (a quoting slip) is not a number as typed; strtof and strtoll skipped it
    EXPECT_USER_ERROR(parse({"--lr", " 0.1"}), "--lr needs a finite decimal number, got \" 0.1\"");
    EXPECT_USER_ERROR(parse({"--steps", " 5"}), "--steps needs an integer, got \" 5\"");
    // a bare "--" is said to be none of ours (it got "did you mean --lr?")
    EXPECT_USER_ERROR(parse({"--steps", "5", "--"}), "\"--\" is not a flag", "drop it");
    EXPECT_USER_ERROR(parse({"--adam-eps", "0"}), "--adam-eps");
    EXPECT_USER_ERROR(parse({"--grad-clip", "-1"}), "--grad-clip");
    EXPECT_USER_ERROR(parse({"--eval-interval", "-1"}), "--eval-interval");
    EXPECT_USER_ERROR(parse({"--eval-tokens", "0"}), "--eval-tokens");
    EXPECT_USER_ERROR(parse({"--log-interval", "0"}), "--log-interval");
    EXPECT_USER_ERROR(parse({"--hidden-align", "0"}), "--hidden-align", "between 1 and 256");
    EXPECT_USER_ERROR(parse({"--hidden-align", "257"}), "--hidden-align", "between 1 and 256");
    EXPECT_USER_ERROR(parse({"--device", "tpu"}), "--device", "cpu, cuda or auto", "\"tpu\"");
    EXPECT_USER_ERROR(parse({"--optimizer-states", "4bit"}), "--optimizer-states", "fp32 or 8bit", "\"4bit\"");
    EXPECT_USER_ERROR(parse({"--optimizer-states", "8bit", "--optimizer", "muon"}), "AdamW's moments", "HINT");
    EXPECT_USER_ERROR(parse({"--optimizer-states", "8bit", "--zero", "1"}), "--zero 1", "HINT");
    EXPECT_NO_THROW(parse({"--optimizer-states", "8bit"}));
    // the edges that are allowed
    EXPECT_NO_THROW(parse({"--steps", "0", "--warmup", "0", "--beta2", "0", "--grad-clip", "0", "--lr", "0",
                           "--min-lr-frac", "1"}));
}

// The learning-rate schedules (train/optim_adamw.h) against their formulas written out here in double: the warmup,
// then cosine 0.5 (1 + cos(pi x)), linear 1 - x, constant 1, wsd 1 (stable) then 1 - sqrt(x) over the cooldown
// (Hägele et al. 2024, arXiv:2405.18392, eq. 1 with the 1 - sqrt form of its section 3), x the part of the decay done,
// times (lr - floor) above the floor; each decay would reach the floor at step `total` (one past the last), and none
// rises after the warmup.
TEST(TrainerSchedule, ShapesFollowTheirFormulas) {
    const int total = 100, warmup = 10;
    const double lr = 1e-3, frac = 0.1, floor = lr * frac;
    auto above_floor = [&](double coeff) { return floor + coeff * (lr - floor); };
    for (LrShape shape : {LrShape::COSINE, LrShape::LINEAR, LrShape::CONSTANT, LrShape::WSD}) {
        SCOPED_TRACE(lr_shape_name(shape));
        auto at = [&](int step) { return (double)lr_schedule(step, total, warmup, (float)lr, (float)frac, shape, 0.2f); };
        for (int s = 0; s < warmup; s++) EXPECT_NEAR(at(s), lr * (s + 1) / warmup, 1e-9) << s;
        for (int s = warmup; s <= total; s++) {
            const double x = (double)(s - warmup) / (total - warmup);
            double want = shape == LrShape::COSINE   ? above_floor(0.5 * (1 + std::cos(M_PI * x)))
                          : shape == LrShape::LINEAR ? above_floor(1 - x)
                                                     : lr;
            if (shape == LrShape::WSD && s >= 80) want = above_floor(1 - std::sqrt((s - 80) / 20.0));  // the last 20
            EXPECT_NEAR(at(s), want, 1e-6 * lr) << "step " << s;
            if (s > warmup) EXPECT_LE(at(s), at(s - 1)) << "step " << s;
        }
        EXPECT_NEAR(at(total), shape == LrShape::CONSTANT ? lr : floor, 1e-6 * lr);
    }
    // wsd by hand: the cooldown's middle (step 90) is 1 - sqrt(0.5) = 0.2929 of the way above the floor, 3.636e-4
    EXPECT_NEAR(lr_schedule(90, 100, 10, 1e-3f, 0.1f, LrShape::WSD, 0.2f), 3.636e-4, 1e-7);
    EXPECT_EQ(lr_schedule(79, 100, 10, 1e-3f, 0.1f, LrShape::WSD, 0.2f), 1e-3f);  // the stable phase's last step
    // the cooldown's length: 0.2 of 100 is 20 steps; halves round up, as the decimal fraction given makes them
    // (0.25 of 10: 3; 0.35 of 10: 4, though 0.35f is 0.34999999; 0.21 of 150: 32, though the float product is
    // 31.499998); every fraction of two decimals at every length to 2,000 steps against integer arithmetic; it does
    // not start inside the warmup; with no step to it, the peak holds to the end
    EXPECT_EQ(wsd_cooldown_start(100, 10, 0.2f), 80);
    EXPECT_EQ(wsd_cooldown_start(10, 0, 0.25f), 7);
    EXPECT_EQ(wsd_cooldown_start(10, 0, 0.35f), 6);
    EXPECT_EQ(wsd_cooldown_start(150, 0, 0.21f), 118);
    EXPECT_EQ(wsd_cooldown_steps(1000000, 0.1234567f), 123457);
    for (int percent = 1; percent <= 100; percent++) {
        const float frac = std::strtof(format("0.%02d", percent).c_str(), nullptr);
        for (int total = 1; total <= 2000; total++)
            ASSERT_EQ(wsd_cooldown_steps(total, percent == 100 ? 1.0f : frac), (2 * percent * total + 100) / 200)
                << percent << "% of " << total;
    }
    EXPECT_EQ(wsd_cooldown_start(100, 90, 0.2f), 90);
    EXPECT_EQ(wsd_cooldown_start(100, 95, 1.0f), 95);
    EXPECT_EQ(lr_schedule(2, 3, 0, 1e-3f, 0.1f, LrShape::WSD, 0.1f), 1e-3f);
    // cosine is the default, and what every run before --lr-schedule took
    EXPECT_EQ(lr_schedule(50, 100, 10, 1e-3f, 0.1f), lr_schedule(50, 100, 10, 1e-3f, 0.1f, LrShape::COSINE, 0.5f));
    for (const char* name : {"cosine", "linear", "constant", "wsd"}) {
        LrShape parsed;
        ASSERT_TRUE(lr_shape_parse(name, &parsed)) << name;
        EXPECT_STREQ(lr_shape_name(parsed), name);
    }
    LrShape none;
    EXPECT_FALSE(lr_shape_parse("Cosine", &none));
}

// A flag given more than once takes its last value (a script's extra flags override its own), and the run says so
// when the values differ, in the order typed (--x=V too); the same value again, or a switch again, is no news.
// finetune_roberta's flags parse alike.
TEST(TrainerCli, AFlagGivenTwiceTakesTheLastValueAndIsNoticed) {
    const TrainOptions o = parse({"--lr", "1e-3", "--seed", "2", "--steps", "5", "--lr=3e-4", "--seed", "2",
                                  "--no-shuffle", "--no-shuffle", "--lr", "2e-4", "--model", "gpt2-tiny"});
    EXPECT_FLOAT_EQ(o.lr, 2e-4f);
    EXPECT_EQ(o.seed, 2);
    EXPECT_EQ(o.repeated, (std::vector<std::string>{"--lr 1e-3, then 3e-4, then 2e-4"}));
    EXPECT_EQ(unused_flags_notice(o, 1),
              "notice: flag given more than once: --lr 1e-3, then 3e-4, then 2e-4; the last is used\n");
    EXPECT_TRUE(parse({"--seed", "1", "--steps", "3"}).repeated.empty());
    EXPECT_TRUE(parse({"--lr", "1e-3", "--lr", "0.001", "--steps", "5", "--steps", "05"}).repeated.empty())
        << "one number written two ways is one setting";
    EXPECT_EQ(parse({"--prompt", "It is, then", "--prompt", "Once"}).repeated,
              (std::vector<std::string>{"--prompt \"It is, then\", then \"Once\""}));
    // --plan's notices (finetune_roberta --plan prints these alone) say it too
    EXPECT_EQ(plan_unused_flags_notice(parse({"--plan", "--steps", "3", "--steps", "4"})),
              "notice: flag given more than once: --steps 3, then 4; the last is used\n");
    const TrainOptions two = parse({"--steps", "3", "--seed", "1", "--steps", "4", "--seed", "7"});
    EXPECT_EQ(two.repeated, (std::vector<std::string>{"--steps 3, then 4", "--seed 1, then 7"}));
    std::vector<std::string> args = {"finetune_roberta", "--task", "rte", "--init-from", "x", "--epochs", "2",
                                     "--epochs", "3"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    FinetuneOptions f;
    try {
        parse_finetune_options(f, (int)argv.size(), argv.data());
    } catch (const UserError&) {  // (the directory x is checked later; the flags are parsed first)
    }
    EXPECT_EQ(f.epochs, 3);
    EXPECT_EQ(f.repeated, (std::vector<std::string>{"--epochs 2, then 3"}));
}

// --lr-schedule and --cooldown-frac: bad values are refused with the choices, flags the schedule leaves unused are
// noticed, and the run's table says where wsd's cooldown falls (steps numbered from 1, as the step lines are).
TEST(TrainerSchedule, FlagsAreCheckedNoticedAndShown) {
    EXPECT_USER_ERROR(parse({"--lr-schedule", "cos"}), "--lr-schedule must be cosine, linear, constant or wsd",
                      "'cos'");
    EXPECT_USER_ERROR(parse({"--lr-schedule", "wsd", "--cooldown-frac", "0"}), "--cooldown-frac must be in (0, 1]",
                      "--lr-schedule constant");
    EXPECT_USER_ERROR(parse({"--cooldown-frac", "1.5"}), "--cooldown-frac must be in (0, 1]");
    EXPECT_USER_ERROR(parse({"--lr-scheduler-type", "linear"}), "spells it --lr-schedule");
    EXPECT_NO_THROW(parse({"--lr-schedule", "wsd", "--cooldown-frac", "1"}));
    // absolute ranks override the fractions (dropped without a word)
    EXPECT_EQ(unused_flags_notice(parse({"--prac", "prac", "--prac-linear", "0.5,0.5", "--prac-linear-ranks", "8,8"}), 1),
              "notice: --prac-linear changes nothing in this run: --prac-linear-ranks 8,8 sets that class's ranks\n");
    EXPECT_EQ(unused_flags_notice(parse({"--prac", "prac", "--prac-nonlinear-ranks", "8,8"}), 1), "");
    EXPECT_EQ(unused_flags_notice(parse({"--lr-schedule", "constant", "--min-lr-frac", "0.5"}), 1),
              "notice: --min-lr-frac changes nothing in this run: --lr-schedule constant does not decay\n");
    EXPECT_EQ(unused_flags_notice(parse({"--lr-schedule", "linear", "--cooldown-frac", "0.3"}), 1),
              "notice: --cooldown-frac changes nothing in this run: the schedule is linear, not wsd\n");
    EXPECT_EQ(unused_flags_notice(parse({"--cooldown-frac", "0.3"}), 1),
              "notice: --cooldown-frac changes nothing in this run: the schedule is cosine, not wsd\n");
    EXPECT_EQ(unused_flags_notice(parse({"--lr-schedule", "wsd", "--cooldown-frac", "0.3", "--min-lr-frac", "0"}), 1),
              "");
    // --eval-interval not below --steps: evaluations fall on steps 1 .. --steps - 1 it divides, so none but the final
    EXPECT_EQ(unused_flags_notice(parse({"--steps", "3", "--eval-interval", "3"}), 1),
              "notice: --eval-interval changes nothing in this run: it is not below --steps 3: the final evaluation is "
              "the only one\n");
    EXPECT_EQ(unused_flags_notice(parse({"--steps", "3", "--eval-interval", "2"}), 1), "");
    const ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-tiny");
    auto rows_of = [&](const std::vector<std::string>& args) {
        std::map<std::string, std::string> rows;
        for (const auto& [k, v] : train_options_rows(parse(args), cfg)) rows[k] = v;
        return rows;
    };
    EXPECT_EQ(rows_of({})["lr schedule"], "cosine");
    // (the cooldown's first step is at the peak: lr_schedule's part done is 0 there)
    EXPECT_EQ(rows_of({"--lr-schedule", "wsd", "--steps", "100", "--warmup", "10"})["lr schedule"],
              "wsd (the peak through step 81, then down over steps 82-100)");
    EXPECT_EQ(rows_of({"--lr-schedule", "wsd", "--steps", "3", "--cooldown-frac", "0.1"})["lr schedule"],
              "wsd (the peak to the end: --cooldown-frac 0.1 of 3 steps is no cooldown)");
    EXPECT_EQ(rows_of({"--lr-schedule", "wsd", "--steps", "5", "--warmup", "0"})["lr schedule"],
              "wsd (the peak to the end: --cooldown-frac 0.2 of 5 steps is a cooldown of 1 step, which is at the peak)");
    EXPECT_EQ(rows_of({"--lr-schedule", "wsd", "--steps", "10", "--warmup", "9"})["lr schedule"],
              "wsd (the peak to the end: --cooldown-frac 0.2 of 10 steps after a warmup of 9 is a cooldown of 1 step, "
              "which is at the peak)");
    // --min-lr-frac where no step is below the peak (a 1-step decay's step is at it), and where one is
    EXPECT_EQ(schedule_notices(parse({"--lr-schedule", "wsd", "--steps", "5", "--warmup", "0", "--min-lr-frac", "0"})),
              "notice: --min-lr-frac changes nothing in this run: no step of it is below the peak (its decay is "
              "the last step alone, which is at the peak)\n");
    EXPECT_EQ(schedule_notices(parse({"--steps", "1", "--warmup", "0", "--min-lr-frac", "0"})),
              "notice: --min-lr-frac changes nothing in this run: no step of it is below the peak (its decay is "
              "the last step alone, which is at the peak)\n");
    EXPECT_EQ(schedule_notices(parse({"--steps", "10", "--warmup", "10", "--min-lr-frac", "0"})),
              "notice: --min-lr-frac changes nothing in this run: no step of it is below the peak (the warmup lasts "
              "the whole run)\n");
    EXPECT_EQ(schedule_notices(parse({"--lr-schedule", "wsd", "--steps", "3", "--warmup", "0", "--cooldown-frac",
                                      "0.1", "--min-lr-frac", "0"})),
              "notice: --min-lr-frac changes nothing in this run: no step of it is below the peak (wsd's cooldown "
              "rounds to no step)\n");
    EXPECT_EQ(rows_of({"--lr-schedule", "wsd", "--steps", "10", "--warmup", "12"})["lr schedule"],
              "wsd (no cooldown: the warmup lasts the whole run)");
    EXPECT_EQ(schedule_notices(parse({"--steps", "10", "--warmup", "8", "--min-lr-frac", "0"})), "");
    EXPECT_LT(lr_schedule(9, 10, 8, 1e-3f, 0.0f), 1e-3f);  // (step 10 of that run is below the peak)
    EXPECT_EQ(rows_of({"--lr-schedule", "constant"})["min lr"], "(constant: no decay)");
    EXPECT_EQ(rows_of({"--lr-schedule", "linear", "--lr", "0.01", "--min-lr-frac", "0.5"})["min lr"], "0.005 (0.5 x lr)");
}

// Non-finite values are accepted today where the check is one-sided: --lr inf passes `lr >= 0` and the run
// dies at step 1 with lr nan ("training diverged"); --weight-decay is not checked at all (nan, negative).
TEST(TrainerCli, RejectsNonFiniteValues) {
    EXPECT_USER_ERROR(parse({"--lr", "inf"}), "--lr");
    EXPECT_USER_ERROR(parse({"--weight-decay", "nan"}), "--weight-decay");
    EXPECT_USER_ERROR(parse({"--adam-eps", "inf"}), "--adam-eps");
}

// The decay is decoupled, W *= 1 - lr * wd per step: lr * wd >= 1 flips or zeroes every decayed weight.
TEST(TrainerCli, RejectsAWeightDecayThatFlipsTheWeights) {
    EXPECT_USER_ERROR(parse({"--weight-decay", "1e9"}), "--weight-decay 1e+09 with --lr", "1 - lr * wd");
    EXPECT_USER_ERROR(parse({"--lr", "1", "--weight-decay", "1"}), "--weight-decay 1 with --lr 1");
    EXPECT_NO_THROW(parse({"--lr", "1e-3", "--weight-decay", "999"}));
    EXPECT_NO_THROW(parse({"--lr", "0", "--weight-decay", "1e9"}));  // --lr 0 changes nothing (noticed)
}

// PRAC's rank and fraction pairs: an absolute rank that overflows an int, a fractional or non-finite value is an error
// naming the flag (99999999999 used to wrap around and silently give the default fractions).
TEST(TrainerCli, PracRankAndFractionPairsAreRangeChecked) {
    auto prac = [](std::vector<std::string> args) { return prac_options_from(parse(args)); };
    for (const char* flag : {"--prac-linear-ranks", "--prac-nonlinear-ranks"})
        for (const char* bad : {"99999999999,8", "8,99999999999", "-8,8", "8.5,8", "nan,8", "8,inf", "8", "8,", ",8",
                                "0x10,8", "1e3,8", " 64,32", "64, 32"})
            EXPECT_USER_ERROR(prac({flag, bad}), flag, bad);
    for (const char* flag : {"--prac-linear", "--prac-nonlinear"})
        for (const char* bad : {"nan,0.1", "0.1,inf", "-0.1,0.1", "0.1", "1e400,0.1", "0x0.1,0.1", " 0.1,0.1", "0.1, 0.1"})
            EXPECT_USER_ERROR(prac({flag, bad}), flag);
    PracOptions p = prac({"--prac-linear-ranks", "64,32", "--prac-nonlinear-ranks", "0,1073741824"});
    EXPECT_EQ(p.linear_r1_abs, 64);
    EXPECT_EQ(p.linear_r2_abs, 32);
    EXPECT_EQ(p.nonlinear_r1_abs, 0);
    EXPECT_EQ(p.nonlinear_r2_abs, 1 << 30);
}

// Every numeric flag of the table, driven with numbers no flag accepts: each is an error that names the flag, at
// parse time or when the options are turned into PRAC and optimizer settings (never a wrapped or default value).
// --prac-storage: act by default (not fp8 yet), fp8 reaches every compressed site's dims; anything else, or fp8
// with nothing to compress, is refused with the accepted values or a hint.
TEST(TrainerCli, PracStorageIsRangeChecked) {
    // the default, auto, stores fp8 whenever PRAC compresses, and the activation dtype otherwise
    EXPECT_EQ(prac_options_from(parse({"--prac", "prac"})).storage, PracStorage::FP8);
    EXPECT_EQ(prac_options_from(parse({})).storage, PracStorage::ACT);
    EXPECT_EQ(prac_options_from(parse({"--prac", "prac", "--prac-storage", "act"})).storage, PracStorage::ACT);
    PracOptions p = prac_options_from(parse({"--prac", "prac", "--prac-storage", "fp8"}));
    EXPECT_EQ(p.storage, PracStorage::FP8);
    EXPECT_TRUE(prac_site_dims(p, SiteClass::LINEAR, 768, "ln1").fp8);
    PracOptions act = prac_options_from(parse({"--prac", "prac", "--prac-storage", "act"}));
    EXPECT_FALSE(prac_site_dims(act, SiteClass::LINEAR, 768, "ln1").fp8);
    EXPECT_USER_ERROR(parse({"--prac", "prac", "--prac-storage", "bf16"}), "--prac-storage", "auto", "act", "fp8",
                      "bf16");
    EXPECT_USER_ERROR(parse({"--prac-storage", "fp8"}), "--prac-storage fp8", "--prac none", "HINT");
    // RSO's projections are not PRAC's: the hint is not the --prac prac that RSO refuses
    std::string rso;
    try {
        parse({"--optimizer", "rso", "--prac-storage", "fp8"});
    } catch (const UserError& e) {
        rso = e.what();
    }
    EXPECT_NE(rso.find("--optimizer rso stores its projections X*P in the activation dtype"), std::string::npos) << rso;
    EXPECT_EQ(rso.find("add --prac prac"), std::string::npos) << rso;
}

TEST(TrainerCli, EveryNumericFlagRefusesBadNumbers) {
    auto all = [](std::vector<std::string> args) {
        TrainOptions o = parse(args);
        prac_options_from(o);
        optimizer_choice_from(o);
    };
    const std::vector<std::string> flags = numeric_train_flags();
    ASSERT_GE(flags.size(), 30u);
    for (const std::string& flag : flags)
        for (const char* bad : {"99999999999999999999", "-99999999999999999999", "nan", "inf", "-inf", "1e400", "12abc",
                                "", "0x", "--"}) {
            SCOPED_TRACE(flag + " " + bad);
            EXPECT_USER_ERROR(all({flag, bad}), flag.c_str());
        }
    // a negative count, refused by every numeric flag (--warmup's default marker -1 too, when given)
    for (const std::string& flag : flags) {
        SCOPED_TRACE(flag + " -2");
        EXPECT_USER_ERROR(all({flag, "-2"}), flag.c_str());
    }
}

// --global-batch N sets --grad-accum to N / (ranks x B) on the job's ranks; a split that is not whole is refused
// with the largest micro-batch up to B that divides it (512 = 2^9: 32 for B = 48, by hand), or with the ranks when
// N does not split over them; a --grad-accum beside it must agree. llm.c's --total-batch-size (tokens) is named.
TEST(TrainerCli, GlobalBatchSetsTheAccumulationOnTheRanks) {
    for (auto [ranks, k] : {std::pair{1, 8}, {2, 4}, {4, 2}, {8, 1}}) {
        TrainOptions o = parse({"--batch-size", "64", "--global-batch", "512"});
        resolve_global_batch(o, ranks);
        EXPECT_EQ(o.grad_accum, k) << ranks << " ranks";
    }
    TrainOptions o = parse({"--batch-size", "64", "--grad-accum", "3"});
    resolve_global_batch(o, 4);
    EXPECT_EQ(o.grad_accum, 3) << "without --global-batch --grad-accum stays";
    o = parse({"--batch-size", "64", "--global-batch", "512", "--grad-accum", "8"});
    resolve_global_batch(o, 1);
    EXPECT_EQ(o.grad_accum, 8);
    o = parse({"--batch-size", "64", "--global-batch", "512", "--grad-accum", "4"});
    EXPECT_USER_ERROR(resolve_global_batch(o, 1), "--grad-accum 4 disagrees with --global-batch 512, which takes 8 "
                      "micro-batch(es) of 64 sequences (--batch-size 64)", "HINT: drop --grad-accum");
    o = parse({"--batch-size", "48", "--global-batch", "512"});
    EXPECT_USER_ERROR(resolve_global_batch(o, 1), "--global-batch 512 is not a whole number of micro-batches: "
                      "--batch-size 48 takes 48 sequences each", "HINT: pass --batch-size 32 (--grad-accum 16)");
    o = parse({"--batch-size", "48", "--global-batch", "512"});
    EXPECT_USER_ERROR(resolve_global_batch(o, 4), "4 ranks x --batch-size 48 take 192 sequences each",
                      "pass --batch-size 32 (--grad-accum 4), or run on a number of ranks that divides it");
    o = parse({"--batch-size", "64", "--global-batch", "512"});
    EXPECT_USER_ERROR(resolve_global_batch(o, 3), "512 sequences do not split over 3 ranks");
    o = parse({"--batch-size", "64", "--global-batch", "2"});
    EXPECT_USER_ERROR(resolve_global_batch(o, 4), "2 sequences do not split over 4 ranks");
    EXPECT_USER_ERROR(parse({"--total-batch-size", "524288"}), "spells it --global-batch, in sequences, not tokens");
}

TEST(TrainerCli, TrainDataNeedsValData) {
    EXPECT_USER_ERROR(parse({"--train-data", "x_*.bin"}), "--train-data given without --val-data", "HINT");
    EXPECT_NO_THROW(parse({"--train-data", "x_*.bin", "--val-data", "y_*.bin"}));
}

// Flags that mean something only beside another are refused alone instead of being ignored (a run that was meant to
// checkpoint ran without checkpoints, exit 0).
TEST(TrainerCli, FlagsThatNeedAPartnerAreRefusedAlone) {
    EXPECT_USER_ERROR(parse({"--ckpt-every", "100"}), "--ckpt-every and --ckpt-keep go with --ckpt-dir", "HINT");
    EXPECT_USER_ERROR(parse({"--ckpt-keep", "2"}), "go with --ckpt-dir");
    EXPECT_NO_THROW(parse({"--ckpt-every", "100", "--ckpt-keep", "2", "--ckpt-dir", "ck"}));
    EXPECT_USER_ERROR(parse({"--eval-only", "--save", "out"}), "--eval-only trains nothing", "drop --save");
    // (with --ckpt-dir and --resume it used to crash: no training data to compare the checkpoint's with)
    EXPECT_USER_ERROR(parse({"--eval-only", "--ckpt-dir", "ck"}), "--eval-only trains nothing", "--init-from");
    EXPECT_USER_ERROR(parse({"--eval-only", "--ckpt-dir", "ck", "--resume"}), "--ckpt-dir and --resume");
    EXPECT_USER_ERROR(parse({"--eval-only", "--dump-site", "ln1"}), "--eval-only takes none", "HINT");
    for (const char* f : {"--dump-layer", "--dump-step"})
        EXPECT_USER_ERROR(parse({f, "1"}), "go with --dump-site");
    EXPECT_USER_ERROR(parse({"--dump-path", "x.npy"}), "go with --dump-site");
    EXPECT_NO_THROW(parse({"--dump-site", "ln1", "--dump-layer", "1", "--dump-step", "2", "--dump-path", "x.npy"}));
    // a step the run does not take (it was refused after the model and the data tables were built)
    EXPECT_USER_ERROR(parse({"--dump-site", "ln1", "--dump-step", "5", "--steps", "5"}),
                      "--dump-step 5 is not a step of this run", "below --steps 5");
    EXPECT_NO_THROW(parse({"--dump-site", "ln1", "--dump-step", "4", "--steps", "5"}));
    EXPECT_USER_ERROR(parse({"--prac-refresh", "foo"}), "must be auto, exact or subspace", "\"foo\"");
    // the defaults' markers are not values: --seq-len 0 meant the model's length, --warmup -1 the default, silently
    EXPECT_USER_ERROR(parse({"--seq-len", "0"}), "--seq-len must be positive (got 0)");
    EXPECT_USER_ERROR(parse({"--warmup", "-1"}), "--warmup must be >= 0 (got -1)");
    EXPECT_NO_THROW(parse({"--warmup", "0"}));
    // a refused value is echoed (these said what they must be, not what they got)
    const std::vector<std::pair<std::vector<std::string>, std::string>> echoed = {
        {{"--ckpt-every", "-1"}, "--ckpt-every must be >= 0 (0: at the end only; got -1)"},
        {{"--ckpt-keep", "0"}, "(got 0)"},           {{"--sample", "-1"}, "(got -1)"},
        {{"--adam-eps", "0"}, "(got 0)"},            {{"--log-interval", "0"}, "(got 0)"},
        {{"--eval-tokens", "-3"}, "(got -3)"},       {{"--eval-interval", "-2"}, "got -2)"},
        {{"--grad-clip", "-1"}, "got -1)"},          {{"--gpu-mem", "-1", "--plan"}, "(got -1)"}};
    for (const auto& [args, says] : echoed) EXPECT_USER_ERROR(parse(args), says.c_str());
    EXPECT_USER_ERROR(prac_options_from(parse({"--prac", "prac", "--prac-t1", "0"})), "(got 0, 500)");
    EXPECT_USER_ERROR(prac_options_from(parse({"--prac", "prac", "--prac-initial-spread", "99999999999"})),
                      "--prac-initial-spread 99999999999 is out of range (0 .. 2147483647 steps)");
    // a positive fraction below float32's range is the least rank, as 1e-5 is (it was rank 0)
    const PracOptions tiny_fraction = prac_options_from(parse({"--prac", "prac", "--prac-linear", "1e-300,0.3"}));
    EXPECT_EQ(prac_round_rank(tiny_fraction.linear_r1, 768), 8);
    EXPECT_EQ(prac_round_rank(prac_options_from(parse({"--prac-linear", "1e-5,0.3"})).linear_r1, 768), 8);
    for (const char* r : {"auto", "exact", "subspace"}) EXPECT_NO_THROW(parse({"--prac-refresh", r})) << r;
    // --precision only picks the CUDA build --plan plans for: alone, or with a CPU plan, it did nothing, silently
    EXPECT_USER_ERROR(parse({"--precision", "fp32"}), "--precision goes with --plan", "PRECISION=FP32");
    EXPECT_USER_ERROR(parse({"--precision", "bf16", "--plan", "--device", "cpu"}), "--device cpu plans the CPU");
    EXPECT_NO_THROW(parse({"--precision", "fp32", "--plan"}));
    EXPECT_USER_ERROR(parse({"--plan", "--eval-only"}), "--plan plans a training run", "drop --eval-only");
}

TEST(TrainerCli, HelpSkipsValidation) {
    TrainOptions o = parse({"--batch-size", "0", "--help"});
    EXPECT_TRUE(o.help);
}

TEST(TrainerCli, HelpListsEveryFlag) {
    const std::vector<std::string> flags = {
        "--model",       "--init-from",  "--train-data",   "--val-data", "--batch-size", "--seq-len",
        "--grad-accum",  "--steps",      "--lr",           "--warmup",   "--min-lr-frac", "--weight-decay",
        "--beta1",       "--beta2",      "--adam-eps",     "--grad-clip", "--seed",      "--eval-interval",
        "--eval-tokens", "--save",       "--device",       "--log",      "--log-interval", "--eval-only",
        "--no-shuffle",  "--help"};
    for (Arch arch : {Arch::GPT2, Arch::LLAMA}) {
        const char* program = arch == Arch::GPT2 ? "train_gpt2" : "train_llama";
        std::string help = train_options_help(arch, program);
        EXPECT_EQ(help.rfind(std::string("usage: ") + program, 0), 0u) << help;
        for (const std::string& f : flags) EXPECT_TRUE(contains(help, "  " + f + " ")) << f << " missing:\n" << help;
        for (const std::string& n : model_config_names(arch)) EXPECT_TRUE(contains(help, n)) << n;
        // each flag the help shows is one the parser accepts (no help entry without a parser entry)
        for (const std::string& f : flags)
            if (f != "--help" && f != "--eval-only" && f != "--no-shuffle") EXPECT_USER_ERROR(parse({f}), f.c_str());
        EXPECT_TRUE(contains(help, arch == Arch::GPT2 ? "[gpt2-124m]" : "[llama-130m]"));
        EXPECT_TRUE(contains(help, "[100]"));  // --steps default
    }
}

// wrap_help's documented rule, at its edges: a word that ends exactly at column HELP_COLUMNS stays on the line, one
// column more moves it to the next line under the indent; explicit newlines are kept; a word wider than a line is
// not cut.
TEST(TrainerCli, WrapHelpBreaksBetweenWordsAtItsWidth) {
    EXPECT_EQ(wrap_help("aa bb", HELP_COLUMNS - 5, 2), "aa bb");          // "bb" ends at column HELP_COLUMNS
    EXPECT_EQ(wrap_help("aa bbb", HELP_COLUMNS - 5, 2), "aa\n  bbb");    // one column more: the word moves down
    EXPECT_EQ(wrap_help("aa  bb\ncc", 0, 2), "aa bb\n  cc");           // spaces collapse; a newline is kept
    const std::string wide(HELP_COLUMNS + 5, 'x');
    EXPECT_EQ(wrap_help("a " + wide + " b", 0, 3), "a\n   " + wide + "\n   b");
}

// Other trainers' spellings of common flags are answered with ours (edit distance alone answered --out with --lr).
TEST(TrainerCli, SynonymsOfCommonFlagsSuggestOurSpelling) {
    const std::vector<std::pair<std::string, std::string>> issue = {
        {"--learning-rate", "--lr"}, {"--max-steps", "--steps"}, {"--out", "--save"}, {"--lr-warmup", "--warmup"},
        {"--micro-batch-size", "--batch-size"}, {"--gradient-accumulation-steps", "--grad-accum"}};
    for (const auto& [theirs, ours] : issue) {
        SCOPED_TRACE(theirs);
        const std::string unknown = "unknown flag \"" + theirs + "\"", answer = "this trainer spells it " + ours;
        EXPECT_USER_ERROR(parse({theirs, "1"}), unknown.c_str(), answer.c_str());
        EXPECT_USER_ERROR(parse({theirs + "=1"}), answer.c_str());
    }
    EXPECT_USER_ERROR(parse({"-learning-rate", "1"}), "spells it --lr");
    EXPECT_USER_ERROR(parse({"--min-lr", "1e-5"}), "spells it --min-lr-frac", "a fraction of --lr");
    // where theirs counts in other units or does other than ours: said (--eval-iters is no interval: nanoGPT's count
    // of batches per evaluation; --max-new-tokens is the sample's length, not the evaluation's)
    EXPECT_USER_ERROR(parse({"--eval-iters", "200"}), "spells it --eval-tokens", "in tokens, not batches");
    EXPECT_USER_ERROR(parse({"--max-new-tokens", "64"}), "spells it --sample");
    EXPECT_USER_ERROR(parse({"--sample-every", "100"}), "spells it --sample", "no sampling during it");
    EXPECT_USER_ERROR(parse({"--val-loss-every", "250"}), "spells it --eval-interval");
    // every entry of the table: its answer is a flag of ours, and it is not itself one of ours
    const std::vector<std::string> names = train_flag_names();
    auto ours_has = [&](const std::string& f) { return std::find(names.begin(), names.end(), f) != names.end(); };
    const auto table = train_flag_synonyms();
    ASSERT_GE(table.size(), 20u);
    for (const auto& [theirs, ours] : table) {
        SCOPED_TRACE(theirs);
        EXPECT_TRUE(ours_has(ours)) << ours << " is not a flag";
        EXPECT_FALSE(ours_has(theirs)) << theirs << " is a flag of ours: it never reaches the synonyms";
        const std::string answer = "spells it " + ours;
        EXPECT_USER_ERROR(parse({theirs, "1"}), answer.c_str());
    }
}

// Every flag a hint of the trainers names exists: the HINT texts of train/, model/, prac/ and the mains (their
// string literals up to the end of the statement, format arguments included), scanned for --flags and -x flags.
// mpirun's own flags (-np, --host) are the only others a hint may name, and prep_data's in a hint that tells to run
// prep_data (its flags: the "--..." names its parser compares, tools/prep_data/options.cpp), and truncate's -s in a
// hint that tells to run "truncate -s". It fails on a hint such as "e.g. -i DIR".
TEST(TrainerCli, EveryFlagNamedInAHintExists) {
    const std::vector<std::string> names = train_flag_names();
    const std::vector<std::string> foreign = {"-np", "--host", "--bind-to", "-x", "--gpus-per-task"};  // mpirun's, srun's (train/launch.h)
    std::vector<std::string> prep_flags;
    {
        const std::string src = read_bytes(ROOT + "/tools/prep_data/options.cpp");
        for (size_t at = src.find("\"--"); at != std::string::npos; at = src.find("\"--", at + 1)) {
            size_t end = src.find('"', at + 1);
            prep_flags.push_back(src.substr(at + 1, end - at - 1));
        }
        ASSERT_GE(prep_flags.size(), 20u) << "prep_data's flags not found in tools/prep_data/options.cpp";
    }
    std::vector<std::string> files = {ROOT + "/train_gpt2.cu", ROOT + "/train_llama.cu", ROOT + "/finetune_roberta.cu"};
    const std::vector<std::string> finetune_flags = finetune_flag_names();  // hints of finetune_roberta's files
    for (const char* sub : {"train", "model", "prac"})
        for (const auto& e : fs::directory_iterator(ROOT + "/" + sub)) {
            std::string ext = e.path().extension().string();
            if (ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh") files.push_back(e.path().string());
        }
    int hints = 0, flags_seen = 0;
    for (const std::string& file : files) {
        const std::string src = read_bytes(file);
        for (size_t at = src.find("HINT:"); at != std::string::npos; at = src.find("HINT:", at + 1)) {
            // the literals from HINT: to the statement's end (the first ';' outside a literal)
            std::string text;
            bool in_lit = true;  // HINT: is inside a literal
            for (size_t i = at; i < src.size(); i++) {
                char c = src[i];
                if (in_lit) {
                    if (c == '\\') {
                        text += src[++i] == 'n' ? ' ' : src[i];
                        continue;
                    }
                    if (c == '"') in_lit = false, text += ' ';
                    else text += c;
                } else if (c == '"') {
                    in_lit = true;
                } else if (c == ';') {
                    break;
                }
            }
            hints++;
            for (size_t i = 0; i < text.size(); i++) {
                bool start = text[i] == '-' && (i == 0 || std::string(" (\'\"`,").find(text[i - 1]) != std::string::npos);
                size_t j = i;
                while (start && j < text.size() && text[j] == '-') j++;
                if (!start || j - i > 2 || j >= text.size() || !std::isalpha((unsigned char)text[j])) continue;
                while (j < text.size() && (std::isalnum((unsigned char)text[j]) || text[j] == '-')) j++;
                std::string flag = text.substr(i, j - i);
                while (flag.back() == '-') flag.pop_back();
                flags_seen++;
                bool known = std::find(names.begin(), names.end(), flag) != names.end() ||
                             std::find(foreign.begin(), foreign.end(), flag) != foreign.end() ||
                             (text.find("prep_data") != std::string::npos &&
                              std::find(prep_flags.begin(), prep_flags.end(), flag) != prep_flags.end()) ||
                             (flag == "-s" && text.find("truncate -s ") != std::string::npos) ||
                             (file.find("finetune") != std::string::npos &&
                              std::find(finetune_flags.begin(), finetune_flags.end(), flag) != finetune_flags.end());
                EXPECT_TRUE(known) << file << ": a hint names " << flag << ", which is not a flag of the trainers:\n"
                                   << text;
                i = j;
            }
        }
    }
    EXPECT_GE(hints, 40) << "the scan found too few hints to mean anything";
    EXPECT_GE(flags_seen, 40);
}

// --save and --ckpt-dir check the free space of their filesystem up front (statvfs): no filesystem here has an
// exabyte free, every one has a kilobyte; a directory not made yet is judged by its nearest existing parent.
TEST(TrainerCli, FreeSpaceIsCheckedUpFront) {
    TempDir dir;
    for (const std::string& d : {dir.path, dir / "not/made/yet"}) {
        SCOPED_TRACE(d);
        EXPECT_USER_ERROR(check_free_space(d, 1e18, "--save (model.safetensors, fp32)"), "--save", d.c_str(),
                          "MiB free");
        EXPECT_NO_THROW(check_free_space(d, 1024, "--save"));
    }
}

// The checkpoints a --ckpt-dir holds at once, which the start-up warning sizes: the kept ones and the one being
// written (checkpoint_rotate removes the oldest only after the newest is committed), or all when fewer are written.
TEST(TrainerCli, CheckpointsHeldAtOnce) {
    EXPECT_EQ(checkpoints_at_once(0, 1, 3), 1);
    EXPECT_EQ(checkpoints_at_once(0, 3, 3), 3);
    EXPECT_EQ(checkpoints_at_once(0, 5, 3), 4);
    EXPECT_EQ(checkpoints_at_once(3, 5, 3), 4);  // a resumed run's rotation counts the existing ones
    EXPECT_EQ(checkpoints_at_once(2, 1, 3), 3);
    EXPECT_EQ(checkpoints_at_once(0, 5, 1), 2);
}

// The checkpoints still to come (the start-up's disk-space warning, the ETA), against the trainer's rule written out
// step by step: after step s (0-based) it checkpoints when --ckpt-every divides s + 1 and s + 1 < steps, and once
// after the last step (a finished run resumed, first = steps + 1, writes none).
TEST(TrainerCli, CheckpointsStillDueFollowTheStepRule) {
    for (int steps = 1; steps <= 13; steps++)
        for (int every = 0; every <= 14; every++)
            for (int first = 1; first <= steps + 1; first++) {
                int written = first <= steps;
                for (int s = first - 1; s < steps; s++) written += every > 0 && (s + 1) % every == 0 && s + 1 < steps;
                EXPECT_EQ(checkpoints_from(first, steps, every), written) << steps << " " << every << " " << first;
            }
}

// The CPU backend's default evaluation budget: whole micro-batches within 1e11 forward FLOPs at 2 x parameters per
// token (the rule --help states), between one micro-batch and the flag's default.
TEST(TrainerCli, CpuEvalBudgetSuitsTheModelSize) {
    // gpt2-124m at B 4, T 1024: 1e11 / (2 * 124475904) = 401 tokens, less than one micro-batch: one micro-batch
    EXPECT_EQ(cpu_eval_tokens(124475904, 4, 1024, 65536), 4096);
    // gpt2-tiny (3323648 parameters) at B 2, T 32: floor(1e11 / 6647296) = 15043 -> 235 micro-batches of 64
    EXPECT_EQ(cpu_eval_tokens(3323648, 2, 32, 65536), 15040);
    // a small model is capped by the default
    EXPECT_EQ(cpu_eval_tokens(100000, 4, 64, 65536), 65536);
}

// Flags that change nothing in the run are said (a run with --prac-linear-ranks but no --prac trained the baseline
// with no word; --prac-k-mult with pac, --galore-rank with adamw: weights byte-identical to the run without them),
// and nothing is said when each flag given is used
TEST(TrainerCli, FlagsThatChangeNothingAreNoticed) {
    EXPECT_EQ(unused_flags_notice(parse({"--prac-t1", "3", "--prac-linear-ranks", "2,2"}), 1),
              "notice: --prac-linear-ranks --prac-t1 change nothing in this run: PRAC is off (--prac none); pass "
              "--prac prac (or pac, rac) to compress\n");
    EXPECT_EQ(unused_flags_notice(parse({"--prac", "pac", "--prac-k-mult", "2", "--prac-t1", "3"}), 1),
              "notice: --prac-k-mult changes nothing in this run: pac keeps no random part (no Q2, no k)\n");
    EXPECT_EQ(unused_flags_notice(parse({"--prac", "rac", "--prac-refresh", "exact"}), 1),
              "notice: --prac-refresh changes nothing in this run: rac computes no Q1 (its whole rank is random)\n");
    EXPECT_EQ(unused_flags_notice(parse({"--galore-rank", "8", "--rso-prox", "1", "--muon-momentum", "0.5"}), 1),
              "notice: --galore-rank changes nothing in this run: the optimizer is adamw, not galore\n"
              "notice: --muon-momentum changes nothing in this run: the optimizer is adamw, not muon\n"
              "notice: --rso-prox changes nothing in this run: the optimizer is adamw, not rso\n");
    EXPECT_NE(unused_flags_notice(parse({"--prac", "prac", "--prac-shared-subspace"}), 1).find("one rank"),
              std::string::npos);
    EXPECT_EQ(unused_flags_notice(parse({"--prac", "prac", "--prac-shared-subspace", "--prac-t1", "3"}), 2), "");
    EXPECT_EQ(unused_flags_notice(parse({"--zero", "1", "--overlap-comm", "0"}), 1),
              "notice: --overlap-comm changes nothing in this run: one rank has no gradients to average\n"
              "notice: --zero changes nothing in this run: one rank keeps the whole optimizer state\n");
    EXPECT_EQ(unused_flags_notice(parse({"--zero", "1", "--overlap-comm", "0"}), 2), "");
    EXPECT_EQ(unused_flags_notice(parse({"--optimizer", "rso", "--rso-gap", "1", "--rso-prox", "0.5"}), 1),
              "notice: --rso-prox changes nothing in this run: with --rso-gap 1 every subproblem takes one step from "
              "B = 0, where the proximal term's gradient C·B is zero\n");
    EXPECT_EQ(unused_flags_notice(parse({"--optimizer", "rso", "--rso-gap", "2", "--rso-prox", "0.5"}), 1), "");
    EXPECT_EQ(unused_flags_notice(parse({"--optimizer", "galore", "--galore-rank", "8"}), 1), "");
    EXPECT_EQ(unused_flags_notice(parse({"--steps", "3"}), 1), "");
    // --plan writes nothing: its outputs were ignored with no word
    EXPECT_EQ(unused_flags_notice(parse({"--plan", "--save", "m", "--log", "m.jsonl", "--ckpt-dir", "c"}), 1),
              "notice: --save --log --ckpt-dir change nothing: --plan prints the memory plan and exits (nothing is "
              "trained or written)\n");
    EXPECT_EQ(unused_flags_notice(parse({"--plan", "--sample", "8"}), 1).rfind("notice: --sample changes nothing", 0),
              0u);
    // --eval-only trains nothing: its training flags (and PRAC's, an optimizer's) were accepted with no word
    EXPECT_EQ(unused_flags_notice(parse({"--eval-only", "--val-data", "x", "--lr", "1", "--grad-accum", "4", "--prac",
                                         "prac", "--prac-t1", "3", "--batch-size", "2"}), 1),
              "notice: --lr --grad-accum change nothing in this run: --eval-only trains nothing\n"
              "notice: --prac --prac-t1 change nothing in this run: --eval-only trains nothing (an evaluation saves no "
              "activations to compress)\n");
    // and --train-data, which it does not even open (a pattern that matched nothing went unsaid)
    EXPECT_EQ(unused_flags_notice(parse({"--eval-only", "--val-data", "x", "--train-data", "nomatch*"}), 1),
              "notice: --train-data changes nothing in this run: --eval-only trains nothing\n");
    // a warmup longer than the run: not inert, but its learning rate never reaches --lr (the last step's: 3/5 of it)
    EXPECT_EQ(unused_flags_notice(parse({"--steps", "3", "--warmup", "5", "--lr", "1e-3"}), 1),
              "notice: --warmup 5 is longer than --steps 3: the learning rate rises the whole run and ends at 0.0006, "
              "short of --lr 0.001\n");
    EXPECT_EQ(unused_flags_notice(parse({"--steps", "5", "--warmup", "5"}), 1), "");
    // --steps 0 trains nothing either (an evaluation and --save of the initial weights): its training flags were
    // accepted with no word, and so was --lr 0 (weights byte-identical to --steps 0's), and a GaLore/RSO gap as long
    // as the run (the subspace of step 1 throughout: weights byte-identical to the default gap's)
    EXPECT_EQ(unused_flags_notice(parse({"--steps", "0", "--lr", "1", "--optimizer", "muon", "--muon-momentum", "0.5",
                                         "--warmup", "5"}), 1),
              "notice: --lr --warmup --optimizer --muon-momentum change nothing in this run: --steps 0 trains "
              "nothing\n");
    EXPECT_EQ(unused_flags_notice(parse({"--steps", "4", "--lr", "0"}), 1),
              "notice: --lr 0: no step changes a weight (every optimizer's update, weight decay too, is scaled by the "
              "learning rate)\n");
    EXPECT_EQ(unused_flags_notice(parse({"--steps", "4", "--optimizer", "galore", "--galore-gap", "4"}), 1),
              "notice: --galore-gap 4 is as long as the run (4 steps): the subspace chosen at step 1 is never "
              "changed in it\n");
    EXPECT_EQ(unused_flags_notice(parse({"--steps", "5", "--optimizer", "rso", "--rso-gap", "9"}), 1),
              "notice: --rso-gap 9 is as long as the run (5 steps): the subspace chosen at step 1 is never changed "
              "in it\n");
    EXPECT_EQ(unused_flags_notice(parse({"--steps", "5", "--optimizer", "galore", "--galore-gap", "4"}), 1), "");
    // (not with --plan, whose rows follow the flags, or --ckpt-dir, whose step-0 checkpoint records them)
    EXPECT_EQ(unused_flags_notice(parse({"--plan", "--steps", "0", "--optimizer", "muon"}), 1), "");
    EXPECT_EQ(unused_flags_notice(parse({"--steps", "0", "--lr", "1", "--ckpt-dir", "ck"}), 1), "");
    // with --prac-refresh-overlap an interval bounds D and sizes the pending slots in every mode: used
    EXPECT_EQ(unused_flags_notice(parse({"--prac", "pac", "--prac-t2", "4", "--prac-refresh-overlap", "2"}), 1), "");
    EXPECT_EQ(unused_flags_notice(parse({"--prac", "rac", "--prac-t1", "4", "--prac-refresh-overlap", "2"}), 1), "");
    // without PRAC, --prac-shared-subspace is named once
    EXPECT_EQ(unused_flags_notice(parse({"--prac-shared-subspace"}), 1),
              "notice: --prac-shared-subspace changes nothing in this run: PRAC is off (--prac none); pass --prac prac "
              "(or pac, rac) to compress\n");
}

TEST(TrainerCli, OptionRowsShowTokensPerStep) {
    TrainOptions o = parse({"--batch-size", "3", "--seq-len", "64", "--grad-accum", "5"});
    const ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-tiny");
    bool found = false;
    for (const auto& [k, v] : train_options_rows(o, cfg))
        if (k == "tokens per step") {
            found = true;
            EXPECT_EQ(v, "960");
        }
    EXPECT_TRUE(found);
    // data parallel: every rank takes B sequences a micro-batch, so a step takes ranks times as many tokens
    std::map<std::string, std::string> rows;
    for (const auto& [k, v] : train_options_rows(o, cfg, 4)) rows[k] = v;
    EXPECT_EQ(rows["tokens per step"], "3840 (B x T x grad_accum x 4 ranks)");
    EXPECT_EQ(rows["batch_size (B)"], "3 per rank");
}

// A row reads back as the value the run uses: %g printed --beta2 0.9999999 as "1" (a beta2 of 1 never forgets), and
// --eval-tokens 1 as "1" though an evaluation reads whole batches (evaluate.h: one of B x T per rank, 192 tokens here).
TEST(TrainerCli, OptionRowsShowTheValuesUsed) {
    const ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-tiny");
    auto rows_of = [&](const std::vector<std::string>& args, int ranks) {
        std::map<std::string, std::string> rows;
        for (const auto& [k, v] : train_options_rows(parse(args), cfg, ranks)) rows[k] = v;
        return rows;
    };
    auto eval_tokens_of = [&](const std::vector<std::string>& args, int ranks) {  // "0 / 1 (...)" -> "1 (...)"
        const std::string row = rows_of(args, ranks)["eval interval / tokens"];
        return row.substr(row.find(" / ") + 3);
    };
    auto rows = rows_of({"--beta2", "0.9999999", "--lr", "3e-4"}, 1);
    EXPECT_EQ(rows["adam betas / eps"], "0.9, 0.9999999 / 1e-08");
    EXPECT_EQ(rows["lr (peak)"], "0.0003");
    // --prac-initial-spread auto says the steps it resolved to (PRAC: the warmup's; rac: none to spread)
    EXPECT_NE(rows_of({"--prac", "prac", "--warmup", "12"}, 1)["prac refresh"].find("initial spread auto (12 steps)"),
              std::string::npos);
    EXPECT_NE(rows_of({"--prac", "rac", "--warmup", "12"}, 1)["prac refresh"].find("initial spread auto (0 steps)"),
              std::string::npos);
    EXPECT_EQ(rows_of({"--prac", "prac", "--prac-initial-spread", "3"}, 1)["prac refresh"],
              "auto (subspace); initial spread 3");
    EXPECT_EQ(eval_tokens_of({"--batch-size", "3", "--seq-len", "64", "--eval-tokens", "1"}, 1), "1 (up to 192: whole batches)");
    // whole batches of every rank; a multiple of them is said as it is
    EXPECT_EQ(eval_tokens_of({"--batch-size", "3", "--seq-len", "64", "--eval-tokens", "1000"}, 2),
              "1000 (up to 1152: whole batches)");
    EXPECT_EQ(eval_tokens_of({"--batch-size", "3", "--seq-len", "64", "--eval-tokens", "384"}, 2), "384");
    // before the model's T is known (--seq-len 0: the model's) no figure is made up; near 2^63 none overflows
    EXPECT_EQ(eval_tokens_of({"--eval-tokens", "1"}, 1), "1");
    EXPECT_EQ(eval_tokens_of({"--batch-size", "3", "--seq-len", "64", "--eval-tokens", "9223372036854775807"}, 1),
              "9223372036854775807");
    // the evaluation itself: every batch of the epoch (it rounded up past 2^63 and read none, a NaN loss)
    EXPECT_EQ(eval_batches_per_rank(9223372036854775807LL, 3, 64, 1, 10), 10);
    EXPECT_EQ(eval_batches_per_rank(193, 3, 64, 1, 10), 2);
    EXPECT_EQ(rows_of({"--eval-only", "--batch-size", "3", "--seq-len", "64", "--eval-tokens", "1"}, 1)["eval tokens"],
              "1 (up to 192: whole batches)");
    for (float v : {0.9999999f, 0.95f, 1e-8f, 1234567.0f, 3.14159274f, 1e-45f})  // shortest text, same float
        EXPECT_EQ(std::strtof(float_text(v).c_str(), nullptr), v) << float_text(v);
    EXPECT_EQ(float_text(0.95f), "0.95");
}

// A rank of 0 means the model's default; the table shows the number the run uses (GaLore's said "GaLore's for the model" before).
// The defaults: GaLore's benchmark scripts (LLaMA-130M rank 256), the PRAC paper's RSO rank for GPT-2 124M (256).
TEST(TrainerCli, OptionRowsShowResolvedOptimizerRanks) {
    auto optimizer_row = [](const std::vector<std::string>& args, Arch arch, const std::string& model) {
        for (const auto& [k, v] : train_options_rows(parse(args), model_config_load(arch, model)))
            if (k == "optimizer") return v;
        return std::string("(no optimizer row)");
    };
    EXPECT_EQ(optimizer_row({"--optimizer", "galore"}, Arch::LLAMA, "llama-130m"),
              "galore (rank 256, gap 200, scale 0.25)");
    EXPECT_EQ(optimizer_row({"--optimizer", "galore", "--galore-rank", "64"}, Arch::LLAMA, "llama-130m"),
              "galore (rank 64, gap 200, scale 0.25)");
    EXPECT_EQ(optimizer_row({"--optimizer", "rso"}, Arch::GPT2, "gpt2-124m"),
              "rso (rank 256, gap 200, prox 0, projected activations)");
    EXPECT_EQ(optimizer_row({"--optimizer", "rso", "--rso-rank", "32"}, Arch::GPT2, "gpt2-124m"),
              "rso (rank 32, gap 200, prox 0, projected activations)");
}

// =========================================================================================================
// 2. Model configs
// =========================================================================================================

TEST(TrainerConfig, NamedGpt2Sizes) {
    struct Want {
        const char* name;
        int L, NH, C, maxT;
    };
    for (Want w : {Want{"gpt2-124m", 12, 12, 768, 1024}, Want{"gpt2-355m", 24, 16, 1024, 1024},
                   Want{"gpt2-mini", 4, 4, 128, 256}, Want{"gpt2-tiny", 2, 4, 64, 64}}) {
        SCOPED_TRACE(w.name);
        ModelConfig c = model_config_load(Arch::GPT2, w.name);
        EXPECT_EQ(c.arch, Arch::GPT2);
        EXPECT_EQ(c.name, w.name);
        EXPECT_EQ(c.num_layers, w.L);
        EXPECT_EQ(c.num_heads, w.NH);
        EXPECT_EQ(c.channels, w.C);
        EXPECT_EQ(c.hidden, 4 * w.C);
        EXPECT_EQ(c.max_seq_len, w.maxT);
        EXPECT_EQ(c.vocab_size, 50257);
        EXPECT_EQ(c.padded_vocab_size, 50304);
        EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
        EXPECT_TRUE(c.tied_embeddings);
    }
}

TEST(TrainerConfig, NamedLlamaSizes) {
    struct Want {
        const char* name;
        int C, F, NH, L;
    };
    for (Want w : {Want{"llama-35m", 384, 1024, 8, 6}, Want{"llama-60m", 512, 1376, 8, 8},
                   Want{"llama-130m", 768, 2048, 12, 12}, Want{"llama-350m", 1024, 2736, 16, 24},
                   Want{"llama-1b", 2048, 5461, 32, 24}, Want{"llama-mini", 128, 352, 4, 4},
                   Want{"llama-tiny", 64, 176, 4, 2}}) {
        SCOPED_TRACE(w.name);
        ModelConfig c = model_config_load(Arch::LLAMA, w.name);
        EXPECT_EQ(c.arch, Arch::LLAMA);
        EXPECT_EQ(c.channels, w.C);
        EXPECT_EQ(c.hidden, w.F);
        EXPECT_EQ(c.num_heads, w.NH);
        EXPECT_EQ(c.num_layers, w.L);
        EXPECT_EQ(c.vocab_size, 32000);
        EXPECT_EQ(c.padded_vocab_size, 32000);  // already a multiple of 128
        EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
        EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
        EXPECT_FALSE(c.tied_embeddings);
        EXPECT_EQ(c.head_dim() % 2, 0);
    }
}

TEST(TrainerConfig, NamesPerArchitecture) {
    EXPECT_EQ(model_config_names(Arch::GPT2),
              (std::vector<std::string>{"gpt2-124m", "gpt2-355m", "gpt2-mini", "gpt2-tiny"}));
    EXPECT_EQ(model_config_names(Arch::LLAMA),
              (std::vector<std::string>{"llama-35m", "llama-60m", "llama-130m", "llama-350m", "llama-1b",
                                        "llama-mini", "llama-tiny"}));
}

// Parameter counts: the formula above against hand-computed literals. gpt2-124m with the real vocabulary
// is the well-known Hugging Face count 124,439,808; our buffers hold the padded vocabulary 50304, so the
// model reports 124,475,904 (47 padded rows x 768 more). The LLaMA counts match GaLore's model names.
TEST(TrainerConfig, ParameterCountsByFormula) {
    EXPECT_EQ(gpt2_param_count(50257, 12, 768, 3072, 1024), 124439808u);
    const std::map<std::string, size_t> want = {
        {"gpt2-124m", 124475904u},  {"gpt2-355m", 354871296u},  {"llama-35m", 35197824u},
        {"llama-60m", 58073600u},   {"llama-130m", 134105856u}, {"llama-350m", 367969280u},
        {"llama-1b", 1339082752u},
    };
    for (const auto& [name, count] : want) {
        Arch arch = name.rfind("gpt2", 0) == 0 ? Arch::GPT2 : Arch::LLAMA;
        EXPECT_EQ(formula_count(model_config_load(arch, name)), count) << name;
    }
}

// The models' own counts (constructing allocates params + grads in fp32: gpt2-124m is ~1 GB, the largest
// built here; the bigger configs are checked by formula only).
TEST(TrainerConfig, ParameterCountsOfBuiltModels) {
    CpuBackend be;
    for (const char* name : {"gpt2-tiny", "gpt2-mini", "gpt2-124m"}) {
        ModelConfig c = model_config_load(Arch::GPT2, name);
        GPT2<CpuBackend> m(be, c);
        EXPECT_EQ(m.num_parameters, formula_count(c)) << name;
        EXPECT_GE(m.param_buffer_numel, m.num_parameters) << name;
        if (std::string(name) == "gpt2-124m") {
            EXPECT_EQ(m.num_parameters, 124475904u);
            EXPECT_EQ(m.num_parameters - c.vocab_padding_parameters(), 124439808u);  // the printed HF count
        }
    }
    for (const char* name : {"llama-tiny", "llama-mini", "llama-35m"}) {
        ModelConfig c = model_config_load(Arch::LLAMA, name);
        Llama<CpuBackend> m(be, c);
        EXPECT_EQ(m.num_parameters, formula_count(c)) << name;
        if (std::string(name) == "llama-35m") EXPECT_EQ(m.num_parameters, 35197824u);
    }
    EXPECT_EQ(be.live_bytes, 0u);  // every model freed what it allocated
}

TEST(TrainerConfig, UnknownNameListsValidNames) {
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, "nonsense"), "unknown model \"nonsense\"", "gpt2-124m",
                      "gpt2-355m", "gpt2-mini", "gpt2-tiny", "config.json");
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, "llama-7b"), "unknown model \"llama-7b\"", "llama-35m",
                      "llama-1b", "llama-tiny");
}

TEST(TrainerConfig, NamedModelOfTheOtherArchitecture) {
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, "llama-tiny"), "LLaMA", "train_llama");
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, "gpt2-124m"), "GPT-2", "train_gpt2");
}

TEST(TrainerConfig, FixtureConfigsLoad) {
    ModelConfig g = model_config_load(Arch::GPT2, GPT2_FIXTURE + "/config.json");
    EXPECT_EQ(g.vocab_size, 96);
    EXPECT_EQ(g.padded_vocab_size, 128);
    EXPECT_EQ(g.num_layers, 2);
    EXPECT_EQ(g.num_heads, 4);
    EXPECT_EQ(g.channels, 32);
    EXPECT_EQ(g.hidden, 128);  // n_inner null -> 4C
    EXPECT_EQ(g.max_seq_len, 32);
    EXPECT_FLOAT_EQ(g.norm_eps, 1e-5f);

    // transformers-5 layout: rope_theta inside rope_parameters
    ModelConfig l = model_config_load(Arch::LLAMA, LLAMA_FIXTURE + "/config.json");
    EXPECT_EQ(l.vocab_size, 96);
    EXPECT_EQ(l.num_layers, 2);
    EXPECT_EQ(l.num_heads, 4);
    EXPECT_EQ(l.channels, 32);
    EXPECT_EQ(l.hidden, 88);
    EXPECT_EQ(l.max_seq_len, 32);
    EXPECT_FLOAT_EQ(l.norm_eps, 1e-6f);
    EXPECT_FLOAT_EQ(l.rope_theta, 10000.0f);
}

TEST(TrainerConfig, RopeThetaFromEitherLayout) {
    TempDir dir;
    // transformers 5: rope_parameters.rope_theta (the fixture's value changed, so it is really read)
    std::string p5 = derived_config(dir, LLAMA_FIXTURE,
                                    {{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 500000.0}}}}, "a.json");
    EXPECT_FLOAT_EQ(model_config_load(Arch::LLAMA, p5).rope_theta, 500000.0f);
    // transformers 4: top-level rope_theta, rope_scaling null
    std::string p4 = derived_config(dir, LLAMA_FIXTURE,
                                    {{"rope_parameters", nullptr}, {"rope_theta", 250000.0}}, "b.json");
    json j = read_json(p4);
    j["rope_scaling"] = nullptr;
    write_json(p4, j);
    EXPECT_FLOAT_EQ(model_config_load(Arch::LLAMA, p4).rope_theta, 250000.0f);
    // neither: the LLaMA default
    std::string p0 = derived_config(dir, LLAMA_FIXTURE, {{"rope_parameters", nullptr}}, "c.json");
    EXPECT_FLOAT_EQ(model_config_load(Arch::LLAMA, p0).rope_theta, 10000.0f);
    // both, with an older file's rope_scaling: it replaces rope_parameters whole, its theta or the top level's
    // (transformers 5.24's AutoConfig reads 250 and 77 from these two; 500 was used)
    std::string ps = derived_config(dir, LLAMA_FIXTURE,
                                    {{"rope_theta", 250.0}, {"rope_parameters", {{"rope_type", "default"},
                                                                                 {"rope_theta", 500.0}}},
                                     {"rope_scaling", {{"rope_type", "default"}}}}, "d.json");
    EXPECT_FLOAT_EQ(model_config_load(Arch::LLAMA, ps).rope_theta, 250.0f);
    json k = read_json(ps);
    k["rope_scaling"]["rope_theta"] = 77.0;
    write_json(ps, k);
    EXPECT_FLOAT_EQ(model_config_load(Arch::LLAMA, ps).rope_theta, 77.0f);
}

TEST(TrainerConfig, RopeScalingRejected) {
    TempDir dir;
    std::string p = derived_config(
        dir, LLAMA_FIXTURE, {{"rope_parameters", {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1e4}}}}, "a.json");
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, p), "rope_type \"linear\"", "not supported");
    // transformers 4 spelling: rope_scaling {"type": ...}
    std::string q = derived_config(dir, LLAMA_FIXTURE,
                                   {{"rope_parameters", nullptr}, {"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}}},
                                   "b.json");
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, q), "\"dynamic\"", "not supported");
}

TEST(TrainerConfig, HeadsMustDivideWidth) {
    TempDir dir;
    std::string p = derived_config(dir, GPT2_FIXTURE, {{"n_embd", 30}});
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, p), "4 heads do not divide the width 30");
}

TEST(TrainerConfig, OddHeadDimRejectedForLlama) {
    TempDir dir;
    // hidden 36 / 4 heads = head dim 9 (the fixture's explicit head_dim key is dropped)
    std::string p = derived_config(dir, LLAMA_FIXTURE, {{"hidden_size", 36}, {"head_dim", nullptr}});
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, p), "head dim 9 is odd");
    // GPT-2 has no RoPE: an odd head dim is fine there
    std::string g = derived_config(dir, GPT2_FIXTURE, {{"n_embd", 36}}, "g.json");
    EXPECT_EQ(model_config_load(Arch::GPT2, g).head_dim(), 9);
}

TEST(TrainerConfig, GroupedQueryAttentionRejected) {
    TempDir dir;
    std::string p = derived_config(dir, LLAMA_FIXTURE, {{"num_key_value_heads", 2}});
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, p), "num_key_value_heads = 2", "grouped-query");
}

// HF LlamaConfig allows head_dim != hidden_size / num_attention_heads (q_proj is then (heads*head_dim, C)).
// We cannot run that; the key should be checked rather than silently ignored (today it is ignored, and the
// mismatch surfaces only later as a tensor-shape error when weights are loaded, or never for a random init).
TEST(TrainerConfig, ExplicitHeadDimMustMatch) {
    TempDir dir;
    std::string p = derived_config(dir, LLAMA_FIXTURE, {{"head_dim", 16}});
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, p), "head_dim");
}

TEST(TrainerConfig, WrongModelType) {
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, GPT2_FIXTURE + "/config.json"), "model_type is \"gpt2\"",
                      "train_gpt2");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, LLAMA_FIXTURE + "/config.json"), "model_type is \"llama\"",
                      "train_llama");
    // a config without model_type is said as such, with the key to add (it read 'model_type is ""', with the hint
    // that LLaMA configs go to train_llama)
    TempDir dir;
    std::string p = derived_config(dir, GPT2_FIXTURE, {{"model_type", nullptr}});
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, p), "it has no model_type, but train_gpt2 needs a GPT-2 config",
                      "HINT: if it is a GPT-2 config, its model_type is \"gpt2\"");
    // another decoder's type: the hint says which types this trainer takes
    std::string q = derived_config(dir, LLAMA_FIXTURE, {{"model_type", "mistral"}});
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, q), "model_type is \"mistral\"",
                      "HINT: if it is a LLaMA config, its model_type is \"llama\"");
}

TEST(TrainerConfig, MissingOrNonNumericKey) {
    TempDir dir;
    std::string p = derived_config(dir, GPT2_FIXTURE, {{"n_layer", nullptr}}, "a.json");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, p), p.c_str(), "missing key \"n_layer\"");
    std::string q = derived_config(dir, LLAMA_FIXTURE, {{"intermediate_size", nullptr}}, "b.json");
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, q), "missing key \"intermediate_size\"");
    std::string r = derived_config(dir, GPT2_FIXTURE, {{"n_head", "four"}}, "c.json");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, r), "\"n_head\" is not a number");
    std::string s = derived_config(dir, GPT2_FIXTURE, {{"n_layer", 0}}, "d.json");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, s), "\"n_layer\" = 0 is out of range");
}

// Optional keys of the wrong JSON type (a string where a number or object belongs) must give a UserError
// naming the key, not a nlohmann::json type_error, which the binaries report as "internal error" (exit 2).
TEST(TrainerConfig, WrongTypeOfOptionalKeyIsUserError) {
    TempDir dir;
    std::string a = derived_config(dir, LLAMA_FIXTURE, {{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", "big"}}}},
                                   "a.json");
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, a), "rope_theta");
    std::string b = derived_config(dir, LLAMA_FIXTURE, {{"rms_norm_eps", "small"}}, "b.json");
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, b), "rms_norm_eps");
    std::string c = derived_config(dir, GPT2_FIXTURE, {{"n_inner", "wide"}}, "c.json");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, c), "n_inner");
}

TEST(TrainerConfig, UnsupportedFeaturesRejected) {
    TempDir dir;
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, derived_config(dir, GPT2_FIXTURE, {{"activation_function", "relu"}}, "a.json")),
                      "activation_function \"relu\"");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, derived_config(dir, GPT2_FIXTURE, {{"tie_word_embeddings", false}}, "b.json")),
                      "untied");
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, derived_config(dir, LLAMA_FIXTURE, {{"tie_word_embeddings", true}}, "c.json")),
                      "tied");
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, derived_config(dir, LLAMA_FIXTURE, {{"hidden_act", "gelu"}}, "d.json")),
                      "hidden_act \"gelu\"");
    // null: refused as transformers refuses it (it ran silu)
    {
        const std::string p = derived_config(dir, LLAMA_FIXTURE, json::object(), "n.json");
        json j = read_json(p);
        j["hidden_act"] = nullptr;  // (derived_config takes a null for "erase")
        write_json(p, j);
        EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, p), "hidden_act is null", "(\"silu\")");
    }
    EXPECT_USER_ERROR(model_config_load(Arch::LLAMA, derived_config(dir, LLAMA_FIXTURE, {{"attention_bias", true}}, "e.json")),
                      "attention_bias");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, derived_config(dir, GPT2_FIXTURE, {{"vocab_size", 70000}}, "f.json")),
                      "70000", "65536");
    // transformers' GPT2Attention: scores / sqrt(head_dim) only with scale_attn_weights, and also / (layer_idx + 1)
    // with scale_attn_by_inverse_layer_idx (modeling_gpt2.py): other logits, which the model computed with exit 0
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, derived_config(dir, GPT2_FIXTURE, {{"scale_attn_weights", false}}, "g.json")),
                      "scale_attn_weights false");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, derived_config(dir, GPT2_FIXTURE, {{"scale_attn_by_inverse_layer_idx", true}},
                                                                   "h.json")),
                      "scale_attn_by_inverse_layer_idx");
    EXPECT_NO_THROW(model_config_load(Arch::GPT2, derived_config(dir, GPT2_FIXTURE, {{"scale_attn_weights", true},
                                                                                    {"scale_attn_by_inverse_layer_idx", false}}, "i.json")));
}

// A fixture's config.json with one key's value replaced by raw JSON text (numbers nlohmann does not write itself:
// 1e999, 2^64, 12.5 for a size).
static std::string raw_config(const TempDir& dir, const std::string& fixture, const std::string& key,
                              const std::string& raw) {
    json j = read_json(fixture + "/config.json");
    j[key] = "@RAW@";
    std::string text = j.dump(2), mark = "\"@RAW@\"";
    text.replace(text.find(mark), mark.size(), raw);
    static int n = 0;
    std::string path = dir / ("raw" + std::to_string(n++) + ".json");
    write_text(path, text);
    return path;
}

// Numbers of a config.json are range-checked where they are read: an integer beyond int (it used to wrap), a
// fraction for a size (it used to be truncated), negative, beyond float (inf or 0 once a float) or absurd values are
// errors naming the key; sizes whose weight matrices overflow 32-bit element counts are refused.
TEST(TrainerConfig, NumbersOfAConfigAreRangeChecked) {
    TempDir dir;
    struct Case {
        Arch arch;
        const char* key;
        const char* raw;
        const char* says;
    };
    const Case cases[] = {
        {Arch::GPT2, "n_layer", "99999999999", "out of range"},
        {Arch::GPT2, "n_layer", "4294967298", "out of range"},  // 2^32 + 2: 2 after a wrap to int
        {Arch::GPT2, "n_layer", "-3", "out of range"},
        {Arch::GPT2, "n_layer", "12.5", "whole number"},
        {Arch::GPT2, "n_layer", "1e20", "out of range"},
        {Arch::GPT2, "n_embd", "18446744073709551615", "out of range"},  // 2^64 - 1
        {Arch::GPT2, "n_embd", "18446744073709551616", "out of range"},  // 2^64: a double to nlohmann
        {Arch::GPT2, "n_positions", "-1024", "out of range"},
        {Arch::GPT2, "n_inner", "1e300", "out of range"},
        {Arch::GPT2, "layer_norm_epsilon", "1e300", "out of range"},
        {Arch::GPT2, "layer_norm_epsilon", "1e-50", "out of range"},  // positive, but 0 as a float
        {Arch::GPT2, "layer_norm_epsilon", "-1e-5", "out of range"},
        {Arch::GPT2, "layer_norm_epsilon", "0", "out of range"},
        {Arch::LLAMA, "rope_theta", "1e300", "out of range"},  // inf as a float
        {Arch::LLAMA, "rope_theta", "-10000", "out of range"},
        {Arch::LLAMA, "rms_norm_eps", "1e300", "out of range"},
        {Arch::LLAMA, "max_position_embeddings", "99999999999", "out of range"},
        {Arch::LLAMA, "num_key_value_heads", "4.5", "whole number"},
        {Arch::LLAMA, "vocab_size", "-32000", "out of range"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(std::string(c.key) + " = " + c.raw);
        std::string p = raw_config(dir, c.arch == Arch::GPT2 ? GPT2_FIXTURE : LLAMA_FIXTURE, c.key, c.raw);
        const std::string key = std::string("\"") + c.key + "\"";
        EXPECT_USER_ERROR(model_config_load(c.arch, p), p.c_str(), key.c_str(), c.says);
    }
    // JSON has no NaN, and a number beyond double is refused by the parser: both are not JSON
    std::string nan = raw_config(dir, GPT2_FIXTURE, "layer_norm_epsilon", "NaN");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, nan), "not valid JSON");
    std::string huge = raw_config(dir, GPT2_FIXTURE, "layer_norm_epsilon", "1e999");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, huge), "not valid JSON", "1e999");
    // each size in range, their product not: 50304 x 65536 embedding elements > 2^31 - 1
    std::string wide = derived_config(dir, GPT2_FIXTURE, {{"vocab_size", 50257}, {"n_embd", 65536}, {"n_head", 4}},
                                      "wide.json");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, wide), "exceeds 2^31 - 1");
    // and a whole number written as a float is accepted (12.0 is 12)
    std::string whole = raw_config(dir, GPT2_FIXTURE, "n_layer", "2.0");
    EXPECT_EQ(model_config_load(Arch::GPT2, whole).num_layers, 2);
}

TEST(TrainerConfig, BadFiles) {
    TempDir dir;
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, dir / "nope.json"), "cannot open model config", "nope.json");
    write_text(dir / "bad.json", "{\"model_type\": \"gpt2\", \"n_layer\": ");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, dir / "bad.json"), "bad.json", "not valid JSON");
    write_text(dir / "array.json", "[1, 2, 3]");
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, dir / "array.json"), "expected a JSON object");
    // a directory is not a config
    EXPECT_USER_ERROR(model_config_load(Arch::GPT2, dir.path + "/"), dir.path.c_str());
}

// write_hf_config then model_config_load gives the same sizes (what --save writes, --model reads back).
TEST(TrainerConfig, HfConfigRoundTrip) {
    TempDir dir;
    for (const char* name : {"gpt2-tiny", "gpt2-124m", "llama-tiny", "llama-1b"}) {
        Arch arch = std::string(name).rfind("gpt2", 0) == 0 ? Arch::GPT2 : Arch::LLAMA;
        ModelConfig a = model_config_load(arch, name);
        std::string path = dir / (std::string(name) + ".json");
        write_hf_config(path, a);
        ModelConfig b = model_config_load(arch, path);
        SCOPED_TRACE(name);
        EXPECT_EQ(b.vocab_size, a.vocab_size);
        EXPECT_EQ(b.padded_vocab_size, a.padded_vocab_size);
        EXPECT_EQ(b.num_layers, a.num_layers);
        EXPECT_EQ(b.num_heads, a.num_heads);
        EXPECT_EQ(b.channels, a.channels);
        EXPECT_EQ(b.hidden, a.hidden);
        EXPECT_EQ(b.max_seq_len, a.max_seq_len);
        EXPECT_EQ(b.norm_eps, a.norm_eps);
        EXPECT_EQ(b.rope_theta, a.rope_theta);
        EXPECT_EQ(b.tied_embeddings, a.tied_embeddings);
        EXPECT_EQ(read_json(path)["architectures"][0], arch == Arch::GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM");
    }
}

// The PRAC resume key (run.key_spelling 3) is what PRAC computes: a flag the run calls inert (pac's --prac-t2, rac's
// --prac-t1, PRAC's flags with --prac none, the ranks of a class not compressed) and another spelling of one setting
// (--prac-linear 0.30,0.3; --prac-classes nonlinear,linear) resume, where the flags' own spelling refused them; k
// to nine digits (1.2000005 passed for 1.2, not bit-exact); a checkpoint of spelling 2 is compared as it was written.
TEST(TrainerResumeKeys, PracKeyIsWhatPracComputes) {
    const ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-mini");
    auto check = [&](const std::vector<std::string>& written, const std::vector<std::string>& resumed,
                     const char* spelling = "3") {
        TrainState st;
        st.set("run.key_spelling", spelling);
        const TrainOptions w = parse(written);
        st.set("run.prac", std::string(spelling) == "3" ? prac_key_canonical(w) : prac_key(w));
        const TrainOptions r = parse(resumed);
        check_resume_keys(st, r, cfg, {{"prac", prac_key_canonical(r)}});
    };
    using V = std::vector<std::string>;
    EXPECT_NO_THROW(check({}, {"--prac-t1", "3", "--prac-linear", "0.5,0.5"}));
    EXPECT_NO_THROW(check({"--prac", "pac"}, {"--prac", "pac", "--prac-t2", "3", "--prac-k-mult", "2"}));
    EXPECT_THROW(check({"--prac", "pac"}, {"--prac", "pac", "--prac-t1", "3"}), UserError);
    EXPECT_NO_THROW(check({"--prac", "rac"}, {"--prac", "rac", "--prac-t1", "3"}));
    EXPECT_THROW(check({"--prac", "rac"}, {"--prac", "rac", "--prac-t2", "3"}), UserError);
    // with an overlap every interval bounds it: T2 is pac's setting too
    EXPECT_THROW(check({"--prac", "pac", "--prac-refresh-overlap", "1"},
                       {"--prac", "pac", "--prac-refresh-overlap", "1", "--prac-t2", "3"}), UserError);
    EXPECT_NO_THROW(check({"--prac", "prac", "--prac-classes", "linear"},
                          {"--prac", "prac", "--prac-classes", "linear", "--prac-nonlinear", "0.5,0.5"}));
    EXPECT_THROW(check({"--prac", "prac", "--prac-classes", "linear"},
                       {"--prac", "prac", "--prac-classes", "linear", "--prac-linear", "0.5,0.5"}), UserError);
    EXPECT_NO_THROW(check({"--prac", "prac"}, {"--prac", "prac", "--prac-classes", "nonlinear,linear"}));
    EXPECT_NO_THROW(check({"--prac", "prac"}, {"--prac", "prac", "--prac-linear", "0.30,0.3"}));
    EXPECT_THROW(check({"--prac", "prac", "--prac-k-mult", "1.2"}, {"--prac", "prac", "--prac-k-mult", "1.2000005"}),
                 UserError);
    EXPECT_THROW(check({"--prac", "prac"}, {"--prac", "prac", "--prac-linear-ranks", "8,8"}), UserError);
    EXPECT_THROW(check({"--prac", "prac"}, {"--prac", "none"}), UserError);
    // spelling 2: the flags as given, compared as they were (the same flags resume; another is refused)
    EXPECT_NO_THROW(check(V{"--prac", "prac", "--prac-t1", "7"}, V{"--prac", "prac", "--prac-t1", "7"}, "2"));
    EXPECT_THROW(check(V{"--prac", "prac"}, V{"--prac", "prac", "--prac-t1", "7"}, "2"), UserError);
}

// The schedule and optimizer resume keys: a float that differs from the 7th digit on (--lr 1.0000005e-3, the six
// digits of %g spelled it as 1e-3, and the resume accepted another run) is refused; a flag of another optimizer
// (--galore-rank with adamw, which the run calls unaffected) is not in the key; GaLore's default rank and the flag
// spelling it are one setting; a checkpoint written with the earlier spelling (the format strings below, as the
// code before wrote them) still resumes with the same settings.
TEST(TrainerResumeKeys, FloatsToNineDigitsOtherOptimizersFlagsLeftOutEarlierSpellingsMatched) {
    TrainOptions o = parse({"--lr", "1e-3", "--weight-decay", "0.1"});
    const ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-mini");
    auto optimizer_key_of = [&](const TrainOptions& run) {  // as a checkpoint records it
        for (const auto& [k, v] : resume_keys(run, cfg))
            if (k == "optimizer") return v;
        return std::string();
    };
    auto check = [&](const TrainState& st, const TrainOptions& run) {
        check_resume_keys(st, run, cfg, {{"schedule", schedule_key(run)}, {"optimizer", optimizer_key_of(run)}});
    };
    TrainState st;
    st.set("run.key_spelling", "2");
    st.set("run.schedule", schedule_key(o));
    st.set("run.optimizer", optimizer_key_of(o));
    EXPECT_NO_THROW(check(st, o));
    for (const auto& changed : {std::vector<std::string>{"--lr", "1.0000005e-3", "--weight-decay", "0.1"},
                                std::vector<std::string>{"--lr", "1e-3", "--weight-decay", "0.1000004"}})
        EXPECT_THROW(check(st, parse(changed)), UserError) << changed[1] << " " << changed[3];
    EXPECT_NO_THROW(check(st, parse({"--lr", "1e-3", "--weight-decay", "0.1", "--galore-rank", "8", "--muon-momentum",
                                     "0.9"})));
    TrainOptions g = parse({"--optimizer", "galore", "--galore-rank", "8"});
    st.set("run.optimizer", optimizer_key_of(g));
    EXPECT_THROW(check(st, parse({"--optimizer", "galore", "--galore-rank", "16"})), UserError);
    // GaLore's default rank (C/4 for gpt2-mini) and --galore-rank spelling it are one setting, both ways, and a
    // checkpoint written when the key spelled the flag ("galore 0/" for the default) still matches them
    const int default_rank = galore_default_rank(cfg);
    const std::vector<std::string> defaulted = {"--optimizer", "galore"},
                                   explicit_default = {"--optimizer", "galore", "--galore-rank",
                                                       std::to_string(default_rank)},
                                   other = {"--optimizer", "galore", "--galore-rank", std::to_string(default_rank + 1)};
    auto check_optimizer = [&](const TrainState& st, const TrainOptions& run) {
        check_resume_keys(st, run, cfg, {{"optimizer", optimizer_key_of(run)}});
    };
    for (const auto& written : {defaulted, explicit_default}) {
        st.set("run.optimizer", optimizer_key_of(parse(written)));
        EXPECT_NO_THROW(check_optimizer(st, parse(defaulted)));
        EXPECT_NO_THROW(check_optimizer(st, parse(explicit_default)));
        EXPECT_THROW(check_optimizer(st, parse(other)), UserError);
    }
    TrainOptions flag_spelled = parse(defaulted);
    st.set("run.optimizer", optimizer_key(flag_spelled, flag_spelled.galore_rank));  // "galore 0/"
    EXPECT_NO_THROW(check_optimizer(st, parse(defaulted)));
    EXPECT_NO_THROW(check_optimizer(st, parse(explicit_default)));
    EXPECT_USER_ERROR(check_optimizer(st, parse(other)), "written with --galore-rank 0, this run has --galore-rank");

    TrainState old;
    old.set("run.schedule", format("lr %g warmup %d min %g", o.lr, o.warmup, o.min_lr_frac));
    old.set("run.optimizer", format("%s wd %g b1 %g b2 %g eps %g clip %g galore %d/%d/%g muon %g", o.optimizer.c_str(),
                                    o.weight_decay, o.beta1, o.beta2, o.adam_eps, o.grad_clip, o.galore_rank,
                                    o.galore_gap, o.galore_scale, o.muon_momentum));
    EXPECT_NO_THROW(check(old, o));
    // --prac none in the old spelling held the ranks' flags too (finetune_roberta's default ranks changed since): any
    // of them resumes a run of --prac none, and a run that compresses is refused
    auto check_prac = [&](const TrainState& st, const TrainOptions& run) {
        check_resume_keys(st, run, cfg, {{"prac", prac_key_canonical(run)}});
    };
    old.set("run.prac", prac_key(parse(std::vector<std::string>{})));  // "none lin 0.3,0.3 nonlin 0.2,0.2 t1 ..."
    EXPECT_NO_THROW(check_prac(old, parse({"--prac-linear-ranks", "2,2", "--prac-nonlinear-ranks", "2,2"})));
    EXPECT_THROW(check_prac(old, parse({"--prac", "prac"})), UserError);
    // the ranks' OpenMP threads: run.cpu_threads stays rank 0's integer (builds before per-rank counts read it with
    // get_i64), the ranks' own beside it where they differ
    TrainState threads;
    record_cpu_threads(threads, "1,2");
    EXPECT_EQ(threads.get_i64("run.cpu_threads"), 1);
    EXPECT_EQ(threads.get("run.cpu_threads_per_rank"), "1,2");
    record_cpu_threads(threads = TrainState(), "4");
    EXPECT_EQ(threads.get_i64("run.cpu_threads"), 4);
    EXPECT_FALSE(threads.has_meta("run.cpu_threads_per_rank"));
    // a refusal names the flag that differs (compared in the checkpoint's own spelling: not every float differs)
    EXPECT_USER_ERROR(check(old, parse({"--lr", "2e-3", "--weight-decay", "0.1"})),
                      "it was written with --lr 0.001, this run has --lr 0.002\n");
    // a switch is said as the switch (it was "run.shuffle = 0, this run has run.shuffle = 1")
    TrainState shuffled;
    shuffled.set("run.shuffle", "0");
    EXPECT_USER_ERROR(check_compatible(shuffled, "run.shuffle", "1"),
                      "it was written with --no-shuffle, which this run lacks\n---> HINT: resume with the settings of "
                      "the run that wrote it (--no-shuffle)");
    shuffled.set("run.shuffle", "1");
    EXPECT_USER_ERROR(check_compatible(shuffled, "run.shuffle", "0"),
                      "it was written without --no-shuffle, which this run has\n");
}

// finetune_roberta's schedules are Hugging Face's: transformers/optimization.py's lr_lambda of
// get_linear_schedule_with_warmup, get_cosine_schedule_with_warmup (num_cycles = 0.5),
// get_constant_schedule_with_warmup and get_constant_schedule (get_scheduler("constant") ignores the warmup), times
// --lr, written here as that file computes them (in double); the warmup of
// --warmup-ratio is TrainingArguments.get_warmup_steps's math.ceil(steps * ratio) on Python floats, whose products
// are exact facts: 10 * 0.1 == 1.0 (ceil 1) and 100 * 0.07 == 7.000000000000001 (ceil 8; in float32 the product is
// 7.0, ceil 7).
static double hf_lr_lambda(const std::string& schedule, int step, int warmup, int total) {
    if (schedule == "constant") return 1.0;
    if (step < warmup) return (double)step / (double)std::max(1, warmup);
    if (schedule == "constant_with_warmup") return 1.0;
    if (schedule == "cosine") {
        const double progress = (double)(step - warmup) / (double)std::max(1, total - warmup);
        return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * 0.5 * 2.0 * progress)));
    }
    return std::max(0.0, (double)(total - step) / (double)std::max(1, total - warmup));
}

TEST(FinetuneSchedule, IsHuggingFaces) {
    const float lr = 3e-5f;
    for (const char* s : {"linear", "cosine", "constant_with_warmup", "constant"})
        for (auto [total, warmup] : {std::pair{10, 0}, {10, 3}, {10, 10}, {10, 15}, {1, 0}, {7, 1}, {1000, 60}})
            for (int step = 0; step < total; step++)
                EXPECT_NEAR(finetune_lr(step, total, warmup, lr, s), lr * hf_lr_lambda(s, step, warmup, total),
                            1e-6 * lr)
                    << s << " step " << step << " of " << total << ", warmup " << warmup;
    auto parsed = [](std::vector<std::string> args) {
        args.insert(args.begin(), {"finetune_roberta", "--task", "rte", "--init-from", "x", "--data-dir", "d"});
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        FinetuneOptions f;
        parse_finetune_options(f, (int)argv.size(), argv.data());
        return f;
    };
    EXPECT_EQ(warmup_of_ratio(parsed({"--warmup-ratio", "0.1"}).warmup_ratio_value, 10), 1);
    EXPECT_EQ(warmup_of_ratio(parsed({"--warmup-ratio", "0.07"}).warmup_ratio_value, 100), 8);
    EXPECT_EQ(parsed({}).schedule, "linear");  // run_glue's default
    // PRAC's ranks: Table 5's r1 = r2 = 2 on both classes (appendix D: rank r1 + r2 = 4); a class's fractions given
    // alone replace its ranks (only its own), ranks given keep theirs
    const FinetuneOptions table5 = parsed({}), lin = parsed({"--prac-linear", "0.25,0.25"}),
                          both = parsed({"--prac-linear", "0.25,0.25", "--prac-linear-ranks", "4,4"});
    EXPECT_EQ(table5.prac_linear_ranks, "2,2");
    EXPECT_EQ(table5.prac_nonlinear_ranks, "2,2");
    EXPECT_EQ(lin.prac_linear_ranks, "");
    EXPECT_EQ(lin.prac_nonlinear_ranks, "2,2");
    EXPECT_EQ(both.prac_linear_ranks, "4,4");
    EXPECT_EQ(parsed({"--prac-nonlinear", "0.1,0.1"}).prac_nonlinear_ranks, "");
    for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
             {"--lr-schedule", "wsd"}, {"--warmup-ratio", "-0.1"}, {"--warmup-ratio", "0.1x"},
             {"--warmup-ratio", ""}, {"--warmup", "3", "--warmup-ratio", "0.1"}})
        EXPECT_THROW(parsed(bad), UserError) << bad[0] << " " << bad[1];
}

// The ETA's checkpoints still due, against the order in which FineTuner writes them: end_step's at a step
// --ckpt-every divides before the last, end_epoch's at an epoch's end (before its evaluation) unless that step has
// one, finish()'s after the last; due after the progress line of step `from` are those of steps from it on.
TEST(FinetuneSchedule, CheckpointsStillDueFollowTheRunsOrder) {
    for (int spe = 1; spe <= 5; spe++)
        for (int epochs = 1; epochs <= 4; epochs++)
            for (int every = 0; every <= 7; every++) {
                const int total = spe * epochs;
                std::vector<int> written;  // the step of each checkpoint, in order
                for (int s = 1; s <= total; s++) {
                    if (every > 0 && s % every == 0 && s < total) written.push_back(s);
                    if (s % spe == 0 && (written.empty() || written.back() != s)) written.push_back(s);
                }
                written.push_back(total);  // finish()'s
                for (int from = 1; from <= total; from++)
                    EXPECT_EQ(finetune_checkpoints_due(from, total, spe, every),
                              std::count_if(written.begin(), written.end(), [&](int s) { return s >= from; }))
                        << "steps per epoch " << spe << ", epochs " << epochs << ", every " << every << ", from " << from;
            }
}

// A fine-tuned head's classes as its config.json orders them, mapped onto the task's as run_glue maps them
// (transformers' examples/pytorch/text-classification/run_glue.py: label_to_id from the model's label2id when its
// names, lower-cased, are the task's labels): roberta-large-mnli names MNLI's classes contradiction, neutral,
// entailment (its config.json), the task's order (Hugging Face datasets) is entailment, neutral, contradiction
TEST(FinetuneHead, ClassOrderOfTheConfigIsMappedOntoTheTask) {
    const GlueTaskInfo& mnli = glue_task_info(GlueTask::MNLI);
    const GlueTaskInfo& mrpc = glue_task_info(GlueTask::MRPC);
    std::string note;
    EXPECT_EQ(head_rows_in_task_order({"CONTRADICTION", "NEUTRAL", "ENTAILMENT"}, mnli, &note),
              (std::vector<int>{2, 1, 0}));
    EXPECT_EQ(note, "");
    EXPECT_EQ(head_rows_in_task_order({"equivalent", "not_equivalent"}, mrpc, &note), (std::vector<int>{1, 0}));
    // the task's own order, transformers' default names, no names: the rows as they are, nothing said
    EXPECT_TRUE(head_rows_in_task_order(mnli.label_names, mnli, &note).empty());
    EXPECT_TRUE(head_rows_in_task_order({"LABEL_0", "LABEL_1"}, mrpc, &note).empty());
    EXPECT_TRUE(head_rows_in_task_order({}, mrpc, &note).empty());
    EXPECT_EQ(note, "");
    // names of other classes (run_glue warns and ignores them): the rows as they are, said
    EXPECT_TRUE(head_rows_in_task_order({"negative", "positive"}, mrpc, &note).empty());
    EXPECT_NE(note.find("names the head's classes negative, positive, not the task's (not_equivalent, equivalent)"),
              std::string::npos) << note;
    EXPECT_TRUE(head_rows_in_task_order({"equivalent", "Equivalent"}, mrpc, &note).empty()) << "a name twice";
    EXPECT_NE(note, "");
}

// --sample's draw (sample_token) against the distribution it is documented to draw from: softmax(logits / T) over the
// tokens whose logit is at least the k-th largest (transformers' TopKLogitsWarper: ties with the k-th kept), written
// out here in double. 200,000 draws each, Pearson's chi-square over the kept tokens against the critical value of
// p = 1e-6 for its degrees of freedom (each check fails by chance once in a million); a token left out is never drawn.
// Temperature 0 is the first largest logit whatever the draw; draws at the ends of the range take the first and the
// last kept token.
TEST(Sample, TokenDrawsFollowTheSoftmaxAtTheTemperatureOverTheTopK) {
    const double chi2_crit[] = {0, 23.93, 27.63, 30.66, 33.38, 35.89};  // p = 1e-6, df 1..5
    struct Case {
        std::vector<float> logits;
        float temperature;
        int top_k;
    };
    const std::vector<float> six = {2.0f, 1.0f, 0.5f, 0.5f, -1.0f, 3.0f};
    for (const Case& c : {Case{six, 1.0f, 0}, Case{six, 0.5f, 0}, Case{six, 2.0f, 0}, Case{six, 1.0f, 3},
                          Case{six, 0.7f, 2}, Case{six, 1.0f, 6}, Case{{3.0f, 2.0f, 2.0f, 1.0f}, 1.0f, 2}}) {
        SCOPED_TRACE(format("T %g, k %d, V %zu", c.temperature, c.top_k, c.logits.size()));
        const int V = (int)c.logits.size();
        std::vector<float> sorted = c.logits;
        std::sort(sorted.rbegin(), sorted.rend());
        const float cut = c.top_k > 0 ? sorted[c.top_k - 1] : -INFINITY;
        std::vector<double> p(V);
        double z = 0;
        for (int v = 0; v < V; v++) z += p[v] = c.logits[v] >= cut ? std::exp(c.logits[v] / c.temperature) : 0.0;
        std::vector<long> count(V);
        std::mt19937_64 rng(7);
        const long n = 200000;
        for (long i = 0; i < n; i++) count[sample_token(c.logits.data(), V, c.temperature, c.top_k, rng())]++;
        double chi2 = 0;
        int kept = 0;
        for (int v = 0; v < V; v++) {
            if (p[v] == 0) {
                EXPECT_EQ(count[v], 0) << "token " << v << " is outside the top k";
                continue;
            }
            const double expected = n * p[v] / z;
            chi2 += (count[v] - expected) * (count[v] - expected) / expected;
            kept++;
        }
        EXPECT_EQ(kept, c.top_k == 2 && V == 4 ? 3 : c.top_k > 0 ? c.top_k : V);  // (the tie with the 2nd kept)
        EXPECT_LT(chi2, chi2_crit[kept - 1]) << "chi-square over " << kept << " tokens";
        EXPECT_EQ(sample_token(c.logits.data(), V, c.temperature, c.top_k, 0), (int)(std::find_if(c.logits.begin(),
                  c.logits.end(), [&](float l) { return l >= cut; }) - c.logits.begin()));
        int last = V - 1;
        while (c.logits[last] < cut) last--;
        EXPECT_EQ(sample_token(c.logits.data(), V, c.temperature, c.top_k, ~0ull), last);
    }
    const std::vector<float> ties = {1.0f, 5.0f, 5.0f, 2.0f};
    for (uint64_t draw : {0ull, 1ull << 63, ~0ull}) EXPECT_EQ(sample_token(ties.data(), 4, 0.0f, 0, draw), 1);
    // a NaN or +inf logit, or every logit -inf, is no distribution (the sum was NaN and every draw went to the last
    // token): -1 at every temperature and top k, which print_sample refuses; a -inf among finite logits is a token
    // left out
    for (const std::vector<float>& broken : {std::vector<float>{1.0f, NAN, 3.0f, 2.0f},
                                             std::vector<float>{1.0f, INFINITY, 3.0f, 2.0f},
                                             std::vector<float>(4, -INFINITY)})
        for (float t : {0.0f, 1.0f})
            for (int k : {0, 2}) EXPECT_EQ(sample_token(broken.data(), 4, t, k, 1ull << 62), -1) << t << " " << k;
    const std::vector<float> masked = {-INFINITY, 0.0f, -INFINITY, 0.0f};
    EXPECT_EQ(sample_token(masked.data(), 4, 1.0f, 0, 0), 1);
    EXPECT_EQ(sample_token(masked.data(), 4, 1.0f, 0, ~0ull), 3);
}

// A stand-in for a model in print_sample: it records what it reads at each draw and makes the next token its last
// input + 1.
struct RecordingModel {
    int T = 16, B = 1;
    struct {
        int vocab_size = 50257;
    } cfg;
    struct Backend {
        static constexpr const char* name = "cpu";  // print_sample's forwards read the window alone
    } be;
    std::vector<int32_t> inputs;
    std::vector<std::vector<int32_t>> reads;  // the context of each draw
    void eval_loss(const int32_t* in, const int32_t*) { inputs.assign(in, in + T); }
    void logits(float* row, int last, int rows) {
        ASSERT_EQ(rows, 1);
        reads.emplace_back(inputs.begin(), inputs.begin() + last + 1);
        std::fill(row, row + cfg.vocab_size, 0.0f);
        row[(inputs[last] + 1) % cfg.vocab_size] = 1.0f;
    }
};

// A sample starts as the training data starts a document (print_sample's SampleStart): after GPT-2's end of text on
// flat shards (documents one after another), at the prompt's first token with nothing before it on rows (a row holds
// nothing before its document: an EOS there is an input no step trained), and on rows with no prompt at a document's
// first token from the data, drawn with the seed's first 64 bits (RecordingModel's reads); r50k's ids of "It is a
// truth": 1026 318 257 3872, of "The": 464.
TEST(Sample, StartsAsTheTrainingDataStartsADocument) {
    TrainOptions opts;
    opts.sample = 3;
    opts.temperature = 0;
    opts.seed = 5;
    std::vector<uint64_t> draws;  // document_start's
    const SampleStart flat, rows{true, [&](uint64_t draw) { return draws.push_back(draw), 464; }, "--train-data"};
    const volatile std::sig_atomic_t no_stop = 0;
    auto sample = [&](const SampleStart& start, const std::string& prompt, int T, std::string* out) {
        RecordingModel m;
        m.T = T;
        opts.prompt = prompt;
        testing::internal::CaptureStdout();
        EXPECT_EQ(print_sample(m, opts, Arch::GPT2, start, no_stop), 0);
        *out = testing::internal::GetCapturedStdout();
        return m.reads;
    };
    using Ids = std::vector<int32_t>;
    std::string out;
    EXPECT_EQ(sample(flat, "It is a truth", 16, &out),
              (std::vector<Ids>{{50256, 1026, 318, 257, 3872}, {50256, 1026, 318, 257, 3872, 3873},
                                {50256, 1026, 318, 257, 3872, 3873, 3874}}));
    const Gpt2Tokenizer gpt2(ROOT + "/data/gpt2/r50k_base.tiktoken");
    const std::vector<uint32_t> continued = {3873, 3874, 3875};
    const std::string text = "It is a truth" + gpt2.decode(continued.data(), 3) + "\n";
    EXPECT_TRUE(contains(out, "sample (3 tokens after a prompt of 4 tokens):\n" + text)) << out;
    EXPECT_EQ(sample(rows, "It is a truth", 16, &out),
              (std::vector<Ids>{{1026, 318, 257, 3872}, {1026, 318, 257, 3872, 3873},
                                {1026, 318, 257, 3872, 3873, 3874}}));
    EXPECT_TRUE(contains(out, "sample (3 tokens after a prompt of 4 tokens):\n" + text)) << out;
    EXPECT_FALSE(contains(out, "note:")) << out;
    EXPECT_TRUE(draws.empty()) << "a prompt needs no document's start";

    EXPECT_EQ(sample(rows, "", 16, &out), (std::vector<Ids>{{464}, {464, 465}, {464, 465, 466}}));
    ASSERT_EQ(draws.size(), 1u);
    EXPECT_EQ(draws[0], std::mt19937_64(5)());
    const std::vector<uint32_t> the = {464, 465, 466, 467};
    EXPECT_TRUE(contains(out, "note: the shards are rows (a document at each row's start, nothing before it): the "
                              "sample starts at the first token of a document drawn from --train-data (--prompt TEXT "
                              "gives it one)\nsample (3 tokens after a document's first token from --train-data):\n" +
                              gpt2.decode(the.data(), 4) + "\n")) << out;
    // a window of 4 (--seq-len): rows read the prompt's 4 tokens at the first draw and leave its first behind at the
    // second; flat shards' end of text is left behind at the first
    EXPECT_EQ(sample(rows, "It is a truth", 4, &out),
              (std::vector<Ids>{{1026, 318, 257, 3872}, {318, 257, 3872, 3873}, {257, 3872, 3873, 3874}}));
    EXPECT_TRUE(contains(out, "note: the sample outgrows the model's window of 4 tokens (--seq-len): from its token 2 "
                              "on, each is drawn from the last 4 before it (the prompt's start left behind)")) << out;
    EXPECT_EQ(sample(flat, "It is a truth", 4, &out)[0], (Ids{1026, 318, 257, 3872}));
    EXPECT_TRUE(contains(out, "note: the prompt's 4 tokens fill the model's window of 4 (--seq-len)")) << out;
    // a prompt that starts with an end of text leads with it (it was read after a second one, which no flat shard
    // holds: documents are never empty)
    EXPECT_EQ(sample(flat, "<|endoftext|>It is a truth", 16, &out)[0], (Ids{50256, 1026, 318, 257, 3872}));
    EXPECT_TRUE(contains(out, "sample (3 tokens after a prompt of 5 tokens):\n<|endoftext|>" + text)) << out;
    EXPECT_FALSE(contains(out, "note:")) << out;
    // on rows it is read as given too, with a note: no row puts an end of text before its document
    EXPECT_EQ(sample(rows, "<|endoftext|>It is a truth", 16, &out)[0], (Ids{50256, 1026, 318, 257, 3872}));
    EXPECT_TRUE(contains(out, "note: the prompt starts with an end of text, which the rows of --train-data never put "
                              "before a document (nothing precedes a row's document): the model reads it as given"))
        << out;
    EXPECT_EQ(sample(rows, "", 2, &out), (std::vector<Ids>{{464}, {464, 465}, {465, 466}}));
    EXPECT_TRUE(contains(out, "from its token 3 on, each is drawn from the last 2 before it (the document's first "
                              "token left behind)")) << out;
}

// --prompt's end-of-text string is that token, as transformers' tokenizers read it (GPT2Tokenizer's ids of
// "A<|endoftext|>B" are [32, 50256, 33]; T5Tokenizer's of "</s>" [1]), with ordinary text around it, and a part of one
// is text; the sample shows the token as the string, so such a prompt reads back as typed. A prompt that does not read
// back (the built-in SentencePiece model has no token for a snowman) is said, with what the model reads; one that does
// (an end of text in it too) is not.
TEST(Sample, PromptReadsTheEndOfTextStringAsItsToken) {
    const Gpt2Tokenizer gpt2(ROOT + "/data/gpt2/r50k_base.tiktoken");
    EXPECT_EQ(prompt_ids(gpt2, "A<|endoftext|>B"), (std::vector<uint32_t>{32, 50256, 33}));
    EXPECT_EQ(prompt_ids(gpt2, "<|endoftext|><|endoftext|>"), (std::vector<uint32_t>{50256, 50256}));
    EXPECT_EQ(prompt_ids(gpt2, "A<|endoftext|"), gpt2.encode("A<|endoftext|"));
    EXPECT_GT(gpt2.encode("A<|endoftext|").size(), 2u);
    const std::vector<uint32_t> ids = prompt_ids(gpt2, "It<|endoftext|>is");
    EXPECT_EQ(sample_text(gpt2, std::vector<int32_t>(ids.begin(), ids.end())), "It<|endoftext|>is");
    const SpmTokenizer spm(ROOT + "/data/builtin/austen_spm8k.model");
    std::vector<uint32_t> want, b;
    spm.encode("a", want);
    spm.encode("b", b);
    want.push_back(1);
    want.insert(want.end(), b.begin(), b.end());
    EXPECT_EQ(spm.eos_id(), 1u);
    EXPECT_EQ(prompt_ids(spm, "a</s>b"), want);  // (libsentencepiece's ids of the text around it: the split is tested)
    // a tokenizer without an end-of-text string encodes the prompt as it is (finding "" looped forever)
    struct Bytes : Tokenizer {
        void encode(std::string_view t, std::vector<uint32_t>& out) const override {
            for (unsigned char c : t) out.push_back(c);
        }
        std::string decode(const uint32_t*, size_t) const override { return ""; }
        int vocab_size() const override { return 256; }
        uint32_t eos_id() const override { return 0; }
        std::string eos_text() const override { return ""; }
        int kind() const override { return 0; }
        std::string name() const override { return "bytes"; }
    };
    EXPECT_EQ(prompt_ids(Bytes(), "ab"), (std::vector<uint32_t>{'a', 'b'}));

    TrainOptions opts;
    opts.sample = 2;
    opts.spm_model = ROOT + "/data/builtin/austen_spm8k.model";
    const volatile std::sig_atomic_t no_stop = 0;
    for (const auto& [prompt, note] : {std::pair<std::string, std::string>{"It is a truth", ""},
                                       {"It is a \u2603", "note: the prompt's "},
                                       {"It is</s>a truth", ""}}) {
        RecordingModel m;
        m.cfg.vocab_size = 8000;
        opts.prompt = prompt;
        testing::internal::CaptureStdout();
        print_sample(m, opts, Arch::LLAMA, SampleStart{}, no_stop);
        const std::string out = testing::internal::GetCapturedStdout();
        if (note.empty()) {
            EXPECT_FALSE(contains(out, "note:")) << out;
        } else {
            // (" \u2047 ": the unk_surface of sentencepiece_model.proto's TrainerSpec by default, after the piece "▁")
            EXPECT_TRUE(contains(out, " tokens read back as \"It is a  \u2047 \": the tokenizer normalizes some of its "
                                      "text or has no token for some of its characters")) << out;
        }
    }
}

// --sample's text (sample_text): documents apart at the tokenizer's EOS, shown as its own text (SentencePiece's
// decode drops it: two documents read as one); a character cut between tokens as U+FFFD (Python's
// bytes.decode(errors="replace"), as tiktoken's decode); a NUL token kept (the text was cut at it)
TEST(Sample, TextShowsDocumentEndsCutCharactersAndNuls) {
    const Gpt2Tokenizer gpt2(ROOT + "/data/gpt2/r50k_base.tiktoken");
    auto ids = [](const std::vector<uint32_t>& v) { return std::vector<int32_t>(v.begin(), v.end()); };
    std::vector<int32_t> two_docs = ids(gpt2.encode("The end."));
    two_docs.push_back(50256);
    for (int32_t id : ids(gpt2.encode(" Chapter one"))) two_docs.push_back(id);
    EXPECT_EQ(sample_text(gpt2, two_docs), "The end.<|endoftext|> Chapter one");
    int32_t c3 = -1;  // the token of the lone byte 0xC3 (the first of e-acute's two)
    for (uint32_t id = 0; id < 50256; id++)
        if (gpt2.token_bytes(id) == "\xc3") c3 = (int32_t)id;
    ASSERT_GE(c3, 0);
    EXPECT_EQ(sample_text(gpt2, {c3, 64}), "\xef\xbf\xbd" "a");  // b"\xc3a".decode(errors="replace") == "\ufffda"
    EXPECT_EQ(sample_text(gpt2, {64, 188, 64}), std::string("a\0a", 3));  // tiktoken: encode("\0") == [188]
    EXPECT_EQ(sample_text(gpt2, {50256}), "<|endoftext|>");
    EXPECT_EQ(sample_text(gpt2, {}), "");

    const SpmTokenizer spm(ROOT + "/data/builtin/austen_spm8k.model");
    std::vector<uint32_t> spm_ids;
    spm.encode("The end.", spm_ids);
    spm_ids.push_back(spm.eos_id());
    spm.encode("Chapter one", spm_ids);
    const std::vector<int32_t> spm_docs = ids(spm_ids);
    EXPECT_EQ(spm.piece((int)spm.eos_id()), "</s>");
    EXPECT_EQ(sample_text(spm, spm_docs), "The end.</s>Chapter one");
}

// =========================================================================================================
// --hellaswag: multiple-choice examples and their completion-style score (train/multiple_choice.h)
// =========================================================================================================

namespace {

// llm.c's eval file as dev/data/data_common.py's write_evalfile documents it, built field by field: 256 int32
// (magic 20240522, version 1, examples, the longest example's bytes), then per example uint16s 65535, its bytes,
// its index, label, endings, the context's length and ids, each ending's length and ids.
std::string llmc_eval_file(int32_t magic = EVAL_FILE_MAGIC, int32_t count = 2, uint16_t label0 = 2) {
    const std::vector<std::vector<uint16_t>> examples = {
        {65535, 30, 0, label0, 3, 2, 10, 11, 1, 20, 2, 21, 22, 1, 23},  // 15 uint16s: 30 bytes
        {65535, 26, 1, 0, 2, 1, 5, 1, 6, 3, 7, 8, 9},                   // 13: 26 bytes
    };
    int32_t header[256] = {magic, 1, count, 30};
    std::string bytes((const char*)header, sizeof(header));
    for (const auto& e : examples) bytes += std::string((const char*)e.data(), e.size() * 2);
    return bytes;
}

}  // namespace

TEST(HellaSwag, LlmcEvalFileIsReadAsItsLayoutSays) {
    TempDir dir;
    write_text(dir / "hs.bin", llmc_eval_file());
    std::vector<ChoiceExample> ex = read_choice_examples(dir / "hs.bin", nullptr, true, 64, 100, 0);
    ASSERT_EQ(ex.size(), 2u);
    EXPECT_EQ(ex[0].label, 2);
    EXPECT_EQ(ex[0].context, (std::vector<int32_t>{10, 11}));
    EXPECT_EQ(ex[0].endings, (std::vector<std::vector<int32_t>>{{20}, {21, 22}, {23}}));
    EXPECT_EQ(ex[1].label, 0);
    EXPECT_EQ(ex[1].context, (std::vector<int32_t>{5}));
    EXPECT_EQ(ex[1].endings, (std::vector<std::vector<int32_t>>{{6}, {7, 8, 9}}));
    EXPECT_EQ(choice_eval_file_bytes(ex), llmc_eval_file()) << "written as llm.c writes it";
    EXPECT_EQ(read_choice_examples(dir / "hs.bin", nullptr, true, 64, 100, 1).size(), 1u) << "--hellaswag-examples 1";
    // its longest row: context 1 + ending 3, less the last token: 3 positions
    EXPECT_EQ(read_choice_examples(dir / "hs.bin", nullptr, true, 3, 100, 0).size(), 2u);
    EXPECT_USER_ERROR(read_choice_examples(dir / "hs.bin", nullptr, true, 2, 100, 0), "example 0, ending 1, takes 3 "
                      "positions", "more than --seq-len 2\n---> HINT: a --seq-len of 3 or more");
    EXPECT_USER_ERROR(read_choice_examples(dir / "hs.bin", nullptr, true, 64, 23, 0), "example 0 holds id 23, past the "
                      "model's vocabulary of 23");
    EXPECT_USER_ERROR(read_choice_examples(dir / "hs.bin", nullptr, false, 64, 100, 0), "llm.c's eval files hold GPT-2 ids",
                      "pass HellaSwag's hellaswag_val.jsonl");
    // damaged files: named, never read as examples
    write_text(dir / "magic.bin", llmc_eval_file(20240520));
    EXPECT_USER_ERROR(read_choice_examples(dir / "magic.bin", nullptr, true, 64, 100, 0), "not llm.c's eval file (magic "
                      "20240520", "need a name ending in .jsonl");
    std::string cut = llmc_eval_file();
    write_text(dir / "cut.bin", cut.substr(0, cut.size() - 2));
    EXPECT_USER_ERROR(read_choice_examples(dir / "cut.bin", nullptr, true, 64, 100, 0), "example 1 of 2",
                      "its byte count does not fit the file");
    write_text(dir / "label.bin", llmc_eval_file(EVAL_FILE_MAGIC, 2, 3));
    EXPECT_USER_ERROR(read_choice_examples(dir / "label.bin", nullptr, true, 64, 100, 0), "example 0 of 2",
                      "a label past them");
    write_text(dir / "more.bin", llmc_eval_file(EVAL_FILE_MAGIC, 3));
    EXPECT_USER_ERROR(read_choice_examples(dir / "more.bin", nullptr, true, 64, 100, 0), "example 2 of 3",
                      "the file ends inside it");
    std::string swapped = llmc_eval_file();
    swapped[1024 + 2 * 2] = 1;  // example 0's index field says 1
    write_text(dir / "index.bin", swapped);
    EXPECT_USER_ERROR(read_choice_examples(dir / "index.bin", nullptr, true, 64, 100, 0), "example 0 of 2",
                      "its index is not its place in the file");
    // the writer refuses what llm.c's uint16 fields cannot hold (65535 is the start mark)
    std::vector<ChoiceExample> big = ex;
    big[1].endings[0] = {65535};
    EXPECT_USER_ERROR(choice_eval_file_bytes(big), "example 1: id 65535 is no uint16 below 65535");
    write_text(dir / "fewer.bin", llmc_eval_file(EVAL_FILE_MAGIC, 1));
    EXPECT_USER_ERROR(read_choice_examples(dir / "fewer.bin", nullptr, true, 64, 100, 0), "26 bytes after its 1 examples");
}

// HellaSwag's JSON lines, rendered as llm.c's hellaswag.py renders them: the context encoded alone, each ending with a
// space before it (GPT-2's words carry their space), the label as given. The first line is the example in
// hellaswag.py's docstring. (The ids are this tokenizer's, which tokenizer.* checks against tiktoken's golden cases.)
TEST(HellaSwag, JsonLinesAreEncodedAsLlmcRendersThem) {
    TempDir dir;
    const Gpt2Tokenizer gpt2(ROOT + "/data/gpt2/r50k_base.tiktoken");
    const std::vector<std::string> endings = {"is using wrap to wrap a pair of skis.", "is ripping level tiles off.",
                                              "is holding a rubik's cube.", "starts pulling up roofing on a roof."};
    json line = {{"ind", 24}, {"activity_label", "Roof shingle removal"}, {"ctx_a", "A man is sitting on a roof."},
                 {"ctx_b", "he"}, {"ctx", "A man is sitting on a roof. he"}, {"split", "val"},
                 {"split_type", "indomain"}, {"label", 3}, {"endings", endings},
                 {"source_id", "activitynet~v_-JhWjGDPHMY"}};
    write_text(dir / "hs.jsonl", line.dump() + "\n\n" + json{{"ctx", "Then"}, {"endings", {"a", "b"}}, {"label", 0}}.dump() + "\n");
    std::vector<ChoiceExample> ex = read_choice_examples(dir / "hs.jsonl", &gpt2, true, 1024, 50257, 0);
    ASSERT_EQ(ex.size(), 2u) << "a blank line is no example";
    auto ids = [&](const std::string& text) {
        std::vector<uint32_t> v;
        gpt2.encode(text, v);
        return std::vector<int32_t>(v.begin(), v.end());
    };
    EXPECT_EQ(ex[0].context, ids("A man is sitting on a roof. he"));
    ASSERT_EQ(ex[0].endings.size(), 4u);
    for (int k = 0; k < 4; k++) EXPECT_EQ(ex[0].endings[k], ids(" " + endings[k])) << k;
    EXPECT_NE(ex[0].endings[0], ids(endings[0])) << "the space changes the ids";
    EXPECT_EQ(ex[0].label, 3);
    EXPECT_EQ(ex[1].endings, (std::vector<std::vector<int32_t>>{ids(" a"), ids(" b")}));
    write_text(dir / "test.jsonl", json{{"ctx", "Then"}, {"endings", {"a", "b"}}}.dump() + "\n");
    EXPECT_USER_ERROR(read_choice_examples(dir / "test.jsonl", &gpt2, true, 1024, 50257, 0), "line 1 has no \"label\"",
                      "test split has no labels");
    // a Hugging Face datasets export: the label as text ("3"), and the test split's as "" (no label)
    write_text(dir / "hf.jsonl", json{{"ctx", "Then"}, {"endings", {"a", "b"}}, {"label", "1"}}.dump() + "\n");
    EXPECT_EQ(read_choice_examples(dir / "hf.jsonl", &gpt2, true, 1024, 50257, 0).at(0).label, 1);
    write_text(dir / "hftest.jsonl", json{{"ctx", "Then"}, {"endings", {"a", "b"}}, {"label", ""}}.dump() + "\n");
    EXPECT_USER_ERROR(read_choice_examples(dir / "hftest.jsonl", &gpt2, true, 1024, 50257, 0), "test split has no labels");
    write_text(dir / "word.jsonl", json{{"ctx", "Then"}, {"endings", {"a", "b"}}, {"label", "B"}}.dump() + "\n");
    EXPECT_USER_ERROR(read_choice_examples(dir / "word.jsonl", &gpt2, true, 1024, 50257, 0), "line 1 has no \"label\" "
                      "(the right ending's index): \"B\" is no index");
    // the file named as --hellaswag's: missing (not .jsonl: it read as an eval file's "cannot read"), a directory
    EXPECT_USER_ERROR(read_choice_examples(dir / "hs.json", &gpt2, true, 1024, 50257, 0), "--hellaswag", "no such file");
    EXPECT_USER_ERROR(read_choice_examples(dir.path, &gpt2, true, 1024, 50257, 0), "is a directory: it takes one file");
    write_text(dir / "bad.jsonl", line.dump() + "\n{\"ctx\": \n");
    EXPECT_USER_ERROR(read_choice_examples(dir / "bad.jsonl", &gpt2, true, 1024, 50257, 0), "line 2 is no JSON object");
    // invalid UTF-8 (and a control byte) in the line: quoted as \xNN, not written raw to the terminal
    write_text(dir / "utf.jsonl", "{\"ctx\": \"caf\xc3\xa9 \xff\x1b[2J\"}\n");
    try {
        read_choice_examples(dir / "utf.jsonl", &gpt2, true, 1024, 50257, 0);
        ADD_FAILURE() << "an invalid line was read";
    } catch (const UserError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("line 1 is no JSON object"), std::string::npos) << m;
        EXPECT_NE(m.find("\\xff"), std::string::npos) << m;
        for (unsigned char c : m) EXPECT_TRUE(c != 0xFF && c != 0x1B) << m;
    }
    EXPECT_EQ(printable_text("caf\xc3\xa9\t\xff\x1b\xe2\x82"), "caf\xc3\xa9\t\\xff\\x1b\\xe2\\x82");
    // kept: 2-, 3- and 4-byte characters; escaped: a C1 control (CSI, U+009B), overlong '/', a surrogate, DEL
    EXPECT_EQ(printable_text("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    EXPECT_EQ(printable_text("a\xc2\x9b" "b\xc0\xaf" "c\xed\xa0\x80" "d\x7f"),
              "a\\xc2\\x9bb\\xc0\\xafc\\xed\\xa0\\x80d\\x7f");
    write_text(dir / "label.jsonl", json{{"ctx", "Then"}, {"endings", {"a", "b"}}, {"label", 2}}.dump() + "\n");
    EXPECT_USER_ERROR(read_choice_examples(dir / "label.jsonl", &gpt2, true, 1024, 50257, 0), "label 2 is no index of its 2 "
                      "endings");
    write_text(dir / "empty.jsonl", json{{"ctx", ""}, {"endings", {"a", "b"}}, {"label", 0}}.dump() + "\n");
    EXPECT_USER_ERROR(read_choice_examples(dir / "empty.jsonl", &gpt2, true, 1024, 50257, 0), "example 0 has an empty "
                      "context");
    write_text(dir / "one.jsonl", json{{"ctx", "Then"}, {"endings", {"a"}}, {"label", 0}}.dump() + "\n");
    EXPECT_USER_ERROR(read_choice_examples(dir / "one.jsonl", &gpt2, true, 1024, 50257, 0), "line 1 has 1 ending(s): "
                      "a choice needs 2 or more");
}

// score_choices against a brute force over the examples: a stand-in model whose loss at a position is a function of
// its input and target ids (NaN where the target is ignored: a scored padding position makes the score an error),
// the reference summing each ending's losses from the context's last id on. Random examples of 1-6 context ids and
// 2-5 endings of 1-5 ids, a copy of an ending among them (equal losses: the first wins, as torch's argmin), scored
// in micro-batches of 1, 3 and 8 rows and over 1, 2 and 3 ranks (the ranks' counts summed): the same counts.
TEST(HellaSwag, ScoresAsABruteForceOverEveryBatchingAndRankSplit) {
    auto loss_of = [](int32_t input, int32_t target) { return ((input * 31 + target * 17) % 13) / 3.0f + 0.1f; };
    std::mt19937 rng(7);
    auto draw = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    std::vector<ChoiceExample> ex(60);
    int T = 0;
    for (ChoiceExample& e : ex) {
        for (int i = draw(1, 6); i > 0; i--) e.context.push_back(draw(0, 49));
        for (int k = draw(2, 5); k > 0; k--) {
            e.endings.emplace_back();
            for (int i = draw(1, 5); i > 0; i--) e.endings.back().push_back(draw(0, 49));
        }
        if (draw(0, 2) == 0) e.endings.push_back(e.endings[draw(0, (int)e.endings.size() - 1)]);
        e.label = draw(0, (int)e.endings.size() - 1);
        for (const auto& end : e.endings) T = std::max(T, (int)(e.context.size() + end.size() - 1));
    }
    ChoiceScore want;
    for (const ChoiceExample& e : ex) {
        std::vector<double> sum, mean;
        for (const auto& end : e.endings) {
            double s = 0;
            for (size_t j = 0; j < end.size(); j++) s += loss_of(j ? end[j - 1] : e.context.back(), end[j]);
            sum.push_back(s);
            mean.push_back(s / end.size());
        }
        want.examples++;
        want.correct += std::min_element(sum.begin(), sum.end()) - sum.begin() == e.label;
        want.correct_norm += std::min_element(mean.begin(), mean.end()) - mean.begin() == e.label;
    }
    ASSERT_GT(want.correct, 5);  // (the labels are random: some right, some wrong)
    ASSERT_LT(want.correct, 55);
    for (int B : {1, 3, 8})
        for (int ranks : {1, 2, 3}) {
            ChoiceScore got;
            for (int rank = 0; rank < ranks; rank++) {
                auto model = [&](const int32_t* in, const int32_t* tg, float* losses) {
                    for (int p = 0; p < B * T; p++) losses[p] = tg[p] >= 0 ? loss_of(in[p], tg[p]) : NAN;
                };
                ChoiceScore s = score_choices(ex, B, T, rank, ranks, model);
                got.examples += s.examples, got.correct += s.correct, got.correct_norm += s.correct_norm;
            }
            SCOPED_TRACE(format("B %d, %d rank(s)", B, ranks));
            EXPECT_EQ(got.examples, want.examples);
            EXPECT_EQ(got.correct, want.correct);
            EXPECT_EQ(got.correct_norm, want.correct_norm);
        }
}
