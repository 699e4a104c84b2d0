// Internal: the planner behind coda::gemm and mainloop::plan_launch (plan.cpp).
#pragma once

#include <cstdint>

#include "coda/gemm.hpp"
#include "coda/mainloop/plan.hpp"

namespace coda::mainloop {

/// The problem A and B define.
struct Problem {
  int64_t m, n, k, batch;
  DType input, output;
};

/// A plan with what building its launch needs besides GemmPlan.
struct Plan {
  GemmPlan public_plan;
  int64_t cluster_tiles = 0;
  int max_segments = 1;
  int64_t counters = 0;
};

/// A and B and the options: the rules every launch shares (messages naming `function`).
Problem validate_operands(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options, const char* function);
/// coda::gemm's C: M x N (x batch), a type the store epilogue writes.
void validate_output(const TensorView& c, Problem& p, const char* function);
/// Tile, split-K, stream-K, grid and workspace for the problem.
Plan make_plan(const Problem& p, const GemmOptions& options, const char* function);
/// The launch of a plan: tensor maps of A and B, schedule, workspace.
LaunchPlan build_launch(const GemmOperand& a, const GemmOperand& b, const Problem& p, const Plan& plan,
                        const GemmOptions& options);

}  // namespace coda::mainloop
