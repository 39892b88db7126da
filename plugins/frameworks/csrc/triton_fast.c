/* hook="triton"'s launch hooks in C: a repeated launch runs no Python frame of ours.
 *
 * Triton calls launch_enter(meta) before and launch_exit(meta) after every kernel launch.  These are
 * the same steps as proton_frameworks.triton_hook.launch_enter/launch_exit, in C:
 *
 *   enter  no session recording (the core's is_active): nothing.  A kernel without launch_metadata (empty
 *          meta.extras, meta.data's keys all Triton's own): nothing.  Else data = meta.get() (inside the scope
 *          __proton_launch_metadata, so what launch_metadata launches is filed there), then the core's
 *          cached launch step (its C API's open_launch_op(data), the native form of
 *          proton_core.launch_ops.open_counted_op(tuple(data.items()))): the op is open and counted, done.
 *          Where the step declines, the Python remainder (triton_hook._enter_general(data, items)) runs,
 *          exactly as in the Python hook; a TypeError from the step (an unhashable value) sends it there with
 *          items None, as the Python hook's `except TypeError` does.
 *   exit   the core's close_op (nothing when no op is open).
 *
 * The thread's scopes, ops and the launch cache are the core's: this file goes through the core's scope
 * engine (proton_core/scope_api.h) and reads no core object itself.  Everything runs with the GIL held, as
 * Triton calls its hooks; free-threaded builds are refused at import (the Python hooks run there).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "proton_core/scope_api.h"

static struct {
    const ProtonScopeAPI *api; /* the core's scope engine */
    PyObject *reserved;        /* frozenset of Triton's own keys */
    PyObject *general;         /* triton_hook._enter_general(data, items) */
    PyObject *s_extras, *s_data, *s_get, *s_items, *s_issuperset;
    PyObject *s_metadata_scope; /* "__proton_launch_metadata": what launch_metadata itself launches goes there */
    /* launches by path, for tests and benchmarks: enters done by the core's cached step / by Python code */
    unsigned long long n_enter_fast, n_enter_slow;
} g;

/* Truth of a value as Python's `if` sees it: 1, 0, or -1 with an exception. */
static inline int truth(PyObject *v) {
    if (v == Py_True) return 1;
    if (v == Py_False || v == Py_None) return 0;
    return PyObject_IsTrue(v);
}

/* RESERVED_KEYS.issuperset(data): 1, 0, or -1 with the exception. */
static int reserved_superset(PyObject *data) {
    if (PyDict_CheckExact(data)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        int plain = 1;
        while (plain && PyDict_Next(data, &pos, &key, &value)) plain = PyUnicode_CheckExact(key);
        if (plain) { /* str keys: no Python code runs while the dict is walked */
            pos = 0;
            while (PyDict_Next(data, &pos, &key, &value)) {
                int found = PySet_Contains(g.reserved, key);
                if (found <= 0) return found;
            }
            return 1;
        }
    }
    PyObject *r = PyObject_CallMethodOneArg(g.reserved, g.s_issuperset, data);
    if (r == NULL) return -1;
    int t = truth(r);
    Py_DECREF(r);
    return t;
}

/* tuple(data.items()) (the slow path's key; the core builds its own on the cached step): a new reference. */
static PyObject *items_of(PyObject *data) {
    PyObject *view = PyDict_CheckExact(data) ? PyDict_Items(data) : PyObject_CallMethodNoArgs(data, g.s_items);
    PyObject *out = view != NULL ? PySequence_Tuple(view) : NULL;
    Py_XDECREF(view);
    return out;
}

/* ----------------------------------------------------------------- the hooks ---- */

static PyObject *not_configured(void) {
    PyErr_SetString(PyExc_RuntimeError, "proton_frameworks._triton_fast: configure() was not called");
    return NULL;
}

/* _enter_general(data, items) */
static PyObject *enter_general(PyObject *data, PyObject *items) {
    ++g.n_enter_slow;
    PyObject *args[2] = {data, items};
    PyObject *r = PyObject_Vectorcall(g.general, args, 2, NULL);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* meta.get(), which runs the kernel's launch_metadata, inside the scope "__proton_launch_metadata": kernels it
 * launches itself (x.sum().item()) are filed there, where viewers hide them, not among the program's (upstream's
 * rule).  A new reference, or NULL with an exception. */
