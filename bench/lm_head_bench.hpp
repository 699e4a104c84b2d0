// LM head + cross-entropy training (forward + backward) for `coda bench ops`: coda's two ops
// against coda's and cuBLAS's three plain GEMMs of the same shapes, with the extra memory.
#pragma once

#include <iosfwd>

namespace coda::bench {

/// Prints its table and writes its rows to `json` as the member "lm_head_training".
void lm_head_training_benchmark(std::ostream& json);

}  // namespace coda::bench
