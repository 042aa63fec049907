// See safetensors.h for the format and the guarantees. Spec: github.com/huggingface/safetensors.
#include "common/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "common/files.h"  // write_all, dir_of
#include "common/strings.h"  // join, printable_bytes

// The data area is little-endian and we copy F32 bytes straight into float buffers.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");
static_assert(sizeof(size_t) == 8, "offsets into multi-GB files need a 64-bit size_t");

// The Python library refuses headers over 100 MB; so do we, rather than allocating whatever a
// corrupt length field says. Real headers are well under 1 MB even for 70B models.
static const uint64_t MAX_HEADER_BYTES = 100'000'000;

// ----------------------------------------------------------------------------
// dtypes

struct DtypeInfo {
    const char* name;
    size_t size;
};

// In the order of the Rust library's Dtype enum: its writer sorts tensors by this rank
// (descending), then by name, and we do the same so our files are byte-identical to its.
static const DtypeInfo DTYPES[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2},  {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"C64", 8}, {"F64", 8},  {"I64", 8},     {"U64", 8},
};
static const int NUM_DTYPES = (int)(sizeof(DTYPES) / sizeof(DTYPES[0]));

// Position in DTYPES, or -1 if unknown.
static int dtype_rank(const std::string& dtype) {
    for (int i = 0; i < NUM_DTYPES; i++) {
        if (dtype == DTYPES[i].name) return i;
    }
    return -1;
}

size_t safetensors_dtype_size(const std::string& dtype) {
    int r = dtype_rank(dtype);
    return r < 0 ? 0 : DTYPES[r].size;
}

static std::string known_dtypes() {
    std::string s;
    for (int i = 0; i < NUM_DTYPES; i++) {
        if (i) s += ", ";
        s += DTYPES[i].name;
    }
    return s;
}

// ----------------------------------------------------------------------------
// float conversions

static uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));  // inf, NaN (payload kept)
    if (exp == 0) {
        // zero or subnormal: mant * 2^-24, exactly representable as a normal float
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));  // rebias 15 -> 127
}

uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    // NaN: truncating could clear every mantissa bit and make it inf, so force a quiet NaN.
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040);
    // Round to nearest even: add just under half an ulp, plus one if the kept lsb is odd.
    // A carry out of the mantissa correctly bumps the exponent (and overflows to inf).
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

uint16_t f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));  // quiet NaN
    // 65520 is halfway between 65504 (max f16) and 65536; ties-to-even rounds it up, to inf.
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);
    uint32_t e = a >> 23;
    if (a < 0x38800000u) {
        // below 2^-14: f16 subnormal (or zero). The result is round(value * 2^24), and
        // value * 2^24 = m * 2^(e - 126) with m the 24-bit significand.
        uint32_t s = 126 - e;  // >= 14 here
        if (e == 0 || s > 24) return sign;  // < half the smallest subnormal (f32 subnormals too)
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t q = m >> s;
        uint32_t rem = m & ((1u << s) - 1);
        uint32_t half = 1u << (s - 1);
        if (rem > half || (rem == half && (q & 1))) q++;  // q == 0x400 is the smallest normal
        return (uint16_t)(sign | q);
    }
    uint32_t h = ((e - 112) << 10) | ((a >> 13) & 0x3ff);
    uint32_t rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;  // carry into the exponent is right
    return (uint16_t)(sign | h);
}

// ----------------------------------------------------------------------------
// helpers

static std::string shape_str(const std::vector<int64_t>& shape) {
    return "[" + join(shape) + "]";
}

// Element count of shape, or false on a negative dim or size_t overflow.
static bool checked_numel(const std::vector<int64_t>& shape, uint64_t* out) {
    uint64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) return false;
        if (__builtin_mul_overflow(n, (uint64_t)d, &n)) return false;
    }
    *out = n;
    return true;
}

size_t SafeTensor::numel() const {
    size_t n = 1;
    for (int64_t d : shape) n *= (size_t)d;
    return n;
}

