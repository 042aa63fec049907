// CPU stand-in for cuDNN's graph API (the backend descriptors that cudnn-frontend builds) in the emulated CUDA
// build: enough of it to run the fused-attention graphs of kernels/attention_cudnn.cu, which the frontend lowers to
// primitive operations (matmul, pointwise, reduction, reshape) or, for a non-causal forward, to cuDNN's unified SDPA
// operation. The stand-in keeps every attribute the caller sets, answers the queries the frontend makes (one engine
// per operation graph, no knobs, no notes), and executes a plan by interpreting its operation graph on the caller's
// memory, which is host memory here ("device" pointers included). Written from the declarations and comments of
// cudnn_graph.h and the cuDNN Backend API's documentation of each operation; it computes the documented result, not
// cuDNN's kernels:
//
//   tensors   N-d (dims, strides in elements); a size-1 input dimension broadcasts against the output's; by-value
//             tensors read their scalar from the host pointer of the variant pack. Virtual tensors have no memory
//             in cuDNN (their strides may even alias): here each lives densely in the plan's workspace as fp32
//             (double for doubles and integers), rounded to its declared type when that is narrower.
//   matmul    C[b, m, n] = sum_k A[b, m, k] B[b, k, n] over the last two dims, batch dims broadcast; with the
//             GEMM_{M,N,K}_OVERRIDE tensors (one value per leading-batch index) rows m >= M' and columns n >= N'
//             hold the matmul descriptor's padding value and the sum runs over k < K'.
//   pointwise y = op(x) or op(x, b) (BINARY_SELECT: t ? x : b), inputs scaled by ALPHA1 / ALPHA2; GEN_INDEX
//             gives each output element its index along AXIS; comparisons and logical ops give 1 or 0.
//   reduction y = the operator over the input elements that map to each output element (output dims 1 where
//             reduced).
//   reshape   view-only (cuDNN before 9.22): y's element at its declared offset is x's at the same declared offset.
//   sdpa fwd  O = softmax(scale Q K^T) V and Stats = max + ln(sum exp), with the implicit padding mask of
//             SEQ_LEN_Q / SEQ_LEN_KV (run_sdpa).
// Arithmetic in double, stored to the tensor's type (bf16 and half round to nearest even), so results agree with
// cuDNN's to its own rounding, which tests keep tolerances for. Operations are run in data-dependency order.
// The workspace the plan reports is the virtual tensors' bytes: execution refuses a null workspace and a caller's
// tensor inside it (cuDNN would fault or overwrite it), so callers' workspace wiring is exercised. Any operation
// type, attribute, pointwise mode or data type outside this list is declined at finalize with
// CUDNN_STATUS_NOT_SUPPORTED, and the frontend then reports that, never a wrong result. PRAC_EMU_CUDNN_TRACE=1
// prints every backend call and, at each execute, the operations with their tensors.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nvrtc.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda_emu/libs_emu.h"
#include "kernels/cuda_emu/stream_order.h"

// ---------------------------------------------------------------------------------------------------------------
// descriptors: a type and the attributes as set (raw bytes), plus what finalize derived
// ---------------------------------------------------------------------------------------------------------------
namespace {

struct Attr {
    cudnnBackendAttributeType_t type;
    int64_t count = 0;
    std::vector<unsigned char> bytes;
};
struct Op;
struct Graph;

}  // namespace

// What cuDNN keeps of a descriptor: the attributes as set and, from finalize on, what it derived from them (a
// finalized operation keeps its own copy of its tensors and sub-descriptors, which the caller may free; an
// operation graph, engine, engine config and plan share the interpreted graph).
struct EmuCudnnDesc {
    cudnnBackendDescriptorType_t type;
    bool finalized = false;
    std::map<int, Attr> attrs;
    std::shared_ptr<Op> op;
    std::shared_ptr<Graph> graph;
};

struct cudnnContext {  // the opaque struct behind cudnnHandle_t (declared in cudnn_graph.h)
    cudaStream_t stream = nullptr;
};

namespace {

thread_local std::string g_last_error;

bool tracing() {  // PRAC_EMU_CUDNN_TRACE, read once
    static const bool on = [] {
        const char* v = std::getenv("PRAC_EMU_CUDNN_TRACE");
        return v && *v && std::strcmp(v, "0") != 0;
    }();
    return on;
}

void trace(const char* fmt, ...) {
    if (!tracing()) return;
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "[cudnn-emu] ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
}

cudnnStatus_t fail_with(cudnnStatus_t s, const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g_last_error = std::string("cudnn-emu: ") + buf;
    trace("error %d: %s", (int)s, buf);
    return s;
}

size_t attr_type_size(cudnnBackendAttributeType_t t) {
    switch (t) {
        case CUDNN_TYPE_HANDLE: return sizeof(cudnnHandle_t);
        case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
        case CUDNN_TYPE_INT64: return sizeof(int64_t);
        case CUDNN_TYPE_FLOAT: return sizeof(float);
        case CUDNN_TYPE_DOUBLE: return sizeof(double);
        case CUDNN_TYPE_VOID_PTR: return sizeof(void*);
        case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(cudnnBackendDescriptor_t);
        case CUDNN_TYPE_INT32: return sizeof(int32_t);
        case CUDNN_TYPE_CHAR: return sizeof(char);
        case CUDNN_TYPE_FRACTION: return sizeof(cudnnFraction_t);
        default: return sizeof(int32_t);  // the enumerations
    }
}

const Attr* find_attr(const EmuCudnnDesc* d, int name) {
    auto it = d->attrs.find(name);
    return it == d->attrs.end() ? nullptr : &it->second;
}

template <typename T>
T attr_scalar(const EmuCudnnDesc* d, int name, T dflt) {
    const Attr* a = find_attr(d, name);
    if (!a || a->count < 1 || a->bytes.size() < sizeof(T)) return dflt;
    T v;
    std::memcpy(&v, a->bytes.data(), sizeof(T));
    return v;
}

template <typename T>
std::vector<T> attr_vector(const EmuCudnnDesc* d, int name) {
    const Attr* a = find_attr(d, name);
    std::vector<T> v;
    if (!a) return v;
    v.resize(a->bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), a->bytes.data(), v.size() * sizeof(T));
    return v;
}

EmuCudnnDesc* attr_desc(const EmuCudnnDesc* d, int name) {
    return (EmuCudnnDesc*)attr_scalar<cudnnBackendDescriptor_t>(d, name, nullptr);
}

// A scalar attribute (alpha, padding value) the caller may give as float or double.
double attr_real(const EmuCudnnDesc* d, int name, double dflt) {
    const Attr* a = find_attr(d, name);
    if (!a || a->count < 1) return dflt;
    if (a->type == CUDNN_TYPE_DOUBLE) return attr_scalar<double>(d, name, dflt);
    if (a->type == CUDNN_TYPE_FLOAT) return attr_scalar<float>(d, name, (float)dflt);
    return dflt;
}

void set_attr(EmuCudnnDesc* d, int name, cudnnBackendAttributeType_t type, int64_t count, const void* data) {
    Attr a;
    a.type = type;
    a.count = count;
    a.bytes.resize((size_t)count * attr_type_size(type));
    if (count > 0) std::memcpy(a.bytes.data(), data, a.bytes.size());
    d->attrs[name] = std::move(a);
}

// ---------------------------------------------------------------------------------------------------------------
// tensors
// ---------------------------------------------------------------------------------------------------------------

struct TensorInfo {
    int64_t uid = 0;
    cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
    std::vector<int64_t> dims, strides;
    bool is_virtual = false, by_value = false;
    int64_t elements() const {
        int64_t n = 1;
        for (int64_t d : dims) n *= d;
        return n;
    }
    int64_t span() const {  // 1 + the largest offset
        int64_t s = 1;
        for (size_t i = 0; i < dims.size(); ++i) s += (dims[i] - 1) * strides[i];
        return s;
    }
};

bool supported_dtype(cudnnDataType_t t) {
    switch (t) {
        case CUDNN_DATA_FLOAT:
        case CUDNN_DATA_DOUBLE:
        case CUDNN_DATA_HALF:
        case CUDNN_DATA_BFLOAT16:
        case CUDNN_DATA_INT32:
        case CUDNN_DATA_INT64:
        case CUDNN_DATA_BOOLEAN:
        case CUDNN_DATA_INT8:
        case CUDNN_DATA_UINT8: return true;
        default: return false;
    }
}

