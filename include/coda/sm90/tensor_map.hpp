// coda/sm90/tensor_map.hpp: building TMA tensor maps on the host.
//
// A tensor map (CUtensorMap, 128 bytes) describes a global tensor and the box one TMA copy
// moves. coda's maps are 3-D: (contiguous dim, row dim, batch) with a box of (box_inner x
// box_outer x 1), 128-byte-swizzled (the layout wgmma reads directly) unless asked otherwise.
// The driver function that encodes them is reached through the runtime's entry-point query, so
// libcoda does not link libcuda.
//
//   CUtensorMap map = coda::sm90::make_tensor_map_3d(ptr, DType::bf16, {K, M, L}, {lda, M * lda},
//                                                   {64, 128});
#pragma once

#include <cuda.h>

#include <cstdint>

#include "coda/core/api.hpp"
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

/// The box's layout in shared memory: 128B-swizzled (what wgmma reads, and conflict-free for the
/// epilogue's stmatrix), or rows packed inner * element size bytes apart.
enum class TensorMapSwizzle : uint8_t { bytes128, none };

/// Encode a tiled tensor map, 128B-swizzled unless asked otherwise. Throws coda::InvalidArgument
/// when the TMA unit cannot address the tensor (alignment, stride or size limits), naming `argument`.
CODA_API CUtensorMap make_tensor_map_3d(const void* base, DType dtype, TensorMapShape shape, TensorMapStrides strides,
                               TensorMapBox box, const char* argument,
                               TensorMapSwizzle swizzle = TensorMapSwizzle::bytes128);

/// Point `map` at `base`, everything else kept (cuTensorMapReplaceAddress: a host-side edit, about
/// 30 ns against 100 for an encode). Throws coda::InvalidArgument naming `argument` when `base` is
/// null or not 16-byte aligned.
CODA_API void replace_tensor_map_address(CUtensorMap& map, const void* base, const char* argument);

}  // namespace coda::sm90
