// coda/core/api.hpp: what libcoda exports. CODA_API marks the public declarations (the headers under
// include/coda); everything else in the library is built hidden (-fvisibility=hidden), and a linker
// version script (src/libcoda.map) keeps every symbol local that is not coda's own, the C++
// runtime's template instantiations included. So libcoda shares no symbol with the process it is
// loaded into beyond its API, whatever C++ runtime that process carries.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define CODA_API [[gnu::visibility("default")]]
#else
#define CODA_API
#endif