// pread until done: a single call may return fewer bytes (and Linux caps one at ~2 GB).
static void pread_full(int fd, void* dst, uint64_t nbytes, uint64_t offset, const std::string& path) {
    char* p = (char*)dst;
    while (nbytes > 0) {
        ssize_t n = pread(fd, p, nbytes, (off_t)offset);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("%s: read error at byte %llu: %s", path.c_str(), (unsigned long long)offset, strerror(errno));
        if (n == 0) {
            fail("%s: unexpected end of file at byte %llu (file shrank while being read?)\n"
                 "---> HINT: another process may be rewriting this file; retry when it is done",
                 path.c_str(), (unsigned long long)offset);
        }
        p += n;
        nbytes -= (uint64_t)n;
        offset += (uint64_t)n;
    }
}

// ----------------------------------------------------------------------------
// reader

SafeTensorsFile::~SafeTensorsFile() {
    if (fd >= 0) close(fd);
}

SafeTensorsFile::SafeTensorsFile(SafeTensorsFile&& o) noexcept
    : path(std::move(o.path)),
      metadata(std::move(o.metadata)),
      tensors(std::move(o.tensors)),
      file_size(o.file_size),
      data_start(o.data_start),
      fd(o.fd),
      index(std::move(o.index)) {
    o.fd = -1;
}

SafeTensorsFile& SafeTensorsFile::operator=(SafeTensorsFile&& o) noexcept {
    if (this != &o) {
        if (fd >= 0) close(fd);
        path = std::move(o.path);
        metadata = std::move(o.metadata);
        tensors = std::move(o.tensors);
        file_size = o.file_size;
        data_start = o.data_start;
        fd = o.fd;
        index = std::move(o.index);
        o.fd = -1;
    }
    return *this;
}

const SafeTensor* SafeTensorsFile::find(const std::string& name) const {
    auto it = index.find(name);
    return it == index.end() ? nullptr : &tensors[it->second];
}

std::string SafeTensorsFile::name_up_to_a_prefix(const std::string& name) const {
    std::vector<std::string> all = names();
    std::sort(all.begin(), all.end());
    for (const std::string& n : all) {
        bool n_ends_with = n.size() > name.size() && n.compare(n.size() - name.size(), name.size(), name) == 0 &&
                           n[n.size() - name.size() - 1] == '.';
        bool name_ends_with = name.size() > n.size() && name.compare(name.size() - n.size(), n.size(), n) == 0 &&
                              name[name.size() - n.size() - 1] == '.';
        if (n_ends_with || name_ends_with) return n;
    }
    return "";
}

const SafeTensor& SafeTensorsFile::get(const std::string& name) const {
    const SafeTensor* t = find(name);
    if (t) return *t;
    std::vector<std::string> all = names();
    std::sort(all.begin(), all.end());
    std::string examples = join(std::vector<std::string>(all.begin(), all.begin() + std::min<size_t>(all.size(), 5)));
    if (all.size() > 5) examples += ", ...";
    std::string hint;
    const std::string alike = name_up_to_a_prefix(name);
    if (!alike.empty())
        hint = format("\n---> HINT: the file has '%s'; the names may differ by a prefix, so the file may come from "
                      "another tool or model family", alike.c_str());
    if (hint.empty()) {
        hint = "\n---> HINT: check that the file is a checkpoint for this model (GPT-2 vs LLaMA, "
               "our format vs Hugging Face's)";
    }
    fail("tensor '%s' not found in %s; it has %zu tensors, e.g. %s%s", name.c_str(), path.c_str(), tensors.size(),
         all.empty() ? "(none)" : examples.c_str(), hint.c_str());
}

std::vector<std::string> SafeTensorsFile::names() const {
    std::vector<std::string> out;
    out.reserve(tensors.size());
    for (const SafeTensor& t : tensors) out.push_back(t.name);
    return out;
}

std::vector<int64_t> SafeTensorsFile::shape(const std::string& name) const { return get(name).shape; }

void SafeTensorsFile::read_raw(const std::string& name, void* dst, size_t nbytes) const {
    const SafeTensor& t = get(name);
    if (nbytes != t.nbytes) {
        fail("tensor '%s' in %s is %llu bytes (%s %s) but the destination buffer is %zu bytes", name.c_str(),
             path.c_str(), (unsigned long long)t.nbytes, t.dtype.c_str(), shape_str(t.shape).c_str(), nbytes);
    }
    pread_full(fd, dst, t.nbytes, data_start + t.offset, path);
}

