// prep_data's inputs: the input files (--input and --val-input expanded, their type told by their names), and
// the byte sources that read them: files, the gzip/xz/zstd decompressors, tar archives and their entries,
// lines.
#include <archive.h>
#include <archive_entry.h>
#include <glob.h>
#include <lzma.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>  // getenv, strtoull
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "common/error.h"
#include "common/files.h"  // file_identity
#include "common/strings.h"  // to_lower
#include "tools/prep_data/prep_data.h"

namespace fs = std::filesystem;

namespace prep {

static bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ---------------------------------------------------------------------------------------------------------
// Input files
// ---------------------------------------------------------------------------------------------------------

FileType classify(const std::string& path) {
    std::string n = to_lower(fs::path(path).filename().string());
    FileType t;
    if (ends_with(n, ".tgz")) return {KIND_TAR, CODEC_GZIP};
    if (ends_with(n, ".txz")) return {KIND_TAR, CODEC_XZ};
    if (ends_with(n, ".tzst")) return {KIND_TAR, CODEC_ZSTD};
    const std::pair<const char*, Codec> codecs[] = {{".gz", CODEC_GZIP}, {".xz", CODEC_XZ}, {".zst", CODEC_ZSTD},
                                                   {".zstd", CODEC_ZSTD}};
    for (const auto& [ext, c] : codecs) {
        if (ends_with(n, ext)) {
            t.codec = c;
            n.resize(n.size() - std::strlen(ext));
            break;
        }
    }
    if (ends_with(n, ".txt") || ends_with(n, ".text")) t.kind = KIND_TEXT;
    else if (ends_with(n, ".jsonl") || ends_with(n, ".json") || ends_with(n, ".ndjson")) t.kind = KIND_JSONL;
    else if (ends_with(n, ".tar")) t.kind = KIND_TAR;
    else if (t.codec != CODEC_NONE) t.kind = KIND_TAR;  // OpenWebText's urlsf_subsetNN-M_data.xz
    return t;
}

// A top-level file we cannot read: say why and what to do.
[[noreturn]] static void unsupported_file(const std::string& path) {
    std::string n = to_lower(path);
    if (ends_with(n, ".parquet"))
        fail("%s: parquet is not read by prep_data\n---> HINT: convert it to JSON lines first: python3 -c "
             "\"import pandas as p,sys; p.read_parquet(sys.argv[1]).to_json(sys.argv[2], orient='records', "
             "lines=True)\" %s out.jsonl", path.c_str(), path.c_str());
    // (the hint's output keeps the content's extension, a.jsonl.zst: a.jsonl.bz2.zst is refused by its name)
    if (ends_with(n, ".bz2"))
        fail("%s: this compression is not supported (gzip, xz and zstd are)\n---> HINT: recompress it: bzip2 -dc %s "
             "| zstd -o %s.zst", path.c_str(), path.c_str(), path.substr(0, path.size() - 4).c_str());
    if (ends_with(n, ".zip") || ends_with(n, ".lz4") || ends_with(n, ".7z"))
        fail("%s: this compression is not supported (gzip, xz and zstd are)\n---> HINT: unpack it, and read its "
             "files, or recompress each with zstd keeping its content's extension (NAME.jsonl.zst, NAME.txt.zst)",
             path.c_str());
    fail("%s: unknown file type (by its name)\n---> HINT: prep_data reads *.txt, *.jsonl/*.json/*.ndjson and "
         "*.tar, each optionally .gz/.xz/.zst; rename the file if its content is one of these",
         path.c_str());
}

// A directory's *.txt files, sorted by path, each once: a file reached by several paths (a symbolic link beside its
// target, a link to a folder listed already) is read under the path that sorts first, and the others are said as
// skipped; a link to a folder on its own path (a loop) is not entered; links that lead nowhere are said; a folder
// that cannot be listed is named. What is read depends on the tree alone, not on the order the system lists it in.
static void add_dir(const std::string& dir, int src, std::vector<InputFile>& out, bool quiet) {
    std::vector<std::pair<std::string, std::string>> found;  // (path, canonical path)
    std::vector<std::string> chain;  // canonical folders from `dir` down to the one being listed: a loop's targets
    int dangling = 0, loops = 0;
    size_t others = 0;        // regular files that are not text (a .jsonl beside the .txt files: skipped, said below)
    std::string first_other;
    std::error_code ec;
    chain.push_back(fs::weakly_canonical(dir, ec).string());
    std::string opening = dir;  // the directory the iterator opens next: the one an error is about
    auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code e;
        chain.resize((size_t)it.depth() + 1);  // (the folders above this entry)
        if (it->is_directory(e)) {
            const std::string canonical = fs::weakly_canonical(it->path(), e).string();
            if (std::find(chain.begin(), chain.end(), canonical) != chain.end()) {
                it.disable_recursion_pending();
                loops++;
            } else {
                chain.push_back(canonical);
                opening = it->path().string();
            }
        } else if (it->is_regular_file(e)) {
            if (classify(it->path().string()).kind == KIND_TEXT)
                found.push_back({it->path().string(), file_identity(it->path().string())});
            else if (!others++ || it->path().string() < first_other)
                first_other = it->path().string();
        } else if (it->is_symlink(e) && !fs::exists(it->path(), e)) {
            dangling++;
        }
    }
    CHECK_USER(!ec, "cannot list directory %s (in --%s %s): %s", opening.c_str(), src == VAL ? "val-input" : "input",
               dir.c_str(), ec.message().c_str());
    std::sort(found.begin(), found.end());
    std::set<std::string> seen;  // file_identity: symbolic and hard links to a file are that file
    size_t again = 0;
    std::vector<std::string> files;
    for (const auto& [path, identity] : found) {
        if (seen.insert(identity).second) files.push_back(path);
        else again++;
    }
    CHECK_USER(!files.empty(), "directory %s has no .txt files\n---> HINT: a directory input stands for its *.txt "
               "files; give JSON lines or archives by name or pattern", dir.c_str());
    if (!quiet) {  // (on stderr with the run's other messages; --quiet leaves them out as it does the others)
        if (others > 0)
            std::fprintf(stderr, "note: %s: read its %zu .txt file(s); %zu other file(s) there are not read (the "
                         "first by name: %s): a directory stands for its *.txt files, give JSON lines or archives by "
                         "name or pattern\n", dir.c_str(), files.size(), others, first_other.c_str());
        if (again > 0)
            std::fprintf(stderr, "note: %s: skipped %zu path(s) to files listed already under another name (symbolic "
                         "or hard links; each file is read once, under the name that sorts first)\n", dir.c_str(),
                         again);
        if (loops > 0)
            std::fprintf(stderr, "note: %s: did not enter %d symbolic link(s) to a folder on their own path (a "
                         "loop)\n", dir.c_str(), loops);
        if (dangling > 0)
            std::fprintf(stderr, "note: %s: skipped %d symbolic link(s) that lead nowhere\n", dir.c_str(), dangling);
    }
    for (auto& p : files) {
        const auto size = fs::file_size(p, ec);  // (a file removed or replaced since the listing)
        CHECK_USER(!ec, "cannot read the size of %s (in directory %s): %s\n---> HINT: was it removed or changed while "
                   "prep_data listed the directory? check the file and its permissions", p.c_str(), dir.c_str(),
                   ec.message().c_str());
        out.push_back({p, (int64_t)size, src, -1});
    }
}

