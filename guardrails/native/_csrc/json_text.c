/* The JSON text of a tool's result (middleware/_render.py's _encode in C),
 * and step 8 around it (render_py in C: the text capped with the marker).
 *
 * json_text(value, fallback) writes exact dict/list/tuple/str/int/float/bool/
 * None straight into one string, with the text of
 * json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False):
 * the same escapes (", \, \b \f \n \r \t, other controls as \u00xx; every
 * other character as is, lone surrogates included), int.__repr__ and
 * float.__repr__ for numbers, str/int/float/bool/None keys written as json
 * writes them.
 *
 * Anything else (a subclass, an object, a non-finite float, a key of another
 * type, an int past the digit limit, depth past what the interpreter allows,
 * a dict that changed size under the walk, memory) makes the walk give up
 * and fallback(value) decide, from the start: the same text, or the same
 * exception, as the Python path. Nothing foreign is called, hashed, compared
 * or converted before that: types are checked exactly, dicts read with
 * PyDict_Next, lists index by index against their current length.
 */
#include "ccore.h"
#include <math.h>
#include <string.h>

#define STACK_BYTES 1024
/* Recursion levels taken before the walk, so that it runs out of depth before
 * the Python path would (that path has two levels more: _encode's frame and
 * the encoder's tp_call); where it does, the Python path decides. */
#define DEPTH_MARGIN 3
/* The same for render(), whose Python twin has one frame more (render_py). */
#define RENDER_MARGIN 4

typedef struct {
    char *data;           /* `len` characters of `kind` bytes each */
    Py_ssize_t len, cap;  /* in characters */
    int kind;             /* 1, 2 or 4 */
    int ascii;            /* every character written so far < 128 */
    char stack[STACK_BYTES];
} Writer;

static void
writer_init(Writer *w)
{
    w->data = w->stack;
    w->len = 0;
    w->cap = STACK_BYTES;
    w->kind = 1;
    w->ascii = 1;
}

static void
writer_free(Writer *w)
{
    if (w->data != w->stack) {
        PyMem_Free(w->data);
    }
}

/* A buffer of `cap` characters of `kind`, holding what was written, widened. */
static int
writer_move(Writer *w, Py_ssize_t cap, int kind)
{
    if (cap > PY_SSIZE_T_MAX / 4) {
        PyErr_NoMemory();
        return -1;
    }
    char *data = PyMem_Malloc((size_t)cap * (size_t)kind);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (kind == w->kind) {
        memcpy(data, w->data, (size_t)w->len * (size_t)kind);
    }
    else {
        for (Py_ssize_t i = 0; i < w->len; i++) {
            PyUnicode_WRITE(kind, data, i, PyUnicode_READ(w->kind, w->data, i));
        }
    }
    writer_free(w);
    w->data = data;
    w->cap = cap;
    w->kind = kind;
    return 0;
}

/* Room for `extra` more characters. */
static inline int
writer_room(Writer *w, Py_ssize_t extra)
{
    if (extra <= w->cap - w->len) {
        return 0;
    }
    if (extra > PY_SSIZE_T_MAX / 8 - w->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = w->len + extra, cap = w->cap * 2;
    return writer_move(w, cap > need ? cap : need, w->kind);
}

static int
put_ascii(Writer *w, const char *s, Py_ssize_t n)
{
    if (writer_room(w, n) < 0) {
        return -1;
    }
    if (w->kind == 1) {
        memcpy(w->data + w->len, s, (size_t)n);
    }
    else {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyUnicode_WRITE(w->kind, w->data, w->len + i, (Py_UCS1)s[i]);
        }
    }
    w->len += n;
    return 0;
}

static inline int
put_char(Writer *w, char c)
{
    if (w->len < w->cap && w->kind == 1) {
        w->data[w->len++] = c;
        return 0;
    }
    return put_ascii(w, &c, 1);
}

/* Characters json escapes: 0 none, 1 a two-character escape, 5 \u00xx. */
static inline int
escape_extra(Py_UCS4 c)
{
    if (c >= 0x20) {
        return c == '"' || c == '\\';
    }
    return c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t' ? 1 : 5;
}

