// JSONL metrics: one object per optimizer step and per evaluation, appended and flushed line by line so a
// killed run keeps everything it logged. Non-finite numbers are written as null (JSON has no NaN).
#pragma once
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

struct MetricsLog {
    FILE* f = nullptr;
    // start_over: an earlier run's records are dropped (--overwrite), at this run's first record (a run refused
    // before it leaves them); otherwise records are appended (a resumed run's log goes on; --eval-only adds its
    // evaluation)
    bool truncate_first = false;
    MetricsLog(const std::string& path, bool start_over) : truncate_first(start_over) {
        if (path.empty()) return;
        std::error_code ec;  // its directory is made, as --save's and --ckpt-dir's are
        const std::filesystem::path dir = std::filesystem::path(path).parent_path();
        if (!dir.empty()) std::filesystem::create_directories(dir, ec);
        f = std::fopen(path.c_str(), "a");
        if (!f) fail("cannot open the metrics log %s for appending: %s", path.c_str(), std::strerror(errno));
    }
    // before each record: the --overwrite truncation, once
    void begin_record() {
        if (!truncate_first) return;
        truncate_first = false;
        if (ftruncate(fileno(f), 0) != 0) fail("cannot empty the metrics log for --overwrite: %s", std::strerror(errno));
    }
    ~MetricsLog() {
        if (f) std::fclose(f);
    }
    MetricsLog(const MetricsLog&) = delete;
    MetricsLog& operator=(const MetricsLog&) = delete;

    static std::string num(double x) { return std::isfinite(x) ? format("%.9g", x) : "null"; }

    void step(int step, float loss, float lr, float grad_norm, double tokens_per_s, double ms, size_t mem_bytes) {
        if (!f) return;
        begin_record();
        std::fprintf(f,
                     "{\"type\":\"step\",\"step\":%d,\"loss\":%s,\"lr\":%s,\"grad_norm\":%s,\"tokens_per_s\":%s,"
                     "\"ms_per_step\":%s,\"mem_peak_bytes\":%zu}\n",
                     step, num(loss).c_str(), num(lr).c_str(), num(grad_norm).c_str(), num(tokens_per_s).c_str(),
                     num(ms).c_str(), mem_bytes);
        std::fflush(f);
    }
    void eval(int step, float val_loss, long long tokens) {
        if (!f) return;
        begin_record();
        std::fprintf(f, "{\"type\":\"eval\",\"step\":%d,\"val_loss\":%s,\"val_ppl\":%s,\"val_tokens\":%lld}\n", step,
                     num(val_loss).c_str(), num(std::exp((double)val_loss)).c_str(), tokens);
        std::fflush(f);
    }
    // Any other record: {"type":TYPE, then the numbers and strings in order} (finetune_roberta's glue_eval, memory
    // and final records). Names and strings are plain words here; quotes and backslashes are escaped anyway.
    void record(const std::string& type, const std::vector<std::pair<std::string, double>>& numbers,
                const std::vector<std::pair<std::string, std::string>>& strings = {}) {
        if (!f) return;
        begin_record();
        auto quote = [](const std::string& s) {
            std::string q = "\"";
            for (char c : s) q += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
            return q + "\"";
        };
        std::string line = "{\"type\":" + quote(type);
        for (const auto& [k, v] : strings) line += "," + quote(k) + ":" + quote(v);
        for (const auto& [k, v] : numbers) line += "," + quote(k) + ":" + num(v);
        std::fprintf(f, "%s}\n", line.c_str());
        std::fflush(f);
    }
};