static void add_input(const std::string& spec, int src, std::vector<InputFile>& out, bool quiet) {
    const char* flag = src == VAL ? "--val-input" : "--input";
    std::vector<std::string> paths;
    struct stat named;
    // a path that exists is read as named: "book [vol 1].txt" is a file, not a pattern (as one it matched
    // "book v.txt", or nothing; a shell's expansion of *.txt passes such names on too)
    if (spec.find_first_of("*?[") != std::string::npos && stat(spec.c_str(), &named) != 0) {
        glob_t g;
        int rc = glob(spec.c_str(), 0, nullptr, &g);
        std::error_code cwd_ec;
        if (rc == GLOB_NOMATCH)
            fail("%s %s: no file matches this pattern\n---> HINT: check the path (relative to the current "
                 "directory %s); the corpora are downloaded separately (prep_data --help: Getting the data)",
                 flag, spec.c_str(), fs::current_path(cwd_ec).c_str());
        CHECK_USER(rc == 0, "%s %s: cannot expand the pattern (glob error %d)", flag, spec.c_str(), rc);
        for (size_t i = 0; i < g.gl_pathc; i++) paths.push_back(g.gl_pathv[i]);  // sorted by glob
        globfree(&g);
    } else {
        paths.push_back(spec);
    }
    for (const auto& p : paths) {
        struct stat st;
        if (stat(p.c_str(), &st) != 0)
            fail("%s %s: %s", flag, p.c_str(), std::strerror(errno));
        if (S_ISDIR(st.st_mode)) {
            add_dir(p, src, out, quiet);
            continue;
        }
        CHECK_USER(S_ISREG(st.st_mode), "%s %s is not a regular file\n---> HINT: prep_data reads files (their sizes "
                   "make its progress and --resume): write a stream to a file first", flag, p.c_str());
        if (classify(p).kind == KIND_UNKNOWN) unsupported_file(p);
        out.push_back({p, (int64_t)st.st_size, src, -1});
    }
}

