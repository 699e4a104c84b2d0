// coda/arch/sm90/tensor_map.hpp: building TMA tensor maps on the host.
//
// A tensor map (CUtensorMap, 128 bytes) describes a global tensor and the box one TMA copy
// moves. coda's maps are 3-D: (contiguous dim, row dim, batch) with a 128-byte-swizzled box of
// (box_inner x box_outer x 1), the layout wgmma reads directly. The driver function that
// encodes them is reached through the runtime's entry-point query, so libcoda does not link
// libcuda.
//
//   CUtensorMap map = coda::sm90::make_tensor_map_3d(ptr, DType::bf16, {K, M, L}, {lda, M * lda},
//                                                   {64, 128});
#pragma once

#include <cuda.h>

#include <cstdint>

#include "coda/core/dtype.hpp"

namespace coda::sm90 {

struct TensorMapShape {
  int64_t inner;  // elements along the contiguous dimension
  int64_t outer;  // rows
  int64_t batch;  // matrices
};

struct TensorMapStrides {
  int64_t row;    // elements between rows
  int64_t batch;  // elements between matrices
};

struct TensorMapBox {
  uint32_t inner;  // elements; inner * element size must be <= 128 for the 128B swizzle
  uint32_t outer;  // rows, <= 256
};

/// Encode a tiled, 128B-swizzled tensor map. Throws coda::InvalidArgument when the TMA unit
/// cannot address the tensor (alignment, stride or size limits), naming `argument`.
CUtensorMap make_tensor_map_3d(const void* base, DType dtype, TensorMapShape shape, TensorMapStrides strides,
                               TensorMapBox box, const char* argument);

}  // namespace coda::sm90
