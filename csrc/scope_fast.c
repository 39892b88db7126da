/* proton.scope's __enter__ and __exit__ in C: a scope in the user's training step runs no Python frame.
 *
 * A scope is the one part of the core that runs inside the user's loop: a step opens a few, and on a
 * GPU host each Python-coded enter + exit took 2 µs in a loop and about 7 µs inside a training step
 * (cold caches after the launches around it), 2-3 % of a 1 ms step.  ScopeBase is the base class of
 * proton_core.scope.scope; its two methods perform the plain case of the Python ones (scope._enter,
 * scope._exit in proton_core/scope.py) on the same objects, in the same order:
 *
 *   init   a non-empty str name and no metrics: stored; anything else is checked by scope._init_check first.
 *   enter  not active (MANAGER.active empty): opened.append((self, False, 0)).  Active: the settlers
 *          (context.SETTLERS, usually none) are called first; then, with no state and
 *          no op on this thread: parent = the innermost scope's id (ROOT_ID without one); the id is the one
 *          this object found last time under the same parent, else the context tree's
 *          index[(parent, SCOPE, name)], else TREE.child(parent, SCOPE, name); stack.append((id, name, monotonic ns));
 *          current = id; every one of MANAGER.setters is called with id; opened.append((self, True, 0)).
 *   exit   this object's entry is the last one of opened: it is removed; if it pushed and a scope is
 *          open, the innermost scope must be this one (same name), no tracing session may be open and
 *          no state or op set: stack.pop(); current = the new innermost id (or ROOT_ID); the setters.
 *
 * enter_scope(name) and exit_scope([name]), the function pair, take the same steps without the ``opened``
 * entry (enter_scope returns the id, exit_scope the closed scope's id); with any other argument they go to
 * the Python functions (scope._enter_scope, _exit_scope), as do all their non-plain cases.
 *
 * Anything else (a subclass such as cpu_timed_scope, metrics, a state or op on top, a tracing session,
 * interleaved generators, a name mismatch, an attribute of an unexpected type) goes to the Python methods,
 * which then do everything, raising what they raise.  The objects come from proton_core.scope's
 * fast_protocol() (version 1); configure(None) sends every call to Python (tests, PROTON_PURE_PYTHON).
 * Everything runs with the GIL held; free-threaded builds are refused at import (Python runs there).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

#include "engine.h"

static struct {
    int on;
    /* scope_objects(): the scope type whose plain instances run here, and the Python path's functions */
    PyObject *plain_type, *slow_enter, *slow_exit;
    PyObject *check; /* scope._init_check(name, metrics): the constructor's checks that are not plain */
    PyObject *slow_enter_scope, *slow_exit_scope; /* scope._enter_scope / _exit_scope, the Python functions */
    PyObject *s_stack, *s_opened, *s_current, *s_state, *s_op, *s_active, *s_tracing, *s_triton_op, *s_metrics;
    PyObject *zero;
    unsigned long long n_enter_fast, n_enter_slow, n_exit_fast, n_exit_slow;
} g;

typedef struct {
    PyObject_HEAD
    PyObject *name;    /* str */
    PyObject *metrics; /* None, or the user's {name: number} */
    PyObject *ids;     /* the Python path's cache: {parent context id: this scope's id under it}, or NULL */
    PyObject *parent;  /* this path's one-entry cache: the last parent id ... */
    PyObject *ctx;     /* ... and this scope's id under it (ids are never reused: it never goes stale) */
    PyObject *weakrefs;
} ScopeBase;

/* ------------------------------------------------------------------ helpers ---- */

/* The thread's dict items this file reads, all borrowed from d (a new reference the caller releases). */
typedef struct {
    PyObject *d, *stack, *opened;
    int plain; /* no state and no op set */
} Thread;

