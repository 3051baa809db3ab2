/* Named tuples (ToolResult, Invocation, AuditRow, ...) built from an exact
 * tuple of their fields, as tuple.__new__(cls, items) builds them, without its
 * call path (an argument tuple, tp_new_wrapper's checks, the argument parser
 * and a copy of items through PySequence_Tuple): make(cls, items); and a copy of
 * one with a field replaced: replaced(value, index, item).
 *
 * Both allocate with the class's tp_alloc and fill the slots, exactly what
 * tuple_subtype_new does; nothing of the items is read or called. Anything
 * else (cls not a strict subclass of tuple, items not an exact tuple, an index
 * out of range) raises TypeError or IndexError: the callers pass their own
 * values, and tuple.__new__ is the reference (tests/test_tuples.py).
 */
#include "ccore.h"

static PyObject *
filled(PyTypeObject *type, PyObject *items, Py_ssize_t index, PyObject *item)
{
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    PyObject *made = type->tp_alloc(type, n);
    if (made == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTuple_SET_ITEM(made, i, Py_NewRef(i == index ? item : PyTuple_GET_ITEM(items, i)));
    }
    return made;
}

static int
named_tuple_type(PyObject *cls)
{
    if (!PyType_Check(cls) || cls == (PyObject *)&PyTuple_Type ||
        !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "make: cls must be a subclass of tuple");
        return 0;
    }
    return 1;
}

PyObject *
ccore_make(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "make(cls, items)");
        return NULL;
    }
    if (!named_tuple_type(args[0])) {
        return NULL;
    }
    if (!PyTuple_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "make: items must be a tuple");
        return NULL;
    }
    return filled((PyTypeObject *)args[0], args[1], -1, NULL);
}

PyObject *
ccore_replaced(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "replaced(value, index, item)");
        return NULL;
    }
    PyObject *value = args[0];
    if (!named_tuple_type((PyObject *)Py_TYPE(value))) {
        return NULL;
    }
    if (!PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "replaced: index must be an int");
        return NULL;
    }
    Py_ssize_t index = PyLong_AsSsize_t(args[1]);
    if (index == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (index < 0 || index >= PyTuple_GET_SIZE(value)) {
        PyErr_SetString(PyExc_IndexError, "replaced: index out of range");
        return NULL;
    }
    return filled(Py_TYPE(value), value, index, args[2]);
}
