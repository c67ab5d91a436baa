// Internal: the x86-64 SIMD kernels behind convert.h. Each is compiled for its
// ISA with a per-function target attribute, so only convert.cpp's dispatcher
// may call them, and only after checking isa_supported(). The packed side is
// read/written with unaligned accesses, so it may have any alignment.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)

namespace qloom::detail {

void bf16_to_f32_avx2(const void* in, float* out, size_t n);
void f32_to_bf16_avx2(const float* in, void* out, size_t n);
void f16_to_f32_avx2(const void* in, float* out, size_t n);
void f32_to_f16_avx2(const float* in, void* out, size_t n);
void fp8_e4m3_to_f32_avx2(const void* in, float* out, size_t n);
void f32_to_fp8_e4m3_avx2(const float* in, void* out, size_t n);

void bf16_to_f32_avx512(const void* in, float* out, size_t n);
void f32_to_bf16_avx512(const float* in, void* out, size_t n);
void f16_to_f32_avx512(const void* in, float* out, size_t n);
void f32_to_f16_avx512(const float* in, void* out, size_t n);
void fp8_e4m3_to_f32_avx512(const void* in, float* out, size_t n);
void f32_to_fp8_e4m3_avx512(const float* in, void* out, size_t n);

}  // namespace qloom::detail

#endif
