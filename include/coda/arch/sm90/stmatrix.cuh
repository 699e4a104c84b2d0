// coda/arch/sm90/stmatrix.cuh: stmatrix, the register-to-shared store that matches the MMA
// accumulator layout (PTX ISA 9.7.14.5.16).
//
// stmatrix.m8n8.x4 stores four 8x8 matrices of 16-bit values. In each, lane l holds row l/4,
// columns 2*(l%4) and 2*(l%4)+1 packed in one 32-bit register: exactly how a wgmma accumulator
// fragment holds an 8x8 block. Lane l supplies the shared address of row l%8 of matrix l/8.
#pragma once

#include <cstdint>

namespace coda::sm90 {

__device__ __forceinline__ void stmatrix_x4(uint32_t row_address, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_address), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

}  // namespace coda::sm90
