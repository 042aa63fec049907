// GPT-2 tokenizer throughput: our encoder (data/gpt2_tokenizer.h) on 1 thread and on all threads, and, when
// python3 can import tiktoken, tiktoken's encode_ordinary_batch on the same documents and thread counts.
//
//   ./build/tools/bench_tokenizer [--doc-bytes N] [--threads 1,2,...] [--repeat R] [--ranks PATH]
//                                 [--no-tiktoken] [FILE ...]
//
// Default text: the six Austen novels (data/austen). The text is cut into documents of about --doc-bytes
// bytes at paragraph boundaries (default 4096, web-document sized; 0 = one document per file), so the
// threads have work to share. Each run uses a fresh tokenizer, so our piece cache starts cold every time
// (tiktoken has none). The best of --repeat runs is reported. Both sides' tokens are checked to agree.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/files.h"  // read_file_bytes
#include "common/strings.h"  // parse_whole, split_commas
#include "data/gpt2_tokenizer.h"

#ifndef PRAC_SOURCE_DIR
#error "PRAC_SOURCE_DIR must point at the repository root"
#endif

// tiktoken's side: reads the documents, times encode_ordinary_batch per thread count, prints
// "threads seconds tokens checksum" lines (checksum = FNV-1a over the ids, as on the C++ side).
static const char* TIKTOKEN_SCRIPT = R"PY(
import struct, sys, time
import tiktoken, tiktoken.load
ranks_path, docs_path, threads, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
enc = tiktoken.Encoding(name="r50k_base_local", pat_str=PAT,
                        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(ranks_path),
                        special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)
data = open(docs_path, "rb").read()
docs, pos = [], 0
while pos < len(data):
    (n,) = struct.unpack_from("<Q", data, pos)
    docs.append(data[pos + 8:pos + 8 + n].decode("utf-8"))
    pos += 8 + n
print("tiktoken", tiktoken.__version__, flush=True)
for t in [int(x) for x in threads.split(",")]:
    best, out = None, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = enc.encode_ordinary_batch(docs, num_threads=t)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    h, ntok = 0xcbf29ce484222325, 0
    for ids in out:
        ntok += len(ids)
        for i in ids:
            h = ((h ^ i) * 0x100000001b3) & 0xffffffffffffffff
    print(t, best, ntok, h, flush=True)
)PY";

static uint64_t fnv(const std::vector<std::vector<uint32_t>>& docs, size_t* ntok) {
    uint64_t h = 0xcbf29ce484222325ull;
    *ntok = 0;
    for (const auto& d : docs) {
        *ntok += d.size();
        for (uint32_t i : d) h = (h ^ i) * 0x100000001b3ull;
    }
    return h;
}

// s as one word for /bin/sh: in single quotes, each ' as '\'' (a path with spaces or quotes stays one argument)
static std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

struct Result {
    int threads;
    double sec;
    size_t ntok;
    uint64_t hash;
};