size_t dtype_bytes(cudnnDataType_t t) {
    switch (t) {
        case CUDNN_DATA_DOUBLE:
        case CUDNN_DATA_INT64: return 8;
        case CUDNN_DATA_HALF:
        case CUDNN_DATA_BFLOAT16: return 2;
        case CUDNN_DATA_BOOLEAN:
        case CUDNN_DATA_INT8:
        case CUDNN_DATA_UINT8: return 1;
        default: return 4;
    }
}

const char* dtype_name(cudnnDataType_t t) {
    switch (t) {
        case CUDNN_DATA_FLOAT: return "FLOAT";
        case CUDNN_DATA_DOUBLE: return "DOUBLE";
        case CUDNN_DATA_HALF: return "HALF";
        case CUDNN_DATA_BFLOAT16: return "BFLOAT16";
        case CUDNN_DATA_INT32: return "INT32";
        case CUDNN_DATA_INT64: return "INT64";
        case CUDNN_DATA_BOOLEAN: return "BOOLEAN";
        case CUDNN_DATA_INT8: return "INT8";
        case CUDNN_DATA_UINT8: return "UINT8";
        default: return "?";
    }
}

double load(const void* base, cudnnDataType_t t, int64_t i) {
    switch (t) {
        case CUDNN_DATA_FLOAT: return ((const float*)base)[i];
        case CUDNN_DATA_DOUBLE: return ((const double*)base)[i];
        case CUDNN_DATA_HALF: return __half2float(((const __half*)base)[i]);
        case CUDNN_DATA_BFLOAT16: return __bfloat162float(((const __nv_bfloat16*)base)[i]);
        case CUDNN_DATA_INT32: return ((const int32_t*)base)[i];
        case CUDNN_DATA_INT64: return (double)((const int64_t*)base)[i];
        case CUDNN_DATA_BOOLEAN: return ((const uint8_t*)base)[i] ? 1.0 : 0.0;
        case CUDNN_DATA_INT8: return ((const int8_t*)base)[i];
        case CUDNN_DATA_UINT8: return ((const uint8_t*)base)[i];
        default: return NAN;
    }
}

void store(void* base, cudnnDataType_t t, int64_t i, double v) {
    switch (t) {
        case CUDNN_DATA_FLOAT: ((float*)base)[i] = (float)v; break;
        case CUDNN_DATA_DOUBLE: ((double*)base)[i] = v; break;
        case CUDNN_DATA_HALF: ((__half*)base)[i] = __float2half_rn((float)v); break;
        case CUDNN_DATA_BFLOAT16: ((__nv_bfloat16*)base)[i] = __float2bfloat16_rn((float)v); break;
        case CUDNN_DATA_INT32: ((int32_t*)base)[i] = (int32_t)v; break;
        case CUDNN_DATA_INT64: ((int64_t*)base)[i] = (int64_t)v; break;
        case CUDNN_DATA_BOOLEAN: ((uint8_t*)base)[i] = v != 0.0; break;
        case CUDNN_DATA_INT8: ((int8_t*)base)[i] = (int8_t)v; break;
        case CUDNN_DATA_UINT8: ((uint8_t*)base)[i] = (uint8_t)v; break;
        default: break;
    }
}

// A virtual tensor is kept as fp32 (or fp64 when declared so); a narrower float type is rounded on store.
double round_to(cudnnDataType_t t, double v) {
    switch (t) {
        case CUDNN_DATA_HALF: return __half2float(__float2half_rn((float)v));
        case CUDNN_DATA_BFLOAT16: return __bfloat162float(__float2bfloat16_rn((float)v));
        case CUDNN_DATA_DOUBLE: return v;
        case CUDNN_DATA_BOOLEAN: return v != 0.0 ? 1.0 : 0.0;
        case CUDNN_DATA_INT32:
        case CUDNN_DATA_INT64:
        case CUDNN_DATA_INT8:
        case CUDNN_DATA_UINT8: return std::trunc(v);
        default: return (float)v;
    }
}

// How a virtual tensor is stored: fp32, or double for doubles and integers (indices exact beyond 2^24).
cudnnDataType_t virtual_storage(cudnnDataType_t declared) {
    switch (declared) {
        case CUDNN_DATA_DOUBLE:
        case CUDNN_DATA_INT32:
        case CUDNN_DATA_INT64: return CUDNN_DATA_DOUBLE;
        default: return CUDNN_DATA_FLOAT;
    }
}

bool read_tensor(const EmuCudnnDesc* d, TensorInfo* t, std::string* why) {
    if (!d || d->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR) {
        *why = "an operand is not a tensor descriptor";
        return false;
    }
    t->uid = attr_scalar<int64_t>(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0);
    t->dtype = attr_scalar<cudnnDataType_t>(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_DATA_FLOAT);
    t->dims = attr_vector<int64_t>(d, CUDNN_ATTR_TENSOR_DIMENSIONS);
    t->strides = attr_vector<int64_t>(d, CUDNN_ATTR_TENSOR_STRIDES);
    t->is_virtual = attr_scalar<bool>(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, false);
    t->by_value = attr_scalar<bool>(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, false);
    if (t->dims.empty() || t->dims.size() != t->strides.size() || t->dims.size() > 8) {
        *why = "tensor " + std::to_string(t->uid) + ": dims and strides must have the same length, 1 to 8";
        return false;
    }
    for (size_t i = 0; i < t->dims.size(); ++i)
        if (t->dims[i] < 1 || t->strides[i] < 0) {
            *why = "tensor " + std::to_string(t->uid) + ": a dimension < 1 or a negative stride";
            return false;
        }
    if (!supported_dtype(t->dtype)) {
        *why = "tensor " + std::to_string(t->uid) + ": data type " + std::to_string((int)t->dtype) + " not emulated";
        return false;
    }
    if (t->dtype == CUDNN_DATA_BOOLEAN && !t->is_virtual) {  // cuDNN packs a BOOLEAN tensor's memory 1 bit each
        *why = "tensor " + std::to_string(t->uid) + ": a BOOLEAN tensor in memory (bit-packed) not emulated";
        return false;
    }
    // what changes the layout (vectorized, reordered, ragged) is declined; default values are accepted
    const bool vectorized = attr_scalar<int64_t>(d, CUDNN_ATTR_TENSOR_VECTOR_COUNT, 1) != 1;
    for (const auto& kv : d->attrs) {
        const int a = kv.first;
        const bool plain = a == CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT || a == CUDNN_ATTR_TENSOR_DATA_TYPE ||
                           a == CUDNN_ATTR_TENSOR_DIMENSIONS || a == CUDNN_ATTR_TENSOR_STRIDES ||
                           a == CUDNN_ATTR_TENSOR_UNIQUE_ID || a == CUDNN_ATTR_TENSOR_IS_VIRTUAL ||
                           a == CUDNN_ATTR_TENSOR_IS_BY_VALUE ||
                           (a == CUDNN_ATTR_TENSOR_VECTOR_COUNT && !vectorized) ||
                           (a == CUDNN_ATTR_TENSOR_VECTORIZED_DIMENSION && !vectorized) ||
                           (a == CUDNN_ATTR_TENSOR_REORDERING_MODE &&
                            attr_scalar<int32_t>(d, a, 0) == CUDNN_TENSOR_REORDERING_NONE);
        if (!plain) {
            *why = "tensor " + std::to_string(t->uid) + ": attribute " + std::to_string(a) +
                   " (a vectorized, reordered or ragged layout) not emulated";
            return false;
        }
    }
    return true;
}

// An operand that holds one value per leading batch index (matmul overrides, sequence lengths) or one value
// (the SDPA scale): dims[0] is 1 or `batch`, every other dim 1.
bool per_batch_shape(const TensorInfo& t, int64_t batch, std::string* why) {
    bool ok = t.dims[0] == 1 || t.dims[0] == batch;
    for (size_t i = 1; i < t.dims.size(); ++i) ok = ok && t.dims[i] == 1;
    if (!ok)
        *why = "tensor " + std::to_string(t.uid) + ": expected one value" + (batch > 1 ? " per batch index" : "") +
               " (dims (" + std::to_string(batch) + " or 1, 1, ...))";
    return ok;
}

// A view-only reshape is a permutation of x's dims with their strides (what the frontend's transposed views are),
// over a declared layout of x without aliasing: then every element of y is exactly one element of x.
bool is_permuted_view(const TensorInfo& x, const TensorInfo& y) {
    auto pairs = [](const TensorInfo& t) {
        std::vector<std::pair<int64_t, int64_t>> p;  // (stride, dim) of the dims > 1
        for (size_t i = 0; i < t.dims.size(); ++i)
            if (t.dims[i] > 1) p.push_back({t.strides[i], t.dims[i]});
        std::sort(p.begin(), p.end());
        return p;
    };
    const auto px = pairs(x), py = pairs(y);
    if (px != py) return false;
    for (size_t i = 1; i < px.size(); ++i)
        if (px[i].first < px[i - 1].first * px[i - 1].second) return false;  // x's declared layout aliases
    return true;
}

