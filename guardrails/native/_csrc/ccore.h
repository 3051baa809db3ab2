/* The compiled core (module guardrails._ccore): what its C files share. */
#ifndef GUARDRAILS_CCORE_H
#define GUARDRAILS_CCORE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* canonical.c: the canonical copy of what the model sent (admission.py). */
PyObject *ccore_canonical(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ccore_configure(PyObject *module, PyObject *args);

/* flat_schema.c: a flat schema's plan (schema.py) checked on a canonical copy. */
PyObject *ccore_flat_valid(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ccore_flat_offending(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* json_text.c: a tool's result as JSON text (middleware/_render.py). */
PyObject *ccore_json_text(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ccore_render(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ccore_configure_render(PyObject *module, PyObject *args);
/* triggers.c: the words of a text looked up in a table of terms' words (text.py). */
PyObject *ccore_word_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ccore_scan_words(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* audit_row.c: an audit row's chain hash (store/_chain.py), storable rows only;
 * its SQLite parameters (store/_sqlite_insert.py). */
PyObject *ccore_chain_link(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ccore_chain_text(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ccore_sqlite_params(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ccore_configure_chain(PyObject *module, PyObject *args);
/* tuples.c: named tuples built without tuple.__new__'s call path. */
PyObject *ccore_make(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *ccore_replaced(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* sha256.c: SHA-256 on the CPU's SHA extensions, where it has them. */
int sha256_native(void);
void sha256_hex(unsigned char *data, Py_ssize_t len, char out[64]);

#endif
