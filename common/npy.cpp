// See npy.h for the format and the guarantees. Spec: numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#include "common/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "common/files.h"  // write_all, dir_of
#include "common/safetensors.h"  // bf16_to_f32, f16_to_f32
#include "common/strings.h"  // join, printable_bytes

// We copy '<f4' bytes straight into float buffers.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy I/O assumes a little-endian host");

static const char MAGIC[] = "\x93NUMPY";
static const size_t MAGIC_LEN = 6;
// numpy's own reader refuses headers over 10,000 bytes unless told otherwise; we allow more (a header is
// text the size of the shape) but not whatever a corrupt length field says.
static const uint64_t MAX_HEADER_BYTES = 1u << 20;
// np.save pads the header so the data starts at a multiple of this, and adds this many spare spaces minus
// the width of the first dimension so the header can be rewritten in place when the array grows.
static const size_t ARRAY_ALIGN = 64;
static const size_t GROWTH_AXIS_MAX_DIGITS = 21;

bool file_starts_as_npy(const std::string& path) {
    char head[MAGIC_LEN] = {0};
    FILE* f = std::fopen(path.c_str(), "rb");
    const bool npy = f && std::fread(head, 1, MAGIC_LEN, f) == MAGIC_LEN && std::memcmp(head, MAGIC, MAGIC_LEN) == 0;
    if (f) std::fclose(f);
    return npy;
}

size_t NpyArray::numel() const {
    size_t n = 1;
    for (int64_t d : shape) n *= (size_t)d;
    return n;
}

static std::string shape_str(const std::vector<int64_t>& shape) {
    // Python's repr of a tuple: (), (3,), (2, 3)
    return "(" + join(shape) + (shape.size() == 1 ? ",)" : ")");
}

// ----------------------------------------------------------------------------
// dtypes

// Human name of a numpy type code and size ('f', 8 -> "float64"), for the error messages.
static std::string dtype_name(char kind, const std::string& size) {
    if (size.empty() || size.find_first_not_of("0123456789") != std::string::npos) return "unknown";
    switch (kind) {
        case 'f': return "float" + std::to_string(8 * std::atoi(size.c_str()));
        case 'i': return "int" + std::to_string(8 * std::atoi(size.c_str()));
        case 'u': return "uint" + std::to_string(8 * std::atoi(size.c_str()));
        case 'c': return "complex" + std::to_string(8 * std::atoi(size.c_str()));
        case 'b': return "bool";
        case 'V': return size + "-byte void (opaque)";
        case 'S': return size + "-byte bytes";
        case 'U': return size + "-character str";
        case 'O': return "Python object";
        case 'M': return "datetime64";
        case 'm': return "timedelta64";
    }
    return "unknown";
}

enum class NpyType { F32, F16, BF16 };

static NpyType check_dtype(const std::string& path, const std::string& descr, bool bf16_as_uint16) {
    // descr is a byte order ('<' little, '>' big, '|' not applicable, '=' native), a type code and a size
    const char* p = path.c_str();
    if (descr.size() < 2 || !std::strchr("<>|=", descr[0]))
        fail("%s: unsupported dtype '%s'\n---> HINT: save a float32 array: np.save(path, x.astype(np.float32))", p,
             printable_bytes(descr).c_str());
    char order = descr[0], kind = descr[1];
    std::string size = descr.substr(2), name = dtype_name(kind, size);
    // '=' is numpy's "native" order; numpy writes '<' or '>' in files, and native is little here
    bool little = order == '<' || order == '=' || (order == '|' && size == "1");
    if (little && kind == 'f' && size == "4") return NpyType::F32;
    if (little && kind == 'f' && size == "2") return NpyType::F16;
    if (little && kind == 'u' && size == "2") {
        if (bf16_as_uint16) return NpyType::BF16;
        fail("%s: dtype '%s' (uint16) is read only as bfloat16 bit patterns, and that was not asked for\n"
             "---> HINT: if the values are bfloat16 bits (numpy has no bfloat16; torch's x.view(torch.uint16).numpy() "
             "saves them like this), pass --bf16 (read_npy(path, bf16_as_uint16=true)); if they are integers, save "
             "x.astype(np.float32)", p, descr.c_str());
    }
    if (order == '>')
        fail("%s: dtype '%s' is big-endian %s; only little-endian data is read\n"
             "---> HINT: save x.astype('<f4') (little-endian float32)", p, descr.c_str(), name.c_str());
    if (kind == 'V' && size == "2")
        fail("%s: dtype '%s' is a 2-byte opaque type (e.g. an ml_dtypes/JAX bfloat16 array saved with np.save)\n"
             "---> HINT: save x.view(np.uint16) and pass --bf16, or save x.astype(np.float32)", p, descr.c_str());
    fail("%s: dtype '%s' (%s) is not supported; this reader takes '<f4' (float32), '<f2' (float16) and, with "
         "--bf16, '<u2' holding bfloat16 bits\n---> HINT: save x.astype(np.float32)", p, descr.c_str(), name.c_str());
}

