// The elementwise CUDA kernel family compiled once: explicit instantiations of every launcher in
// kernels/{encoder,layernorm,rmsnorm,residual,gelu,swiglu,rope,adamw}.cuh for both storage types, fp32 and bf16
// (the backend uses floatX, common/cuda_common.cuh; the tests use both in every build). Other translation units
// include the same headers, whose `extern template` declarations keep them from instantiating the launchers again:
// they link prac_cuda, which compiles this file, instead.
#define PRAC_ELEMENTWISE_INSTANTIATE 1

#include "kernels/adamw.cuh"
#include "kernels/encoder.cuh"
#include "kernels/gelu.cuh"
#include "kernels/layernorm.cuh"
#include "kernels/residual.cuh"
#include "kernels/rmsnorm.cuh"
#include "kernels/rope.cuh"
#include "kernels/swiglu.cuh"

#define PRAC_EW_INSTANTIATE(T)                                                                                     \
    template void encoder_forward_cuda<T>(T*, const int32_t*, const T*, const T*, int, int, int, cudaStream_t);   \
    template void encoder_backward_cuda<T>(T*, T*, const T*, const int32_t*, int, int, int, void*, size_t,        \
                                           cudaStream_t);                                                          \
    template void layernorm_forward_cuda<T>(T*, float*, float*, const T*, const T*, const T*, int, int, float,    \
                                            cudaStream_t);                                                         \
    template void layernorm_backward_cuda<T>(T*, T*, T*, const T*, const T*, const T*, const float*, const float*, \
                                             int, int, void*, size_t, cudaStream_t);                               \
    template void rmsnorm_forward_cuda<T>(T*, float*, const T*, const T*, int, int, float, cudaStream_t);         \
    template void rmsnorm_backward_cuda<T>(T*, T*, const T*, const T*, const T*, const float*, int, int, void*,   \
                                           size_t, cudaStream_t);                                                  \
    template void residual_forward_cuda<T>(T*, const T*, const T*, size_t, cudaStream_t);                         \
    template void gelu_forward_cuda<T>(T*, const T*, size_t, cudaStream_t);                                       \
    template void gelu_backward_cuda<T>(T*, const T*, const T*, size_t, cudaStream_t);                            \
    template void gelu_erf_forward_cuda<T>(T*, const T*, size_t, cudaStream_t);                                   \
    template void gelu_erf_backward_cuda<T>(T*, const T*, const T*, size_t, cudaStream_t);                        \
    template void swiglu_forward_cuda<T>(T*, const T*, int, int, cudaStream_t);                                   \
    template void swiglu_backward_cuda<T>(T*, const T*, const T*, int, int, cudaStream_t);                        \
    template void rope_cuda<T>(T*, const float*, int, int, int, int, bool, cudaStream_t);                         \
    template void adamw_update_cuda<T>(T*, float*, const T*, float*, float*, size_t, float, float, float, float,  \
                                       float, int, float, uint64_t, cudaStream_t);                                 \
    template void sum_squares_device_cuda<T>(double*, const T*, size_t, bool, void*, size_t, cudaStream_t);       \
    template double sum_squares_cuda<T>(const T*, size_t, void*, size_t, cudaStream_t);

PRAC_EW_INSTANTIATE(float)
PRAC_EW_INSTANTIATE(__nv_bfloat16)
