// Helpers shared by the trainer tests (test_trainer.cpp, test_trainer_config.cpp, test_trainer_weights.cpp): the
// source-tree paths of the fixtures, TempDir, text / JSON files, and derived_config (a fixture's config.json with
// some keys changed). Whole-file reads use read_bytes from test_files.h.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <system_error>

#include "test/test_files.h"

#ifndef PRAC_SOURCE_DIR
#error "PRAC_SOURCE_DIR must be the repository root"
#endif

namespace fs = std::filesystem;
using json = nlohmann::json;

inline const std::string ROOT = PRAC_SOURCE_DIR;
inline const std::string GPT2_FIXTURE = ROOT + "/test/fixtures/gpt2_tiny";
inline const std::string LLAMA_FIXTURE = ROOT + "/test/fixtures/llama_tiny";

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A fresh directory under /tmp, removed with everything in it when the test ends.
struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/prac_test_trainer_XXXXXX";
        char* p = mkdtemp(tmpl);
        if (!p) throw std::runtime_error("mkdtemp failed");
        path = p;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string operator/(const std::string& name) const { return path + "/" + name; }
};

inline void write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    ASSERT_TRUE(f.good()) << "cannot write " << path;
}

inline json read_json(const std::string& path) { return json::parse(read_bytes(path)); }

inline void write_json(const std::string& path, const json& j) { write_text(path, j.dump(2)); }

// A config file derived from a fixture's config.json with some keys changed (null value = key removed).
inline std::string derived_config(const TempDir& dir, const std::string& fixture_dir, const json& changes,
                                  const std::string& name = "config.json") {
    json j = read_json(fixture_dir + "/config.json");
    for (auto it = changes.begin(); it != changes.end(); ++it) {
        if (it.value().is_null())
            j.erase(it.key());
        else
            j[it.key()] = it.value();
    }
    std::string path = dir / name;
    write_json(path, j);
    return path;
}
