// Unpredictable bytes for cancel keys, MD5 salts and the admin console's keys, drawn from a
// per-thread buffer that the kernel's CSPRNG (getrandom(2)) refills 256 bytes at a time.
//
// Why a buffer: a login takes three small draws (the virtual pid, the cancel key, the MD5 salt).
// Each RAND_bytes call of OpenSSL 3 walks its provider and DRBG layers: about 6,600 instructions
// for 4 bytes, a quarter of a whole md5 login's instructions in the pooler (callgrind,
// docs/profile.md 0g). One getrandom(2) per 256 bytes costs less than one of those calls.
// The bytes are as unpredictable as the kernel's; like any CSPRNG's state they sit in process
// memory until used. A forked child starts with an empty buffer (pthread_atfork), so parent
// and child never hand out the same bytes.
#pragma once

#include <cstddef>

namespace pgsluice {

// Fills `out` with `size` random bytes. False (and `out` unspecified) only when the kernel's
// generator fails, which callers turn into a refused login, never into a guessable value.
[[nodiscard]] bool secure_random(void* out, size_t size);

}  // namespace pgsluice
