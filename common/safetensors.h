// Reading and writing Hugging Face .safetensors files (checkpoints, HF model weights): an 8-byte little-endian
// header length, a JSON header mapping each tensor name to {"dtype", "shape", "data_offsets"} (plus an optional
// "__metadata__" of strings), then the little-endian, row-major data. The reader validates the whole header at open
// (a truncated or corrupt file fails there, naming the problem) and reads tensor data lazily with pread (const, safe
// from several threads; 64-bit offsets). The writer produces the Python `safetensors` library's bytes for the same
// tensors and metadata and replaces the target atomically. The format in detail: docs/DESIGN.md section 7.3.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

// Bytes per element of a safetensors dtype string ("F32" -> 4, "BF16" -> 2, ...); 0 when the
// dtype is unknown. Sub-byte dtypes (F4, F6_*) are not supported.
size_t safetensors_dtype_size(const std::string& dtype);

// Exact widenings, and round-to-nearest-even narrowings (NaN stays NaN, overflow goes to inf).
float bf16_to_f32(uint16_t h);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
uint16_t f32_to_f16(float f);

// One tensor's entry in the header. offset is relative to the start of the data area.
struct SafeTensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;  // [] is a scalar (1 element); a 0 anywhere means no elements
    uint64_t offset = 0;
    uint64_t nbytes = 0;
    size_t numel() const;
};

// An open .safetensors file with a validated header. Move-only: owns the file descriptor.
struct SafeTensorsFile {
    std::string path;
    std::map<std::string, std::string> metadata;  // the "__metadata__" object, empty if absent
    std::vector<SafeTensor> tensors;               // in file (offset) order
    uint64_t file_size = 0;
    uint64_t data_start = 0;  // absolute file offset of the data area: 8 + header length
    int fd = -1;
    std::unordered_map<std::string, size_t> index;  // name -> position in tensors

    SafeTensorsFile() = default;
    ~SafeTensorsFile();
    SafeTensorsFile(SafeTensorsFile&& o) noexcept;
    SafeTensorsFile& operator=(SafeTensorsFile&& o) noexcept;
    SafeTensorsFile(const SafeTensorsFile&) = delete;
    SafeTensorsFile& operator=(const SafeTensorsFile&) = delete;

    const SafeTensor* find(const std::string& name) const;  // nullptr if absent
    // Like find, but fails with "tensor 'x' not found in FILE; it has N tensors, e.g. ...".
    const SafeTensor& get(const std::string& name) const;
    // A tensor whose name is `name` up to a dotted prefix ("model.x" for "x", or "x" for "model.x": another tool's
    // or model family's layout), or "": for the messages about a missing tensor.
    std::string name_up_to_a_prefix(const std::string& name) const;
    std::vector<std::string> names() const;  // in file (offset) order
    std::vector<int64_t> shape(const std::string& name) const;

    // Copies the tensor's bytes as stored; nbytes must equal the tensor's size in bytes.
    void read_raw(const std::string& name, void* dst, size_t nbytes) const;
    // Reads an F32, BF16 or F16 tensor as float (exact). expected_numel must match the tensor's
    // element count: the caller states what it expects so a wrong-shape file cannot be read
    // into a buffer of another size.
    void read_f32(const std::string& name, float* dst, size_t expected_numel) const;
};

// Opens and validates path: header length vs file size, JSON syntax, known dtypes, shapes,
// every tensor inside the data area, nbytes == numel * dtype size, no two tensors overlapping.
SafeTensorsFile safetensors_open(const std::string& path);

struct SafeTensorWrite {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    const void* data;  // numel * dtype size bytes; may be null when there are no elements
};

// Writes the tensors (and metadata, if any) to path atomically: everything goes to
// path + ".tmp.<pid>", which is fsync'ed and then renamed over path, so path holds either its
// old content or the complete new file. On any failure the temp file is removed and a UserError
// thrown. Tensors are laid out like the Python library does (larger dtypes first, then by name)
// so each tensor is aligned to its element size; duplicate names are an error.
void safetensors_write(const std::string& path, const std::vector<SafeTensorWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
