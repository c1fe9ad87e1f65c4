// A check for fuzz targets that stays on in every build type (assert() vanishes under NDEBUG):
// a broken invariant aborts, which libFuzzer reports as a crash with the input that caused it.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

namespace pgsluice::fuzz {

// Whether `inner` lies inside `outer` (a view a parser handed out must point into its input).
inline bool within(const char* outer_begin, std::size_t outer_size, const char* inner_begin,
                   std::size_t inner_size) {
  if (inner_size == 0) return true;  // an empty view may point anywhere (even nullptr)
  return inner_begin >= outer_begin && inner_begin + inner_size <= outer_begin + outer_size;
}

}  // namespace pgsluice::fuzz
