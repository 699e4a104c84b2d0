// coda/sm90/stmatrix.cuh: register-to-shared stores: stmatrix, which matches the MMA
// accumulator layout (PTX ISA 9.7.14.5.16), and plain st.shared at a 32-bit shared address (a
// generic 64-bit pointer per store costs two registers each where registers are scarce).
//
// stmatrix.m8n8.x4 stores four 8x8 matrices of 16-bit values. In each, lane l holds row l/4,
// columns 2*(l%4) and 2*(l%4)+1 packed in one 32-bit register: exactly how a wgmma accumulator
// fragment holds an 8x8 block. Lane l supplies the shared address of row l%8 of matrix l/8.
// ldmatrix.m8n8.x4 is the same in the other direction (PTX ISA 9.7.14.5.15): a tile input read
// straight into the accumulator layout, four 32-bit words per lane in one instruction.
#pragma once

#include <cstdint>

namespace coda::sm90 {

__device__ __forceinline__ void stmatrix_x4(uint32_t row_address, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_address), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t row_address, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row_address)
               : "memory");
}

__device__ __forceinline__ void st_shared_b8(uint32_t address, uint8_t v) {
  asm volatile("st.shared.b8 [%0], %1;" ::"r"(address), "h"(uint16_t(v)) : "memory");
}
__device__ __forceinline__ void st_shared_b16(uint32_t address, uint16_t v) {
  asm volatile("st.shared.b16 [%0], %1;" ::"r"(address), "h"(v) : "memory");
}
__device__ __forceinline__ void st_shared_b32(uint32_t address, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(address), "r"(v) : "memory");
}
// fp32 values are stored as floats ("f" operands): passed as integers (__float_as_uint), an
// accumulator value got a mov to an integer register inside the K loop, right after its wgmma,
// and ptxas then had to wait on every wgmma there (warning C7517: "warpgroup.wait is injected").
__device__ __forceinline__ void st_shared_f32(uint32_t address, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(address), "f"(v) : "memory");
}
__device__ __forceinline__ void st_shared_v2_f32(uint32_t address, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(address), "f"(a), "f"(b) : "memory");
}

}  // namespace coda::sm90
