/* guardrails._ccore: the compiled core of admission, rendering and the audit
 * chain. Optional: without it the pure-Python walk (admission.py),
 * jsonschema_rs (schema.py), the json module's encoder (_render.py) and
 * store/_storable.py with store/_chain.py do the same work. */
#include "ccore.h"

static PyMethodDef methods[] = {
    {"canonical", (PyCFunction)(void (*)(void))ccore_canonical, METH_FASTCALL,
     "canonical(arguments, limit) -> (value, view or None) | Reason"},
    {"configure", ccore_configure, METH_VARARGS,
     "configure(not_json, too_large, not_an_object, FrozenDict, FrozenList, proxy, parse, "
     "max_depth)"},
    {"flat_valid", (PyCFunction)(void (*)(void))ccore_flat_valid, METH_FASTCALL,
     "flat_valid(plan, arguments) -> bool: a canonical value against a flat schema's plan"},
    {"flat_offending", (PyCFunction)(void (*)(void))ccore_flat_offending, METH_FASTCALL,
     "flat_offending(plan, arguments) -> (names, undeclared) | None: CompiledSchema.offending_py"},
    {"json_text", (PyCFunction)(void (*)(void))ccore_json_text, METH_FASTCALL,
     "json_text(value, fallback) -> str: exact JSON types as text, else fallback(value)"},
    {"render", (PyCFunction)(void (*)(void))ccore_render, METH_FASTCALL,
     "render(value, max_chars) -> (content, truncated): _render.render_py, compiled"},
    {"configure_render", ccore_configure_render, METH_VARARGS,
     "configure_render(render_py, truncation_marker)"},
    {"word_table", (PyCFunction)(void (*)(void))ccore_word_table, METH_FASTCALL,
     "word_table(keys, tracked) -> table: the keys scan_words looks up"},
    {"scan_words", (PyCFunction)(void (*)(void))ccore_scan_words, METH_FASTCALL,
     "scan_words(table, tokens, want_odd) -> (found, odd tokens or None, starts)"},
    {"chain_link", (PyCFunction)(void (*)(void))ccore_chain_link, METH_FASTCALL,
     "chain_link(row, previous, row_id) -> str | None: link(previous, row_id, content(row)) "
     "of a row storable() keeps, else None"},
    {"chain_text", (PyCFunction)(void (*)(void))ccore_chain_text, METH_FASTCALL,
     "chain_text(row) -> str | None: content(row) of a row storable() keeps, else None"},
    {"sqlite_params", (PyCFunction)(void (*)(void))ccore_sqlite_params, METH_FASTCALL,
     "sqlite_params(row, row_id, digest) -> (nulls, params) | None: the NULL columns of a "
     "storable row as bits, and (row_id, the other columns, digest)"},
    {"make", (PyCFunction)(void (*)(void))ccore_make, METH_FASTCALL,
     "make(cls, items) -> cls: tuple.__new__(cls, items) for a tuple subclass and an exact tuple"},
    {"replaced", (PyCFunction)(void (*)(void))ccore_replaced, METH_FASTCALL,
     "replaced(value, index, item) -> type(value): a copy of a tuple subclass's value with "
     "value[index] replaced by item"},
    {"configure_chain", ccore_configure_chain, METH_VARARGS,
     "configure_chain(row_type, shapes, limits, sha256, native) -> bool: whether the CPU's "
     "SHA extensions hash"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "guardrails._ccore",
    .m_doc = "The compiled core of admission and rendering (see guardrails/_csrc/AGENTS.md).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__ccore(void)
{
    return PyModule_Create(&module_def);
}