/* 1: filled; 0: not the shapes expected (Python decides); -1: an exception. */
static int thread_get(Thread *t) {
    t->d = engine_thread_dict(); /* the threading.local's own dict for this thread, kept by the engine */
    if (t->d == NULL) return -1;
    Py_INCREF(t->d);
    t->stack = PyDict_GetItemWithError(t->d, g.s_stack);
    t->opened = t->stack ? PyDict_GetItemWithError(t->d, g.s_opened) : NULL;
    PyObject *state = t->opened ? PyDict_GetItemWithError(t->d, g.s_state) : NULL;
    PyObject *op = state ? PyDict_GetItemWithError(t->d, g.s_op) : NULL;
    if (op == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!PyList_CheckExact(t->stack) || !PyList_CheckExact(t->opened)) return 0;
    t->plain = state == Py_None && op == Py_None;
    return 1;
}

static PyObject *entry3(PyObject *a, PyObject *b, PyObject *c) { return PyTuple_Pack(3, a, b, c); }

/* ------------------------------------------------------------------ shared steps ---- */

/* `_push`'s steps once the id is known: stack.append((ctx, name, now)); current = ctx; the setters. */
static int push_plain(Thread *t, PyObject *ctx, PyObject *name) {
    PyObject *now = engine_now();
    PyObject *e = now ? entry3(ctx, name, now) : NULL;
    Py_XDECREF(now);
    int ok = e != NULL && PyList_Append(t->stack, e) == 0 && PyDict_SetItem(t->d, g.s_current, ctx) == 0 &&
             engine_call_setters(ctx) == 0;
    Py_XDECREF(e);
    return ok ? 0 : -1;
}

/* `_pop`'s steps without tracing, state or op: stack.pop(); current = the new innermost id; the setters. */
static int pop_plain(Thread *t, Py_ssize_t depth) {
    engine_drop_last(t->stack);
    PyObject *parent = engine_top(t->stack);
    if (parent == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "proton: a scope stack entry is not (id, name, start)");
        return -1;
    }
    Py_INCREF(parent);
    int rc = PyDict_SetItem(t->d, g.s_current, parent) == 0 && engine_call_setters(parent) == 0 ? 0 : -1;
    Py_DECREF(parent);
    return rc;
}

/* Whether the innermost entry of the stack (depth > 0) is named `name` (an exact str): 1, 0. */
static int top_named(PyObject *stack, Py_ssize_t depth, PyObject *name) {
    PyObject *top = PyList_GET_ITEM(stack, depth - 1);
    if (!PyTuple_CheckExact(top) || PyTuple_GET_SIZE(top) != 3 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(top, 1)))
        return 0;
    return PyTuple_GET_ITEM(top, 1) == name || PyUnicode_Compare(PyTuple_GET_ITEM(top, 1), name) == 0;
}

/* The Python function ``fn`` with the caller's arguments, counted as a call handed to Python. */
static PyObject *slow_call(PyObject *fn, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                           unsigned long long *counter) {
    ++*counter;
    return PyObject_Vectorcall(fn, args, nargsf, kwnames);
}

/* ------------------------------------------------------------------ scope: enter / exit ---- */

static PyObject *slow_enter(ScopeBase *self) {
    PyObject *arg = (PyObject *)self;
    return slow_call(g.slow_enter, &arg, 1, NULL, &g.n_enter_slow);
}