static Py_ssize_t
escapes_in(int kind, const void *data, Py_ssize_t n)
{
    Py_ssize_t extra = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = data;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (p[i] < 0x20 || p[i] == '"' || p[i] == '\\') {
                extra += escape_extra(p[i]);
            }
        }
        return extra;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x20 || c == '"' || c == '\\') {
            extra += escape_extra(c);
        }
    }
    return extra;
}

static void
write_escaped(Writer *w, int kind, const void *data, Py_ssize_t n)
{
    static const char hex[] = "0123456789abcdef";
    int wk = w->kind;
    char *out = w->data;
    Py_ssize_t at = w->len;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        int extra = c < 0x20 || c == '"' || c == '\\' ? escape_extra(c) : 0;
        if (extra == 0) {
            PyUnicode_WRITE(wk, out, at++, c);
            continue;
        }
        PyUnicode_WRITE(wk, out, at++, '\\');
        switch (c) {
        case '\b': c = 'b'; break;
        case '\f': c = 'f'; break;
        case '\n': c = 'n'; break;
        case '\r': c = 'r'; break;
        case '\t': c = 't'; break;
        default: break;
        }
        if (extra == 1) {
            PyUnicode_WRITE(wk, out, at++, c);
            continue;
        }
        PyUnicode_WRITE(wk, out, at++, 'u');
        PyUnicode_WRITE(wk, out, at++, '0');
        PyUnicode_WRITE(wk, out, at++, '0');
        PyUnicode_WRITE(wk, out, at++, hex[(c >> 4) & 0xf]);
        PyUnicode_WRITE(wk, out, at++, hex[c & 0xf]);
    }
    w->len = at;
}

/* One-byte text copied as long as nothing needs an escape: how many were copied. */
static inline Py_ssize_t
copy_plain(Py_UCS1 *out, const Py_UCS1 *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i < n; i++) {
        Py_UCS1 c = p[i];
        if (c < 0x20 || c == '"' || c == '\\') {
            break;
        }
        out[i] = c;
    }
    return i;
}

/* An exact str, quoted and escaped. */
static int
put_text(Writer *w, PyObject *s)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0) {
        return -1;
    }
#endif
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (!PyUnicode_IS_ASCII(s)) {
        w->ascii = 0;
    }
    /* The common case: one-byte text into a one-byte buffer, nothing to escape. */
    if (kind == 1 && w->kind == 1) {
        if (writer_room(w, n + 2) < 0) {
            return -1;
        }
        Py_UCS1 *out = (Py_UCS1 *)w->data + w->len;
        out[0] = '"';
        if (copy_plain(out + 1, data, n) == n) {
            out[n + 1] = '"';
            w->len += n + 2;
            return 0;
        }
    }
    Py_ssize_t extra = escapes_in(kind, data, n);
    if (kind > w->kind && writer_move(w, w->cap > n + 2 ? w->cap : n + 2, kind) < 0) {
        return -1;
    }
    if (writer_room(w, n + extra + 2) < 0) {
        return -1;
    }
    PyUnicode_WRITE(w->kind, w->data, w->len++, '"');
    if (extra == 0 && kind == w->kind) {
        memcpy(w->data + w->len * kind, data, (size_t)n * (size_t)kind);
        w->len += n;
    }
    else {
        write_escaped(w, kind, data, n);
    }
    PyUnicode_WRITE(w->kind, w->data, w->len++, '"');
    return 0;
}

/* An exact int as int.__repr__ writes it. */
static int
put_int(Writer *w, PyObject *v)
{
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow == 0) {
        if (x == -1 && PyErr_Occurred()) {
            return -1;
        }
        char buf[24];
        char *end = buf + sizeof(buf), *p = end;
        unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
        do {
            *--p = (char)('0' + u % 10);
            u /= 10;
        } while (u != 0);
        if (x < 0) {
            *--p = '-';
        }
        return put_ascii(w, p, end - p);
    }
    /* Past 64 bits: int's own repr, with its digit limit (ValueError past it). */
    PyObject *text = PyLong_Type.tp_repr(v);
    if (text == NULL) {
        return -1;
    }
    int r = put_ascii(w, (const char *)PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text));
    Py_DECREF(text);
    return r;
}

