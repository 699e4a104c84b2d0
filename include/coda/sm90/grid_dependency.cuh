// coda/sm90/grid_dependency.cuh: programmatic dependent launch (sm_90): a grid launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may start before the grid ahead of it in the
// stream has finished, as soon as every CTA of that grid has signalled or exited.
#pragma once

namespace coda::sm90 {

/// Let the dependent grid start (PTX ISA, griddepcontrol.launch_dependents: it is scheduled once
/// every CTA of this grid has executed the instruction or exited). No memory is made visible.
__device__ __forceinline__ void launch_dependent_grids() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

/// Wait until the prerequisite grids have completed and their memory operations are visible
/// (PTX ISA, griddepcontrol.wait). Returns at once in a grid launched without a prerequisite.
__device__ __forceinline__ void wait_for_prerequisite_grids() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

}  // namespace coda::sm90