int main(int argc, char** argv) {
    try {
        const std::string src = PRAC_SOURCE_DIR;
        std::string ranks = src + "/data/gpt2/r50k_base.tiktoken";
        size_t doc_bytes = 4096;
        int repeat = 3;
        bool use_tiktoken = true;
        const int cores = (int)std::max(1u, std::thread::hardware_concurrency());
        std::vector<int> threads = {1, cores};
        std::vector<std::string> files;
        for (int i = 1; i < argc; i++) {
            std::string a = argv[i];
            auto value = [&]() -> std::string {
                if (i + 1 >= argc) fail("%s needs a value", a.c_str());
                return argv[++i];
            };
            if (a == "--doc-bytes") {
                doc_bytes = (size_t)parse_whole("--doc-bytes", value(), 0, LLONG_MAX);
            } else if (a == "--repeat") {
                repeat = (int)parse_whole("--repeat", value(), 1, 1000000);
            } else if (a == "--ranks") {
                ranks = value();
            } else if (a == "--no-tiktoken") {
                use_tiktoken = false;
            } else if (a == "--threads") {
                // every comma-separated piece checked, empty ones too ("", ",", "1,": never an empty list)
                threads.clear();
                const std::string v = value();
                for (const std::string& t : split_commas(v)) {
                    if (t.empty())
                        fail("--threads: '%s' has an empty thread count\n---> HINT: give counts >= 1 or all, "
                             "comma-separated, e.g. --threads 1,all", v.c_str());
                    threads.push_back(t == "all" ? cores : (int)parse_whole("--threads", t, 1, 4096));
                }
            } else if (a == "-h" || a == "--help") {
                std::printf("usage: %s [--doc-bytes N] [--threads 1,all] [--repeat R] [--ranks PATH] "
                            "[--no-tiktoken] [FILE ...]\n"
                            "  --doc-bytes N   documents of about N bytes, cut at paragraphs (default 4096; 0: one "
                            "per file)\n"
                            "  --threads T,... thread counts, each >= 1 or all (default 1,all)\n"
                            "  --repeat R      the best of R >= 1 runs (default 3)\n"
                            "  --ranks PATH    the BPE ranks (default data/gpt2/r50k_base.tiktoken)\n"
                            "  --no-tiktoken   skip tiktoken's side\n"
                            "  FILE ...        the text (default: the six Austen novels in data/austen)\n", argv[0]);
                return 0;
            } else if (!a.empty() && a[0] == '-') {
                fail("unknown flag %s\n---> HINT: see --help", a.c_str());
            } else {
                files.push_back(a);
            }
        }
        threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
        if (files.empty())
            for (const char* n : {"emma", "mansfield-park", "northanger-abbey", "persuasion", "pride-and-prejudice",
                                  "sense-and-sensibility"})
                files.push_back(src + "/data/austen/" + n + ".txt");

        // Documents: paragraphs ("\n\n"-terminated) gathered until doc_bytes.
        std::vector<std::string> docs;
        size_t total = 0;
        for (const auto& f : files) {
            CHECK_USER(!std::filesystem::is_directory(f), "%s is a directory\n---> HINT: pass the text files in it "
                       "(e.g. %s/*.txt)", f.c_str(), f.c_str());
            std::string text = read_file_bytes(f);
            total += text.size();
            if (doc_bytes == 0) {
                docs.push_back(std::move(text));
                continue;
            }
            size_t start = 0;
            while (start < text.size()) {
                size_t end = start;
                while (end < text.size() && end - start < doc_bytes) {
                    size_t p = text.find("\n\n", end);
                    end = p == std::string::npos ? text.size() : p + 2;
                }
                docs.push_back(text.substr(start, end - start));
                start = end;
            }
        }
        // (empty files time nothing: their MB/s and ratio printed as nan)
        CHECK_USER(total > 0, "the input holds no text (%zu empty file%s)\n---> HINT: pass text files",
                   files.size(), files.size() == 1 ? "" : "s");
        std::string tlist;
        for (int t : threads) tlist += (tlist.empty() ? "" : ",") + std::to_string(t);
        std::printf("config: %zu files, %.2f MB text, %zu documents (--doc-bytes %zu), threads %s, "
                    "%d hardware threads, best of %d\n",
                    files.size(), total / 1e6, docs.size(), doc_bytes, tlist.c_str(), cores, repeat);

        std::vector<Result> ours;
        for (int t : threads) {
            Result r{t, 1e30, 0, 0};
            for (int k = 0; k < repeat; k++) {
                Gpt2Tokenizer tok(ranks);  // fresh: cold piece cache
                auto t0 = std::chrono::steady_clock::now();
                auto out = tok.encode_batch(docs, t);
                double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                r.sec = std::min(r.sec, sec);
                r.hash = fnv(out, &r.ntok);
            }
            ours.push_back(r);
        }

        std::vector<Result> tik;
        std::string tik_version, why;
        const char* py = getenv("PYTHON");
        std::string python = py && *py ? py : "python3";
        if (!use_tiktoken) {
            why = "--no-tiktoken";
        } else if (std::system((python + " -c 'import tiktoken' >/dev/null 2>&1").c_str()) != 0) {
            why = python + " cannot import tiktoken (pip install tiktoken)";
        } else {
            char dir[] = "/tmp/prac_bench_tok_XXXXXX";
            if (!mkdtemp(dir)) fail("mkdtemp failed");
            std::string script = std::string(dir) + "/bench.py", docs_path = std::string(dir) + "/docs.bin";
            std::ofstream(script) << TIKTOKEN_SCRIPT;
            {
                std::ofstream o(docs_path, std::ios::binary);
                for (const auto& d : docs) {
                    uint64_t n = d.size();
                    o.write((const char*)&n, 8);
                    o << d;
                }
            }
            // paths quoted: a checkout or --ranks path with spaces or quotes stays one argument ($PYTHON is a
            // command line, as the import check above runs it)
            std::string cmd = python + " " + shell_quote(script) + " " + shell_quote(ranks) + " " +
                              shell_quote(docs_path) + " " + shell_quote(tlist) + " " + std::to_string(repeat);
            FILE* p = popen(cmd.c_str(), "r");
            char line[512];
            while (p && std::fgets(line, sizeof line, p)) {
                if (std::strncmp(line, "tiktoken ", 9) == 0) {
                    tik_version = std::string(line + 9);
                    while (!tik_version.empty() && tik_version.back() == '\n') tik_version.pop_back();
                    continue;
                }
                Result r{};
                unsigned long long ntok = 0, h = 0;
                if (std::sscanf(line, "%d %lf %llu %llu", &r.threads, &r.sec, &ntok, &h) == 4) {
                    r.ntok = ntok;
                    r.hash = h;
                    tik.push_back(r);
                }
            }
            int rc = p ? pclose(p) : -1;
            if (rc != 0 || tik.size() != ours.size()) why = "the tiktoken script failed", tik.clear();
            std::remove(script.c_str());
            std::remove(docs_path.c_str());
            rmdir(dir);
        }

        std::printf("ours: PCRE2 JIT regex + rank BPE, per-thread piece cache; tokens %zu\n", ours[0].ntok);
        if (!tik.empty())
            std::printf("tiktoken %s (python: %s), encode_ordinary_batch(num_threads=N)\n", tik_version.c_str(),
                        python.c_str());
        else
            std::printf("tiktoken: skipped (%s)\n", why.c_str());
        std::printf("\n%8s %10s %12s %14s", "threads", "ours s", "ours MB/s", "MB/s/thread");
        if (!tik.empty()) std::printf(" %10s %12s %14s %8s %6s", "tik s", "tik MB/s", "MB/s/thread", "ratio", "same");
        std::printf("\n");
        bool all_same = true;
        for (size_t i = 0; i < ours.size(); i++) {
            const Result& r = ours[i];
            double mbs = total / 1e6 / r.sec;
            std::printf("%8d %10.3f %12.2f %14.2f", r.threads, r.sec, mbs, mbs / r.threads);
            if (!tik.empty()) {
                const Result& q = tik[i];
                double tmbs = total / 1e6 / q.sec;
                bool same = q.ntok == r.ntok && q.hash == r.hash;
                all_same = all_same && same;
                std::printf(" %10.3f %12.2f %14.2f %7.2fx %6s", q.sec, tmbs, tmbs / q.threads, mbs / tmbs,
                            same ? "yes" : "NO");
            }
            std::printf("\n");
        }
        if (!tik.empty())
            std::printf("\nratio = our MB/s / tiktoken's; same = identical token ids (count + FNV-1a hash)\n");
        return all_same ? 0 : 1;
    } catch (const UserError& e) {
        std::fprintf(stderr, "bench_tokenizer: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_tokenizer: internal error: %s\n", e.what());
        return 2;
    }
}
