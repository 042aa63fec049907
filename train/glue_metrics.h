// The metrics each GLUE task reports (CoLA: Matthews correlation; SST-2, QNLI, RTE, MNLI: accuracy; MRPC, QQP:
// F1 of the positive class and accuracy; STS-B: Pearson and Spearman correlation), in double, with the
// conventions of scikit-learn and SciPy that GLUE's own scripts use (test_glue_metrics checks them against
// values those libraries computed). Unlabeled examples (label -1) are an error, not silently skipped.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "data/glue.h"

inline void glue_check_sizes(size_t a, size_t b, const char* what) {
    CHECK_USER(a == b && a > 0, "%s: %zu predictions for %zu labels", what, a, b);
}

inline double glue_accuracy(const std::vector<int>& pred, const std::vector<int>& label) {
    glue_check_sizes(pred.size(), label.size(), "accuracy");
    size_t right = 0;
    for (size_t i = 0; i < pred.size(); i++) right += pred[i] == label[i];
    return (double)right / (double)pred.size();
}

// F1 of class 1 (sklearn's f1_score, average="binary"): 0 when there is no true or predicted positive.
inline double glue_f1(const std::vector<int>& pred, const std::vector<int>& label) {
    glue_check_sizes(pred.size(), label.size(), "F1");
    double tp = 0, fp = 0, fn = 0;
    for (size_t i = 0; i < pred.size(); i++) {
        tp += pred[i] == 1 && label[i] == 1;
        fp += pred[i] == 1 && label[i] != 1;
        fn += pred[i] != 1 && label[i] == 1;
    }
    return tp == 0 ? 0.0 : 2 * tp / (2 * tp + fp + fn);
}

// Matthews correlation over K classes from the confusion matrix (sklearn's matthews_corrcoef; 0 when a marginal
// is constant, i.e. the denominator is 0).
inline double glue_matthews(const std::vector<int>& pred, const std::vector<int>& label, int num_classes) {
    glue_check_sizes(pred.size(), label.size(), "Matthews correlation");
    std::vector<double> t(num_classes, 0), p(num_classes, 0);
    double correct = 0, n = (double)pred.size();
    for (size_t i = 0; i < pred.size(); i++) {
        CHECK_USER(pred[i] >= 0 && pred[i] < num_classes && label[i] >= 0 && label[i] < num_classes,
                   "Matthews correlation: class %d / %d outside 0..%d", pred[i], label[i], num_classes - 1);
        t[label[i]]++;
        p[pred[i]]++;
        correct += pred[i] == label[i];
    }
    double tp = 0, tt = 0, pp = 0;
    for (int k = 0; k < num_classes; k++) {
        tp += t[k] * p[k];
        tt += t[k] * t[k];
        pp += p[k] * p[k];
    }
    double den = std::sqrt(n * n - pp) * std::sqrt(n * n - tt);
    return den == 0 ? 0.0 : (correct * n - tp) / den;
}

inline double glue_pearson(const std::vector<double>& x, const std::vector<double>& y) {
    glue_check_sizes(x.size(), y.size(), "Pearson correlation");
    double n = (double)x.size(), mx = 0, my = 0;
    for (size_t i = 0; i < x.size(); i++) mx += x[i], my += y[i];
    mx /= n, my /= n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < x.size(); i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    if (!(sxx > 0 && syy > 0)) return NAN;  // a constant sequence: undefined (SciPy's pearsonr returns nan too)
    return sxy / std::sqrt(sxx * syy);
}

// 1-based ranks, ties given the mean of the ranks they span (SciPy's rankdata, method="average").
inline std::vector<double> glue_ranks(const std::vector<double>& x) {
    std::vector<size_t> order(x.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
    std::vector<double> rank(x.size());
    for (size_t i = 0; i < order.size();) {
        size_t j = i;
        while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) j++;
        for (size_t k = i; k <= j; k++) rank[order[k]] = 0.5 * (double)(i + j) + 1.0;
        i = j + 1;
    }
    return rank;
}

inline double glue_spearman(const std::vector<double>& x, const std::vector<double>& y) {
    return glue_pearson(glue_ranks(x), glue_ranks(y));
}

// The task's metrics by name, in GLUE's order; the first picks the best epoch (GLUE's own score of a task averages
// MRPC's and QQP's F1 and accuracy, STS-B's Pearson and Spearman; not computed here). Classification:
// pred / label are class ids; STS-B: score / target are the similarities.
inline std::vector<std::pair<std::string, double>> glue_metrics(GlueTask task, const std::vector<int>& pred,
                                                                const std::vector<int>& label,
                                                                const std::vector<double>& score = {},
                                                                const std::vector<double>& target = {}) {
    for (int l : label) CHECK_USER(l >= 0, "GLUE metrics need labels: this split has unlabeled examples (label -1)");
    switch (task) {
        case GlueTask::COLA: return {{"matthews", glue_matthews(pred, label, 2)}};
        case GlueTask::MRPC:
        case GlueTask::QQP: return {{"f1", glue_f1(pred, label)}, {"accuracy", glue_accuracy(pred, label)}};
        case GlueTask::STSB: return {{"pearson", glue_pearson(score, target)}, {"spearman", glue_spearman(score, target)}};
        default: return {{"accuracy", glue_accuracy(pred, label)}};
    }
}