std::vector<InputFile> expand_inputs(const Options& o) {
    std::vector<InputFile> files;
    for (const auto& s : o.val_inputs) add_input(s, VAL, files, o.quiet);  // val first: closed before train starts
    for (const auto& s : o.inputs) add_input(s, TRAIN, files, o.quiet);
    std::map<std::string, size_t> seen;  // file_identity: a hard link is the file it links to
    for (size_t i = 0; i < files.size(); i++) {
        auto [it, fresh] = seen.emplace(file_identity(files[i].path), i);
        if (!fresh) {
            const auto& a = files[it->second];  // (the --val-input where the splits differ: those come first)
            const char* b = files[i].path.c_str();
            if (a.path != files[i].path) {  // two names of one file
                if (a.split_src != files[i].split_src)
                    fail("%s (a --val-input) and %s (an --input) are one file (hard or symbolic links): validation "
                         "documents would leak into training", a.path.c_str(), b);
                fail("%s and %s are one file (hard or symbolic links): its documents would be read twice",
                     a.path.c_str(), b);
            }
            if (a.split_src != files[i].split_src)
                fail("%s is both a --val-input and an --input: validation documents would leak into training", b);
            fail("%s is given twice (overlapping --input patterns?)", b);
        }
    }
    return files;
}

// ---------------------------------------------------------------------------------------------------------
// Byte sources: files, decompressors, tar entries. read() returns 0 only at the end, throws UserError on
// corrupt data naming the file.
// ---------------------------------------------------------------------------------------------------------

FileSource::FileSource(const std::string& p, std::atomic<uint64_t>* c) : path(p), counter(c) {
    f = std::fopen(p.c_str(), "rb");
    CHECK_USER(f, "cannot open %s: %s", p.c_str(), std::strerror(errno));
}

FileSource::~FileSource() { std::fclose(f); }

size_t FileSource::read(char* buf, size_t cap) {
    size_t n = std::fread(buf, 1, cap, f);
    if (n == 0 && std::ferror(f)) fail("error reading %s: %s", path.c_str(), std::strerror(errno));
    counter->fetch_add(n, std::memory_order_relaxed);
    return n;
}

