#include "train/trainer.h"

#include <cerrno>
#include <climits>
#include <cstring>

static bool is_dir(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string builtin_data_dir() {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = 0;
        std::string dir(exe);
        dir = dir.substr(0, dir.rfind('/')) + "/data/builtin";
        if (is_dir(dir)) return dir;
    }
    std::string src = std::string(PRAC_SOURCE_DIR) + "/data/builtin";
    if (is_dir(src)) return src;
    fail("the built-in corpus is not found next to the binary nor in %s\n---> HINT: pass --train-data and "
         "--val-data, or run the binary from the repository it was built in", src.c_str());
}

std::string resolve_weights_path(const std::string& path) {
    if (is_dir(path)) return path + "/model.safetensors";
    return path;
}

void prepare_save_dir(const std::string& dir) {
    std::string partial;
    for (size_t i = 0; i <= dir.size(); i++) {
        if (i == dir.size() || dir[i] == '/') {
            if (!partial.empty() && !is_dir(partial) && mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
                fail("--save: cannot create directory %s (%s)", partial.c_str(), std::strerror(errno));
        }
        if (i < dir.size()) partial += dir[i];
    }
}

void print_table(const char* title, const std::vector<std::pair<std::string, std::string>>& rows) {
    size_t w1 = std::strlen(title), w2 = 0;
    for (const auto& r : rows) {
        w1 = std::max(w1, r.first.size());
        w2 = std::max(w2, r.second.size());
    }
    std::string line = "+" + std::string(w1 + 2, '-') + "+" + std::string(w2 + 2, '-') + "+";
    std::printf("%s\n| %-*s | %-*s |\n%s\n", line.c_str(), (int)w1, title, (int)w2, "", line.c_str());
    for (const auto& r : rows) std::printf("| %-*s | %-*s |\n", (int)w1, r.first.c_str(), (int)w2, r.second.c_str());
    std::printf("%s\n", line.c_str());
}

std::string human_duration(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    long long t = (long long)(s + 0.5);
    if (t < 60) return format("%llds", t);
    if (t < 3600) return format("%lldm%02llds", t / 60, t % 60);
    return format("%lldh%02lldm", t / 3600, (t % 3600) / 60);
}