/* A finite exact float as float.__repr__ writes it; a non-finite one gives up. */
static int
put_float(Writer *w, PyObject *v)
{
    double d = PyFloat_AS_DOUBLE(v);
    if (!isfinite(d)) {
        return -1;
    }
    /* A whole number under 1e16 (and not -0.0) is its digits and ".0" in repr. */
    if (d > -1e16 && d < 1e16 && d == (double)(long long)d && (d != 0.0 || !signbit(d))) {
        char buf[24];
        char *end = buf + sizeof(buf), *p = end - 2;
        long long x = (long long)d;
        unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
        end[-2] = '.';
        end[-1] = '0';
        do {
            *--p = (char)('0' + u % 10);
            u /= 10;
        } while (u != 0);
        if (x < 0) {
            *--p = '-';
        }
        return put_ascii(w, p, end - p);
    }
    char *text = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL) {
        return -1;
    }
    int r = put_ascii(w, text, (Py_ssize_t)strlen(text));
    PyMem_Free(text);
    return r;
}

static int put_value(Writer *w, PyObject *v);

/* A key: an exact str as is; an exact int, float, bool or None as json writes it, quoted. */
static int
put_key(Writer *w, PyObject *k)
{
    PyTypeObject *t = Py_TYPE(k);
    int r;
    if (t == &PyUnicode_Type) {
        return put_text(w, k);
    }
    if (t != &PyLong_Type && t != &PyFloat_Type && t != &PyBool_Type && k != Py_None) {
        return -1;
    }
    if (put_char(w, '"') < 0) {
        return -1;
    }
    r = t == &PyLong_Type ? put_int(w, k) : t == &PyFloat_Type ? put_float(w, k) : put_value(w, k);
    return r < 0 ? -1 : put_char(w, '"');
}

static int
put_dict(Writer *w, PyObject *d)
{
    Py_ssize_t size = PyDict_GET_SIZE(d), pos = 0;
    PyObject *k, *v;
    if (put_char(w, '{') < 0) {
        return -1;
    }
    for (int first = 1; PyDict_Next(d, &pos, &k, &v); first = 0) {
        Py_INCREF(k);
        Py_INCREF(v);
        int r = first ? 0 : put_char(w, ',');
        if (r == 0) {
            r = put_key(w, k);
        }
        if (r == 0) {
            r = put_char(w, ':');
        }
        if (r == 0) {
            r = put_value(w, v);
        }
        Py_DECREF(k);
        Py_DECREF(v);
        /* A size change means a finalizer changed the dict: give up. */
        if (r < 0 || PyDict_GET_SIZE(d) != size) {
            return -1;
        }
    }
    return put_char(w, '}');
}

static int
put_array(Writer *w, PyObject *a)
{
    int list = Py_TYPE(a) == &PyList_Type;
    if (put_char(w, '[') < 0) {
        return -1;
    }
    /* Index by index against the current length, as a list may change under a finalizer. */
    for (Py_ssize_t i = 0; i < (list ? PyList_GET_SIZE(a) : PyTuple_GET_SIZE(a)); i++) {
        PyObject *item = list ? PyList_GET_ITEM(a, i) : PyTuple_GET_ITEM(a, i);
        Py_INCREF(item);
        int r = i == 0 ? 0 : put_char(w, ',');
        if (r == 0) {
            r = put_value(w, item);
        }
        Py_DECREF(item);
        if (r < 0) {
            return -1;
        }
    }
    return put_char(w, ']');
}

static int
put_value(Writer *w, PyObject *v)
{
    PyTypeObject *t = Py_TYPE(v);
    int r;
    if (t == &PyUnicode_Type) {
        return put_text(w, v);
    }
    if (t == &PyLong_Type) {
        return put_int(w, v);
    }
    if (t == &PyFloat_Type) {
        return put_float(w, v);
    }
    if (v == Py_None) {
        return put_ascii(w, "null", 4);
    }
    if (v == Py_True) {
        return put_ascii(w, "true", 4);
    }
    if (v == Py_False) {
        return put_ascii(w, "false", 5);
    }
    if (t != &PyDict_Type && t != &PyList_Type && t != &PyTuple_Type) {
        return -1;
    }
    if (Py_EnterRecursiveCall(" while encoding a JSON object")) {
        return -1;
    }
    r = t == &PyDict_Type ? put_dict(w, v) : put_array(w, v);
    Py_LeaveRecursiveCall();
    return r;
}

