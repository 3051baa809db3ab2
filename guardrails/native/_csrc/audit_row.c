/* The hash of one audit row after the previous one (store/_chain.py's
 * link(previous, row_id, content(row)) for a row that store/_storable.py's
 * storable(row) returns unchanged), in one pass over the row's columns; and
 * that row's content text alone (chain_text), for the callers that need it.
 *
 * chain_link(row, previous, row_id) checks each column against its shape
 * (text, integer or float; NULL or not) and writes the UTF-8 bytes of
 * "previous|row_id|content" as it goes: "~" for NULL, "s<len>:<text>",
 * "i<int>", "f<float.hex()>", joined by "|", and hashes them: on the CPU's
 * SHA extensions (sha256.c) where it has them and configure_chain allowed
 * it, else with the configured sha256 (hashlib's) and its hexdigest().
 *
 * Anything storable() would rewrite (a str subclass, a lone surrogate, a NUL,
 * text past its limit, a bool, an int past 64 bits, a non-finite float, a
 * NULL kind or at, a value of another type), and anything unusual (a row of
 * another type, a previous hash that is not ASCII text, an id past 64 bits)
 * makes it give up whole and return None: the Python twin decides, from the
 * start. Columns are read with exact type checks only; nothing of the row's
 * is called.
 *
 * sqlite_params(row, row_id, digest) splits a storable row for SQLite's
 * INSERT (store/_sqlite_insert.py's params_py): which columns are NULL, as
 * bits, and the parameters left to bind, the id first and the hash last.
 * Python's sqlite3 module looks a None parameter up in its adapters
 * (raising and clearing an AttributeError) before it binds NULL; a NULL
 * written in the statement costs nothing. Only identity with None is read.
 */
#include "ccore.h"
#include <float.h>
#include <math.h>
#include <string.h>

#define STACK_BYTES 2048
#define GIVE_UP 0
#define WRITTEN 1

/* What configure_chain set: the row type, each column's shape ('t' text,
 * 'i' integer, 'f' float; upper case: never NULL) and text limit, and the
 * hash constructor. */
static PyTypeObject *row_type = NULL;
static PyObject *shapes = NULL;  /* bytes, one per column */
static Py_ssize_t *limits = NULL;
static PyObject *sha256 = NULL;
static PyObject *str_hexdigest = NULL;
static int native = 0;  /* hash in sha256.c, not with sha256 */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
    char stack[STACK_BYTES];
} Bytes;