// ---------------------------------------------------------------------------------------------------------------
// operations: what finalize of the operation graph derives
// ---------------------------------------------------------------------------------------------------------------

enum class OpKind { Matmul, Pointwise, Reduction, Reshape, Sdpa };

struct Op {
    OpKind kind;
    std::vector<TensorInfo> in;  // matmul: A, B[, M', N', K' overrides]; pointwise: x[, b[, t]]; reduction, reshape: x
    TensorInfo out;
    std::vector<TensorInfo> more_out;  // sdpa: Stats, when asked for
    int pw_mode = 0;
    int64_t axis = 0;
    double alpha1 = 1, alpha2 = 1, padding = 0;
    int red_op = 0;
    int override_slot[3] = {-1, -1, -1};  // matmul: index in `in` of the M, N, K override tensors
    int scale_slot = -1, seq_q_slot = -1, seq_kv_slot = -1;  // sdpa: index in `in` (Q, K, V come first)
};

struct Graph {
    std::vector<Op> ops;                   // in execution order
    std::map<int64_t, TensorInfo> tensors;  // every tensor by uid
    std::map<int64_t, int64_t> virtual_offset;  // workspace byte offset of each virtual tensor
    std::map<int64_t, TensorInfo> storage;      // how each virtual tensor is stored: its dims, dense row-major
    int64_t workspace = 0;
};

int arity(int mode) {
    switch (mode) {
        case CUDNN_POINTWISE_ADD:
        case CUDNN_POINTWISE_SUB:
        case CUDNN_POINTWISE_MUL:
        case CUDNN_POINTWISE_DIV:
        case CUDNN_POINTWISE_MAX:
        case CUDNN_POINTWISE_MIN:
        case CUDNN_POINTWISE_POW:
        case CUDNN_POINTWISE_CMP_EQ:
        case CUDNN_POINTWISE_CMP_NEQ:
        case CUDNN_POINTWISE_CMP_GT:
        case CUDNN_POINTWISE_CMP_GE:
        case CUDNN_POINTWISE_CMP_LT:
        case CUDNN_POINTWISE_CMP_LE:
        case CUDNN_POINTWISE_LOGICAL_AND:
        case CUDNN_POINTWISE_LOGICAL_OR: return 2;
        case CUDNN_POINTWISE_BINARY_SELECT: return 3;
        case CUDNN_POINTWISE_EXP:
        case CUDNN_POINTWISE_LOG:
        case CUDNN_POINTWISE_NEG:
        case CUDNN_POINTWISE_ABS:
        case CUDNN_POINTWISE_SQRT:
        case CUDNN_POINTWISE_RSQRT:
        case CUDNN_POINTWISE_RECIPROCAL:
        case CUDNN_POINTWISE_IDENTITY:
        case CUDNN_POINTWISE_TANH_FWD:
        case CUDNN_POINTWISE_LOGICAL_NOT:
        case CUDNN_POINTWISE_GEN_INDEX: return 1;
        default: return 0;  // not emulated
    }
}

double pointwise(int mode, double x, double b, double t) {
    switch (mode) {
        case CUDNN_POINTWISE_ADD: return x + b;
        case CUDNN_POINTWISE_SUB: return x - b;
        case CUDNN_POINTWISE_MUL: return x * b;
        case CUDNN_POINTWISE_DIV: return x / b;
        case CUDNN_POINTWISE_MAX: return std::isnan(x) || std::isnan(b) ? NAN : std::max(x, b);  // NaN propagates
        case CUDNN_POINTWISE_MIN: return std::isnan(x) || std::isnan(b) ? NAN : std::min(x, b);
        case CUDNN_POINTWISE_POW: return std::pow(x, b);
        case CUDNN_POINTWISE_CMP_EQ: return x == b;
        case CUDNN_POINTWISE_CMP_NEQ: return x != b;
        case CUDNN_POINTWISE_CMP_GT: return x > b;
        case CUDNN_POINTWISE_CMP_GE: return x >= b;
        case CUDNN_POINTWISE_CMP_LT: return x < b;
        case CUDNN_POINTWISE_CMP_LE: return x <= b;
        case CUDNN_POINTWISE_LOGICAL_AND: return (x != 0) && (b != 0);
        case CUDNN_POINTWISE_LOGICAL_OR: return (x != 0) || (b != 0);
        case CUDNN_POINTWISE_BINARY_SELECT: return t != 0 ? x : b;
        case CUDNN_POINTWISE_EXP: return std::exp(x);
        case CUDNN_POINTWISE_LOG: return std::log(x);
        case CUDNN_POINTWISE_NEG: return -x;
        case CUDNN_POINTWISE_ABS: return std::fabs(x);
        case CUDNN_POINTWISE_SQRT: return std::sqrt(x);
        case CUDNN_POINTWISE_RSQRT: return 1.0 / std::sqrt(x);
        case CUDNN_POINTWISE_RECIPROCAL: return 1.0 / x;
        case CUDNN_POINTWISE_IDENTITY: return x;
        case CUDNN_POINTWISE_TANH_FWD: return std::tanh(x);
        case CUDNN_POINTWISE_LOGICAL_NOT: return x == 0;
        default: return NAN;
    }
}

bool supported_reduction(int op) {
    return op == CUDNN_REDUCE_TENSOR_ADD || op == CUDNN_REDUCE_TENSOR_MAX || op == CUDNN_REDUCE_TENSOR_MIN ||
           op == CUDNN_REDUCE_TENSOR_MUL || op == CUDNN_REDUCE_TENSOR_AMAX || op == CUDNN_REDUCE_TENSOR_AVG;
}

// an input of `out`'s rank whose every dim is 1 or out's (broadcast)
bool broadcasts_to(const TensorInfo& in, const TensorInfo& out) {
    if (in.dims.size() != out.dims.size()) return false;
    for (size_t i = 0; i < in.dims.size(); ++i)
        if (in.dims[i] != 1 && in.dims[i] != out.dims[i]) return false;
    return true;
}

