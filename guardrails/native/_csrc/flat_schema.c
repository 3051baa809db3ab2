/* A flat schema checked in C: the plan schema.flat_plan() compiles at registration.
 *
 * The plan is (open, required, properties): `open` is True unless
 * additionalProperties is false, `required` a tuple of names, `properties` a
 * dict of name -> (types, enum, const, minimum, maximum, minLength,
 * maxLength), None where the keyword is absent; `types` is a bit mask (0: any
 * type), `enum` a tuple of scalars, `const` a 1-tuple. The semantics are
 * jsonschema's (draft 2020-12) on that subset: "integer" includes integral
 * floats, bool is neither a number nor equal to one, 1 equals 1.0, numbers
 * compare exactly (Python's int/float comparison), lengths count code points.
 *
 * The arguments are the canonical copy (exact JSON types, exact-str keys):
 * anything else is invalid here, and nothing foreign is compared or hashed.
 *
 * flat_offending names what makes the arguments invalid, as
 * CompiledSchema.offending_py does with one jsonschema_rs validator per
 * property: (the sorted declared names that fail, or are required and
 * missing; whether an undeclared key meets a closed schema). On anything
 * that is not a canonical copy it gives up whole and returns None.
 */
#include "ccore.h"
#include <math.h>

enum {
    T_STRING = 1,
    T_NUMBER = 2,
    T_INTEGER = 4,
    T_BOOLEAN = 8,
    T_NULL = 16,
    T_ARRAY = 32,
    T_OBJECT = 64,
};

enum { S_TYPES, S_ENUM, S_CONST, S_MINIMUM, S_MAXIMUM, S_MIN_LENGTH, S_MAX_LENGTH, S_SIZE };

static int
is_number(PyObject *v)
{
    return Py_TYPE(v) == &PyLong_Type || Py_TYPE(v) == &PyFloat_Type;
}

static long
type_bits(PyObject *v)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) {
        return T_STRING;
    }
    if (t == &PyLong_Type) {
        return T_NUMBER | T_INTEGER;
    }
    if (t == &PyFloat_Type) {
        double d = PyFloat_AS_DOUBLE(v);
        return T_NUMBER | (isfinite(d) && floor(d) == d ? T_INTEGER : 0);
    }
    if (t == &PyBool_Type) {
        return T_BOOLEAN;
    }
    if (v == Py_None) {
        return T_NULL;
    }
    return t == &PyList_Type ? T_ARRAY : t == &PyDict_Type ? T_OBJECT : 0;
}

/* jsonschema's equality for a value against a plan scalar: 1 equal, 0 not, -1 error. */
static int
json_equal(PyObject *value, PyObject *scalar)
{
    PyTypeObject *tv = Py_TYPE(value), *ts = Py_TYPE(scalar);
    if (value == scalar) {
        return 1;
    }
    if (tv == &PyUnicode_Type && ts == &PyUnicode_Type) {
        return PyUnicode_Compare(value, scalar) == 0;
    }
    if (is_number(value) && is_number(scalar)) {
        return PyObject_RichCompareBool(value, scalar, Py_EQ);
    }
    return 0; /* bool and None are equal only to themselves (identity above) */
}

static int
any_equal(PyObject *value, PyObject *choices)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(choices); i++) {
        int eq = json_equal(value, PyTuple_GET_ITEM(choices, i));
        if (eq != 0) {
            return eq;
        }
    }
    return 0;
}

/* 1 if the number is within the bound (op: Py_GE for a minimum, Py_LE for a maximum). */
static int
within(PyObject *value, PyObject *bound, int op)
{
    return bound == Py_None ? 1 : PyObject_RichCompareBool(value, bound, op);
}

static int
within_length(PyObject *value, PyObject *min_len, PyObject *max_len)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(value);
    if (min_len != Py_None && n < PyLong_AsSsize_t(min_len)) {
        return 0;
    }
    return max_len == Py_None || n <= PyLong_AsSsize_t(max_len);
}

/* 1 valid, 0 invalid, -1 error. */
static int
check_value(PyObject *spec, PyObject *value)
{
    long types = PyLong_AsLong(PyTuple_GET_ITEM(spec, S_TYPES));
    PyObject *choices = PyTuple_GET_ITEM(spec, S_ENUM);
    PyObject *constant = PyTuple_GET_ITEM(spec, S_CONST);
    int ok = 1;
    if (types == -1 && PyErr_Occurred()) { /* a malformed plan */
        return -1;
    }
    if (types != 0 && (type_bits(value) & types) == 0) {
        return 0;
    }
    if (choices != Py_None) {
        ok = any_equal(value, choices);
    }
    if (ok == 1 && constant != Py_None) {
        ok = any_equal(value, constant);
    }
    if (ok == 1 && is_number(value)) {
        ok = within(value, PyTuple_GET_ITEM(spec, S_MINIMUM), Py_GE);
        if (ok == 1) {
            ok = within(value, PyTuple_GET_ITEM(spec, S_MAXIMUM), Py_LE);
        }
    }
    else if (ok == 1 && Py_TYPE(value) == &PyUnicode_Type) {
        ok = within_length(value, PyTuple_GET_ITEM(spec, S_MIN_LENGTH),
                           PyTuple_GET_ITEM(spec, S_MAX_LENGTH));
    }
    return ok;
}

