// Reading and writing numpy .npy files (activation dumps for tools/prac_analyze). Format (numpy/lib/format.py,
// "NEP 1"): magic "\x93NUMPY", version, header length, a Python dict literal header padded so that the data starts
// on a 64-byte boundary, then the data (row-major unless fortran_order). The reader takes only what the tools need
// and refuses the rest with a message naming the problem and the fix, never guessing (a Fortran-order or big-endian
// array read as C-order little-endian would be silently wrong numbers). The writer produces np.save's bytes for a
// float32 array (version 1.0) and replaces the target atomically. The format in detail: docs/DESIGN.md section 7.3.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct NpyArray {
    std::vector<int64_t> shape;  // [] is a 0-d array (1 element); a 0 anywhere means no elements
    std::string dtype;           // the file's descr, e.g. "<f4" (the data is float whatever the file held)
    std::vector<float> data;     // numel() values, row-major
    size_t numel() const;
};

// Reads path. Supported dtypes: '<f4' (float32), '<f2' (float16, widened exactly), and '<u2' only when
// bf16_as_uint16 is true: the uint16 values are bfloat16 bit patterns (numpy has no bfloat16; torch's
// x.view(torch.uint16).numpy() saves them this way), widened exactly. Throws UserError for a missing file,
// bad magic, an unsupported version, a malformed header, fortran_order True, any other dtype (named, with
// the conversion to apply), and data shorter than the shape says.
NpyArray read_npy(const std::string& path, bool bf16_as_uint16 = false);

// Whether the file at path begins with the .npy magic (false when it cannot be read): an earlier dump that a
// resumed run may replace, told from someone else's file.
bool file_starts_as_npy(const std::string& path);

// Writes a float32 array of this shape (C order) as an .npy version 1.0 file, atomically: everything goes
// to path + ".tmp.<pid>", which is fsync'ed and renamed over path, so path holds either its old content
// or the complete new file. Throws UserError (and removes the temp file) on any failure.
void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);

// The header text np.save writes for a float32 C-order array of this shape, magic and length included
// (exposed for the tests, which compare it with numpy's bytes).
std::string npy_header_f32(const std::vector<int64_t>& shape);