static int
bytes_room(Bytes *b, Py_ssize_t extra)
{
    if (extra <= b->cap - b->len) {
        return 0;
    }
    if (extra > PY_SSIZE_T_MAX / 4 - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = b->len + extra, cap = b->cap * 2;
    cap = cap > need ? cap : need;
    char *data = PyMem_Malloc((size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(data, b->data, (size_t)b->len);
    if (b->data != b->stack) {
        PyMem_Free(b->data);
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static int
put(Bytes *b, const char *s, Py_ssize_t n)
{
    if (bytes_room(b, n) < 0) {
        return -1;
    }
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

static int
put_integer(Bytes *b, long long value)
{
    char digits[24];
    int n = 0;
    unsigned long long magnitude =
        value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    do {
        digits[sizeof digits - 1 - n++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0) {
        digits[sizeof digits - 1 - n++] = '-';
    }
    return put(b, digits + sizeof digits - n, n);
}

/* float.hex() of a finite double (CPython's float_hex: 13 hex digits after
 * the point, the exponent in decimal with its sign). */
static int
put_float_hex(Bytes *b, double x)
{
    static const char hex[] = "0123456789abcdef";
    char s[40];
    int n = 0, e;
    if (x == 0.0) {
        return copysign(1.0, x) < 0 ? put(b, "-0x0.0p+0", 9) : put(b, "0x0.0p+0", 8);
    }
    if (x < 0.0) {
        s[n++] = '-';
    }
    double m = frexp(fabs(x), &e);
    int shift = 1 - (DBL_MIN_EXP - e > 0 ? DBL_MIN_EXP - e : 0);
    m = ldexp(m, shift);
    e -= shift;
    s[n++] = '0';
    s[n++] = 'x';
    s[n++] = hex[(int)m];
    m -= (int)m;
    s[n++] = '.';
    for (int i = 0; i < (DBL_MANT_DIG + 3 - (DBL_MANT_DIG + 2) % 4 - 1) / 4; i++) {
        m *= 16.0;
        s[n++] = hex[(int)m];
        m -= (int)m;
    }
    s[n++] = 'p';
    s[n++] = e < 0 ? '-' : '+';
    if (put(b, s, n) < 0) {
        return -1;
    }
    return put_integer(b, e < 0 ? -(long long)e : (long long)e);
}

/* "s<len>:<UTF-8>" of exact text without NUL or lone surrogates, at most
 * `limit` characters long; GIVE_UP otherwise. */
static int
put_text(Bytes *b, PyObject *text, Py_ssize_t limit)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (n > limit) {
        return GIVE_UP;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    /* at most 4 bytes a character, 3 for 2-byte kinds, 2 for 1-byte ones */
    if (put(b, "s", 1) < 0 || put_integer(b, n) < 0 || put(b, ":", 1) < 0 ||
        bytes_room(b, n * (kind == PyUnicode_1BYTE_KIND ? 2 : kind + 1)) < 0) {
        return -1;
    }
    if (PyUnicode_IS_ASCII(text)) {
        if (memchr(data, 0, (size_t)n) != NULL) {
            return GIVE_UP;
        }
        memcpy(b->data + b->len, data, (size_t)n);
        b->len += n;
        return WRITTEN;
    }
    unsigned char *out = (unsigned char *)b->data + b->len;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x80) {
            if (c == 0) {
                return GIVE_UP;
            }
            *out++ = (unsigned char)c;
        }
        else if (c < 0x800) {
            *out++ = (unsigned char)(0xc0 | (c >> 6));
            *out++ = (unsigned char)(0x80 | (c & 0x3f));
        }
        else if (c < 0x10000) {
            if (c >= 0xd800 && c <= 0xdfff) {
                return GIVE_UP;
            }
            *out++ = (unsigned char)(0xe0 | (c >> 12));
            *out++ = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
            *out++ = (unsigned char)(0x80 | (c & 0x3f));
        }
        else {
            *out++ = (unsigned char)(0xf0 | (c >> 18));
            *out++ = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
            *out++ = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
            *out++ = (unsigned char)(0x80 | (c & 0x3f));
        }
    }
    b->len = (char *)out - b->data;
    return WRITTEN;
}

/* One column's text, by its shape; GIVE_UP where storable() would change it. */
static int
put_column(Bytes *b, PyObject *value, char shape, Py_ssize_t limit)
{
    if (value == Py_None) {
        return shape >= 'a' ? (put(b, "~", 1) < 0 ? -1 : WRITTEN) : GIVE_UP;
    }
    PyTypeObject *type = Py_TYPE(value);
    switch (shape) {
        case 't':
        case 'T':
            return type == &PyUnicode_Type ? put_text(b, value, limit) : GIVE_UP;
        case 'i': {
            if (type != &PyLong_Type) {
                return GIVE_UP;
            }
            int overflow;
            long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
            if (overflow) {
                return GIVE_UP;
            }
            return put(b, "i", 1) < 0 || put_integer(b, number) < 0 ? -1 : WRITTEN;
        }
        case 'f':
        case 'F': {
            if (type != &PyFloat_Type) {
                return GIVE_UP;
            }
            double x = PyFloat_AS_DOUBLE(value);
            if (!isfinite(x)) {
                return GIVE_UP;
            }
            return put(b, "f", 1) < 0 || put_float_hex(b, x) < 0 ? -1 : WRITTEN;
        }
        default:
            return GIVE_UP;
    }
}

/* The row's content (its columns joined by "|") into b: WRITTEN, GIVE_UP or
 * -1 (an error set). */
static int
put_content(Bytes *b, PyObject *row)
{
    Py_ssize_t columns = PyBytes_GET_SIZE(shapes);
    if (Py_TYPE(row) != row_type || PyTuple_GET_SIZE(row) != columns + 1) {
        return GIVE_UP;
    }
    const char *shape = PyBytes_AS_STRING(shapes);
    for (Py_ssize_t i = 0; i < columns; i++) {
        if (i > 0 && put(b, "|", 1) < 0) {
            return -1;
        }
        int done = put_column(b, PyTuple_GET_ITEM(row, i), shape[i], limits[i]);
        if (done != WRITTEN) {
            return done;
        }
    }
    return WRITTEN;
}

/* "previous|row_id|content" into b: WRITTEN, GIVE_UP or -1 (an error set). */
static int
put_link(Bytes *b, PyObject *row, PyObject *previous, PyObject *row_id)
{
    if (Py_TYPE(previous) != &PyUnicode_Type || !PyUnicode_IS_ASCII(previous) ||
        Py_TYPE(row_id) != &PyLong_Type) {
        return GIVE_UP;
    }
    int overflow;
    long long id = PyLong_AsLongLongAndOverflow(row_id, &overflow);
    if (overflow) {
        return GIVE_UP;
    }
    if (put(b, PyUnicode_DATA(previous), PyUnicode_GET_LENGTH(previous)) < 0 ||
        put(b, "|", 1) < 0 || put_integer(b, id) < 0 || put(b, "|", 1) < 0) {
        return -1;
    }
    return put_content(b, row);
}

static int
configured(void)
{
    if (sha256 == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "audit_row.c: configure_chain was not called");
        return 0;
    }
    return 1;
}

PyObject *
ccore_chain_text(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "chain_text(row)");
        return NULL;
    }
    if (!configured()) {
        return NULL;
    }
    Bytes b = {.len = 0, .cap = STACK_BYTES};
    b.data = b.stack;
    PyObject *result = NULL;
    int done = put_content(&b, args[0]);
    if (done == GIVE_UP) {
        result = Py_NewRef(Py_None);
    }
    else if (done == WRITTEN) {
        result = PyUnicode_DecodeUTF8(b.data, b.len, "strict");
    }
    if (b.data != b.stack) {
        PyMem_Free(b.data);
    }
    return result;
}

PyObject *
ccore_chain_link(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "chain_link(row, previous, row_id)");
        return NULL;
    }
    if (!configured()) {
        return NULL;
    }
    Bytes b = {.len = 0, .cap = STACK_BYTES};
    b.data = b.stack;
    PyObject *result = NULL;
    int done = put_link(&b, args[0], args[1], args[2]);
    if (done == GIVE_UP) {
        result = Py_NewRef(Py_None);
    }
    else if (done == WRITTEN && native) {
        if (bytes_room(&b, 72) == 0 && (result = PyUnicode_New(64, 127)) != NULL) {
            sha256_hex((unsigned char *)b.data, b.len, (char *)PyUnicode_1BYTE_DATA(result));
        }
    }
    else if (done == WRITTEN) {
        PyObject *bytes = PyBytes_FromStringAndSize(b.data, b.len);
        if (bytes != NULL) {
            PyObject *hash = PyObject_CallOneArg(sha256, bytes);
            Py_DECREF(bytes);
            if (hash != NULL) {
                result = PyObject_CallMethodNoArgs(hash, str_hexdigest);
                Py_DECREF(hash);
            }
        }
    }
    if (b.data != b.stack) {
        PyMem_Free(b.data);
    }
    return result;
}

