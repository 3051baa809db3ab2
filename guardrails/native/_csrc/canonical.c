/* The canonical copy of what the model sent (admission.canonical_py in C).
 *
 * The same rules as the pure walk in admission.py, in one C pass: exact
 * dict/list/str, int within a double's finite range, finite float,
 * bool/None, exact-str keys without lone surrogates, the size budget and
 * MAX_DEPTH, checked in the same order so the
 * same reason comes back. No user-defined method runs: every type is checked
 * with Py_TYPE(x) == &Py..._Type (or PyDict_Check/PyList_Check before reading
 * storage with PyDict_Next / PyList_GET_ITEM), keys are exact str (their hash
 * is str's own), and nothing foreign is compared, hashed or converted.
 *
 * configure() hands in, once, the Reason members, the read-only view types,
 * the JSON text parser and the depth bound (see admission.py).
 */
#include "ccore.h"
#include <math.h>

enum { OK = 0, NOT_JSON, TOO_LARGE, BROKEN };

static PyObject *not_json, *too_large, *not_an_object;
static PyObject *frozen_dict, *frozen_list, *proxy, *parse;
static Py_ssize_t max_depth = -1;

/* Budgets are clamped far from overflow: no real value comes near 2**60. */
#define BUDGET_CAP ((Py_ssize_t)1 << 60)

static int
has_surrogate(PyObject *s)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0) {
        return -1;
    }
#endif
    if (PyUnicode_IS_ASCII(s)) {
        return 0;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = (const Py_UCS2 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            if ((p[i] & 0xF800) == 0xD800) {
                return 1;
            }
        }
    }
    else if (kind == PyUnicode_4BYTE_KIND) {
        const Py_UCS4 *p = (const Py_UCS4 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (p[i] >= 0xD800 && p[i] <= 0xDFFF) {
                return 1;
            }
        }
    }
    return 0; /* one-byte text holds no surrogate */
}

/* A text value or key: charge its length, then refuse a lone surrogate. */
static int
charge_text(PyObject *s, Py_ssize_t *budget)
{
    *budget -= PyUnicode_GET_LENGTH(s);
    if (*budget < 0) {
        return TOO_LARGE;
    }
    int found = has_surrogate(s);
    return found < 0 ? BROKEN : found ? NOT_JSON : OK;
}

static PyObject *walk_container(PyObject *, Py_ssize_t, Py_ssize_t *, PyObject **, int *);

/* A scalar's copy (itself, new reference), or NULL with *why set; a container
 * goes to walk_container and its read-only view comes back in *view. A
 * non-text scalar costs `scalar` (1 in an object; 0 in a list, whose length
 * was charged already), as in the pure walk. */
static PyObject *
walk_value(PyObject *v, Py_ssize_t depth, Py_ssize_t *budget, Py_ssize_t scalar, PyObject **view,
           int *why)
{
    PyTypeObject *t = Py_TYPE(v);
    *view = NULL;
    if (t == &PyUnicode_Type) {
        *why = charge_text(v, budget);
        if (*why != OK) {
            return NULL;
        }
    }
    else if (t == &PyLong_Type) {
        /* An int that rounds to infinity as a double is not a finite number
         * (admission.INT_BOUND): refused as NaN and the infinities are. */
        if (PyLong_AsDouble(v) == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            *why = NOT_JSON;
            return NULL;
        }
        *budget -= scalar;
    }
    else if (t == &PyBool_Type || v == Py_None) {
        *budget -= scalar;
    }
    else if (t == &PyFloat_Type) {
        if (!isfinite(PyFloat_AS_DOUBLE(v))) {
            *why = NOT_JSON;
            return NULL;
        }
        *budget -= scalar;
    }
    else {
        return walk_container(v, depth + 1, budget, view, why);
    }
    Py_INCREF(v);
    return v;
}

/* A dict's canonical copy; its nested members' views go into *frozen (made on
 * first need). The budget is charged for the size before the walk. */