void SafeTensorsFile::read_f32(const std::string& name, float* dst, size_t expected_numel) const {
    const SafeTensor& t = get(name);
    if (t.numel() != expected_numel) {
        fail("tensor '%s' in %s has shape %s (%zu elements) but %zu elements were expected\n"
             "---> HINT: the file does not match the model config (n_embd, n_layer, vocab size, ...); "
             "use the config the checkpoint was made with",
             name.c_str(), path.c_str(), shape_str(t.shape).c_str(), t.numel(), expected_numel);
    }
    uint64_t pos = data_start + t.offset;
    if (t.dtype == "F32") {
        pread_full(fd, dst, t.nbytes, pos, path);
        return;
    }
    float (*convert)(uint16_t);
    if (t.dtype == "BF16") {
        convert = bf16_to_f32;
    } else if (t.dtype == "F16") {
        convert = f16_to_f32;
    } else {
        fail("tensor '%s' in %s has dtype %s; only F32, BF16 and F16 can be read as float\n"
             "---> HINT: convert the file to one of those dtypes (e.g. in Python: safetensors.torch.save_file with "
             "each tensor .float())",
             name.c_str(), path.c_str(), t.dtype.c_str());
    }
    // Convert through a bounded staging buffer: a 2 GB embedding must not need 2 GB extra.
    const size_t CHUNK = (size_t)1 << 20;
    std::vector<uint16_t> buf(std::min(CHUNK, expected_numel));
    for (size_t done = 0; done < expected_numel;) {
        size_t n = std::min(CHUNK, expected_numel - done);
        pread_full(fd, buf.data(), n * 2, pos + done * 2, path);
        for (size_t i = 0; i < n; i++) dst[done + i] = convert(buf[i]);
        done += n;
    }
}

// Parses and checks one header entry into t. data_size is the size of the data area.
static void parse_tensor_entry(const std::string& path, const std::string& name, const nlohmann::json& v,
                               uint64_t data_size, SafeTensor* t) {
    const char* p = path.c_str();
    const char* n = name.c_str();
    if (!v.is_object()) fail("%s: header entry for tensor '%s' is not a JSON object", p, n);
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || sh == v.end() || off == v.end()) {
        fail("%s: header entry for tensor '%s' lacks \"dtype\", \"shape\" or \"data_offsets\"", p, n);
    }
    if (!dt->is_string()) fail("%s: tensor '%s' has a dtype that is not a string", p, n);
    t->name = name;
    t->dtype = dt->get<std::string>();
    size_t esize = safetensors_dtype_size(t->dtype);
    if (esize == 0) {
        fail("%s: tensor '%s' has unknown dtype '%s'\n---> HINT: known dtypes: %s", p, n, t->dtype.c_str(),
             known_dtypes().c_str());
    }
    if (!sh->is_array()) fail("%s: tensor '%s' has a shape that is not a JSON array", p, n);
    for (const auto& d : *sh) {
        if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t)INT64_MAX) {
            fail("%s: tensor '%s' has shape %s; dimensions must be non-negative integers", p, n, sh->dump().c_str());
        }
        t->shape.push_back((int64_t)d.get<uint64_t>());
    }
    if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned()) {
        fail("%s: tensor '%s' has data_offsets %s; expected [begin, end] with non-negative integers", p, n,
             off->dump().c_str());
    }
    uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (begin > end) fail("%s: tensor '%s' has data_offsets [%llu, %llu] with begin after end", p, n,
                          (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size) {
        fail("%s: tensor '%s' has data_offsets [%llu, %llu] but the data area is only %llu bytes\n"
             "---> HINT: the file is truncated (interrupted download or copy?); fetch it again",
             p, n, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)data_size);
    }
    uint64_t numel, nbytes;
    if (!checked_numel(t->shape, &numel) || __builtin_mul_overflow(numel, (uint64_t)esize, &nbytes)) {
        fail("%s: tensor '%s' has shape %s, whose size overflows 64 bits", p, n, shape_str(t->shape).c_str());
    }
    if (end - begin != nbytes) {
        fail("%s: tensor '%s' has dtype %s and shape %s (%llu bytes) but data_offsets [%llu, %llu] span %llu bytes",
             p, n, t->dtype.c_str(), shape_str(t->shape).c_str(), (unsigned long long)nbytes,
             (unsigned long long)begin, (unsigned long long)end, (unsigned long long)(end - begin));
    }
    t->offset = begin;
    t->nbytes = nbytes;
}