bool read_op(const EmuCudnnDesc* d, Op* op, std::string* why) {
    auto tensor = [&](int name, TensorInfo* t) {  // a tensor the operation must have
        const EmuCudnnDesc* td = attr_desc(d, name);
        if (!td) *why = "an operation lacks a required tensor (attribute " + std::to_string(name) + ")";
        return td && read_tensor(td, t, why);
    };
    auto sub_descriptor = [&](int name, cudnnBackendDescriptorType_t type, const char* what) {
        const EmuCudnnDesc* sd = attr_desc(d, name);
        if (!sd || sd->type != type) *why = std::string("an operation without its ") + what + " descriptor";
        return sd && sd->type == type ? sd : nullptr;
    };
    switch (d->type) {
        case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: {
            op->kind = OpKind::Matmul;
            TensorInfo a, b;
            if (!tensor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, &a) ||
                !tensor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, &b) ||
                !tensor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, &op->out))
                return false;
            op->in = {a, b};
            const int names[3] = {CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC,
                                  CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC,
                                  CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC};
            for (int i = 0; i < 3; ++i) {
                if (!attr_desc(d, names[i])) continue;
                TensorInfo o;
                if (!tensor(names[i], &o)) return false;
                op->override_slot[i] = (int)op->in.size();
                op->in.push_back(o);
            }
            const EmuCudnnDesc* md =
                sub_descriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
            if (!md) return false;
            op->padding = attr_real(md, CUDNN_ATTR_MATMUL_PADDING_VALUE, 0.0);
            const size_t r = op->out.dims.size();
            if (r < 2 || a.dims.size() != r || b.dims.size() != r) {
                *why = "matmul: A, B and C need the same rank >= 2";
                return false;
            }
            const int64_t M = op->out.dims[r - 2], N = op->out.dims[r - 1], K = a.dims[r - 1];
            if (a.dims[r - 2] != M || b.dims[r - 2] != K || b.dims[r - 1] != N) {
                *why = "matmul: shapes do not chain (A (.., M, K), B (.., K, N), C (.., M, N))";
                return false;
            }
            for (size_t i = 0; i + 2 < r; ++i)
                if ((a.dims[i] != 1 && a.dims[i] != op->out.dims[i]) ||
                    (b.dims[i] != 1 && b.dims[i] != op->out.dims[i])) {
                    *why = "matmul: a batch dimension neither matches C's nor is 1";
                    return false;
                }
            for (int i = 0; i < 3; ++i)
                if (op->override_slot[i] >= 0 &&
                    !per_batch_shape(op->in[op->override_slot[i]], r > 2 ? op->out.dims[0] : 1, why))
                    return false;
            for (const auto& kv : d->attrs)
                if (kv.first == CUDNN_ATTR_OPERATION_MATMUL_IRREGULARLY_STRIDED_BATCH_COUNT) {
                    *why = "matmul: an irregularly strided batch not emulated";
                    return false;
                }
            return true;
        }
        case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
            op->kind = OpKind::Pointwise;
            const EmuCudnnDesc* pd =
                sub_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
                               "pointwise");
            if (!pd) return false;
            op->pw_mode = attr_scalar<cudnnPointwiseMode_t>(pd, CUDNN_ATTR_POINTWISE_MODE, CUDNN_POINTWISE_ADD);
            op->axis = attr_scalar<int64_t>(pd, CUDNN_ATTR_POINTWISE_AXIS, 0);
            const int n = arity(op->pw_mode);
            if (n == 0) {
                *why = "pointwise mode " + std::to_string(op->pw_mode) + " not emulated";
                return false;
            }
            if (attr_desc(d, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC) ||
                attr_desc(d, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC)) {
                *why = "backward pointwise modes (dx, dy) not emulated";
                return false;
            }
            TensorInfo x, b, t;
            if (!tensor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, &x) ||
                !tensor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, &op->out))
                return false;
            op->in = {x};
            if (n >= 2) {
                if (!tensor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, &b)) return false;
                op->in.push_back(b);
            }
            if (n == 3) {
                if (!tensor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, &t)) return false;
                op->in.push_back(t);
            }
            op->alpha1 = attr_real(d, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, 1.0);
            op->alpha2 = attr_real(d, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, 1.0);
            if (op->pw_mode == CUDNN_POINTWISE_GEN_INDEX &&
                (op->axis < 0 || op->axis >= (int64_t)op->out.dims.size())) {
                *why = "GEN_INDEX: axis outside the output's dims";
                return false;
            }
            for (const TensorInfo& i : op->in)
                if (!broadcasts_to(i, op->out)) {
                    *why = "pointwise: input tensor " + std::to_string(i.uid) + " does not broadcast to output " +
                           std::to_string(op->out.uid);
                    return false;
                }
            return true;
        }
        case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: {
            op->kind = OpKind::Reduction;
            const EmuCudnnDesc* rd =
                sub_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
            if (!rd) return false;
            op->red_op = attr_scalar<cudnnReduceTensorOp_t>(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_REDUCE_TENSOR_ADD);
            if (!supported_reduction(op->red_op)) {
                *why = "reduction operator " + std::to_string(op->red_op) + " not emulated";
                return false;
            }
            TensorInfo x;
            if (!tensor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, &x) ||
                !tensor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, &op->out))
                return false;
            op->in = {x};
            if (!broadcasts_to(op->out, x)) {
                *why = "reduction: each output dim must be the input's or 1";
                return false;
            }
            return true;
        }
        case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: {
            // view-only (cuDNN before 9.22, the only mode the stand-in offers): y's element at y's offset o is the
            // element x holds at offset o, converted to y's type (the frontend's transposed views of K, P, dS)
            op->kind = OpKind::Reshape;
            for (const auto& kv : d->attrs)  // e.g. cuDNN 9.22's reshape mode (a logical reshape)
                if (kv.first != CUDNN_ATTR_OPERATION_RESHAPE_XDESC && kv.first != CUDNN_ATTR_OPERATION_RESHAPE_YDESC) {
                    *why = "reshape attribute " + std::to_string(kv.first) + " not emulated";
                    return false;
                }
            TensorInfo x;
            if (!tensor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, &x) ||
                !tensor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, &op->out))
                return false;
            op->in = {x};
            if (!is_permuted_view(x, op->out)) {
                *why = "reshape: y is not a permuted view of x's declared layout (or that layout aliases)";
                return false;
            }
            return true;
        }
        case CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR: {
            // cuDNN's unified SDPA forward (what the frontend picks for a non-causal forward from cuDNN 9.13.1): O =
            // softmax(scale Q K^T) V per (batch, head), Stats = the rows' max + ln(sum of exp), heads of K and V
            // shared by hq / hk query heads; with SEQ_LEN_Q and SEQ_LEN_KV its implicit padding mask keeps score
            // (i, j) only where i < seq_len_q[b] and j < seq_len_kv[b] (rows without a key: O = 0, Stats = -inf).
            op->kind = OpKind::Sdpa;
            for (const auto& kv : d->attrs)
                if (kv.first < CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC ||
                    (kv.first > CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC &&
                     kv.first != CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_QDESC &&
                     kv.first != CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_KVDESC)) {
                    *why = "SDPA forward attribute " + std::to_string(kv.first) + " not emulated";
                    return false;
                }
            TensorInfo q, k, v, t;
            if (!tensor(CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, &q) ||
                !tensor(CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, &k) ||
                !tensor(CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, &v) ||
                !tensor(CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, &op->out))
                return false;
            op->in = {q, k, v};
            auto optional = [&](int name, int* slot) {
                if (!attr_desc(d, name)) return true;
                if (!tensor(name, &t)) return false;
                *slot = (int)op->in.size();
                op->in.push_back(t);
                return true;
            };
            if (!optional(CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, &op->scale_slot) ||
                !optional(CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_QDESC, &op->seq_q_slot) ||
                !optional(CUDNN_ATTR_OPERATION_SDPA_FWD_SEQ_LEN_KVDESC, &op->seq_kv_slot))
                return false;
            if ((op->seq_q_slot < 0) != (op->seq_kv_slot < 0)) {
                *why = "SDPA forward: SEQ_LEN_Q and SEQ_LEN_KV come together";
                return false;
            }
            if ((op->scale_slot >= 0 && !per_batch_shape(op->in[op->scale_slot], 1, why)) ||
                (op->seq_q_slot >= 0 && !per_batch_shape(op->in[op->seq_q_slot], q.dims[0], why)) ||
                (op->seq_kv_slot >= 0 && !per_batch_shape(op->in[op->seq_kv_slot], q.dims[0], why)))
                return false;
            if (attr_desc(d, CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC)) {
                if (!tensor(CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, &t)) return false;
                op->more_out.push_back(t);
            }
            const TensorInfo& o = op->out;
            const bool shapes = q.dims.size() == 4 && k.dims.size() == 4 && v.dims.size() == 4 && o.dims.size() == 4 &&
                                k.dims[0] == q.dims[0] && v.dims[0] == q.dims[0] && k.dims[3] == q.dims[3] &&
                                v.dims[2] == k.dims[2] && k.dims[1] >= 1 && q.dims[1] % k.dims[1] == 0 &&
                                q.dims[1] % v.dims[1] == 0 &&
                                o.dims == std::vector<int64_t>{q.dims[0], q.dims[1], q.dims[2], v.dims[3]} &&
                                (op->more_out.empty() ||
                                 op->more_out[0].dims == std::vector<int64_t>{q.dims[0], q.dims[1], q.dims[2], 1});
            if (!shapes) {
                *why = "SDPA forward: shapes are not Q (b, hq, sq, d), K (b, hk, skv, d), V (b, hv, skv, dv), "
                       "O (b, hq, sq, dv), Stats (b, hq, sq, 1)";
                return false;
            }
            return true;
        }
        default:
            *why = "operation descriptor type " + std::to_string((int)d->type) + " not emulated";
            return false;
    }
}