static size_t dtype_size(NpyType t) { return t == NpyType::F32 ? 4 : 2; }

// ----------------------------------------------------------------------------
// the header: a Python dict literal with exactly the keys 'descr', 'fortran_order' and 'shape'

struct HeaderParser {
    const std::string& path;
    const std::string& text;
    size_t pos = 0;

    [[noreturn]] void malformed(const char* what) const {
        fail("%s: malformed .npy header (%s at character %zu of \"%s\")\n"
             "---> HINT: the file is corrupt or was not written by numpy; re-save it with np.save",
             path.c_str(), what, pos, printable_bytes(text).c_str());
    }
    void skip_ws() {
        while (pos < text.size() && std::isspace((unsigned char)text[pos])) pos++;
    }
    bool accept(char c) {
        skip_ws();
        if (pos < text.size() && text[pos] == c) {
            pos++;
            return true;
        }
        return false;
    }
    void expect(char c, const char* what) {
        if (!accept(c)) malformed(what);
    }
    // A Python string literal in single or double quotes (numpy writes single quotes and no escapes).
    std::string string_literal() {
        skip_ws();
        if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"')) malformed("expected a quoted string");
        char q = text[pos++];
        std::string s;
        while (pos < text.size() && text[pos] != q) {
            if (text[pos] == '\\') malformed("escape sequences in strings are not supported");
            s += text[pos++];
        }
        if (pos >= text.size()) malformed("unterminated string");
        pos++;
        return s;
    }
    std::string identifier() {
        skip_ws();
        size_t start = pos;
        while (pos < text.size() && (std::isalnum((unsigned char)text[pos]) || text[pos] == '_')) pos++;
        return text.substr(start, pos - start);
    }
    // (), (3,), (2, 3), (2, 3,) -- and the (3L, 4L) that Python 2's numpy wrote
    std::vector<int64_t> shape_tuple() {
        expect('(', "expected '(' starting the shape tuple");
        std::vector<int64_t> shape;
        while (!accept(')')) {
            skip_ws();
            size_t start = pos;
            int64_t v = 0;
            while (pos < text.size() && std::isdigit((unsigned char)text[pos])) {
                if (v > (INT64_MAX - 9) / 10) malformed("shape dimension too large");
                v = v * 10 + (text[pos++] - '0');
            }
            if (pos == start) malformed("expected a non-negative integer in the shape tuple");
            if (pos < text.size() && text[pos] == 'L') pos++;
            shape.push_back(v);
            if (!accept(',')) {
                expect(')', "expected ',' or ')' in the shape tuple");
                break;
            }
        }
        return shape;
    }
};

struct NpyHeader {
    std::string descr;
    bool fortran_order = false;
    std::vector<int64_t> shape;
};

