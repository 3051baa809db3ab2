/* The set of odd tokens behind scan_words (triggers.c); see tokenset.h. */
#include "tokenset.h"
#include <string.h>

/* Python's hash of bytes (SipHash, keyed per process): needs no GIL. */
#if PY_VERSION_HEX >= 0x030E0000
#define KEYED_HASH(p, n) ((uint64_t)Py_HashBuffer((p), (n)))
#else
#define KEYED_HASH(p, n) ((uint64_t)_Py_HashBytes((p), (n)))
#endif

#define ODD_PROBES 128

/* The set in a new table of `size` slots; with `rehash`, every hash keyed. */
static int
odd_rebuild(OddSet *set, Py_ssize_t size, const char *buf, int rehash)
{
    OddSlot *slots = PyMem_RawMalloc((size_t)size * sizeof(OddSlot));
    Py_ssize_t *order = PyMem_RawMalloc((size_t)(size / 2 + 1) * sizeof(Py_ssize_t));
    if (slots == NULL || order == NULL) {
        PyMem_RawFree(slots);
        PyMem_RawFree(order);
        return -1;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        slots[i].start = -1;
    }
    Py_ssize_t mask = size - 1;
    for (Py_ssize_t k = 0; k < set->count; k++) {
        OddSlot entry = set->slots[set->order[k]];
        if (rehash) {
            entry.hash = KEYED_HASH((const unsigned char *)buf + entry.start, entry.len);
        }
        Py_ssize_t at = (Py_ssize_t)(entry.hash & (uint64_t)mask);
        while (slots[at].start >= 0) {
            at = (at + 1) & mask;
        }
        slots[at] = entry;
        order[k] = at;
    }
    PyMem_RawFree(set->slots);
    PyMem_RawFree(set->order);
    set->slots = slots;
    set->order = order;
    set->mask = mask;
    return 0;
}

int
odd_add(OddSet *set, const char *buf, Py_ssize_t start, Py_ssize_t len, uint64_t fast)
{
    if (set->slots == NULL || 2 * (set->count + 1) > set->mask + 1) {
        Py_ssize_t size = set->slots ? 2 * (set->mask + 1) : 1024;
        if (odd_rebuild(set, size, buf, 0) < 0) {
            return -1;
        }
    }
    uint64_t h = set->keyed ? KEYED_HASH((const unsigned char *)buf + start, len) : fast;
    Py_ssize_t at = (Py_ssize_t)(h & (uint64_t)set->mask);
    for (Py_ssize_t probes = 0;; probes++) {
        OddSlot *s = &set->slots[at];
        if (s->start < 0) {
            s->hash = h;
            s->start = start;
            s->len = len;
            set->order[set->count++] = at;
            return 0;
        }
        if (s->hash == h && s->len == len && memcmp(buf + s->start, buf + start, (size_t)len) == 0) {
            return 0;
        }
        if (probes == ODD_PROBES && !set->keyed) {
            set->keyed = 1;
            if (odd_rebuild(set, set->mask + 1, buf, 1) < 0) {
                return -1;
            }
            return odd_add(set, buf, start, len, fast);
        }
        at = (at + 1) & set->mask;
    }
}

void
odd_free(OddSet *set)
{
    PyMem_RawFree(set->slots);
    PyMem_RawFree(set->order);
}