namespace {

// Common input buffering of the decompressors.
struct Decoder : ByteSource {
    ByteSource& in;
    std::string name;
    std::vector<char> ibuf = std::vector<char>(1 << 17);
    bool eof = false;
    uint64_t total_in = 0;
    Decoder(ByteSource& i, const std::string& n) : in(i), name(n) {}
    size_t fill() {  // reads the next chunk of compressed bytes into ibuf; sets eof at the end
        size_t n = in.read(ibuf.data(), ibuf.size());
        if (n == 0) eof = true;
        total_in += n;
        return n;
    }
    [[noreturn]] void corrupt(const char* codec, const std::string& why) const {
        if (total_in == 0)
            fail("%s is empty (0 bytes), not %s data\n---> HINT: an interrupted download? fetch it again",
                 name.c_str(), codec);
        fail("%s: %s\n---> HINT: the file is damaged or cut short (an interrupted download?): test it with "
             "\"%s -t\" and fetch it again",
             name.c_str(), why.c_str(), std::strcmp(codec, "gzip") == 0 ? "gzip" : codec);
    }
};

struct GzipSource : Decoder {
    z_stream zs{};
    bool member_open = true, finished = false;
    GzipSource(ByteSource& i, const std::string& n) : Decoder(i, n) {
        CHECK_USER(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, "zlib: cannot initialize");
    }
    ~GzipSource() override { inflateEnd(&zs); }
    size_t read(char* buf, size_t cap) override {
        zs.next_out = (Bytef*)buf;
        zs.avail_out = (uInt)cap;
        while (zs.avail_out == cap && !finished) {
            if (zs.avail_in == 0 && !eof) {
                zs.avail_in = (uInt)fill();
                zs.next_in = (Bytef*)ibuf.data();
            }
            if (!member_open) {  // between gzip members (gzip allows several, and zero padding after)
                while (zs.avail_in > 0 && *zs.next_in == 0) zs.next_in++, zs.avail_in--;
                if (zs.avail_in == 0) {
                    if (eof) finished = true;
                    continue;
                }
                if (*zs.next_in != 0x1f) corrupt("gzip", "unexpected bytes after the end of the gzip data");
                inflateReset(&zs);
                member_open = true;
            }
            int ret = inflate(&zs, Z_NO_FLUSH);
            if (ret == Z_STREAM_END) {
                member_open = false;
            } else if (ret == Z_BUF_ERROR) {
                if (eof && zs.avail_in == 0) corrupt("gzip", "unexpected end of the gzip data (truncated)");
            } else if (ret != Z_OK) {
                corrupt("gzip", format("corrupt gzip data (zlib: %s)", zs.msg ? zs.msg : zError(ret)));
            }
        }
        return cap - zs.avail_out;
    }
};

struct XzSource : Decoder {
    lzma_stream xs = LZMA_STREAM_INIT;
    bool finished = false;
    XzSource(ByteSource& i, const std::string& n) : Decoder(i, n) {
        CHECK_USER(lzma_stream_decoder(&xs, UINT64_MAX, LZMA_CONCATENATED) == LZMA_OK, "liblzma: cannot initialize");
    }
    ~XzSource() override { lzma_end(&xs); }
    size_t read(char* buf, size_t cap) override {
        xs.next_out = (uint8_t*)buf;
        xs.avail_out = cap;
        while (xs.avail_out == cap && !finished) {
            if (xs.avail_in == 0 && !eof) {
                xs.avail_in = fill();
                xs.next_in = (const uint8_t*)ibuf.data();
            }
            if (eof && total_in == 0) corrupt("xz", "");
            lzma_ret ret = lzma_code(&xs, eof ? LZMA_FINISH : LZMA_RUN);
            if (ret == LZMA_STREAM_END) finished = true;
            else if (ret == LZMA_OK) continue;
            else if (ret == LZMA_FORMAT_ERROR) corrupt("xz", "not xz data (bad magic bytes)");
            else if (ret == LZMA_DATA_ERROR) corrupt("xz", "corrupt xz data");
            else if (ret == LZMA_BUF_ERROR) corrupt("xz", "unexpected end of the xz data (truncated)");
            else if (ret == LZMA_MEM_ERROR) fail("%s: out of memory decompressing xz", name.c_str());
            else if (ret == LZMA_OPTIONS_ERROR) corrupt("xz", "unsupported xz options");
            else corrupt("xz", format("xz error %d", (int)ret));
        }
        return cap - xs.avail_out;
    }
};

struct ZstdSource : Decoder {
    ZSTD_DStream* ds;
    ZSTD_inBuffer zin{nullptr, 0, 0};
    size_t last = 1;  // ZSTD_decompressStream's last result; 0 = a frame just ended
    ZstdSource(ByteSource& i, const std::string& n) : Decoder(i, n) {
        ds = ZSTD_createDStream();
        CHECK_USER(ds && !ZSTD_isError(ZSTD_initDStream(ds)), "libzstd: cannot initialize");
    }
    ~ZstdSource() override { ZSTD_freeDStream(ds); }
    size_t read(char* buf, size_t cap) override {
        ZSTD_outBuffer zout{buf, cap, 0};
        while (true) {
            if (zin.pos == zin.size && !eof) {
                zin.size = fill();
                zin.src = ibuf.data();
                zin.pos = 0;
            }
            if (eof && total_in == 0) corrupt("zstd", "");
            size_t before = zin.pos;
            size_t r = ZSTD_decompressStream(ds, &zout, &zin);
            if (ZSTD_isError(r)) corrupt("zstd", format("corrupt zstd data (%s)", ZSTD_getErrorName(r)));
            bool progress = zin.pos != before || zout.pos > 0;
            if (progress) last = r;  // a call with no input after a finished frame asks for the next header
            if (zout.pos > 0) return zout.pos;
            if (eof && zin.pos == zin.size && !progress) {
                if (last != 0) corrupt("zstd", "unexpected end of the zstd data (truncated)");
                return 0;
            }
        }
    }
};

}  // namespace