static NpyHeader parse_header(const std::string& path, const std::string& text) {
    HeaderParser ps{path, text};
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    ps.expect('{', "expected '{' starting the header dict");
    while (!ps.accept('}')) {
        std::string key = ps.string_literal();
        ps.expect(':', "expected ':' after a key");
        if (key == "descr") {
            if (have_descr) ps.malformed("'descr' given twice");
            ps.skip_ws();
            if (ps.pos < text.size() && (text[ps.pos] == '[' || text[ps.pos] == '{'))
                fail("%s: structured (record) dtypes are not supported (header: \"%s\")\n"
                     "---> HINT: save a plain float32 array: np.save(path, x.astype(np.float32))",
                     path.c_str(), printable_bytes(text).c_str());
            h.descr = ps.string_literal();
            have_descr = true;
        } else if (key == "fortran_order") {
            if (have_order) ps.malformed("'fortran_order' given twice");
            std::string v = ps.identifier();
            if (v != "True" && v != "False") ps.malformed("'fortran_order' must be True or False");
            h.fortran_order = v == "True";
            have_order = true;
        } else if (key == "shape") {
            if (have_shape) ps.malformed("'shape' given twice");
            h.shape = ps.shape_tuple();
            have_shape = true;
        } else {
            ps.malformed(format("unexpected key '%s'", printable_bytes(key).c_str()).c_str());
        }
        if (!ps.accept(',')) {
            ps.expect('}', "expected ',' or '}' after a value");
            break;
        }
    }
    ps.skip_ws();  // np.save pads with spaces and ends with '\n'
    if (ps.pos != text.size()) ps.malformed("unexpected text after the header dict");
    if (!have_descr) ps.malformed("no 'descr' key");
    if (!have_order) ps.malformed("no 'fortran_order' key");
    if (!have_shape) ps.malformed("no 'shape' key");
    return h;
}

// ----------------------------------------------------------------------------
// reading

// Reads exactly n bytes at offset (pread: 64-bit offsets, and short reads are retried).
static bool read_at(int fd, void* dst, uint64_t n, uint64_t offset) {
    char* d = (char*)dst;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t got = pread(fd, d, chunk, (off_t)offset);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return false;
        d += got;
        offset += (uint64_t)got;
        n -= (uint64_t)got;
    }
    return true;
}

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) close(fd);
    }
};