static int
plan_parts(PyObject *plan, int *open, PyObject **required, PyObject **properties)
{
    if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != 3) {
        PyErr_SetString(PyExc_TypeError, "the flat plan is (open, required, properties)");
        return -1;
    }
    *open = PyTuple_GET_ITEM(plan, 0) == Py_True;
    *required = PyTuple_GET_ITEM(plan, 1);
    *properties = PyTuple_GET_ITEM(plan, 2);
    if (!PyTuple_CheckExact(*required) || !PyDict_CheckExact(*properties)) {
        PyErr_SetString(PyExc_TypeError, "malformed flat plan");
        return -1;
    }
    return 0;
}

static int
check_members(int open, PyObject *properties, PyObject *arguments)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(arguments, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            return 0;
        }
        PyObject *spec = PyDict_GetItemWithError(properties, key);
        if (spec == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            if (!open) {
                return 0;
            }
            continue;
        }
        if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != S_SIZE) {
            PyErr_SetString(PyExc_TypeError, "flat_valid: malformed property plan");
            return -1;
        }
        int ok = check_value(spec, value);
        if (ok != 1) {
            return ok;
        }
    }
    return 1;
}

PyObject *
ccore_flat_valid(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *required, *properties, *arguments;
    int open, ok;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "flat_valid(plan, arguments)");
        return NULL;
    }
    if (plan_parts(args[0], &open, &required, &properties) < 0) {
        return NULL;
    }
    arguments = args[1];
    if (!PyDict_CheckExact(arguments)) {
        Py_RETURN_FALSE;
    }
    ok = check_members(open, properties, arguments);
    for (Py_ssize_t i = 0; ok == 1 && i < PyTuple_GET_SIZE(required); i++) {
        /* exact-str names against exact-str keys: str's own hash and equality */
        ok = PyDict_Contains(arguments, PyTuple_GET_ITEM(required, i));
    }
    if (ok < 0 || PyErr_Occurred()) {
        return NULL;
    }
    return PyBool_FromLong(ok);
}

/* The plan's spec of one property; NULL when it is undeclared, or with an error. */
static PyObject *
property_spec(PyObject *properties, PyObject *key)
{
    PyObject *spec = PyDict_GetItemWithError(properties, key);
    if (spec == NULL) {
        return NULL;
    }
    if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != S_SIZE) {
        PyErr_SetString(PyExc_TypeError, "flat_offending: malformed property plan");
        return NULL;
    }
    return spec;
}

/* Every declared member that fails its spec, appended to names. 1 done, 0 give up
 * (not a canonical copy), -1 error. */
static int
failing_members(PyObject *properties, PyObject *arguments, PyObject *names, int *undeclared)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(arguments, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            return 0;
        }
        PyObject *spec = property_spec(properties, key);
        if (spec == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            *undeclared = 1; /* counted only when the schema is closed */
            continue;
        }
        long bits = type_bits(value);
        if (bits == 0 || (Py_TYPE(value) == &PyFloat_Type && !isfinite(PyFloat_AS_DOUBLE(value)))) {
            return 0;
        }
        int ok = check_value(spec, value);
        if (ok < 0 || (ok == 0 && PyList_Append(names, key) < 0)) {
            return -1;
        }
    }
    return 1;
}

/* Required names the arguments lack, appended to names. 0 or -1. */
static int
missing_required(PyObject *required, PyObject *arguments, PyObject *names)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(required); i++) {
        PyObject *name = PyTuple_GET_ITEM(required, i);
        if (!PyUnicode_CheckExact(name)) {
            PyErr_SetString(PyExc_TypeError, "flat_offending: a required name is not a str");
            return -1;
        }
        int present = PyDict_Contains(arguments, name);
        if (present < 0 || (present == 0 && PyList_Append(names, name) < 0)) {
            return -1;
        }
    }
    return 0;
}

/* The i-th name repeats the one before it (the list is sorted). */
static int
repeats(PyObject *names, Py_ssize_t i)
{
    return i > 0 &&
           PyUnicode_Compare(PyList_GET_ITEM(names, i - 1), PyList_GET_ITEM(names, i)) == 0;
}

/* sorted(set(names)) as a tuple: exact strs, so sorting and comparing run no user code. */
static PyObject *
sorted_unique(PyObject *names)
{
    Py_ssize_t n = PyList_GET_SIZE(names), unique = 0, kept = 0;
    if (n > 1 && PyList_Sort(names) < 0) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unique += !repeats(names, i);
    }
    PyObject *out = PyTuple_New(unique);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        if (!repeats(names, i)) {
            PyTuple_SET_ITEM(out, kept++, Py_NewRef(PyList_GET_ITEM(names, i)));
        }
    }
    return out;
}

PyObject *
ccore_flat_offending(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *required, *properties, *arguments, *names, *found = NULL;
    int open, undeclared = 0, done;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "flat_offending(plan, arguments)");
        return NULL;
    }
    if (plan_parts(args[0], &open, &required, &properties) < 0) {
        return NULL;
    }
    arguments = args[1];
    if (!PyDict_CheckExact(arguments)) {
        Py_RETURN_NONE;
    }
    names = PyList_New(0);
    if (names == NULL) {
        return NULL;
    }
    done = failing_members(properties, arguments, names, &undeclared);
    if (done == 1 && missing_required(required, arguments, names) == 0) {
        PyObject *sorted = sorted_unique(names);
        if (sorted != NULL) {
            found = PyTuple_Pack(2, sorted, undeclared && !open ? Py_True : Py_False);
            Py_DECREF(sorted);
        }
    }
    else if (done == 0) {
        found = Py_NewRef(Py_None);
    }
    Py_DECREF(names);
    if (found != NULL && PyErr_Occurred()) { /* a malformed plan's number, read above */
        Py_CLEAR(found);
    }
    return found;
}