static PyObject *scope_enter(ScopeBase *self, PyObject *unused) {
    if (!g.on || Py_TYPE(self) != (PyTypeObject *)g.plain_type || self->metrics != Py_None || self->name == NULL ||
        !PyUnicode_CheckExact(self->name))
        return slow_enter(self);
    int on = engine_manager_has(g.s_active);
    if (on < 0 || (on && engine_settle() < 0)) return NULL;
    Thread t;
    int got = thread_get(&t);
    PyObject *result = NULL;
    if (got <= 0 || (on && !t.plain)) {
        Py_XDECREF(t.d);
        return got < 0 ? NULL : slow_enter(self);
    }
    if (!on) {
        PyObject *e = entry3((PyObject *)self, Py_False, g.zero);
        if (e != NULL && PyList_Append(t.opened, e) == 0) result = Py_NewRef(self);
        Py_XDECREF(e);
        Py_DECREF(t.d);
        g.n_enter_fast++;
        return result;
    }
    Py_INCREF(t.stack);
    Py_INCREF(t.opened);
    PyObject *parent = engine_top(t.stack);
    if (parent == NULL) {
        result = slow_enter(self);
        goto done;
    }
    Py_INCREF(parent);
    PyObject *ctx = NULL;
    if (self->parent != NULL && (self->parent == parent || (PyLong_CheckExact(parent) &&
                                 PyLong_CheckExact(self->parent) && PyObject_RichCompareBool(self->parent, parent, Py_EQ) == 1))) {
        ctx = Py_NewRef(self->ctx);
    } else if ((ctx = engine_scope_child(parent, self->name)) != NULL) {
        Py_XSETREF(self->parent, Py_NewRef(parent));
        Py_XSETREF(self->ctx, Py_NewRef(ctx));
    }
    Py_DECREF(parent);
    if (ctx != NULL) {
        /* The (self, True, 0) entry is made each time: kept on the object, it would make every scope a
         * reference cycle. */
        PyObject *e = push_plain(&t, ctx, self->name) == 0 ? entry3((PyObject *)self, Py_True, g.zero) : NULL;
        if (e != NULL && PyList_Append(t.opened, e) == 0) result = Py_NewRef(self);
        Py_XDECREF(e);
        Py_DECREF(ctx);
        g.n_enter_fast++;
    }
done:
    Py_DECREF(t.stack);
    Py_DECREF(t.opened);
    Py_DECREF(t.d);
    return result;
}

static PyObject *slow_exit(ScopeBase *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *call[4] = {(PyObject *)self, NULL, NULL, NULL};
    for (Py_ssize_t i = 0; i < nargs && i < 3; ++i) call[i + 1] = args[i];
    return slow_call(g.slow_exit, call, 1 + (nargs < 3 ? nargs : 3), NULL, &g.n_exit_slow);
}

static PyObject *scope_exit(ScopeBase *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!g.on || Py_TYPE(self) != (PyTypeObject *)g.plain_type || nargs > 3 || self->name == NULL)
        return slow_exit(self, args, nargs);
    Thread t;
    int got = thread_get(&t);
    if (got <= 0) {
        Py_XDECREF(t.d);
        return got < 0 ? NULL : slow_exit(self, args, nargs);
    }
    Py_ssize_t n = PyList_GET_SIZE(t.opened);
    PyObject *mine = n ? PyList_GET_ITEM(t.opened, n - 1) : NULL;
    if (mine == NULL || !PyTuple_CheckExact(mine) || PyTuple_GET_SIZE(mine) != 3 ||
        PyTuple_GET_ITEM(mine, 0) != (PyObject *)self) {
        Py_DECREF(t.d);
        return slow_exit(self, args, nargs); /* interleaved generators, or an exit without its enter */
    }
    PyObject *result = NULL;
    Py_INCREF(t.stack);
    Py_INCREF(t.opened);
    Py_ssize_t depth = PyList_GET_SIZE(t.stack);
    if (PyTuple_GET_ITEM(mine, 1) == Py_False || depth == 0) { /* it pushed nothing, or stack was reset */
        engine_drop_last(t.opened);
        result = Py_NewRef(Py_None);
        g.n_exit_fast++;
        goto done;
    }
    int plain = t.plain && PyTuple_GET_ITEM(mine, 1) == Py_True && top_named(t.stack, depth, self->name);
    int traced = plain ? engine_manager_has(g.s_tracing) : 1;
    if (traced < 0) goto done;
    if (traced) {
        result = slow_exit(self, args, nargs); /* a mismatch, a state or op, tracing: Python's steps */
        goto done;
    }
    engine_drop_last(t.opened);
    if (pop_plain(&t, depth) == 0) result = Py_NewRef(Py_None);
    g.n_exit_fast++;