static PyObject *
walk_object(PyObject *node, Py_ssize_t depth, Py_ssize_t *budget, PyObject **frozen, int *why)
{
    Py_ssize_t size = PyDict_GET_SIZE(node), pos = 0;
    PyObject *key, *value;
    PyObject *out = PyDict_New();
    *frozen = NULL;
    if (out == NULL) {
        goto broken;
    }
    *budget -= size + 1;
    while (PyDict_Next(node, &pos, &key, &value)) {
        PyObject *copy, *view;
        if (!PyUnicode_CheckExact(key)) {
            *why = NOT_JSON;
            goto fail;
        }
        Py_INCREF(key);
        Py_INCREF(value);
        *why = charge_text(key, budget);
        copy = *why == OK ? walk_value(value, depth, budget, 1, &view, why) : NULL;
        Py_DECREF(value);
        if (copy != NULL && *budget < 0) {
            *why = TOO_LARGE;
            Py_CLEAR(copy);
            Py_CLEAR(view);
        }
        if (copy != NULL && view != NULL) {
            if (*frozen == NULL && (*frozen = PyDict_New()) == NULL) {
                *why = BROKEN;
            }
            else if (PyDict_SetItem(*frozen, key, view) < 0) {
                *why = BROKEN;
            }
            Py_DECREF(view);
        }
        if (copy != NULL && *why == OK && PyDict_SetItem(out, key, copy) < 0) {
            *why = BROKEN;
        }
        Py_DECREF(key);
        Py_XDECREF(copy);
        if (*why != OK) {
            goto fail;
        }
        /* Only a finalizer run by the collector could change it: as a dict
         * iterator would, refuse rather than read storage that moved. */
        if (PyDict_GET_SIZE(node) != size) {
            goto broken;
        }
    }
    return out;
broken:
    *why = BROKEN;
fail:
    Py_XDECREF(out);
    Py_CLEAR(*frozen);
    return NULL;
}

static PyObject *
walk_list(PyObject *node, Py_ssize_t depth, Py_ssize_t *budget, PyObject **views, int *why)
{
    PyObject *out = NULL;
    *views = NULL;
    *budget -= PyList_GET_SIZE(node) + 1;
    if (*budget < 0) {
        *why = TOO_LARGE;
        return NULL;
    }
    out = PyList_New(0);
    *views = out == NULL ? NULL : PyObject_CallNoArgs(frozen_list);
    if (*views == NULL) {
        goto broken;
    }
    /* Index by index against the current length, as list.__iter__ reads it. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(node); i++) {
        PyObject *item = PyList_GET_ITEM(node, i), *copy, *view;
        Py_INCREF(item);
        copy = walk_value(item, depth, budget, 0, &view, why);
        if (copy == NULL) {
            Py_DECREF(item);
            goto fail;
        }
        int failed = PyList_Append(out, copy) < 0 ||
                     PyList_Append(*views, view != NULL ? view : item) < 0;
        Py_DECREF(item);
        Py_DECREF(copy);
        Py_XDECREF(view);
        if (failed) {
            goto broken;
        }
    }
    return out;
broken:
    *why = BROKEN;
fail:
    Py_XDECREF(out);
    Py_CLEAR(*views);
    return NULL;
}

static PyObject *
walk_container(PyObject *node, Py_ssize_t depth, Py_ssize_t *budget, PyObject **view, int *why)
{
    PyObject *value, *nested;
    *view = NULL;
    if (depth > max_depth) {
        *why = TOO_LARGE;
        return NULL;
    }
    if (PyList_Check(node)) {
        return walk_list(node, depth, budget, view, why);
    }
    if (!PyDict_Check(node)) {
        *why = NOT_JSON;
        return NULL;
    }
    value = walk_object(node, depth, budget, &nested, why);
    if (value == NULL) {
        return NULL;
    }
    *view = PyObject_CallOneArg(frozen_dict, value);
    if (*view == NULL || (nested != NULL && PyDict_Update(*view, nested) < 0)) {
        *why = BROKEN;
        Py_CLEAR(*view);
        Py_CLEAR(value);
    }
    Py_XDECREF(nested);
    return value;
}

static PyObject *
reason_for(int why)
{
    PyObject *reason = why == NOT_JSON ? not_json : why == TOO_LARGE ? too_large : not_an_object;
    if (why == BROKEN) {
        PyErr_Clear(); /* as the pure walk: anything unexpected is not_an_object */
    }
    Py_INCREF(reason);
    return reason;
}

