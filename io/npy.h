// Reading and writing numpy .npy files (activation dumps for tools/prac_analyze).
//
// Format (numpy/lib/format.py, "NEP 1"): the 6-byte magic "\x93NUMPY", a major and a minor version byte,
// the header length as little-endian u16 (version 1.0) or u32 (2.0 and 3.0), then the header: a Python
// dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces
// and ended by '\n' so that the data starts on a 64-byte boundary. The data follows, row-major (C order)
// unless fortran_order is True. Version 3.0 only allows UTF-8 in the header, which changes nothing here.
//
// The reader takes only what the tools need and refuses the rest with a message naming the problem and
// the fix; it never guesses (a Fortran-order or big-endian array read as if it were C-order little-endian
// would be silently wrong numbers, not an error).
//
// The writer produces the bytes np.save produces for the same float32 array (version 1.0, same header
// text and padding), so numpy loads what we write, and replaces the target atomically.
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

// Writes a float32 array of this shape (C order) as an .npy version 1.0 file, atomically: everything goes
// to path + ".tmp.<pid>", which is fsync'ed and renamed over path, so path holds either its old content
// or the complete new file. Throws UserError (and removes the temp file) on any failure.
void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);

// The header text np.save writes for a float32 C-order array of this shape, magic and length included
// (exposed for the tests, which compare it with numpy's bytes).
std::string npy_header_f32(const std::vector<int64_t>& shape);