done:
    Py_DECREF(t.stack);
    Py_DECREF(t.opened);
    Py_DECREF(t.d);
    return result;
}

/* ------------------------------------------------------------------ enter_scope / exit_scope ---- */

/* Only triton_op=False and metrics=None among the keywords (or none given): 1, else 0. */
static int plain_keywords(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
        if (value == Py_False && PyUnicode_Compare(key, g.s_triton_op) == 0) continue;
        if (value == Py_None && PyUnicode_Compare(key, g.s_metrics) == 0) continue;
        return 0;
    }
    return 1;
}

/* enter_scope(name, *, triton_op=False, metrics=None): the plain case, else scope.enter_scope's Python. */
static PyObject *fast_enter_scope(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!g.on || nargs != 1 || !PyUnicode_CheckExact(args[0]) || PyUnicode_GET_LENGTH(args[0]) == 0 ||
        !plain_keywords(args, nargs, kwnames))
        return slow_call(g.slow_enter_scope, args, nargsf, kwnames, &g.n_enter_slow);
    int on = engine_manager_has(g.s_active);
    if (on <= 0) {
        g.n_enter_fast += on == 0;
        return on < 0 ? NULL : PyLong_FromLong(-1);
    }
    if (engine_settle() < 0) return NULL;
    Thread t;
    int got = thread_get(&t);
    if (got <= 0 || !t.plain) {
        Py_XDECREF(t.d);
        return got < 0 ? NULL : slow_call(g.slow_enter_scope, args, nargsf, kwnames, &g.n_enter_slow);
    }
    PyObject *result = NULL;
    Py_INCREF(t.stack);
    PyObject *parent = engine_top(t.stack);
    if (parent == NULL) {
        result = slow_call(g.slow_enter_scope, args, nargsf, kwnames, &g.n_enter_slow);
    } else {
        Py_INCREF(parent);
        PyObject *ctx = engine_scope_child(parent, args[0]);
        Py_DECREF(parent);
        if (ctx != NULL && push_plain(&t, ctx, args[0]) == 0) result = Py_NewRef(ctx);
        Py_XDECREF(ctx);
        g.n_enter_fast++;
    }
    Py_DECREF(t.stack);
    Py_DECREF(t.d);
    return result;
}

/* exit_scope(name=None, *, triton_op=False, metrics=None): the plain case, else scope.exit_scope's Python. */
static PyObject *fast_exit_scope(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *name = nargs == 1 ? args[0] : Py_None;
    if (!g.on || nargs > 1 || (name != Py_None && !PyUnicode_CheckExact(name)) || !plain_keywords(args, nargs, kwnames))
        return slow_call(g.slow_exit_scope, args, nargsf, kwnames, &g.n_exit_slow);
    Thread t;
    int got = thread_get(&t);
    Py_ssize_t depth = got > 0 ? PyList_GET_SIZE(t.stack) : 0;
    if (got <= 0 || !t.plain || depth == 0 || engine_top(t.stack) == NULL ||
        (name != Py_None && !top_named(t.stack, depth, name))) {
        Py_XDECREF(t.d); /* no scope open, a mismatch, a state or op: Python raises or recomputes */
        return got < 0 ? NULL : slow_call(g.slow_exit_scope, args, nargsf, kwnames, &g.n_exit_slow);
    }
    int traced = engine_manager_has(g.s_tracing);
    if (traced != 0) {
        Py_DECREF(t.d);
        return traced < 0 ? NULL : slow_call(g.slow_exit_scope, args, nargsf, kwnames, &g.n_exit_slow);
    }
    Py_INCREF(t.stack);
    PyObject *ctx = Py_NewRef(engine_top(t.stack));
    PyObject *result = pop_plain(&t, depth) == 0 ? Py_NewRef(ctx) : NULL;
    Py_DECREF(ctx);
    g.n_exit_fast++;
    Py_DECREF(t.stack);
    Py_DECREF(t.d);
    return result;
}

