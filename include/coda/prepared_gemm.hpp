// coda/prepared_gemm.hpp: a GEMM validated and planned once, run many times on new data.
//
// An eager framework call repeats the same shapes with new tensors. coda::gemm validates, plans and
// encodes three TMA tensor maps on every call; a PreparedGemm does that once, and each run swaps the
// three addresses into its maps (cuTensorMapReplaceAddress) and launches: the host cost of a launch
// and little more (docs/performance.md, "The PyTorch package").
//
//   coda::PreparedGemm gemm({x, coda::Major::k}, {w, coda::Major::k}, y);   // shapes, strides, majors
//   gemm.run(x2.data, w.data, y2.data, stream);                             // any tensors of those
//
// Construction takes coda::gemm's arguments and rules (coda/gemm.hpp); the views' data pointers are
// checked there but not kept. A run's tensors must have the prepared shapes, strides and dtypes (the
// object cannot check what it is not given); their addresses must be non-null and 16-byte aligned,
// and a plan that splits K needs `workspace` (plan().workspace_bytes bytes, any contents). Runs go to
// the device current at construction. Same bits as coda::gemm of the same
// arguments. A run is const and may be called from several threads at once.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "coda/core/api.hpp"
#include "coda/gemm.hpp"

namespace coda {

class CODA_API PreparedGemm {
 public:
  /// Validate and plan C = A B^T for these operands (options.workspace's address plays no part, only
  /// whether one of workspace_bytes is given). Throws as coda::gemm does.
  PreparedGemm(const GemmOperand& a, const GemmOperand& b, const TensorView& c, const GemmOptions& options = {});
  ~PreparedGemm();
  PreparedGemm(PreparedGemm&&) noexcept;
  PreparedGemm& operator=(PreparedGemm&&) noexcept;

  /// C = A B^T on `stream` with the prepared shapes at these addresses. Throws coda::InvalidArgument
  /// for a null or misaligned address or a missing workspace, coda::Unsupported on another device.
  void run(const void* a, const void* b, void* c, cudaStream_t stream = nullptr, void* workspace = nullptr) const;

  /// What each run computes: tile, split, CTAs, the workspace it needs.
  const GemmPlan& plan() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace coda
