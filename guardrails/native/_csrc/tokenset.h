/* The distinct tokens of a buffer that hold a non-ASCII byte (triggers.c). */
#ifndef GUARDRAILS_TOKENSET_H
#define GUARDRAILS_TOKENSET_H
#include "ccore.h"
#include <stdint.h>

/* The distinct odd tokens seen so far: (hash, start, length) in the buffer.
 *
 * The text decides which tokens the set holds, so it must not be able to
 * make them all land in one place. They are placed by the walk's hash, which
 * is fast and not keyed; the first time a token needs more than ODD_PROBES
 * probes (ordinary text stays far below), the set is rebuilt with Python's
 * keyed hash (SipHash, keyed per process) and keeps it for the call. */
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
    int keyed;         /* placed by KEYED_HASH rather than the walk's hash */
} OddSet;

/* Adds buf[start:start+len], whose walk's hash is `fast`, unless already
 * there: 0, or -1 when out of memory. Needs no GIL. */
int odd_add(OddSet *set, const char *buf, Py_ssize_t start, Py_ssize_t len, uint64_t fast);
void odd_free(OddSet *set);

#endif
