/* The words of a text looked up in C: the scan behind Text.present (text.py).
 *
 * word_table(keys) copies a tuple of exact bytes (the ASCII forms of the
 * terms' words) into an open-addressing hash table held by a capsule.
 * scan_words(table, tokens, want_odd) walks `tokens` (Text.tokens: words
 * separated by ASCII whitespace, as bytes.split() cuts them) once, hashing
 * each token in place, with no Python object per token:
 *
 *   - an all-ASCII token is looked up; the keys found come back as a dict
 *     key -> offset of its first occurrence as a whole token;
 *   - a token holding a byte >= 0x80 ("odd": raw UTF-8, normalised later in
 *     Python) is never looked up; with want_odd, the distinct odd tokens come
 *     back as a list of bytes, in order of first occurrence (else None).
 *
 * Its pure-Python twin is guardrails._wordscan.scan_py; the tests compare
 * them on generated buffers. Only the C buffers of the table and of an
 * immutable bytes object are read while the GIL is released.
 */
#include "ccore.h"
#include <stdint.h>
#include <string.h>

#define TABLE_NAME "guardrails._ccore.word_table"
/* Scans of buffers at least this long release the GIL. */
#define NOGIL_BYTES 65536

/* A key's place: its full hash, its index in keys, its bytes in the arena. */
typedef struct {
    uint64_t hash;
    Py_ssize_t key;
    Py_ssize_t start;
    Py_ssize_t len;
} Slot;

typedef struct {
    Py_ssize_t mask;      /* slots - 1 (a power of two minus one) */
    uint32_t *tags;       /* per slot: 0 empty, else the hash's top bits (| 1): */
    Slot *slots;          /* a small array probed first, the slots read on a match */
    Py_ssize_t nkeys;
    char *arena;
    PyObject *keys;       /* tuple of the keys, returned as found */
} Table;

/* ASCII whitespace, as bytes.split() cuts: space, \t, \n, \v, \f, \r. */
static const unsigned char SPACE[256] = {
    [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\v'] = 1, ['\f'] = 1, ['\r'] = 1,
};

#define MIX 0x9e3779b97f4a7c15ULL
#define HIGH_BITS 0x8080808080808080ULL
#define BELOW_21 0x2121212121212121ULL

/* The hash is built eight bytes at a time (the last ones zero-extended),
 * then the length: the walk computes it on the words it loads to find the
 * end of a token, hash_bytes on a whole key; both give the same value. */
static inline uint64_t
hash_step(uint64_t h, uint64_t w)
{
    h = (h ^ w) * MIX;
    return h ^ (h >> 32);
}

static inline uint64_t
hash_end(uint64_t h, Py_ssize_t n)
{
    h = (h ^ (uint64_t)n) * MIX;
    h ^= h >> 29;
    h *= MIX;
    return h ^ (h >> 32);
}

/* The hash of p[:n]; *high gets the OR of the bytes' top bits. */
static uint64_t
hash_bytes(const unsigned char *p, Py_ssize_t n, uint64_t *high)
{
    uint64_t h = MIX, w, seen = 0;
    Py_ssize_t left = n;
    while (left >= 8) {
        memcpy(&w, p, 8);
        seen |= w;
        h = hash_step(h, w);
        p += 8;
        left -= 8;
    }
    if (left > 0) {
        w = 0;
        memcpy(&w, p, (size_t)left);
        seen |= w;
        h = hash_step(h, w);
    }
    *high = seen & HIGH_BITS;
    return hash_end(h, n);
}

static inline uint32_t
tag_of(uint64_t h)
{
    return (uint32_t)(h >> 32) | 1u;
}

static void
table_free(Table *t)
{
    if (t == NULL) {
        return;
    }
    PyMem_Free(t->tags);
    PyMem_Free(t->slots);
    PyMem_Free(t->arena);
    Py_XDECREF(t->keys);
    PyMem_Free(t);
}

static void
table_capsule_free(PyObject *capsule)
{
    table_free(PyCapsule_GetPointer(capsule, TABLE_NAME));
}

/* The slot holding bytes p[:n] with hash h, or the empty slot where it would go. */
static inline Py_ssize_t
table_find(const Table *t, const unsigned char *p, Py_ssize_t n, uint64_t h)
{
    uint32_t tag = tag_of(h);
    Py_ssize_t at = (Py_ssize_t)(h & (uint64_t)t->mask);
    for (;;) {
        uint32_t here = t->tags[at];
        if (here == 0) {
            return at;
        }
        if (here == tag) {
            const Slot *s = &t->slots[at];
            if (s->hash == h && s->len == n
                && memcmp(t->arena + s->start, p, (size_t)n) == 0) {
                return at;
            }
        }
        at = (at + 1) & t->mask;
    }
}

static int
table_fill(Table *t)
{
    Py_ssize_t total = 0, size = 8;
    for (Py_ssize_t i = 0; i < t->nkeys; i++) {
        total += PyBytes_GET_SIZE(PyTuple_GET_ITEM(t->keys, i));
    }
    while (size < 2 * t->nkeys + 2) {
        size *= 2;
    }
    t->mask = size - 1;
    t->tags = PyMem_Calloc((size_t)size, sizeof(uint32_t));
    t->slots = PyMem_Malloc((size_t)size * sizeof(Slot));
    t->arena = PyMem_Malloc((size_t)total + 1);
    if (!t->tags || !t->slots || !t->arena) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t used = 0;
    for (Py_ssize_t i = 0; i < t->nkeys; i++) {
        PyObject *key = PyTuple_GET_ITEM(t->keys, i);
        Py_ssize_t n = PyBytes_GET_SIZE(key);
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(key);
        uint64_t high;
        uint64_t h = hash_bytes(p, n, &high);
        Py_ssize_t at = table_find(t, p, n, h);
        if (t->tags[at] != 0) {
            continue; /* a duplicate: the first one answers */
        }
        memcpy(t->arena + used, p, (size_t)n);
        t->tags[at] = tag_of(h);
        t->slots[at] = (Slot){.hash = h, .key = i, .start = used, .len = n};
        used += n;
    }
    return 0;
}

PyObject *
ccore_word_table(PyObject *module, PyObject *keys)
{
    if (!PyTuple_CheckExact(keys)) {
        PyErr_SetString(PyExc_TypeError, "word_table: keys must be a tuple of bytes");
        return NULL;
    }
    Py_ssize_t nkeys = PyTuple_GET_SIZE(keys);
    for (Py_ssize_t i = 0; i < nkeys; i++) {
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(keys, i))) {
            PyErr_Format(PyExc_TypeError, "word_table: key %zd is not bytes", i);
            return NULL;
        }
    }
    Table *t = PyMem_Calloc(1, sizeof(Table));
    if (t == NULL) {
        return PyErr_NoMemory();
    }
    t->nkeys = nkeys;
    t->keys = Py_NewRef(keys);
    if (table_fill(t) < 0) {
        table_free(t);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(t, TABLE_NAME, table_capsule_free);
    if (capsule == NULL) {
        table_free(t);
    }
    return capsule;
}