NpyArray read_npy(const std::string& path, bool bf16_as_uint16) {
    const char* p = path.c_str();
    Fd f;
    f.fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // (a named pipe's open waited for a writer forever)
    if (f.fd < 0) {
        int err = errno;
        fail("cannot open %s: %s%s", p, strerror(err),
             err == ENOENT ? "\n---> HINT: check the path (relative paths are from the current directory)" : "");
    }
    struct stat st;
    if (fstat(f.fd, &st) != 0) fail("cannot stat %s: %s", p, strerror(errno));
    if (S_ISDIR(st.st_mode)) fail("%s is a directory, not an .npy file", p);
    if (!S_ISREG(st.st_mode))
        fail("%s is not a regular file (a pipe or a device): an .npy file is read by its size and offsets\n---> HINT: "
             "save the array to a file and pass its path", p);
    uint64_t file_size = (uint64_t)st.st_size;

    // magic (6), version (2), header length (2 in version 1.0, 4 in 2.0 and 3.0)
    unsigned char pre[12] = {0};
    size_t pre_len = file_size < sizeof(pre) ? (size_t)file_size : sizeof(pre);
    if (!read_at(f.fd, pre, pre_len, 0)) fail("cannot read %s: %s", p, strerror(errno));
    if (pre_len >= MAGIC_LEN && pre_len < MAGIC_LEN + 2 && std::memcmp(pre, MAGIC, MAGIC_LEN) == 0)
        fail("%s is truncated: %zu bytes, the magic \"\\x93NUMPY\" and no format version\n---> HINT: the file was cut "
             "short (a copy or a save that did not finish): write it again with np.save", p, pre_len);
    if (pre_len < MAGIC_LEN + 2 || std::memcmp(pre, MAGIC, MAGIC_LEN) != 0) {
        std::string first((const char*)pre, pre_len < 8 ? pre_len : 8);
        bool zip = pre_len >= 4 && std::memcmp(pre, "PK\x03\x04", 4) == 0;
        fail("%s is not an .npy file: it does not start with the magic \"\\x93NUMPY\" (first bytes: \"%s\"%s)\n"
             "---> HINT: %s", p, printable_bytes(first).c_str(), file_size == 0 ? ", the file is empty" : "",
             zip ? "this is a zip archive, probably an .npz from np.savez: extract one array and np.save it"
                 : "write the array with np.save(path, x)");
    }
    int major = pre[6], minor = pre[7];
    if (!((major == 1 || major == 2 || major == 3) && minor == 0))
        fail("%s: unsupported .npy format version %d.%d (this reader knows 1.0, 2.0 and 3.0)\n"
             "---> HINT: re-save it with np.save from numpy 1.x or 2.x", p, major, minor);
    size_t len_bytes = major == 1 ? 2 : 4;
    uint64_t header_start = MAGIC_LEN + 2 + len_bytes;
    if (file_size < header_start)
        fail("%s: truncated .npy file (%llu bytes, not even a complete header length)", p,
             (unsigned long long)file_size);
    uint64_t header_len = major == 1 ? (uint64_t)pre[8] | (uint64_t)pre[9] << 8
                                     : (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 |
                                           (uint64_t)pre[11] << 24;
    if (header_len > MAX_HEADER_BYTES)
        fail("%s: .npy header length %llu is over the %llu-byte limit (a corrupt file?)", p,
             (unsigned long long)header_len, (unsigned long long)MAX_HEADER_BYTES);
    if (header_start + header_len > file_size)
        fail("%s: truncated .npy file: the header needs %llu bytes, the file has %llu", p,
             (unsigned long long)(header_start + header_len), (unsigned long long)file_size);
    std::string text(header_len, '\0');
    if (!read_at(f.fd, text.data(), header_len, header_start)) fail("cannot read %s: %s", p, strerror(errno));

    NpyHeader h = parse_header(path, text);
    NpyType type = check_dtype(path, h.descr, bf16_as_uint16);
    // With at most one dimension above 1 the two orders are the same bytes (numpy writes False there anyway).
    size_t big_dims = 0;
    for (int64_t d : h.shape) big_dims += d > 1;
    if (h.fortran_order && big_dims > 1)
        fail("%s holds a Fortran-order (column-major) array of shape %s; only C order (row-major) is read\n"
             "---> HINT: save it with np.save(path, np.ascontiguousarray(x))", p, shape_str(h.shape).c_str());

    uint64_t numel = 1, nbytes = 0;
    for (int64_t d : h.shape)
        if (__builtin_mul_overflow(numel, (uint64_t)d, &numel))
            fail("%s: shape %s has too many elements", p, shape_str(h.shape).c_str());
    if (__builtin_mul_overflow(numel, (uint64_t)dtype_size(type), &nbytes))
        fail("%s: shape %s has too many elements", p, shape_str(h.shape).c_str());
    uint64_t data_start = header_start + header_len;
    // Bytes past the end of the data are ignored, as np.load ignores them.
    if (file_size - data_start < nbytes)
        fail("%s: truncated .npy file: shape %s of '%s' needs %llu data bytes after the %llu-byte header, the file "
             "has %llu\n---> HINT: the file was cut short (an interrupted save or copy?); write it again",
             p, shape_str(h.shape).c_str(), h.descr.c_str(), (unsigned long long)nbytes,
             (unsigned long long)data_start, (unsigned long long)(file_size - data_start));

    NpyArray a;
    a.shape = h.shape;
    a.dtype = h.descr;
    a.data.resize(numel);
    if (type == NpyType::F32) {
        if (!read_at(f.fd, a.data.data(), nbytes, data_start)) fail("cannot read %s: %s", p, strerror(errno));
    } else {
        // 2-byte types: read in chunks and widen, so the file is never held twice in memory
        const uint64_t CHUNK = 1 << 20;
        std::vector<uint16_t> buf((size_t)(numel < CHUNK ? numel : CHUNK));
        for (uint64_t i = 0; i < numel; i += CHUNK) {
            uint64_t n = numel - i < CHUNK ? numel - i : CHUNK;
            if (!read_at(f.fd, buf.data(), 2 * n, data_start + 2 * i)) fail("cannot read %s: %s", p, strerror(errno));
            for (uint64_t j = 0; j < n; j++)
                a.data[i + j] = type == NpyType::F16 ? f16_to_f32(buf[j]) : bf16_to_f32(buf[j]);
        }
    }
    return a;
}

// ----------------------------------------------------------------------------
// writing

std::string npy_header_f32(const std::vector<int64_t>& shape) {
    // exactly numpy's _write_array_header: sorted keys, repr values, growth spaces, pad to 64, '\n'
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
    if (!shape.empty()) {
        size_t w = std::to_string(shape[0]).size();
        if (w < GROWTH_AXIS_MAX_DIGITS) dict += std::string(GROWTH_AXIS_MAX_DIGITS - w, ' ');
    }
    size_t hlen = dict.size() + 1;
    size_t pad = ARRAY_ALIGN - (MAGIC_LEN + 2 + 2 + hlen) % ARRAY_ALIGN;
    if (hlen + pad > 65535) fail("cannot write an .npy version 1.0 header for shape with %zu dimensions", shape.size());
    std::string out(MAGIC, MAGIC_LEN);
    out += '\x01';
    out += '\x00';
    out += (char)((hlen + pad) & 0xff);
    out += (char)((hlen + pad) >> 8);
    return out + dict + std::string(pad, ' ') + '\n';
}

// Removes the temp file unless the rename happened, whichever way we leave write_npy_f32.
struct TempFile {
    std::string path;
    int fd = -1;
    bool committed = false;
    ~TempFile() {
        if (fd >= 0) close(fd);
        if (!committed && !path.empty()) unlink(path.c_str());
    }
};

static void write_full(int fd, const void* src, uint64_t n, const std::string& tmp, const std::string& path) {
    if (const int err = write_all(fd, src, n))
        fail("cannot write %s (while saving %s): %s%s", tmp.c_str(), path.c_str(), strerror(err),
             err == ENOSPC ? "\n---> HINT: the disk is full; free space or write elsewhere" : "");
}

void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
    const char* p = path.c_str();
    uint64_t numel = 1, nbytes = 0;
    for (int64_t d : shape) {
        if (d < 0) fail("cannot write %s: negative dimension in shape %s", p, shape_str(shape).c_str());
        if (__builtin_mul_overflow(numel, (uint64_t)d, &numel))
            fail("cannot write %s: shape %s has too many elements", p, shape_str(shape).c_str());
    }
    if (__builtin_mul_overflow(numel, (uint64_t)4, &nbytes))
        fail("cannot write %s: shape %s has too many elements", p, shape_str(shape).c_str());
    if (numel > 0 && !data) fail("cannot write %s: no data for shape %s", p, shape_str(shape).c_str());
    std::string header = npy_header_f32(shape);

    // The temp file sits next to the target so rename() stays within one filesystem (atomic).
    TempFile tmp;
    tmp.path = path + ".tmp." + std::to_string((long)getpid());
    tmp.fd = open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (tmp.fd < 0) {
        int err = errno;
        std::string name = tmp.path;
        tmp.path.clear();  // nothing to remove
        fail("cannot create %s (to save %s): %s%s", name.c_str(), p, strerror(err),
             err == ENOENT ? "\n---> HINT: the directory does not exist; create it first" : "");
    }
    write_full(tmp.fd, header.data(), header.size(), tmp.path, path);
    write_full(tmp.fd, data, nbytes, tmp.path, path);
    // fsync before rename: otherwise a crash can leave the new name pointing at missing data.
    if (fsync(tmp.fd) != 0) fail("cannot fsync %s (while saving %s): %s", tmp.path.c_str(), p, strerror(errno));
    int fd = tmp.fd;
    tmp.fd = -1;
    if (close(fd) != 0) fail("cannot close %s (while saving %s): %s", tmp.path.c_str(), p, strerror(errno));
    if (rename(tmp.path.c_str(), p) != 0) fail("cannot rename %s to %s: %s", tmp.path.c_str(), p, strerror(errno));
    tmp.committed = true;
    // Make the rename itself durable. Best effort: some filesystems refuse to fsync directories.
    int dfd = open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}
