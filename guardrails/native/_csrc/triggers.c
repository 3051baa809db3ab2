/* The words of a text looked up in C: the scan behind Text.present (text.py).
 *
 * word_table(keys, tracked) copies a tuple of exact bytes (the ASCII forms of
 * the terms' words) into an open-addressing hash table held by a capsule;
 * the first `tracked` keys (first words of multi-word terms) also have their
 * occurrences recorded. scan_words(table, tokens, want_odd) walks `tokens`
 * (Text.tokens: words separated by ASCII whitespace, as bytes.split() cuts
 * them) once, hashing each token in place, with no Python object per token,
 * and returns (found, odd, starts):
 *
 *   - found: each key that is an all-ASCII token -> the offset of its first
 *     occurrence;
 *   - odd: with want_odd, the distinct tokens holding a byte >= 0x80 (raw
 *     UTF-8, normalised later in Python), in order of first occurrence,
 *     else None; such a token is never looked up;
 *   - starts: each tracked key found -> the offsets of its first STARTS
 *     occurrences (fewer: all of them).
 *
 * Its pure-Python twin is guardrails._wordscan.scan_py; the tests compare
 * them on generated buffers. Only C buffers (the table's, an immutable bytes
 * object's, this call's) are touched while the GIL is released.
 */
#include "ccore.h"
#include "tokenset.h"
#include <string.h>