PyObject *
ccore_sqlite_params(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "sqlite_params(row, row_id, digest)");
        return NULL;
    }
    if (!configured()) {
        return NULL;
    }
    PyObject *row = args[0];
    if (Py_TYPE(row) != row_type) {
        Py_RETURN_NONE;
    }
    Py_ssize_t columns = PyTuple_GET_SIZE(row) - 1; /* not the id */
    if (columns < 0 || columns > 63) {
        Py_RETURN_NONE;
    }
    unsigned long long nulls = 0;
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < columns; i++) {
        if (PyTuple_GET_ITEM(row, i) == Py_None) {
            nulls |= 1ULL << i;
        }
        else {
            kept++;
        }
    }
    PyObject *params = PyTuple_New(kept + 2);
    if (params == NULL) {
        return NULL;
    }
    PyTuple_SET_ITEM(params, 0, Py_NewRef(args[1]));
    Py_ssize_t at = 1;
    for (Py_ssize_t i = 0; i < columns; i++) {
        PyObject *value = PyTuple_GET_ITEM(row, i);
        if (value != Py_None) {
            PyTuple_SET_ITEM(params, at++, Py_NewRef(value));
        }
    }
    PyTuple_SET_ITEM(params, at, Py_NewRef(args[2]));
    PyObject *key = PyLong_FromUnsignedLongLong(nulls);
    if (key == NULL) {
        Py_DECREF(params);
        return NULL;
    }
    PyObject *result = PyTuple_New(2);
    if (result == NULL) {
        Py_DECREF(key);
        Py_DECREF(params);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, key);
    PyTuple_SET_ITEM(result, 1, params);
    return result;
}

PyObject *
ccore_configure_chain(PyObject *module, PyObject *args)
{
    PyObject *type, *new_shapes, *new_limits, *new_sha256;
    int allow_native;
    if (!PyArg_ParseTuple(args, "O!O!O!Op:configure_chain", &PyType_Type, &type, &PyBytes_Type,
                          &new_shapes, &PyTuple_Type, &new_limits, &new_sha256, &allow_native)) {
        return NULL;
    }
    Py_ssize_t columns = PyBytes_GET_SIZE(new_shapes);
    if (PyTuple_GET_SIZE(new_limits) != columns || columns == 0) {
        PyErr_SetString(PyExc_ValueError, "configure_chain: one limit per column");
        return NULL;
    }
    Py_ssize_t *new = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)columns);
    if (new == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < columns; i++) {
        new[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(new_limits, i));
        if (new[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(new);
            return NULL;
        }
    }
    if (str_hexdigest == NULL && (str_hexdigest = PyUnicode_InternFromString("hexdigest")) == NULL) {
        PyMem_Free(new);
        return NULL;
    }
    PyMem_Free(limits);
    limits = new;
    Py_XSETREF(row_type, (PyTypeObject *)Py_NewRef(type));
    Py_XSETREF(shapes, Py_NewRef(new_shapes));
    Py_XSETREF(sha256, Py_NewRef(new_sha256));
    native = allow_native && sha256_native();
    return PyBool_FromLong(native);
}
