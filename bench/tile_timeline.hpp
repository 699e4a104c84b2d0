// coda bench timeline: a program kernel's time tile by tile (MMAs, epilogue, slack, clock).
#pragma once

namespace coda::bench {

int timeline_benchmark();

}  // namespace coda::bench
