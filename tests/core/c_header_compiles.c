/* coda.h must be valid C (not only C++): this file is compiled by the C compiler. */
#include "coda/coda.h"

int coda_c_header_is_c(void) {
  coda_tensor t = {0};
  t.dtype = CODA_BF16;
  t.rank = 2;
  return (int)coda_device_count() + (int)t.dtype * 0;
}