// Finalize of an operation graph: read every op, order them by data dependency, lay the virtual tensors out in
// the workspace. False (with *why) for anything the stand-in does not emulate or an inconsistent graph.
bool build_graph(const EmuCudnnDesc* og, Graph* g, std::string* why) {
    std::vector<cudnnBackendDescriptor_t> op_descs = attr_vector<cudnnBackendDescriptor_t>(og, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    if (op_descs.empty()) {
        *why = "an operation graph without operations";
        return false;
    }
    std::vector<Op> ops;
    for (cudnnBackendDescriptor_t od : op_descs) {
        const auto* d = (const EmuCudnnDesc*)od;
        if (!d || !d->finalized || !d->op) {
            *why = "an operation of the graph is not a finalized operation descriptor";
            return false;
        }
        ops.push_back(*d->op);
    }
    // every tensor once, consistently
    std::map<int64_t, int> producer;
    auto note = [&](const TensorInfo& t) {
        auto it = g->tensors.find(t.uid);
        if (it == g->tensors.end()) {
            g->tensors[t.uid] = t;
            return true;
        }
        const TensorInfo& o = it->second;
        if (o.dims != t.dims || o.strides != t.strides || o.dtype != t.dtype || o.is_virtual != t.is_virtual) {
            *why = "tensor uid " + std::to_string(t.uid) + " is described two ways";
            return false;
        }
        return true;
    };
    for (size_t i = 0; i < ops.size(); ++i) {
        for (const TensorInfo& t : ops[i].in)
            if (!note(t)) return false;
        std::vector<TensorInfo> outs = ops[i].more_out;
        outs.push_back(ops[i].out);
        for (const TensorInfo& t : outs) {
            if (!note(t)) return false;
            if (producer.count(t.uid)) {
                *why = "tensor uid " + std::to_string(t.uid) + " is written by two operations";
                return false;
            }
            producer[t.uid] = (int)i;
        }
    }
    for (auto& kv : g->tensors)
        if (kv.second.is_virtual && !producer.count(kv.first)) {
            *why = "virtual tensor " + std::to_string(kv.first) + " is read but never written";
            return false;
        }
    // data-dependency order (Kahn, stable in the given order)
    std::vector<bool> done(ops.size(), false);
    std::set<int64_t> ready;  // uids written so far
    while (g->ops.size() < ops.size()) {
        bool progressed = false;
        for (size_t i = 0; i < ops.size(); ++i) {
            if (done[i]) continue;
            bool ok = true;
            for (const TensorInfo& t : ops[i].in)
                if (producer.count(t.uid) && !ready.count(t.uid)) ok = false;
            if (!ok) continue;
            done[i] = true;
            progressed = true;
            ready.insert(ops[i].out.uid);
            for (const TensorInfo& t : ops[i].more_out) ready.insert(t.uid);
            g->ops.push_back(ops[i]);
        }
        if (!progressed) {
            *why = "the operation graph has a cycle";
            return false;
        }
    }
    // the workspace: every virtual tensor as fp32 (fp64 if declared), 256-byte aligned
    for (auto& kv : g->tensors) {
        if (!kv.second.is_virtual) continue;
        const size_t el = dtype_bytes(virtual_storage(kv.second.dtype));
        TensorInfo st = kv.second;  // a virtual tensor's strides describe no memory (cuDNN fuses it away, and
        int64_t dense = 1;          // the frontend's may even alias): stored densely, read back by its dims
        for (int d = (int)st.dims.size() - 1; d >= 0; --d) {
            st.strides[d] = dense;
            dense *= st.dims[d];
        }
        g->storage[kv.first] = st;
        g->virtual_offset[kv.first] = g->workspace;
        g->workspace += ((int64_t)(st.elements() * el) + 255) / 256 * 256;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------------------------
// execution
// ---------------------------------------------------------------------------------------------------------------

struct Bound {  // a tensor's memory at execution
    void* base = nullptr;
    cudnnDataType_t dtype = CUDNN_DATA_FLOAT;  // the storage type (virtual: FLOAT or DOUBLE)
    cudnnDataType_t declared = CUDNN_DATA_FLOAT;
    const TensorInfo* info = nullptr;
};

// offset of `in` at the output multi-index `idx` (size-1 dims broadcast)
int64_t offset_at(const TensorInfo& in, const int64_t* idx) {
    int64_t off = 0;
    for (size_t d = 0; d < in.dims.size(); ++d)
        if (in.dims[d] != 1) off += idx[d] * in.strides[d];
    return off;
}

bool next_index(int64_t* idx, const std::vector<int64_t>& dims) {
    for (int d = (int)dims.size() - 1; d >= 0; --d) {
        if (++idx[d] < dims[d]) return true;
        idx[d] = 0;
    }
    return false;
}

double read_at(const Bound& b, int64_t off) { return load(b.base, b.dtype, off); }
void write_at(const Bound& b, int64_t off, double v) {
    store(b.base, b.dtype, off, b.info->is_virtual ? round_to(b.declared, v) : v);
}

// the extent an override tensor gives for the leading batch index idx[0] (its first dim indexes it; a negative
// value counts as 0), or `full` when the matmul has no such override
int64_t override_value(const Op& op, const std::vector<Bound>& in, int which, const int64_t* idx, int64_t full) {
    const int s = op.override_slot[which];
    if (s < 0) return full;
    const TensorInfo& t = *in[s].info;
    const int64_t b = t.dims[0] == 1 ? 0 : idx[0];
    return std::min(full, std::max<int64_t>(0, (int64_t)read_at(in[s], b * t.strides[0])));
}

void run_matmul(const Op& op, const std::vector<Bound>& in, const Bound& out) {
    const TensorInfo &A = *in[0].info, &B = *in[1].info, &C = *out.info;
    const size_t r = C.dims.size();
    const int64_t M = C.dims[r - 2], N = C.dims[r - 1], K = A.dims[r - 1];
    std::vector<int64_t> batch(C.dims.begin(), C.dims.end() - 2);
    std::vector<int64_t> idx(r, 0);
    std::vector<double> a((size_t)(M * K)), bt((size_t)(N * K));
    do {
        const int64_t Mo = override_value(op, in, 0, idx.data(), M), No = override_value(op, in, 1, idx.data(), N),
                      k_end = override_value(op, in, 2, idx.data(), K);
        int64_t ia[8] = {0}, ib[8] = {0}, ic[8] = {0};
        for (size_t d = 0; d + 2 < r; ++d) ia[d] = ib[d] = ic[d] = idx[d];
        const int64_t a0 = offset_at(A, ia), b0 = offset_at(B, ib), c0 = offset_at(C, ic);
        // this batch's A (M, k_end) and B^T (N, k_end) read once, as double
        for (int64_t m = 0; m < M; ++m)
            for (int64_t k = 0; k < k_end; ++k)
                a[(size_t)(m * k_end + k)] = read_at(in[0], a0 + m * A.strides[r - 2] + k * A.strides[r - 1]);
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < k_end; ++k)
                bt[(size_t)(n * k_end + k)] = read_at(in[1], b0 + k * B.strides[r - 2] + n * B.strides[r - 1]);
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
                double s = op.padding;
                if (m < Mo && n < No) {
                    s = 0;
                    const double *am = &a[(size_t)(m * k_end)], *bn = &bt[(size_t)(n * k_end)];
                    for (int64_t k = 0; k < k_end; ++k) s += am[k] * bn[k];
                }
                write_at(out, c0 + m * C.strides[r - 2] + n * C.strides[r - 1], s);
            }
    } while (!batch.empty() && next_index(idx.data(), batch));
}

void run_pointwise(const Op& op, const std::vector<Bound>& in, const Bound& out) {
    const TensorInfo& Y = *out.info;
    std::vector<int64_t> idx(Y.dims.size(), 0);
    do {
        double v;
        if (op.pw_mode == CUDNN_POINTWISE_GEN_INDEX) {
            v = (double)idx[op.axis];
        } else {
            const double x = op.alpha1 * read_at(in[0], offset_at(*in[0].info, idx.data()));
            const double b = in.size() > 1 ? op.alpha2 * read_at(in[1], offset_at(*in[1].info, idx.data())) : 0;
            const double t = in.size() > 2 ? read_at(in[2], offset_at(*in[2].info, idx.data())) : 0;
            v = pointwise(op.pw_mode, x, b, t);
        }
        write_at(out, offset_at(Y, idx.data()), v);
    } while (next_index(idx.data(), Y.dims));
}

// View-only reshape: y's element at its declared offset o is x's element at x's declared offset o. The declared
// layouts relate the two; each is read or written where it is stored.
cudnnStatus_t run_reshape(const Op& op, const Bound& in, const Bound& out) {
    const TensorInfo &X = op.in[0], &Y = op.out;
    std::vector<int64_t> stored_at((size_t)X.span(), -1);  // declared offset of x -> where x keeps that element
    std::vector<int64_t> idx(X.dims.size(), 0);
    do {
        int64_t& slot = stored_at[(size_t)offset_at(X, idx.data())];
        if (slot >= 0)
            return fail_with(CUDNN_STATUS_BAD_PARAM, "reshape: x (uid %lld) has two elements at one offset",
                             (long long)X.uid);
        slot = offset_at(*in.info, idx.data());
    } while (next_index(idx.data(), X.dims));
    std::vector<int64_t> idy(Y.dims.size(), 0);
    do {
        const int64_t o = offset_at(Y, idy.data());
        if (o >= (int64_t)stored_at.size() || stored_at[(size_t)o] < 0)
            return fail_with(CUDNN_STATUS_BAD_PARAM, "reshape: y (uid %lld) is not a view of x's elements",
                             (long long)Y.uid);
        write_at(out, offset_at(*out.info, idy.data()), read_at(in, stored_at[(size_t)o]));
    } while (next_index(idy.data(), Y.dims));
    return CUDNN_STATUS_SUCCESS;
}

void run_reduction(const Op& op, const Bound& in, const Bound& out) {
    const TensorInfo &X = *in.info, &Y = *out.info;
    // accumulate in a dense double array over the output's elements, then store
    std::vector<int64_t> ydense(Y.dims.size());
    int64_t ny = 1;
    for (int d = (int)Y.dims.size() - 1; d >= 0; --d) {
        ydense[d] = ny;
        ny *= Y.dims[d];
    }
    const bool is_max = op.red_op == CUDNN_REDUCE_TENSOR_MAX || op.red_op == CUDNN_REDUCE_TENSOR_AMAX;
    double init = 0;
    if (is_max) init = op.red_op == CUDNN_REDUCE_TENSOR_AMAX ? 0.0 : -INFINITY;
    if (op.red_op == CUDNN_REDUCE_TENSOR_MIN) init = INFINITY;
    if (op.red_op == CUDNN_REDUCE_TENSOR_MUL) init = 1;
    std::vector<double> acc((size_t)ny, init);
    std::vector<int64_t> idx(X.dims.size(), 0);
    do {
        int64_t yi = 0;
        for (size_t d = 0; d < Y.dims.size(); ++d)
            if (Y.dims[d] != 1) yi += idx[d] * ydense[d];
        const double x = read_at(in, offset_at(X, idx.data()));
        double& a = acc[(size_t)yi];
        switch (op.red_op) {
            case CUDNN_REDUCE_TENSOR_MAX: a = std::isnan(x) || std::isnan(a) ? NAN : std::max(a, x); break;
            case CUDNN_REDUCE_TENSOR_AMAX: a = std::max(a, std::fabs(x)); break;
            case CUDNN_REDUCE_TENSOR_MIN: a = std::isnan(x) || std::isnan(a) ? NAN : std::min(a, x); break;
            case CUDNN_REDUCE_TENSOR_MUL: a *= x; break;
            default: a += x; break;  // ADD, AVG
        }
    } while (next_index(idx.data(), X.dims));
    const double count = (double)(X.elements() / Y.elements());
    std::vector<int64_t> oidx(Y.dims.size(), 0);
    do {
        int64_t yi = 0;
        for (size_t d = 0; d < Y.dims.size(); ++d) yi += oidx[d] * ydense[d];
        double v = acc[(size_t)yi];
        if (op.red_op == CUDNN_REDUCE_TENSOR_AVG) v /= count;
        write_at(out, offset_at(Y, oidx.data()), v);
    } while (next_index(oidx.data(), Y.dims));
}

void run_sdpa(const Op& op, const std::vector<Bound>& in, const Bound& out, const Bound* stats) {
    const TensorInfo &Q = *in[0].info, &K = *in[1].info, &V = *in[2].info, &O = *out.info;
    const int64_t B = Q.dims[0], HQ = Q.dims[1], SQ = Q.dims[2], D = Q.dims[3], SKV = K.dims[2], DV = V.dims[3];
    const double scale = op.scale_slot >= 0 ? read_at(in[op.scale_slot], 0) : 1.0;
    auto per_batch = [&](int slot, int64_t b, int64_t dflt) {
        if (slot < 0) return dflt;
        const TensorInfo& t = *in[slot].info;
        return (int64_t)read_at(in[slot], (t.dims[0] == 1 ? 0 : b) * t.strides[0]);
    };
    std::vector<double> s((size_t)SKV), qb((size_t)D), kb((size_t)(SKV * D)), vb((size_t)(SKV * DV));
    for (int64_t b = 0; b < B; ++b) {
        const int64_t sq = per_batch(op.seq_q_slot, b, SQ), skv = std::min(per_batch(op.seq_kv_slot, b, SKV), SKV);
        for (int64_t h = 0; h < HQ; ++h) {
            const int64_t hk = h / (HQ / K.dims[1]), hv = h / (HQ / V.dims[1]);
            // this head's keys (skv, D) and values (skv, DV), read once, as double
            for (int64_t j = 0; j < skv; ++j) {
                for (int64_t e = 0; e < D; ++e)
                    kb[(size_t)(j * D + e)] =
                        read_at(in[1], b * K.strides[0] + hk * K.strides[1] + j * K.strides[2] + e * K.strides[3]);
                for (int64_t e = 0; e < DV; ++e)
                    vb[(size_t)(j * DV + e)] =
                        read_at(in[2], b * V.strides[0] + hv * V.strides[1] + j * V.strides[2] + e * V.strides[3]);
            }
            for (int64_t i = 0; i < SQ; ++i) {
                const int64_t o0 = b * O.strides[0] + h * O.strides[1] + i * O.strides[2];
                const int64_t st0 = stats ? b * stats->info->strides[0] + h * stats->info->strides[1] +
                                                i * stats->info->strides[2]
                                          : 0;
                if (i >= sq || skv <= 0) {
                    for (int64_t e = 0; e < DV; ++e) write_at(out, o0 + e * O.strides[3], 0.0);
                    if (stats) write_at(*stats, st0, -INFINITY);
                    continue;
                }
                for (int64_t e = 0; e < D; ++e)
                    qb[(size_t)e] =
                        read_at(in[0], b * Q.strides[0] + h * Q.strides[1] + i * Q.strides[2] + e * Q.strides[3]);
                double m = -INFINITY;
                for (int64_t j = 0; j < skv; ++j) {
                    double dot = 0;
                    for (int64_t e = 0; e < D; ++e) dot += qb[(size_t)e] * kb[(size_t)(j * D + e)];
                    s[(size_t)j] = scale * dot;
                    m = std::max(m, s[(size_t)j]);
                }
                double sum = 0;
                for (int64_t j = 0; j < skv; ++j) sum += (s[(size_t)j] = std::exp(s[(size_t)j] - m));
                for (int64_t e = 0; e < DV; ++e) {
                    double acc = 0;
                    for (int64_t j = 0; j < skv; ++j) acc += s[(size_t)j] * vb[(size_t)(j * DV + e)];
                    write_at(out, o0 + e * O.strides[3], acc / sum);
                }
                if (stats) write_at(*stats, st0, m + std::log(sum));
            }
        }
    }
}

// PRAC_EMU_CUDNN_TRACE: one line per interpreted operation, its tensors as uid[v: virtual]TYPE[dim:stride ...]
void trace_op(const Op& op) {
    static const char* kinds[] = {"matmul", "pointwise", "reduction", "reshape", "sdpa"};
    auto text = [](const TensorInfo& t) {
        std::string r = std::to_string(t.uid) + (t.is_virtual ? "v" : "") + dtype_name(t.dtype) + "[";
        for (size_t i = 0; i < t.dims.size(); ++i)
            r += std::to_string(t.dims[i]) + ":" + std::to_string(t.strides[i]) + (i + 1 < t.dims.size() ? " " : "]");
        return r;
    };
    std::string ins;
    for (const TensorInfo& t : op.in) ins += text(t) + " ";
    trace("  op %s mode %d red %d axis %lld alpha %g %g pad %g: %s-> %s", kinds[(int)op.kind], op.pw_mode, op.red_op,
          (long long)op.axis, op.alpha1, op.alpha2, op.padding, ins.c_str(), text(op.out).c_str());
}

cudnnStatus_t execute_graph(const Graph& g, const std::map<int64_t, void*>& pack, void* workspace) {
    if (g.workspace > 0 && !workspace)
        return fail_with(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "the plan needs a %lld-byte workspace; none given",
                         (long long)g.workspace);
    std::map<int64_t, Bound> bound;
    for (const auto& kv : g.tensors) {
        const TensorInfo& t = kv.second;
        Bound b;
        b.info = t.is_virtual ? &g.storage.at(kv.first) : &t;
        b.declared = t.dtype;
        if (t.is_virtual) {
            b.base = (char*)workspace + g.virtual_offset.at(kv.first);
            b.dtype = virtual_storage(t.dtype);
        } else {
            auto it = pack.find(kv.first);
            if (it == pack.end() || !it->second)
                return fail_with(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                                 "tensor uid %lld has no data pointer in the variant pack", (long long)kv.first);
            b.base = it->second;
            b.dtype = t.dtype;
            trace("  tensor %lld at %p, %lld bytes", (long long)kv.first, b.base,
                  (long long)(t.span() * dtype_bytes(t.dtype)));
            // a caller's tensor inside the plan's workspace would be overwritten by the plan's intermediates
            const char *lo = (const char*)b.base, *hi = lo + t.span() * dtype_bytes(t.dtype);
            const char *wlo = (const char*)workspace, *whi = wlo + g.workspace;
            if (g.workspace > 0 && lo < whi && wlo < hi)
                return fail_with(CUDNN_STATUS_BAD_PARAM,
                                 "tensor uid %lld [%p, %p) overlaps the plan's workspace [%p, %p)",
                                 (long long)kv.first, (const void*)lo, (const void*)hi, (const void*)wlo,
                                 (const void*)whi);
        }
        bound[kv.first] = b;
    }
    // the bytes it reads and writes, for the race check across streams (stream_order.h): each caller's tensor over its
    // span (an interleaved view's gaps included), then the workspace; not a scalar passed by value (host memory that
    // the call reads)
    std::set<int64_t> outputs;
    for (const Op& op : g.ops) {
        outputs.insert(op.out.uid);
        for (const TensorInfo& t : op.more_out) outputs.insert(t.uid);
    }
    for (bool write : {false, true})
        for (const auto& kv : g.tensors)
            if (!kv.second.is_virtual && !kv.second.by_value && outputs.count(kv.first) == (write ? 1u : 0u))
                cuda_emu::op_access(bound.at(kv.first).base, (size_t)(kv.second.span() * dtype_bytes(kv.second.dtype)),
                                    write, "cudnnBackendExecute");
    if (g.workspace > 0) cuda_emu::op_access(workspace, (size_t)g.workspace, true, "cudnnBackendExecute");
    for (const Op& op : g.ops) {
        if (tracing()) trace_op(op);
        std::vector<Bound> in;
        for (const TensorInfo& t : op.in) in.push_back(bound.at(t.uid));
        const Bound& out = bound.at(op.out.uid);
        switch (op.kind) {
            case OpKind::Matmul: run_matmul(op, in, out); break;
            case OpKind::Pointwise: run_pointwise(op, in, out); break;
            case OpKind::Reduction: run_reduction(op, in[0], out); break;
            case OpKind::Reshape:
                if (cudnnStatus_t st = run_reshape(op, in[0], out); st != CUDNN_STATUS_SUCCESS) return st;
                break;
            case OpKind::Sdpa:
                run_sdpa(op, in, out, op.more_out.empty() ? nullptr : &bound.at(op.more_out[0].uid));
                break;
        }
    }
    return CUDNN_STATUS_SUCCESS;
}

long g_executes = 0;

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// the C API
// ---------------------------------------------------------------------------------------------------------------

// The stand-in offers the graph API of cuDNN 9.19 (the CUDA 13 toolkit's): cudnn-frontend then lowers a causal
// SDPA to composite graphs of matmul, pointwise, reduction and reshape operations, and a non-causal forward to
// the unified SDPA operation. Newer versions get other lowerings (a unified softmax operation from 9.21), so it
// reports at most 9.19, whatever headers it was compiled with.
size_t cudnnGetVersion(void) { return CUDNN_VERSION < 91900 ? CUDNN_VERSION : 91900; }
size_t cudnnGetMaxDeviceVersion(void) { return 900; }  // sm_90, the emulated device
size_t cudnnGetCudartVersion(void) { return CUDART_VERSION; }

const char* cudnnGetErrorString(cudnnStatus_t status) {
    switch (status) {
        case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
        case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
        case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
        case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
        case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
        case CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
        case CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE: return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
        case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT: return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
        case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
        case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
        case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
        default: return "CUDNN_STATUS_UNKNOWN (cudnn-emu)";
    }
}

void cudnnGetLastErrorString(char* message, size_t max_size) {
    if (!message || max_size == 0) return;
    std::snprintf(message, max_size, "%s", g_last_error.c_str());
    g_last_error.clear();
}

cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int* value) {
    if (!value) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    const int v = (int)cudnnGetVersion();  // 91900 = 9.19.0
    switch (type) {
        case MAJOR_VERSION: *value = v / 10000; return CUDNN_STATUS_SUCCESS;
        case MINOR_VERSION: *value = v / 100 % 100; return CUDNN_STATUS_SUCCESS;
        case PATCH_LEVEL: *value = v % 100; return CUDNN_STATUS_SUCCESS;
        default: return CUDNN_STATUS_BAD_PARAM;
    }
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
    if (!handle) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    *handle = new (std::nothrow) cudnnContext();
    trace("cudnnCreate -> %p", (void*)*handle);
    return *handle ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
    if (!handle) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    delete handle;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
    if (!handle) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    handle->stream = streamId;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* streamId) {
    if (!handle || !streamId) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    *streamId = handle->stream;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGraphVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                           cudnnBackendDescriptor_t* descriptor) {
    if (!descriptor) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    auto* d = new (std::nothrow) EmuCudnnDesc();
    if (!d) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    d->type = descriptorType;
    *descriptor = (cudnnBackendDescriptor_t)d;
    trace("create type %d -> %p", (int)descriptorType, (void*)d);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
    if (!descriptor) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    delete (EmuCudnnDesc*)descriptor;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendInitialize(cudnnBackendDescriptor_t descriptor) {
    return descriptor ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType, int64_t elementCount,
                                       const void* arrayOfElements) {
    auto* d = (EmuCudnnDesc*)descriptor;
    if (!d) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (elementCount < 0 || (elementCount > 0 && !arrayOfElements)) return CUDNN_STATUS_BAD_PARAM;
    if (d->finalized)
        return fail_with(CUDNN_STATUS_BAD_PARAM, "set attribute %d on finalized descriptor type %d", (int)attributeName,
                         (int)d->type);
    set_attr(d, attributeName, attributeType, elementCount, arrayOfElements);
    trace("set %p (type %d) attr %d type %d count %lld", (void*)d, (int)d->type, (int)attributeName,
          (int)attributeType, (long long)elementCount);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
    auto* d = (EmuCudnnDesc*)descriptor;
    if (!d) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    trace("finalize %p (type %d)", (void*)d, (int)d->type);
    std::string why;
    switch (d->type) {
        case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
            TensorInfo t;
            if (!read_tensor(d, &t, &why)) return fail_with(CUDNN_STATUS_BAD_PARAM, "%s", why.c_str());
            break;
        }
        case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
        case CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR: {
            auto op = std::make_shared<Op>();
            if (!read_op(d, op.get(), &why)) return fail_with(CUDNN_STATUS_NOT_SUPPORTED, "%s", why.c_str());
            d->op = op;
            break;
        }
        case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
        case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
        case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
        case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
        case CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR:
        case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: break;
        case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: {
            auto g = std::make_shared<Graph>();
            if (!build_graph(d, g.get(), &why))
                return fail_with(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN, "%s", why.c_str());
            d->graph = g;
            break;
        }
        case CUDNN_BACKEND_ENGINE_DESCRIPTOR:  // engine -> operation graph, config -> engine, plan -> config
        case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
        case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
            const int link = d->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR    ? CUDNN_ATTR_ENGINE_OPERATION_GRAPH
                             : d->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR ? CUDNN_ATTR_ENGINECFG_ENGINE
                                                                            : CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG;
            const EmuCudnnDesc* from = attr_desc(d, link);
            if (!from || !from->finalized || !from->graph)
                return fail_with(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                                 "descriptor type %d: attribute %d is not a finalized descriptor", (int)d->type, link);
            if (d->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR && attr_scalar<int64_t>(d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, 0) != 0)
                return fail_with(CUDNN_STATUS_NOT_SUPPORTED, "engine index other than 0 (the stand-in has one engine)");
            d->graph = from->graph;
            break;
        }
        default:
            return fail_with(CUDNN_STATUS_NOT_SUPPORTED, "descriptor type %d not emulated", (int)d->type);
    }
    d->finalized = true;
    return CUDNN_STATUS_SUCCESS;
}

