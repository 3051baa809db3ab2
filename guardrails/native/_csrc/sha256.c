/* SHA-256 on the x86 SHA extensions, for audit_row.c: a row's few hundred
 * bytes hash here in less time than it takes to make a bytes object, call
 * hashlib and read its hexdigest(). Where the CPU lacks the extensions (or
 * the compiler cannot target them), sha256_native() is 0 and audit_row.c
 * calls hashlib instead. tests/store/test_chain_core.py checks both routes
 * against hashlib. */
#include "ccore.h"
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

/* The first 32 bits of the fractional parts of the cube roots of the first
 * 64 primes (FIPS 180-4, 4.2.2). */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

int
sha256_native(void)
{
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1)) {
        return 0;
    }
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}

/* The state after `blocks` 64-byte blocks of `data`: four rounds per step,
 * the message schedule kept in four registers (Intel's SHA extensions
 * white paper, 2013). */
__attribute__((target("sha,sse4.1,ssse3"))) static void
blocks_ni(uint32_t state[8], const unsigned char *data, Py_ssize_t blocks)
{
    const __m128i order = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[0]), 0xB1);
    __m128i cdgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[4]), 0x1B);
    __m128i abef = _mm_alignr_epi8(tmp, cdgh, 8);
    cdgh = _mm_blend_epi16(cdgh, tmp, 0xF0);
    for (; blocks > 0; blocks--, data += 64) {
        __m128i abef_was = abef, cdgh_was = cdgh, msg[4];
        for (int i = 0; i < 16; i++) {
            if (i < 4) {
                msg[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * i)), order);
            }
            __m128i w = _mm_add_epi32(msg[i % 4], _mm_loadu_si128((const __m128i *)&K[4 * i]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, w);
            if (i >= 3 && i < 15) {
                __m128i next = _mm_add_epi32(msg[(i + 1) % 4],
                                             _mm_alignr_epi8(msg[i % 4], msg[(i + 3) % 4], 4));
                msg[(i + 1) % 4] = _mm_sha256msg2_epu32(next, msg[i % 4]);
            }
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(w, 0x0E));
            if (i >= 1 && i < 13) {
                msg[(i + 3) % 4] = _mm_sha256msg1_epu32(msg[(i + 3) % 4], msg[i % 4]);
            }
        }
        abef = _mm_add_epi32(abef, abef_was);
        cdgh = _mm_add_epi32(cdgh, cdgh_was);
    }
    tmp = _mm_shuffle_epi32(abef, 0x1B);
    cdgh = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(tmp, cdgh, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(cdgh, tmp, 8));
}

/* The hex digest of the `len` bytes at `data`, whose buffer has room for 72
 * bytes more (the padding is written there). */
void
sha256_hex(unsigned char *data, Py_ssize_t len, char out[64])
{
    static const char hex[] = "0123456789abcdef";
    uint32_t state[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                         0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    uint64_t bits = (uint64_t)len * 8;
    Py_ssize_t padded = len + 1;
    data[len] = 0x80;
    while (padded % 64 != 56) {
        data[padded++] = 0;
    }
    for (int i = 7; i >= 0; i--) {
        data[padded++] = (unsigned char)(bits >> (8 * i));
    }
    blocks_ni(state, data, padded / 64);
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < 8; j++) {
            out[8 * i + j] = hex[(state[i] >> (28 - 4 * j)) & 0xf];
        }
    }
}

#else

int
sha256_native(void)
{
    return 0;
}

void
sha256_hex(unsigned char *data, Py_ssize_t len, char out[64])
{
    (void)data;
    (void)len;
    (void)out;
    Py_UNREACHABLE();
}

#endif
