// prac_analyze's verdict: do the measured draws agree with the theory computed from the Q1 actually used
// (T = ||X - X Q1 Q1ᵀ||_F²)? A pure function of the numbers prac_analyze measured, kept apart so that a test can hand
// it the numbers of a broken estimator (a wrong k, a principal part off) and see it say so.
//
// Two checks, each "consistent" or not, or left out with the reason:
//   mse   the mean over K draws of e_d = ||X~_d - X||_F² against mse_theory, within t · s.e. (s.e. from the draws'
//         own spread; t is Student's two-sided quantile at FAILURE_PROBABILITY with K - 1 degrees of freedom, as
//         the statistical tests use), or within MSE_ROUNDING of the theory (k = 2 makes e_d nearly deterministic:
//         its spread is then float32 rounding, 1e-8 of the mean, and no t covers a rounding offset)
//   bias  the mean of b_d = <X~_d - X, X> against (c - 1) T, the same way. E[X~] - X = (c - 1) X⊥ with
//         X⊥ = X (I - Q1 Q1ᵀ) (E[Q2 Q2ᵀ] = r2 / (n - r1) of the complement) and <X⊥, X> = T: 0 when unbiased
//         (k_mult = 1). For an estimator of PRAC's form, X~ - X = X (k Q2 Q2ᵀ - (I - Q1 Q1ᵀ)), both e_d and b_d are
//         functions of q = ||X Q2||_F² alone, e_d = (k - 2) b_d + (k - 1) T: the two checks then ask one question
//         (except at k = 2, where e_d = T and b_d alone varies). What b_d adds is a bias of another form: a principal
//         part scaled by 1 + β moves b_d by β (||X||² - T) and e_d only by β² (||X||² - T). Its floor is
//         BIAS_ROUNDING of ||X||_F² (float32 X~ against double sums; measured about 4e-8).
// Not a check: the tail ratio T / Σ_{i>r1} σ_i² (how close the Q1 used is to the exact top-r1 basis) is a fact about
// the refresh, not about the estimator, whose theory takes the T it finds; the float32 Gram's rounding alone moves
// it past 1.02 when T is near 1e-5 of ||X||² (prac_analyze prints it, and --refresh exact beside it is the bar).
// The checks need MIN_DRAWS draws; none is judged when the tail is within float32 rounding of the Gram
// (tail_at_rounding: every ratio then measures the rounding) or zero (nothing to estimate), or for pac (no draws:
// X~ = X Q1 Q1ᵀ, its error T by construction).
#pragma once

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <string>
#include <vector>

struct VerdictInput {
    int draws = 0;
    int r2 = 0;
    bool tail_at_rounding = false;
    double fro2 = 0;                    // ||X||_F²
    double tail = 0;                    // T with the Q1 used
    double mse_theory = 0, mse_mean = 0, mse_stderr = 0;  // e_d
    double bias_mean = 0, bias_stderr = 0, bias_theory = 0;  // b_d; (c - 1) T, c = k r2 / (n - r1)
};

struct VerdictCheck {
    std::string name;       // mse | bias
    double measured = 0;    // the mean over the draws
    double expected = 0;    // the theory
    double allowed = 0;     // the largest |measured - expected| allowed
    bool consistent = false;
};

struct Verdict {
    std::vector<VerdictCheck> checks;
    std::vector<std::string> not_judged;  // why nothing was checked: "fewer than 8 draws (--draws)", ...
    bool consistent() const {
        for (const VerdictCheck& c : checks)
            if (!c.consistent) return false;
        return true;
    }
};

constexpr double VERDICT_FAILURE_PROBABILITY = 1e-6;  // per statistical check, two-sided
constexpr int VERDICT_MIN_DRAWS = 8;
constexpr double VERDICT_MSE_ROUNDING = 1e-3;   // of mse_theory (the statistical tests' floor)
constexpr double VERDICT_BIAS_ROUNDING = 1e-6;  // of ||X||_F²

// Student's t quantile with `dof` degrees of freedom beyond which |t| falls with probability p (two-sided).
inline double student_t_two_sided(double p, int dof) {
    return boost::math::quantile(boost::math::complement(boost::math::students_t_distribution<double>(dof), p / 2));
}

inline Verdict judge_estimator(const VerdictInput& in) {
    Verdict v;
    if (in.tail <= 0)
        v.not_judged.push_back("the tail past r1 is zero (X has rank <= r1: nothing is estimated)");
    else if (in.tail_at_rounding)
        v.not_judged.push_back("the tail past r1 is within float32 rounding (see the warning)");
    else if (in.r2 == 0)
        v.not_judged.push_back("pac draws nothing (X~ = X Q1 Q1^T, its error is T by construction)");
    else if (in.draws < VERDICT_MIN_DRAWS)
        v.not_judged.push_back("fewer than " + std::to_string(VERDICT_MIN_DRAWS) + " draws (--draws)");
    if (!v.not_judged.empty()) return v;
    const double t = student_t_two_sided(VERDICT_FAILURE_PROBABILITY, in.draws - 1);
    auto within = [&](const char* name, double mean, double se, double theory, double floor) {
        const double allowed = std::max(t * se, floor);
        // a NaN mean or s.e. is not consistent with anything
        v.checks.push_back({name, mean, theory, allowed, std::fabs(mean - theory) <= allowed});
    };
    within("mse", in.mse_mean, in.mse_stderr, in.mse_theory, VERDICT_MSE_ROUNDING * in.mse_theory);
    within("bias", in.bias_mean, in.bias_stderr, in.bias_theory, VERDICT_BIAS_ROUNDING * in.fro2);
    return v;
}