std::unique_ptr<ByteSource> make_decoder(Codec c, ByteSource& in, const std::string& name) {
    switch (c) {
        case CODEC_GZIP: return std::make_unique<GzipSource>(in, name);
        case CODEC_XZ: return std::make_unique<XzSource>(in, name);
        case CODEC_ZSTD: return std::make_unique<ZstdSource>(in, name);
        default: return nullptr;
    }
}

// TarReader's read callback for libarchive; an exception of its ByteSource is kept for TarReader::raise.
static la_ssize_t tar_read_cb(archive* ar, void* self_, const void** out) {
    auto* self = (TarReader*)self_;
    try {
        size_t n = self->in.read(self->buf.data(), self->buf.size());
        *out = self->buf.data();
        return (la_ssize_t)n;
    } catch (...) {
        self->err = std::current_exception();
        archive_set_error(ar, EIO, "read error");
        return -1;
    }
}

TarReader::TarReader(ByteSource& i, const std::string& n, bool maybe_not) : in(i), name(n), maybe_not_a_tar(maybe_not) {
    a = archive_read_new();
    CHECK_USER(a, "libarchive: out of memory");
    archive_read_support_format_tar(a);
    if (archive_read_open(a, this, nullptr, &tar_read_cb, nullptr) != ARCHIVE_OK) {
        try {
            raise("cannot open");
        } catch (...) {
            archive_read_free(a);
            throw;
        }
    }
}

TarReader::~TarReader() { archive_read_free(a); }

bool names_a_tar(const std::string& path) {
    const std::string base = to_lower(fs::path(path).filename().string());
    return base.find(".tar") != std::string::npos || base.find(".tgz") != std::string::npos ||
           base.find(".txz") != std::string::npos || base.find(".tzst") != std::string::npos;
}

void TarReader::raise(const char* what) {
    if (err) std::rethrow_exception(err);  // (the bytes could not be read: damage, whatever the content)
    // (libarchive's "Unrecognized archive format" is EILSEQ, ARCHIVE_ERRNO_FILE_FORMAT, here)
    if (maybe_not_a_tar && entries == 0 && archive_errno(a) == EILSEQ) throw NotATar{};
    const char* e = archive_error_string(a);
    const bool named_tar = names_a_tar(name);
    fail("%s: %s: %s\n---> HINT: %s", name.c_str(), what, e ? e : "unknown libarchive error",
         named_tar || entries > 0 ? "the archive is damaged or cut short, or not a tar archive (test it with \"tar -tf\")"
                   : "a compressed file without .txt or .jsonl before its .gz/.xz/.zst is read as a tar archive (as "
                     "OpenWebText's *.xz); if it holds text or JSON lines, rename it (NAME.txt.gz, NAME.jsonl.gz)");
}

