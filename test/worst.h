// The running worst of a test's error measures. std::max(worst, NaN) returns worst, and the idiom
// "if (!(d <= worst)) worst = d" keeps a NaN only until the next finite d: an output element left NaN (unwritten
// by a kernel, or a NaN it computed) passed every such check unless it was the last. Here a NaN stays for good
// and fails the "<= tolerance" check that follows.
#pragma once
#include <algorithm>
#include <cmath>

inline double worst_of(double worst, double d) { return std::isnan(worst) || std::isnan(d) ? NAN : std::max(worst, d); }
