#!/usr/bin/env python3
"""Reference values of the GLUE metrics for test_glue_metrics (train/glue_metrics.h), computed with the libraries
GLUE's evaluation uses: scikit-learn (matthews_corrcoef, f1_score, accuracy_score) and SciPy (pearsonr,
spearmanr). Writes test/fixtures/glue/metrics.json. Needs `pip install numpy scipy scikit-learn`.

    python3 test/reference/make_glue_fixtures.py
"""
import json
import os

import numpy as np
import scipy
import sklearn
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "glue", "metrics.json")


def classification(name, pred, label, classes):
    pred, label = [int(p) for p in pred], [int(l) for l in label]
    case = {"name": name, "classes": classes, "pred": pred, "label": label,
            "accuracy": accuracy_score(label, pred), "matthews": matthews_corrcoef(label, pred)}
    if classes == 2:
        case["f1"] = f1_score(label, pred, zero_division=0)
    return case


def regression(name, score, target):
    score, target = [float(s) for s in score], [float(t) for t in target]
    return {"name": name, "score": score, "target": target,
            "pearson": float(pearsonr(score, target)[0]), "spearman": float(spearmanr(score, target)[0])}


def main():
    rng = np.random.default_rng(20261125)
    cls = []
    for n in (7, 200, 1043):  # 1043: CoLA's dev set size
        label = rng.integers(0, 2, n)
        noisy = np.where(rng.random(n) < 0.3, 1 - label, label)  # 70% right: a positive correlation
        cls.append(classification(f"binary n={n}", noisy, label, 2))
    label = rng.integers(0, 2, 50)
    cls.append(classification("all predicted 0 (MCC 0, F1 0)", np.zeros(50, int), label, 2))
    cls.append(classification("anti-correlated", 1 - label, label, 2))
    label = rng.integers(0, 3, 300)
    cls.append(classification("three classes", np.where(rng.random(300) < 0.5, label, rng.integers(0, 3, 300)), label, 3))
    reg = []
    target = rng.uniform(0, 5, 150)
    reg.append(regression("continuous", target + rng.normal(0, 1, 150), target))
    # ties in both: scores and targets on a 0.5 grid (STS-B's gold scores are often whole or half)
    t2 = np.round(rng.uniform(0, 5, 120) * 2) / 2
    reg.append(regression("ties on a 0.5 grid", np.round((t2 + rng.normal(0, 1.2, 120)) * 2) / 2, t2))
    doc = {"generator": f"test/reference/make_glue_fixtures.py (numpy {np.__version__}, scipy {scipy.__version__}, "
                        f"scikit-learn {sklearn.__version__})",
           "classification": cls, "regression": reg}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {len(cls)} classification and {len(reg)} regression cases")


if __name__ == "__main__":
    main()