SafeTensorsFile safetensors_open(const std::string& path) {
    const char* p = path.c_str();
    SafeTensorsFile f;
    f.path = path;
    f.fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // (a named pipe's open waited for a writer forever)
    if (f.fd < 0) {
        int err = errno;
        fail("cannot open safetensors file %s: %s%s", p, strerror(err),
             err == ENOENT ? "\n---> HINT: check the path (relative paths are from the current directory)" : "");
    }
    struct stat st;
    if (fstat(f.fd, &st) != 0) fail("cannot stat %s: %s", p, strerror(errno));
    if (!S_ISREG(st.st_mode))
        fail("%s is not a regular file (a directory, a pipe or a device); expected a .safetensors file", p);
    f.file_size = (uint64_t)st.st_size;
    if (f.file_size < 8) {
        fail("%s is %llu bytes, too short to be a safetensors file (the header length alone is 8 bytes)\n"
             "---> HINT: the file is truncated or empty; fetch or write it again",
             p, (unsigned long long)f.file_size);
    }
    unsigned char lenbuf[8];
    pread_full(f.fd, lenbuf, 8, 0, path);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = (header_len << 8) | lenbuf[i];
    if (header_len > f.file_size - 8 || header_len > MAX_HEADER_BYTES || header_len < 2) {
        // Cloning a Hugging Face repo without git-lfs leaves small text pointer files.
        bool lfs = std::memcmp(lenbuf, "version ", 8) == 0;
        fail("%s: header length %llu does not fit the file (%llu bytes after the length field%s); "
             "not a valid safetensors file%s",
             p, (unsigned long long)header_len, (unsigned long long)(f.file_size - 8),
             header_len > MAX_HEADER_BYTES ? ", and the limit is 100 MB" : "",
             lfs ? "\n---> HINT: this is a Git LFS pointer, not the weights; run `git lfs pull` in its repository"
                 : "\n---> HINT: the file is truncated or not a safetensors file; fetch or write it again");
    }
    std::string header(header_len, '\0');
    pread_full(f.fd, header.data(), header_len, 8, path);
    f.data_start = 8 + header_len;
    uint64_t data_size = f.file_size - f.data_start;

    nlohmann::json j;
    std::set<std::string> names;  // the header's own keys: a name given twice kept its last entry silently
    std::set<std::string> fields;  // the keys of the entry being parsed (a tensor's, or the metadata's)
    std::string twice, twice_in;   // a key given twice, and the entry it is in ("": the header's own)
    std::string entry;
    auto note_key = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (event == nlohmann::json::parse_event_t::key && depth == 1) {
            entry = parsed.get<std::string>();
            fields.clear();
            if (twice.empty() && !names.insert(entry).second) twice = entry, twice_in.clear();
        } else if (event == nlohmann::json::parse_event_t::key && depth == 2 && twice.empty() &&
                   !fields.insert(parsed.get<std::string>()).second) {
            twice = parsed.get<std::string>(), twice_in = entry;
        }
        return true;
    };
    try {
        j = nlohmann::json::parse(header, note_key);
    } catch (const nlohmann::json::exception& e) {
        // (the parser quotes the bytes it read last: a damaged header's binary, escaped so the message stays text)
        fail("%s: the header is not valid JSON: %s\n---> HINT: the file is corrupt or not a safetensors file", p,
             printable_bytes(e.what(), 400).c_str());
    }
    if (!j.is_object()) fail("%s: the header is JSON but not an object", p);
    // what the JSON parser lets by but the format does not: a byte-order mark or anything else before the '{' (the
    // format's "MUST begin with a {"), and NUL bytes (only spaces may pad the header; the safetensors library refuses
    // them as trailing characters)
    if (header[0] != '{')
        fail("%s: the header begins with byte 0x%02x, not '{' as the safetensors format requires\n---> HINT: the file "
             "is corrupt or was written by hand (a UTF-8 byte-order mark?)", p, (unsigned)(uint8_t)header[0]);
    if (size_t nul = header.find('\0'); nul != std::string::npos)
        fail("%s: the header holds a NUL byte at offset %zu (only spaces may pad it)\n---> HINT: the file is corrupt",
             p, nul);
    if (!twice.empty() && twice_in.empty())
        fail("%s: the header names '%s' twice (which entry holds its data is undefined: the safetensors library "
             "keeps the last one silently)\n---> HINT: the file is corrupt; write it again", p, twice.c_str());
    if (!twice.empty())  // (the safetensors library refuses this one: "duplicate field")
        fail("%s: the entry '%s' gives \"%s\" twice\n---> HINT: the file is corrupt; write it again", p,
             twice_in.c_str(), twice.c_str());

    for (auto it = j.begin(); it != j.end(); ++it) {
        if (it.key() == "__metadata__") {
            if (it->is_null()) continue;  // (no metadata: the safetensors library reads it as such)
            if (!it->is_object()) fail("%s: \"__metadata__\" is not a JSON object", p);
            for (auto m = it->begin(); m != it->end(); ++m) {
                if (!m->is_string()) {
                    fail("%s: metadata value for '%s' is not a string (safetensors metadata is string to string)", p,
                         m.key().c_str());
                }
                f.metadata[m.key()] = m->get<std::string>();
            }
            continue;
        }
        SafeTensor t;
        parse_tensor_entry(path, it.key(), *it, data_size, &t);
        f.tensors.push_back(std::move(t));
    }

    std::sort(f.tensors.begin(), f.tensors.end(), [](const SafeTensor& a, const SafeTensor& b) {
        return a.offset != b.offset ? a.offset < b.offset : a.nbytes < b.nbytes;
    });
    // Sorted by start, the tensors tile the data area, as the safetensors library requires: two overlap iff one
    // starts before the furthest end so far; bytes between two or after the last belong to none (a file cut and
    // patched, or written by something else: refused rather than read in part). A zero-size tensor is skipped: no
    // byte is read for it (the library also refuses one that points inside another tensor; harmless here).
    uint64_t max_end = 0;
    const SafeTensor* max_end_tensor = nullptr;
    for (const SafeTensor& t : f.tensors) {
        if (t.nbytes == 0) continue;
        if (max_end_tensor && t.offset < max_end) {
            fail("%s: tensors '%s' and '%s' overlap in the data area (bytes %llu..%llu and %llu..%llu)", p,
                 max_end_tensor->name.c_str(), t.name.c_str(), (unsigned long long)max_end_tensor->offset,
                 (unsigned long long)max_end, (unsigned long long)t.offset,
                 (unsigned long long)(t.offset + t.nbytes));
        }
        if (t.offset > max_end)
            fail("%s: bytes %llu..%llu of the data area belong to no tensor (before '%s'); the safetensors library "
                 "refuses such a file\n---> HINT: the file is corrupt; write it again", p,
                 (unsigned long long)max_end, (unsigned long long)t.offset, t.name.c_str());
        if (t.offset + t.nbytes > max_end) {
            max_end = t.offset + t.nbytes;
            max_end_tensor = &t;
        }
    }
    if (max_end != data_size)
        fail("%s: the data area has %llu bytes after its last tensor (%llu of %llu used); the safetensors library "
             "refuses such a file\n---> HINT: the file is corrupt or was appended to; write it again", p,
             (unsigned long long)(data_size - max_end), (unsigned long long)max_end, (unsigned long long)data_size);
    for (size_t i = 0; i < f.tensors.size(); i++) f.index[f.tensors[i].name] = i;
    return f;
}

