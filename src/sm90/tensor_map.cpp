#include "coda/sm90/tensor_map.hpp"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "coda/core/validate.hpp"

namespace coda::sm90 {
namespace {

constexpr const char* kFunction = "coda::sm90::make_tensor_map_3d";

// The driver's `name` (CUDA 12.0's version), asked of the runtime once; throws when the driver lacks it.
template <class Function>
Function driver_function(const char* name) {
  void* pointer = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const bool ok = cudaGetDriverEntryPointByVersion(name, &pointer, 12000, cudaEnableDefault, &found) == cudaSuccess &&
                  found == cudaDriverEntryPointSuccess;
  cudaGetLastError();
  return ok ? reinterpret_cast<Function>(pointer) : nullptr;
}

template <class Function>
Function required(Function function, const char* name) {
  if (!function) throw CudaError(kFunction, text("no CUDA driver, or one too old to provide ", name));
  return function;
}

PFN_cuTensorMapEncodeTiled_v12000 encode_function() {
  static const auto function = driver_function<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled");
  return required(function, "cuTensorMapEncodeTiled");
}

PFN_cuTensorMapReplaceAddress_v12000 replace_address_function() {
  static const auto function = driver_function<PFN_cuTensorMapReplaceAddress_v12000>("cuTensorMapReplaceAddress");
  return required(function, "cuTensorMapReplaceAddress");
}

CUtensorMapDataType tma_type(DType t) {
  switch (t) {
    case DType::f32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case DType::f16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case DType::bf16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case DType::i32:
      return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case DType::e4m3:
    case DType::e5m2:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  }
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

}  // namespace

CUtensorMap make_tensor_map_3d(const void* base, DType dtype, TensorMapShape shape, TensorMapStrides strides,
                               TensorMapBox box, const char* argument, TensorMapSwizzle swizzle) {
  const int64_t element = int64_t(size_of(dtype));
  constexpr int64_t kMaxDim = int64_t(1) << 32;     // TMA global dimensions are 32-bit
  constexpr int64_t kMaxStride = int64_t(1) << 40;  // and strides are below 2^40 bytes
  ArgumentCheck check(kFunction);
  check.require(reinterpret_cast<uintptr_t>(base) % 16 == 0, argument, "base address must be 16-byte aligned for TMA")
      .require(shape.inner >= 1 && shape.outer >= 1 && shape.batch >= 1, argument, "every dimension must be at least 1")
      .require(shape.inner <= kMaxDim && shape.outer <= kMaxDim && shape.batch <= kMaxDim, argument,
               "a dimension exceeds 2^32 elements, more than TMA can address")
      .require((strides.row * element) % 16 == 0 && (strides.batch * element) % 16 == 0, argument,
               "row and batch strides must be multiples of 16 bytes for TMA")
      .require(strides.row * element < kMaxStride && strides.batch * element < kMaxStride, argument,
               "a stride exceeds 2^40 bytes, more than TMA can address")
      .require(box.inner * element <= 128 && box.outer <= 256, argument, "internal: TMA box too large");
  check.throw_if_error();

  CUtensorMap map{};
  const cuuint64_t dims[3] = {cuuint64_t(shape.inner), cuuint64_t(shape.outer), cuuint64_t(shape.batch)};
  const cuuint64_t byte_strides[2] = {
      cuuint64_t(strides.row * element),
      cuuint64_t((shape.batch > 1 ? strides.batch : strides.row * shape.outer) * element)};
  const cuuint32_t box_dims[3] = {box.inner, box.outer, 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const auto encode = [&] {
    return encode_function()(&map, tma_type(dtype), 3, const_cast<void*>(base), dims, byte_strides, box_dims,
                             element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                             swizzle == TensorMapSwizzle::bytes128 ? CU_TENSOR_MAP_SWIZZLE_128B
                                                                   : CU_TENSOR_MAP_SWIZZLE_NONE,
                             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  CUresult r = encode();
  if (r == CUDA_ERROR_INVALID_CONTEXT) {
    // A driver call needs a current context, which a thread that reached the GPU only through another
    // CUDA runtime may lack (torch's autograd threads on device 0: torch skips cudaSetDevice when its
    // runtime's device is already 0). cudaSetDevice binds the device's primary context; then retry.
    int device = 0;
    if (cudaGetDevice(&device) == cudaSuccess && cudaSetDevice(device) == cudaSuccess) r = encode();
    cudaGetLastError();
  }
  if (r != CUDA_SUCCESS)
    throw InvalidArgument(kFunction, text("argument '", argument,
                                          "': cuTensorMapEncodeTiled rejected the tensor (CUresult ", int(r), ")"));
  return map;
}

void replace_tensor_map_address(CUtensorMap& map, const void* base, const char* argument) {
  constexpr const char* kReplace = "coda::sm90::replace_tensor_map_address";
  ArgumentCheck(kReplace)
      .not_null(argument, base)
      .require(reinterpret_cast<uintptr_t>(base) % 16 == 0, argument, "base address must be 16-byte aligned for TMA")
      .throw_if_error();
  const CUresult r = replace_address_function()(&map, const_cast<void*>(base));
  if (r != CUDA_SUCCESS)
    throw InvalidArgument(kReplace, text("argument '", argument,
                                         "': cuTensorMapReplaceAddress rejected the address (CUresult ", int(r), ")"));
}

}  // namespace coda::sm90