/* ------------------------------------------------------------------ the type ---- */

static int scope_traverse(ScopeBase *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->name);
    Py_VISIT(self->metrics);
    Py_VISIT(self->ids);
    Py_VISIT(self->parent);
    Py_VISIT(self->ctx);
    return 0;
}

static int scope_clear(ScopeBase *self) {
    Py_CLEAR(self->name);
    Py_CLEAR(self->metrics);
    Py_CLEAR(self->ids);
    Py_CLEAR(self->parent);
    Py_CLEAR(self->ctx);
    return 0;
}

static void scope_dealloc(ScopeBase *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL) PyObject_ClearWeakRefs((PyObject *)self);
    scope_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *scope_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    ScopeBase *self = (ScopeBase *)type->tp_alloc(type, 0);
    if (self != NULL) self->metrics = Py_NewRef(Py_None);
    return (PyObject *)self;
}

/* scope(name, metrics=None): a non-empty str name and no metrics here; anything else through
 * scope._init_check(name, metrics), which raises what the Python constructor raises. */
static int scope_init(ScopeBase *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"name", "metrics", NULL};
    PyObject *name, *metrics = Py_None;
    if (kwds == NULL && PyTuple_GET_SIZE(args) == 1) { /* scope("name"): the usual call, parsed by hand */
        name = PyTuple_GET_ITEM(args, 0);
    } else if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:scope", kwlist, &name, &metrics)) {
        return -1;
    }
    if (!PyUnicode_CheckExact(name) || PyUnicode_GET_LENGTH(name) == 0 || metrics != Py_None) {
        if (g.check == NULL) {
            PyErr_SetString(PyExc_TypeError, "proton_core._scope_fast is not configured");
            return -1;
        }
        PyObject *r = PyObject_CallFunctionObjArgs(g.check, name, metrics, NULL);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    Py_XSETREF(self->name, Py_NewRef(name));
    Py_XSETREF(self->metrics, Py_NewRef(metrics));
    return 0;
}