// ----------------------------------------------------------------------------
// writer

static void write_full(int fd, const void* src, uint64_t nbytes, const std::string& tmp, const std::string& path) {
    if (const int err = write_all(fd, src, nbytes)) {
        bool space = err == ENOSPC || err == EDQUOT || err == EFBIG;
        fail("cannot write %s (while saving %s): %s%s", tmp.c_str(), path.c_str(), strerror(err),
             space ? "\n---> HINT: free some disk space (or raise the file size limit), then run again" : "");
    }
}

// Removes the temp file unless the rename happened, whichever way we leave safetensors_write.
struct TempFile {
    std::string path;
    int fd = -1;
    bool committed = false;
    ~TempFile() {
        if (fd >= 0) close(fd);
        if (!committed) unlink(path.c_str());
    }
};

static std::string json_string(const std::string& s, const char* what, const std::string& path) {
    try {
        return nlohmann::json(s).dump();
    } catch (const nlohmann::json::exception&) {
        fail("cannot save %s: %s '%s' is not valid UTF-8", path.c_str(), what, s.c_str());
    }
}

void safetensors_write(const std::string& path, const std::vector<SafeTensorWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    const char* p = path.c_str();
    // Validate everything before touching the disk.
    std::vector<uint64_t> nbytes(tensors.size());
    std::set<std::string> seen;
    for (size_t i = 0; i < tensors.size(); i++) {
        const SafeTensorWrite& t = tensors[i];
        const char* n = t.name.c_str();
        if (t.name.empty() || t.name == "__metadata__") {
            fail("cannot save %s: invalid tensor name '%s'", p, n);
        }
        if (!seen.insert(t.name).second) {
            fail("cannot save %s: tensor name '%s' appears twice\n"
                 "---> HINT: every tensor in a safetensors file needs a unique name",
                 p, n);
        }
        size_t esize = safetensors_dtype_size(t.dtype);
        if (esize == 0) {
            fail("cannot save %s: tensor '%s' has unknown dtype '%s'\n---> HINT: known dtypes: %s", p, n,
                 t.dtype.c_str(), known_dtypes().c_str());
        }
        uint64_t numel;
        if (!checked_numel(t.shape, &numel) || __builtin_mul_overflow(numel, (uint64_t)esize, &nbytes[i])) {
            fail("cannot save %s: tensor '%s' has invalid shape %s", p, n, shape_str(t.shape).c_str());
        }
        if (nbytes[i] > 0 && t.data == nullptr) fail("cannot save %s: tensor '%s' has no data pointer", p, n);
    }

    // Same layout as the Python library: larger dtypes first, then by name, so with the data area
    // 8-aligned every tensor starts at a multiple of its element size.
    std::vector<size_t> order(tensors.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        int ra = dtype_rank(tensors[a].dtype), rb = dtype_rank(tensors[b].dtype);
        return ra != rb ? ra > rb : tensors[a].name < tensors[b].name;
    });

    // The header, built by hand (not via a JSON object) to keep the Python key order:
    // __metadata__ first, tensors in data order, each as dtype, shape, data_offsets.
    std::string header = "{";
    if (!metadata.empty()) {
        header += "\"__metadata__\":{";
        bool first = true;
        for (const auto& kv : metadata) {
            if (!first) header += ",";
            first = false;
            header += json_string(kv.first, "metadata key", path) + ":" + json_string(kv.second, "metadata value", path);
        }
        header += "}";
    }
    uint64_t offset = 0;
    for (size_t k = 0; k < order.size(); k++) {
        const SafeTensorWrite& t = tensors[order[k]];
        if (header.size() > 1) header += ",";
        header += json_string(t.name, "tensor name", path);
        header += ":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
        for (size_t d = 0; d < t.shape.size(); d++) header += (d ? "," : "") + std::to_string(t.shape[d]);
        header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + nbytes[order[k]]) + "]}";
        offset += nbytes[order[k]];
    }
    header += "}";
    header.append((8 - header.size() % 8) % 8, ' ');  // data area starts 8-aligned
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (unsigned char)((uint64_t)header.size() >> (8 * i));

    // The temp file sits next to the target so rename() stays within one filesystem (atomic).
    TempFile tmp;
    tmp.path = path + ".tmp." + std::to_string((long)getpid());
    tmp.fd = open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (tmp.fd < 0) {
        int err = errno;
        std::string dir = dir_of(path);
        fail("cannot create %s (to save %s): %s%s", tmp.path.c_str(), p, strerror(err),
             err == ENOENT ? format("\n---> HINT: the directory '%s' does not exist; create it first", dir.c_str()).c_str()
                           : "");
    }
    write_full(tmp.fd, lenbuf, 8, tmp.path, path);
    write_full(tmp.fd, header.data(), header.size(), tmp.path, path);
    for (size_t k : order) write_full(tmp.fd, tensors[k].data, nbytes[k], tmp.path, path);
    // fsync before rename: otherwise a crash can leave the new name pointing at missing data.
    if (fsync(tmp.fd) != 0) fail("cannot fsync %s (while saving %s): %s", tmp.path.c_str(), p, strerror(errno));
    int fd = tmp.fd;
    tmp.fd = -1;
    if (close(fd) != 0) fail("cannot close %s (while saving %s): %s", tmp.path.c_str(), p, strerror(errno));
    if (rename(tmp.path.c_str(), p) != 0) {
        fail("cannot rename %s to %s: %s", tmp.path.c_str(), p, strerror(errno));
    }
    tmp.committed = true;
    // Make the rename itself durable. Best effort: some filesystems refuse to fsync directories.
    int dfd = open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}