static PyObject *metadata_of(PyObject *meta, int pending) {
    if (!pending) return PyObject_CallMethodNoArgs(meta, g.s_get); /* evaluated already: nothing can launch */
    uint64_t scope = 0;
    if (g.api->open_scope(g.s_metadata_scope, &scope) < 0) return NULL;
    PyObject *data = PyObject_CallMethodNoArgs(meta, g.s_get);
    if (data == NULL) {
        PyObject *type, *value, *tb; /* PyErr_Fetch: CPython 3.10 and 3.11 lack PyErr_GetRaisedException */
        PyErr_Fetch(&type, &value, &tb);
        if (g.api->close_scope(scope) < 0) PyErr_Clear();
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    if (g.api->close_scope(scope) < 0) {
        Py_DECREF(data);
        return NULL;
    }
    return data;
}

static PyObject *launch_enter(PyObject *self, PyObject *meta) {
    if (g.api == NULL) return not_configured();
    if (!g.api->is_active()) Py_RETURN_NONE;
    /* if not getattr(meta, "extras", True) and RESERVED_KEYS.issuperset(meta.data): return */
    PyObject *extras = PyObject_GetAttr(meta, g.s_extras);
    int pending = 1;
    if (extras == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear();
    } else {
        pending = PyList_CheckExact(extras) ? PyList_GET_SIZE(extras) != 0 : truth(extras);
        Py_DECREF(extras);
        if (pending < 0) return NULL;
    }
    if (!pending) {
        PyObject *data = PyObject_GetAttr(meta, g.s_data);
        if (data == NULL) return NULL;
        int only_triton = reserved_superset(data);
        Py_DECREF(data);
        if (only_triton != 0) return only_triton < 0 ? NULL : Py_NewRef(Py_None);
    }
    /* data = meta.get() under the metadata scope; try: if open_counted_op(tuple(data.items())): return / except
     * TypeError: items = None */
    PyObject *data = metadata_of(meta, pending);
    if (data == NULL) return NULL;
    PyObject *result = NULL, *items = NULL;
    int step = PyDict_CheckExact(data) ? g.api->open_launch_op(data) : 0;
    if (step == 1) {
        ++g.n_enter_fast;
        result = Py_NewRef(Py_None);
    } else if (step == 0) {
        items = items_of(data);
        if (items != NULL) result = enter_general(data, items);
    } else if (PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        result = enter_general(data, Py_None);
    }
    Py_XDECREF(items);
    Py_DECREF(data);
    return result;
}

static PyObject *launch_exit(PyObject *self, PyObject *meta) {
    if (g.api == NULL) return not_configured();
    if (g.api->close_op() < 0) return NULL;
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- configure ---- */

static int intern(PyObject **slot, const char *text) {
    if (*slot == NULL) *slot = PyUnicode_InternFromString(text);
    return *slot == NULL ? -1 : 0;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *reserved, *general;
    if (!PyArg_ParseTuple(args, "OO:configure", &reserved, &general)) return NULL;
    if (!PyAnySet_Check(reserved) || !PyCallable_Check(general)) {
        PyErr_SetString(PyExc_TypeError, "configure(reserved keys (a set), general enter (callable))");
        return NULL;
    }
    const ProtonScopeAPI *api = ProtonScopeAPI_Import(1);
    if (api == NULL) return NULL;
    if (intern(&g.s_extras, "extras") || intern(&g.s_data, "data") || intern(&g.s_get, "get") ||
        intern(&g.s_items, "items") || intern(&g.s_issuperset, "issuperset") ||
        intern(&g.s_metadata_scope, "__proton_launch_metadata"))
        return NULL;
    Py_XSETREF(g.reserved, Py_NewRef(reserved));
    Py_XSETREF(g.general, Py_NewRef(general));
    g.api = api;
    Py_RETURN_NONE;
}

static PyObject *stats(PyObject *self, PyObject *unused) {
    return Py_BuildValue("{sKsK}", "enter_fast", g.n_enter_fast, "enter_slow", g.n_enter_slow);
}

static PyMethodDef methods[] = {
    {"launch_enter", launch_enter, METH_O, "Triton's enter hook (triton_hook.launch_enter, natively)."},
    {"launch_exit", launch_exit, METH_O, "Triton's exit hook (triton_hook.launch_exit, natively)."},
    {"configure", configure, METH_VARARGS,
     "configure(reserved_keys, general_enter): Triton's own metadata keys and the Python remainder of the enter "
     "hook; takes the core's scope engine (ImportError where the core was built without it)."},
    {"stats", stats, METH_NOARGS,
     "Enter hook calls per path since import: enter_fast (the core's cached step), enter_slow (Python code). "
     "How the core's step and close_op ran: proton_core._scope_fast.engine_counts()."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "proton_frameworks._triton_fast",
    "hook='triton''s launch hooks in C (see proton_frameworks.triton_hook).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__triton_fast(void) {
#ifdef Py_GIL_DISABLED
    PyErr_SetString(PyExc_ImportError, "proton_frameworks._triton_fast needs the GIL: the Python hooks run here");
    return NULL;
#else
    return PyModule_Create(&module);
#endif
}