/* (value, view) for an exact or subclassed dict; view is None when flat. */
static PyObject *
admit_object(PyObject *arguments, Py_ssize_t budget)
{
    PyObject *nested, *view = NULL, *pair;
    int why = OK;
    PyObject *value = walk_object(arguments, 0, &budget, &nested, &why);
    if (value == NULL) {
        return reason_for(why);
    }
    if (nested == NULL) {
        pair = PyTuple_Pack(2, value, Py_None);
    }
    else {
        PyObject *merged = PyDict_Copy(value);
        if (merged != NULL && PyDict_Update(merged, nested) == 0) {
            view = PyObject_CallOneArg(proxy, merged);
        }
        Py_XDECREF(merged);
        pair = view == NULL ? NULL : PyTuple_Pack(2, value, view);
        Py_XDECREF(view);
        Py_DECREF(nested);
    }
    Py_DECREF(value);
    return pair == NULL ? reason_for(BROKEN) : pair;
}

PyObject *
ccore_canonical(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *arguments, *parsed, *result;
    Py_ssize_t limit;
    int overflow;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "canonical(arguments, limit)");
        return NULL;
    }
    if (max_depth < 0) {
        PyErr_SetString(PyExc_RuntimeError, "_ccore.configure() was not called");
        return NULL;
    }
    arguments = args[0];
    if (!PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "limit must be an int");
        return NULL;
    }
    long long raw = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (overflow != 0) {
        limit = overflow > 0 ? BUDGET_CAP : -BUDGET_CAP;
    }
    else if (raw > BUDGET_CAP || raw < -BUDGET_CAP) {
        limit = raw > 0 ? BUDGET_CAP : -BUDGET_CAP;
    }
    else {
        limit = (Py_ssize_t)raw;
    }
    PyTypeObject *t = Py_TYPE(arguments);
    if (t == &PyUnicode_Type || t == &PyBytes_Type || t == &PyByteArray_Type) {
        parsed = PyObject_CallFunction(parse, "On", arguments, limit);
        if (parsed == NULL || !PyDict_CheckExact(parsed)) {
            return parsed; /* an exception of the parser's, or the reason it refused */
        }
        result = admit_object(parsed, limit);
        Py_DECREF(parsed);
        return result;
    }
    if (!PyDict_Check(arguments)) {
        Py_INCREF(not_an_object);
        return not_an_object;
    }
    return admit_object(arguments, limit);
}

PyObject *
ccore_configure(PyObject *module, PyObject *args)
{
    PyObject *nj, *tl, *nao, *fd, *fl, *px, *ps;
    Py_ssize_t depth;
    if (!PyArg_ParseTuple(args, "OOOOOOOn", &nj, &tl, &nao, &fd, &fl, &px, &ps, &depth)) {
        return NULL;
    }
    if (!PyType_Check(fd) || !PyType_IsSubtype((PyTypeObject *)fd, &PyDict_Type) ||
        !PyType_Check(fl) || !PyType_IsSubtype((PyTypeObject *)fl, &PyList_Type) || depth < 0) {
        PyErr_SetString(PyExc_TypeError, "configure: view types must subclass dict and list");
        return NULL;
    }
    Py_INCREF(nj);
    Py_XSETREF(not_json, nj);
    Py_INCREF(tl);
    Py_XSETREF(too_large, tl);
    Py_INCREF(nao);
    Py_XSETREF(not_an_object, nao);
    Py_INCREF(fd);
    Py_XSETREF(frozen_dict, fd);
    Py_INCREF(fl);
    Py_XSETREF(frozen_list, fl);
    Py_INCREF(px);
    Py_XSETREF(proxy, px);
    Py_INCREF(ps);
    Py_XSETREF(parse, ps);
    max_depth = depth;
    Py_RETURN_NONE;
}