#define TABLE_NAME "guardrails._ccore.word_table"
/* Occurrences recorded per tracked key (_wordscan.STARTS). */
#define STARTS 64
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
    Py_ssize_t ntracked;  /* keys[:ntracked] have their occurrences recorded */
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
ccore_word_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_CheckExact(args[0]) || !PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "word_table(keys: tuple of bytes, tracked: int)");
        return NULL;
    }
    PyObject *keys = args[0];
    Py_ssize_t nkeys = PyTuple_GET_SIZE(keys);
    Py_ssize_t ntracked = PyLong_AsSsize_t(args[1]);
    if (ntracked == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (ntracked < 0 || ntracked > nkeys) {
        PyErr_SetString(PyExc_ValueError, "word_table: tracked must be in 0..len(keys)");
        return NULL;
    }
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
    t->ntracked = ntracked;
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

/* One call's state: what it found, where, and the odd tokens. */
typedef struct {
    Py_ssize_t *first;  /* per key: the offset of its first occurrence, or -1 */
    Py_ssize_t *found;  /* the keys found, in order of first occurrence */
    Py_ssize_t nfound;
    Py_ssize_t *seen;   /* per tracked key: occurrences recorded */
    Py_ssize_t *starts; /* (key, offset) pairs of tracked keys' occurrences */
    Py_ssize_t nstarts;
    Py_ssize_t capacity;
    OddSet odd;
    int want_odd;
} Scan;

static int
record_start(Scan *scan, Py_ssize_t key, Py_ssize_t start)
{
    if (scan->seen[key] == STARTS) {
        return 0;
    }
    if (scan->nstarts == scan->capacity) {
        Py_ssize_t capacity = scan->capacity ? 2 * scan->capacity : 64;
        Py_ssize_t *grown = PyMem_RawRealloc(scan->starts, (size_t)capacity * 2 * sizeof(Py_ssize_t));
        if (grown == NULL) {
            return -1;
        }
        scan->starts = grown;
        scan->capacity = capacity;
    }
    scan->starts[2 * scan->nstarts] = key;
    scan->starts[2 * scan->nstarts + 1] = start;
    scan->nstarts++;
    scan->seen[key]++;
    return 0;
}

/* The walk itself, without the GIL on long buffers: -1 when out of memory. */
static int
walk(const Table *t, const char *buf, Py_ssize_t size, Scan *scan)
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
            if (scan->want_odd && odd_add(&scan->odd, buf, start, i - start, h) < 0) {
                return -1;
            }
            continue;
        }
        Py_ssize_t at = table_find(t, p + start, i - start, h);
        if (t->tags[at] == 0) {
            continue;
        }
        Py_ssize_t key = t->slots[at].key;
        if (scan->first[key] < 0) {
            scan->first[key] = start;
            scan->found[scan->nfound++] = key;
        }
        if (key < t->ntracked && record_start(scan, key, start) < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *
found_dict(const Table *t, const Scan *scan)
{
    PyObject *found = PyDict_New();
    for (Py_ssize_t k = 0; found != NULL && k < scan->nfound; k++) {
        PyObject *at = PyLong_FromSsize_t(scan->first[scan->found[k]]);
        if (at == NULL || PyDict_SetItem(found, PyTuple_GET_ITEM(t->keys, scan->found[k]), at) < 0) {
            Py_CLEAR(found);
        }
        Py_XDECREF(at);
    }
    return found;
}

static PyObject *
odd_list(const char *buf, const Scan *scan)
{
    if (!scan->want_odd) {
        Py_RETURN_NONE;
    }
    PyObject *tokens = PyList_New(scan->odd.count);
    for (Py_ssize_t k = 0; tokens != NULL && k < scan->odd.count; k++) {
        const OddSlot *s = &scan->odd.slots[scan->odd.order[k]];
        PyObject *token = PyBytes_FromStringAndSize(buf + s->start, s->len);
        if (token == NULL) {
            Py_CLEAR(tokens);
            break;
        }
        PyList_SET_ITEM(tokens, k, token);
    }
    return tokens;
}

static PyObject *
starts_dict(const Table *t, const Scan *scan)
{
    PyObject *starts = PyDict_New();
    for (Py_ssize_t k = 0; starts != NULL && k < scan->nstarts; k++) {
        PyObject *key = PyTuple_GET_ITEM(t->keys, scan->starts[2 * k]);
        PyObject *offsets = PyDict_GetItemWithError(starts, key); /* borrowed */
        if (offsets == NULL) {
            offsets = PyErr_Occurred() ? NULL : PyList_New(0);
            if (offsets == NULL || PyDict_SetItem(starts, key, offsets) < 0) {
                Py_XDECREF(offsets);
                Py_CLEAR(starts);
                break;
            }
            Py_DECREF(offsets); /* the dict holds it */
        }
        PyObject *at = PyLong_FromSsize_t(scan->starts[2 * k + 1]);
        if (at == NULL || PyList_Append(offsets, at) < 0) {
            Py_CLEAR(starts);
        }
        Py_XDECREF(at);
    }
    return starts;
}

static PyObject *
results(const Table *t, const char *buf, const Scan *scan)
{
    PyObject *found = found_dict(t, scan);
    PyObject *odd = found == NULL ? NULL : odd_list(buf, scan);
    PyObject *starts = odd == NULL ? NULL : starts_dict(t, scan);
    PyObject *out = starts == NULL ? NULL : PyTuple_Pack(3, found, odd, starts);
    Py_XDECREF(found);
    Py_XDECREF(odd);
    Py_XDECREF(starts);
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
    if (!PyBool_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "scan_words: want_odd must be a bool");
        return NULL;
    }
    const Table *t = PyCapsule_GetPointer(args[0], TABLE_NAME);
    const char *buf = PyBytes_AS_STRING(args[1]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[1]);
    Scan scan = {.want_odd = args[2] == Py_True};
    scan.first = PyMem_Malloc((size_t)(t->nkeys + 1) * sizeof(Py_ssize_t));
    scan.found = PyMem_Malloc((size_t)(t->nkeys + 1) * sizeof(Py_ssize_t));
    scan.seen = PyMem_Calloc((size_t)(t->ntracked + 1), sizeof(Py_ssize_t));
    PyObject *out = NULL;
    if (scan.first == NULL || scan.found == NULL || scan.seen == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < t->nkeys; i++) {
        scan.first[i] = -1;
    }
    int status;
    if (size >= NOGIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        status = walk(t, buf, size, &scan);
        Py_END_ALLOW_THREADS
    } else {
        status = walk(t, buf, size, &scan);
    }
    out = status < 0 ? PyErr_NoMemory() : results(t, buf, &scan);
done:
    odd_free(&scan.odd);
    PyMem_RawFree(scan.starts);
    PyMem_Free(scan.first);
    PyMem_Free(scan.found);
    PyMem_Free(scan.seen);
    return out;
}
