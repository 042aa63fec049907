// Files for the CPU tests that write them: a fixture with a fresh temporary directory, and whole-file byte I/O.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

// A fresh directory under /tmp, removed with everything in it at the end of the test.
struct TmpDirTest : ::testing::Test {
    std::string dir;
    void SetUp() override {
        char tmpl[] = "/tmp/prac_test_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir = tmpl;
    }
    void TearDown() override { std::filesystem::remove_all(dir); }
    std::string file(const std::string& name) const { return dir + "/" + name; }
    // Names of leftover temporary files of the atomic writers (".tmp." in the name).
    std::vector<std::string> temp_files() const {
        std::vector<std::string> out;
        for (const auto& e : std::filesystem::directory_iterator(dir)) {
            std::string n = e.path().filename().string();
            if (n.find(".tmp.") != std::string::npos) out.push_back(n);
        }
        return out;
    }
};

inline std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), (std::streamsize)bytes.size());
}