namespace {

// Copies a descriptor's contents into a caller-created one of the same type (GetAttribute of descriptors).
void copy_into(EmuCudnnDesc* to, const EmuCudnnDesc* from) {
    if (!to || !from) return;
    to->attrs = from->attrs;
    to->finalized = from->finalized;
    to->op = from->op;
    to->graph = from->graph;
}

template <typename T>
cudnnStatus_t return_values(const std::vector<T>& v, cudnnBackendAttributeType_t type,
                            cudnnBackendAttributeType_t asked, int64_t requested, int64_t* count, void* out) {
    if (asked != type) return fail_with(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "attribute type %d asked, %d held",
                                        (int)asked, (int)type);
    if (count) *count = (int64_t)v.size();
    if (requested > 0 && out) std::memcpy(out, v.data(), std::min<size_t>((size_t)requested, v.size()) * sizeof(T));
    return CUDNN_STATUS_SUCCESS;
}

}  // namespace

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                       cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType, int64_t requestedElementCount,
                                       int64_t* elementCount, void* arrayOfElements) {
    auto* d = (EmuCudnnDesc*)descriptor;
    if (!d) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    trace("get %p (type %d) attr %d type %d requested %lld", (void*)d, (int)d->type, (int)attributeName,
          (int)attributeType, (long long)requestedElementCount);
    switch ((int)attributeName) {
        case CUDNN_ATTR_ENGINEHEUR_RESULTS: {
            // one engine config: engine 0 on the heuristic's operation graph, no knobs
            if (!d->finalized) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
            if (elementCount) *elementCount = 1;
            if (requestedElementCount >= 1 && arrayOfElements) {
                const EmuCudnnDesc* og = attr_desc(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
                if (!og || !og->graph)
                    return fail_with(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "heuristics without a finalized graph");
                auto* cfg = ((EmuCudnnDesc**)arrayOfElements)[0];
                if (!cfg || cfg->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
                    return fail_with(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE, "heuristics results: not an engine config");
                // the engine is owned by the stand-in (a config refers to it as cuDNN's do), one per query, kept
                // to the end of the process (a few hundred bytes per graph built)
                static std::mutex engines_mu;
                static std::vector<std::unique_ptr<EmuCudnnDesc>> engines;
                std::lock_guard<std::mutex> lock(engines_mu);
                engines.push_back(std::make_unique<EmuCudnnDesc>());
                EmuCudnnDesc* eng = engines.back().get();
                eng->type = CUDNN_BACKEND_ENGINE_DESCRIPTOR;
                set_attr(eng, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og);
                const int64_t zero = 0;
                set_attr(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &zero);
                eng->graph = og->graph;
                eng->finalized = true;
                cudnnBackendDescriptor_t e = eng;
                set_attr(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &e);
                cfg->graph = og->graph;
                cfg->finalized = true;
            }
            return CUDNN_STATUS_SUCCESS;
        }
        case CUDNN_ATTR_ENGINECFG_SHARED_MEMORY_USED:  // no GPU kernels: none
            return return_values(std::vector<int32_t>{0}, CUDNN_TYPE_INT32, attributeType, requestedElementCount,
                                 elementCount, arrayOfElements);
        case CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT:
            return return_values(std::vector<int64_t>{1}, CUDNN_TYPE_INT64, attributeType, requestedElementCount,
                                 elementCount, arrayOfElements);
        case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE:
        case CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE:
        case CUDNN_ATTR_ENGINE_KNOB_INFO:
        case CUDNN_ATTR_ENGINECFG_KNOB_CHOICES:
        case CUDNN_ATTR_ENGINE_LAYOUT_INFO:
        case CUDNN_ATTR_EXECUTION_PLAN_COMPUTED_INTERMEDIATE_UIDS:
        case CUDNN_ATTR_EXECUTION_PLAN_RUN_ONLY_INTERMEDIATE_UIDS:
            if (elementCount) *elementCount = 0;  // none
            return CUDNN_STATUS_SUCCESS;
        case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE:
        case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE:
            if (!d->graph) return fail_with(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "workspace size of an unfinalized plan");
            return return_values(std::vector<int64_t>{d->graph->workspace}, CUDNN_TYPE_INT64, attributeType,
                                 requestedElementCount, elementCount, arrayOfElements);
        case CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION: {
            const std::string json = "{\"cudnn-emu\": \"interpreted operation graph\"}";
            if (elementCount) *elementCount = (int64_t)json.size() + 1;
            if (requestedElementCount > 0 && arrayOfElements)
                std::snprintf((char*)arrayOfElements, (size_t)requestedElementCount, "%s", json.c_str());
            return CUDNN_STATUS_SUCCESS;
        }
        default: break;
    }
    const Attr* a = find_attr(d, attributeName);
    if (!a) {
        if (elementCount) *elementCount = 0;
        return fail_with(CUDNN_STATUS_NOT_SUPPORTED, "attribute %d of descriptor type %d not set or not emulated",
                         (int)attributeName, (int)d->type);
    }
    if (a->type != attributeType)
        return fail_with(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "attribute %d held as type %d, asked as %d",
                         (int)attributeName, (int)a->type, (int)attributeType);
    if (elementCount) *elementCount = a->count;
    if (requestedElementCount > 0 && arrayOfElements) {
        const int64_t n = std::min(requestedElementCount, a->count);
        if (a->type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {  // fill the caller's descriptors
            for (int64_t i = 0; i < n; ++i) {
                EmuCudnnDesc* src;
                std::memcpy(&src, a->bytes.data() + i * sizeof(void*), sizeof(void*));
                copy_into(((EmuCudnnDesc**)arrayOfElements)[i], src);
            }
        } else {
            std::memcpy(arrayOfElements, a->bytes.data(), (size_t)n * attr_type_size(a->type));
        }
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                  cudnnBackendDescriptor_t variantPack) {
    auto* plan = (EmuCudnnDesc*)executionPlan;
    auto* vp = (EmuCudnnDesc*)variantPack;
    if (!handle || !plan || !vp) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
    if (!plan->finalized || !vp->finalized) return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    if (plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !plan->graph)
        return fail_with(CUDNN_STATUS_BAD_PARAM, "execute: not an execution plan");
    const std::vector<int64_t> uids = attr_vector<int64_t>(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    const std::vector<void*> ptrs = attr_vector<void*>(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    if (uids.size() != ptrs.size())
        return fail_with(CUDNN_STATUS_BAD_PARAM, "variant pack: %zu uids, %zu pointers", uids.size(), ptrs.size());
    std::map<int64_t, void*> pack;
    for (size_t i = 0; i < uids.size(); ++i) pack[uids[i]] = ptrs[i];
    void* ws = attr_scalar<void*>(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, nullptr);
    trace("execute plan %p: %zu ops, workspace %lld bytes at %p", (void*)plan, plan->graph->ops.size(),
          (long long)plan->graph->workspace, ws);
    // in program order: the handle's stream's queued work first, then the graph, now (stream_order.h); nothing runs
    // after a failed kernel
    cudnnStatus_t s = CUDNN_STATUS_EXECUTION_FAILED;
    cuda_emu::stream_run_now(handle->stream, [&] { s = execute_graph(*plan->graph, pack, ws); });
    if (s == CUDNN_STATUS_SUCCESS) ++g_executes;
    return s;
}

long cuda_emu_cudnn_executes() { return g_executes; }

// ---------------------------------------------------------------------------------------------------------------
// NVRTC: cudnn-frontend compiles its own kernels for a few engines (none of the SDPA graphs); nothing can be
// compiled for a GPU here, so creating a program fails and says why.
// ---------------------------------------------------------------------------------------------------------------
nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char*, const char* name, int, const char* const*,
                               const char* const*) {
    if (prog) *prog = nullptr;
    std::fprintf(stderr, "cudnn-emu: nvrtcCreateProgram(%s): no GPU code can be compiled in the CPU execution layer\n",
                 name ? name : "?");
    return NVRTC_ERROR_COMPILATION;
}
nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) {
    if (prog) *prog = nullptr;
    return NVRTC_SUCCESS;
}
nvrtcResult nvrtcCompileProgram(nvrtcProgram, int, const char* const*) { return NVRTC_ERROR_INVALID_PROGRAM; }
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram, size_t* n) {
    if (n) *n = 1;
    return NVRTC_ERROR_INVALID_PROGRAM;
}
nvrtcResult nvrtcGetProgramLog(nvrtcProgram, char* log) {
    if (log) *log = 0;
    return NVRTC_ERROR_INVALID_PROGRAM;
}
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram, size_t* n) {
    if (n) *n = 0;
    return NVRTC_ERROR_INVALID_PROGRAM;
}
nvrtcResult nvrtcGetCUBIN(nvrtcProgram, char*) { return NVRTC_ERROR_INVALID_PROGRAM; }