static PyMethodDef scope_methods[] = {
    {"__enter__", (PyCFunction)scope_enter, METH_NOARGS, "Open the scope on this thread."},
    {"__exit__", (PyCFunction)(void (*)(void))scope_exit, METH_FASTCALL, "Close the scope on this thread."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef scope_members[] = {
    {"name", T_OBJECT_EX, offsetof(ScopeBase, name), 0, "the scope's name"},
    {"metrics", T_OBJECT, offsetof(ScopeBase, metrics), 0, "metrics added at each entry, or None"},
    {"_ids", T_OBJECT, offsetof(ScopeBase, ids), 0, "the Python path's {parent context id: this scope's id}, or None"},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(ScopeBase, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot scope_slots[] = {
    {Py_tp_doc, "ScopeBase(name, metrics=None)\n--\n\nproton.scope's constructor, enter and exit in C (csrc/scope_fast.c)."},
    {Py_tp_new, scope_new},
    {Py_tp_init, scope_init},
    {Py_tp_dealloc, scope_dealloc},
    {Py_tp_traverse, scope_traverse},
    {Py_tp_clear, scope_clear},
    {Py_tp_methods, scope_methods},
    {Py_tp_members, scope_members},
    {0, NULL},
};

static PyType_Spec scope_spec = {
    "proton_core._scope_fast.ScopeBase", sizeof(ScopeBase), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, scope_slots,
};

/* ------------------------------------------------------------------ module ---- */

/* configure(objects): a dict from proton_core.scope.scope_objects(); None sends every call to Python (tests,
 * PROTON_PURE_PYTHON).  The scope engine (csrc/engine.c) is configured on its own, by configure_engine. */
static PyObject *configure(PyObject *mod, PyObject *objects) {
    if (objects == Py_None) {
        g.on = 0;
        Py_RETURN_NONE;
    }
    static const char *names[] = {"plain_type", "enter", "exit", "init_check", "enter_scope", "exit_scope"};
    PyObject **slots[] = {&g.plain_type, &g.slow_enter, &g.slow_exit, &g.check, &g.slow_enter_scope, &g.slow_exit_scope};
    PyObject *found[6];
    if (!PyDict_Check(objects)) return PyErr_Format(PyExc_TypeError, "configure takes the dict of scope_objects()");
    for (int i = 0; i < 6; ++i)
        if ((found[i] = PyDict_GetItemString(objects, names[i])) == NULL)
            return PyErr_Format(PyExc_KeyError, "proton_core._scope_fast.configure: %s missing", names[i]);
    if (!PyType_Check(found[0])) return PyErr_Format(PyExc_TypeError, "plain_type must be a type");
    for (int i = 0; i < 6; ++i) Py_XSETREF(*slots[i], Py_NewRef(found[i]));
    g.on = 1;
    Py_RETURN_NONE;
}

static PyObject *counts(PyObject *mod, PyObject *unused) {
    return Py_BuildValue("{sKsKsKsK}", "enter_fast", g.n_enter_fast, "enter_slow", g.n_enter_slow, "exit_fast",
                         g.n_exit_fast, "exit_slow", g.n_exit_slow);
}

static PyObject *configure_engine(PyObject *mod, PyObject *objects) {
    if (engine_configure(objects) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *engine_counts_py(PyObject *mod, PyObject *unused) { return engine_counts(); }

static PyObject *capi_py(PyObject *mod, PyObject *args) { return engine_capi_call(args); }

static PyMethodDef module_methods[] = {
    {"configure_engine", configure_engine, METH_O,
     "configure_engine(objects dict | None): the core's objects behind the C API (_C_API); Python only."},
    {"engine_counts", engine_counts_py, METH_NOARGS, "C API calls taken natively / handed to Python / recalled."},
    {"capi", capi_py, METH_VARARGS, "capi(function, argument=None, resolve=None): one call through the C API's table (tests)."},
    {"configure", configure, METH_O, "configure(scope_objects() | None): the plain scope path in C, or all in Python."},
    {"counts", counts, METH_NOARGS, "Calls taken here (fast) and handed to Python (slow), for tests."},
    {"enter_scope", (PyCFunction)(void (*)(void))fast_enter_scope, METH_FASTCALL | METH_KEYWORDS,
     "enter_scope($module, /, name, *, triton_op=False, metrics=None)\n--\n\n"
     "Open a scope (or, with triton_op, an op) on this thread; return its id (-1: profiling off)."},
    {"exit_scope", (PyCFunction)(void (*)(void))fast_exit_scope, METH_FASTCALL | METH_KEYWORDS,
     "exit_scope($module, /, name=None, *, triton_op=False, metrics=None)\n--\n\n"
     "Close the innermost scope (or the op); name, if given, must match it. Returns the closed scope's id."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "proton_core._scope_fast",
    "proton.scope's enter and exit in C; proton_core.scope falls back to Python without it.", -1, module_methods,
};

#define INTERN(field, text) \
    if ((g.field = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC PyInit__scope_fast(void) {
#ifdef Py_GIL_DISABLED
    PyErr_SetString(PyExc_ImportError, "proton_core._scope_fast needs the GIL (the Python scope path runs instead)");
    return NULL;
#endif
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    INTERN(s_stack, "stack");
    INTERN(s_opened, "opened");
    INTERN(s_current, "current");
    INTERN(s_state, "state");
    INTERN(s_op, "op");
    INTERN(s_active, "active");
    INTERN(s_tracing, "tracing");
    INTERN(s_triton_op, "triton_op");
    INTERN(s_metrics, "metrics");
    if ((g.zero = PyLong_FromLong(0)) == NULL) return NULL;
    if (engine_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *type = PyType_FromSpec(&scope_spec);
    if (type == NULL || PyModule_AddObject(m, "ScopeBase", type) < 0) {
        Py_XDECREF(type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