bool TarReader::next(std::string* path, bool* regular) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) {
        // a download or copy cut right after an entry ends there too: GNU tar, bsdtar and Python end an archive with
        // zero blocks, which libarchive reads (and counts) before it says the end (what follows them, the padding
        // to a record, it leaves unread)
        if (entries > 0 && archive_filter_bytes(a, 0) < entry_end + 512)
            fail("%s: the tar archive ends after %lld entr%s without its end-of-archive marker (blocks of zeros): "
                 "cut short right after an entry (GNU tar and Python's tarfile list such an archive without a "
                 "word)\n---> HINT: fetch or copy it again; if it is whole, made by a writer that omits the marker, "
                 "append one to the uncompressed archive: head -c 1024 /dev/zero >> ARCHIVE.tar", name.c_str(),
                 (long long)entries, entries == 1 ? "y" : "ies");
        return false;
    }
    if (r < ARCHIVE_WARN) raise("not a readable tar archive");
    const char* p = archive_entry_pathname(e);
    *path = p ? p : "";
    *regular = archive_entry_filetype(e) == AE_IFREG;
    entries++;
    entry_end = archive_filter_bytes(a, 0) + (archive_entry_size(e) + 511) / 512 * 512;
    return true;
}

void TarReader::skip() {
    if (archive_read_data_skip(a) < ARCHIVE_WARN) raise("cannot skip an entry");
}

size_t EntrySource::read(char* buf, size_t cap) {
    la_ssize_t n = archive_read_data(t.a, buf, cap);
    if (n < 0) t.raise(format("cannot read entry %s", name.c_str()).c_str());
    return (size_t)n;
}

// The longest line read as text: 2 GB (tests: PRAC_TEST_MAX_LINE bytes, to see the message without a file of 2 GB);
// read once, not per file or archive entry
static size_t max_line_bytes() {
    static const size_t most = std::getenv("PRAC_TEST_MAX_LINE")
                                   ? std::strtoull(std::getenv("PRAC_TEST_MAX_LINE"), nullptr, 10)
                                   : (size_t)1 << 31;
    return most;
}

bool LineReader::next(std::string& line) {
    line.clear();
    while (true) {
        if (pos == end) {
            if (done) return !line.empty();
            end = src.read(buf.data(), buf.size());
            pos = 0;
            if (end == 0) {
                done = true;
                return !line.empty();
            }
        }
        const char* p = buf.data() + pos;
        const char* nl = (const char*)std::memchr(p, '\n', end - pos);
        if (nl) {
            line.append(p, nl);
            pos += (size_t)(nl - p) + 1;
            return true;
        }
        line.append(p, end - pos);
        pos = end;
        const size_t most = max_line_bytes();
        CHECK_USER(line.size() < most, "%s: a line of more than %s: is this really text?", name.c_str(),
                   most == (size_t)1 << 31 ? "2 GB" : format("%zu bytes", most).c_str());
    }
}

std::string read_all(ByteSource& s, const std::string& name) {
    std::string out;
    std::vector<char> buf(1 << 18);
    size_t n;
    while ((n = s.read(buf.data(), buf.size())) > 0) {
        out.append(buf.data(), n);
        CHECK_USER(out.size() < (1ull << 31),
                   "%s: a document of more than 2 GB\n---> HINT: --doc-sep blank splits text files at blank lines",
                   name.c_str());
    }
    return out;
}

bool is_blank(const std::string& s) {
    for (char c : s)
        if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v') return false;
    return true;
}

}  // namespace prep