/* The distinct odd tokens seen so far: (hash, start, length) in the buffer. */
typedef struct {
    uint64_t hash;
    Py_ssize_t start; /* -1: empty */
    Py_ssize_t len;
} OddSlot;

typedef struct {
    OddSlot *slots;
    Py_ssize_t mask;
    Py_ssize_t count;
    Py_ssize_t *order; /* slot indices in order of first occurrence */
} OddSet;

static int
odd_grow(OddSet *set)
{
    Py_ssize_t size = set->slots ? 2 * (set->mask + 1) : 1024;
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
        OddSlot *old = &set->slots[set->order[k]];
        Py_ssize_t at = (Py_ssize_t)(old->hash & (uint64_t)mask);
        while (slots[at].start >= 0) {
            at = (at + 1) & mask;
        }
        slots[at] = *old;
        order[k] = at;
    }
    PyMem_RawFree(set->slots);
    PyMem_RawFree(set->order);
    set->slots = slots;
    set->order = order;
    set->mask = mask;
    return 0;
}

static int
odd_add(OddSet *set, const char *buf, Py_ssize_t start, Py_ssize_t len, uint64_t h)
{
    if (set->slots == NULL || 2 * (set->count + 1) > set->mask + 1) {
        if (odd_grow(set) < 0) {
            return -1;
        }
    }
    Py_ssize_t at = (Py_ssize_t)(h & (uint64_t)set->mask);
    for (;;) {
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
        at = (at + 1) & set->mask;
    }
}

/* The token starting at p[*at], its end stored back in *at: its hash and
 * (*high) whether a byte of it is >= 0x80. Eight bytes are loaded at a time
 * while eight remain; a byte below 0x21 is a candidate end (bytes >= 0x80
 * are never flagged), and SPACE says whether it is one. */
static inline uint64_t
next_token(const unsigned char *p, Py_ssize_t size, Py_ssize_t *at, uint64_t *high)
{
    Py_ssize_t start = *at, i = start;
    uint64_t h = MIX, seen = 0, w;
    while (i + 8 <= size) {
        memcpy(&w, p + i, 8);
        uint64_t ends = (w - BELOW_21) & ~w & HIGH_BITS;
        if (ends == 0) {
            seen |= w;
            h = hash_step(h, w);
            i += 8;
            continue;
        }
        /* The lowest flagged byte is exact (little-endian: the first in memory). */
        int k = __builtin_ctzll(ends) >> 3;
        if (!SPACE[p[i + k]]) {
            break; /* a control byte inside the token: the slow way below */
        }
        if (k > 0) {
            w &= ((uint64_t)1 << (8 * k)) - 1;
            seen |= w;
            h = hash_step(h, w);
        }
        *at = i + k;
        *high = seen & HIGH_BITS;
        return hash_end(h, i + k - start);
    }
    /* Near the end of the buffer, or a control byte: byte by byte, then hashed whole. */
    while (i < size && !SPACE[p[i]]) {
        i++;
    }
    *at = i;
    return hash_bytes(p + start, i - start, high);
}