static PyObject *
writer_text(Writer *w)
{
    Py_UCS4 top = w->ascii ? 0x7f : w->kind == 1 ? 0xff : w->kind == 2 ? 0xffff : 0x10ffff;
    PyObject *text = PyUnicode_New(w->len, top);
    if (text != NULL) {
        memcpy(PyUnicode_DATA(text), w->data, (size_t)w->len * (size_t)w->kind);
    }
    return text;
}

/* The walk with `margin` recursion levels taken first; 0 done, -1 gave up. */
static int
walk(Writer *w, PyObject *value, int margin)
{
    if (margin == 0) {
        return put_value(w, value);
    }
    if (Py_EnterRecursiveCall(" while encoding a JSON object")) {
        return -1;
    }
    int r = walk(w, value, margin - 1);
    Py_LeaveRecursiveCall();
    return r;
}

PyObject *
ccore_json_text(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Writer w;
    PyObject *text = NULL;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "json_text(value, fallback)");
        return NULL;
    }
    writer_init(&w);
    if (walk(&w, args[0], DEPTH_MARGIN) == 0) {
        text = writer_text(&w);
    }
    writer_free(&w);
    if (text != NULL) {
        return text;
    }
    PyErr_Clear(); /* whatever stopped the walk, the Python path decides */
    return PyObject_CallOneArg(args[1], args[0]);
}

/* render(value, max_chars): _render.render_py's (content, truncated) for an
 * exact str, dict or list and an exact int bound; render_py decides the rest,
 * and every value the walk gives up on, from the start. */
static PyObject *render_py, *marker;

static PyObject *
capped(PyObject *text, Py_ssize_t max_chars)
{
    PyObject *pair, *head, *cut;
    if (PyUnicode_GET_LENGTH(text) <= max_chars) {
        pair = PyTuple_Pack(2, text, Py_False);
        Py_DECREF(text);
        return pair;
    }
    Py_ssize_t keep = max_chars - PyUnicode_GET_LENGTH(marker);
    head = PyUnicode_Substring(text, 0, keep > 0 ? keep : 0);
    Py_DECREF(text);
    cut = head == NULL ? NULL : PyUnicode_Concat(head, marker);
    Py_XDECREF(head);
    pair = cut == NULL ? NULL : PyTuple_Pack(2, cut, Py_True);
    Py_XDECREF(cut);
    return pair;
}

PyObject *
ccore_render(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Writer w;
    PyObject *value, *text = NULL;
    Py_ssize_t max_chars;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "render(value, max_chars)");
        return NULL;
    }
    if (render_py == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_ccore.configure_render() was not called");
        return NULL;
    }
    value = args[0];
    PyTypeObject *t = Py_TYPE(value);
    if (Py_TYPE(args[1]) != &PyLong_Type ||
        (t != &PyUnicode_Type && t != &PyDict_Type && t != &PyList_Type)) {
        return PyObject_Vectorcall(render_py, args, 2, NULL);
    }
    max_chars = PyLong_AsSsize_t(args[1]);
    if (max_chars == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* past Py_ssize_t: render_py's arithmetic */
        return PyObject_Vectorcall(render_py, args, 2, NULL);
    }
    if (t == &PyUnicode_Type) {
        Py_INCREF(value);
        return capped(value, max_chars);
    }
    writer_init(&w);
    if (walk(&w, value, RENDER_MARGIN) == 0) {
        text = writer_text(&w);
    }
    writer_free(&w);
    if (text == NULL) {
        PyErr_Clear();
        return PyObject_Vectorcall(render_py, args, 2, NULL);
    }
    return capped(text, max_chars);
}

PyObject *
ccore_configure_render(PyObject *module, PyObject *args)
{
    PyObject *py, *mark;
    if (!PyArg_ParseTuple(args, "OU", &py, &mark)) {
        return NULL;
    }
    if (!PyUnicode_CheckExact(mark)) {
        PyErr_SetString(PyExc_TypeError, "configure_render: the marker must be a str");
        return NULL;
    }
    Py_INCREF(py);
    Py_XSETREF(render_py, py);
    Py_INCREF(mark);
    Py_XSETREF(marker, mark);
    Py_RETURN_NONE;
}