/* The walk itself, without the GIL on long buffers: -1 when out of memory. */
static int
walk(const Table *t, const char *buf, Py_ssize_t size, Py_ssize_t *first, Py_ssize_t *found,
     Py_ssize_t *nfound, OddSet *odd)
{
    const unsigned char *p = (const unsigned char *)buf;
    Py_ssize_t i = 0;
    while (i < size) {
        while (i < size && SPACE[p[i]]) {
            i++;
        }
        if (i == size) {
            break;
        }
        Py_ssize_t start = i;
        uint64_t high;
        uint64_t h = next_token(p, size, &i, &high);
        if (high) {
            if (odd != NULL && odd_add(odd, buf, start, i - start, h) < 0) {
                return -1;
            }
            continue;
        }
        Py_ssize_t at = table_find(t, p + start, i - start, h);
        if (t->tags[at] != 0) {
            Py_ssize_t key = t->slots[at].key;
            if (first[key] < 0) {
                first[key] = start;
                found[(*nfound)++] = key;
            }
        }
    }
    return 0;
}

static PyObject *
results(const Table *t, const char *buf, const Py_ssize_t *first, const Py_ssize_t *found,
        Py_ssize_t nfound, const OddSet *odd)
{
    PyObject *hits = PyDict_New();
    if (hits == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < nfound; k++) {
        PyObject *at = PyLong_FromSsize_t(first[found[k]]);
        if (at == NULL || PyDict_SetItem(hits, PyTuple_GET_ITEM(t->keys, found[k]), at) < 0) {
            Py_XDECREF(at);
            Py_DECREF(hits);
            return NULL;
        }
        Py_DECREF(at);
    }
    PyObject *tokens = Py_None;
    if (odd != NULL) {
        tokens = PyList_New(odd->count);
        if (tokens == NULL) {
            Py_DECREF(hits);
            return NULL;
        }
        for (Py_ssize_t k = 0; k < odd->count; k++) {
            const OddSlot *s = &odd->slots[odd->order[k]];
            PyObject *token = PyBytes_FromStringAndSize(buf + s->start, s->len);
            if (token == NULL) {
                Py_DECREF(tokens);
                Py_DECREF(hits);
                return NULL;
            }
            PyList_SET_ITEM(tokens, k, token);
        }
    } else {
        Py_INCREF(tokens);
    }
    PyObject *out = PyTuple_Pack(2, hits, tokens);
    Py_DECREF(hits);
    Py_DECREF(tokens);
    return out;
}

PyObject *
ccore_scan_words(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "scan_words(table, tokens, want_odd)");
        return NULL;
    }
    if (!PyCapsule_CheckExact(args[0]) || !PyCapsule_IsValid(args[0], TABLE_NAME)) {
        PyErr_SetString(PyExc_TypeError, "scan_words: table must come from word_table()");
        return NULL;
    }
    if (!PyBytes_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "scan_words: tokens must be bytes");
        return NULL;
    }
    const Table *t = PyCapsule_GetPointer(args[0], TABLE_NAME);
    int want_odd = PyObject_IsTrue(args[2]);
    if (want_odd < 0) {
        return NULL;
    }
    const char *buf = PyBytes_AS_STRING(args[1]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[1]);
    Py_ssize_t *first = PyMem_Malloc((size_t)(t->nkeys + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *found = PyMem_Malloc((size_t)(t->nkeys + 1) * sizeof(Py_ssize_t));
    if (first == NULL || found == NULL) {
        PyMem_Free(first);
        PyMem_Free(found);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < t->nkeys; i++) {
        first[i] = -1;
    }
    Py_ssize_t nfound = 0;
    OddSet odd = {NULL, 0, 0, NULL};
    int status;
    if (size >= NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        status = walk(t, buf, size, first, found, &nfound, want_odd ? &odd : NULL);
        Py_END_ALLOW_THREADS
    } else {
        status = walk(t, buf, size, first, found, &nfound, want_odd ? &odd : NULL);
    }
    PyObject *out = status < 0 ? PyErr_NoMemory()
                               : results(t, buf, first, found, nfound, want_odd ? &odd : NULL);
    PyMem_RawFree(odd.slots);
    PyMem_RawFree(odd.order);
    PyMem_Free(first);
    PyMem_Free(found);
    return out;
}
