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

#define PROTOCOL_VERSION 1

static struct {
    int on;
    /* (1, thread, index, child, scope_kind, manager, root_id, plain_type, slow_enter, slow_exit,
     * init_check, enter_scope, exit_scope[, settlers]) */
    PyObject *thread, *index, *child, *kind, *manager, *root, *plain_type, *slow_enter, *slow_exit;
    PyObject *check; /* scope._init_check(name, metrics): the constructor's checks that are not plain */
    PyObject *slow_enter_scope, *slow_exit_scope; /* scope._enter_scope / _exit_scope, the Python functions */
    PyObject *settlers; /* context.SETTLERS: called before a scope opens (plugins' own frames become scopes), or NULL */
    PyObject *s_dict, *s_stack, *s_opened, *s_current, *s_state, *s_op, *s_active, *s_setters, *s_tracing,
        *s_triton_op, *s_metrics;
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

/* context.settle(): each of the settlers called (usually none), before the stack is read to open a scope. */
static int run_settlers(void) {
    if (g.settlers == NULL) return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(g.settlers); ++i) {
        PyObject *settler = Py_NewRef(PyList_GET_ITEM(g.settlers, i));
        PyObject *r = PyObject_CallNoArgs(settler);
        Py_DECREF(settler);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 0;
}

static int is_true(PyObject *v) {
    if (v == Py_True) return 1;
    if (v == Py_False || v == Py_None) return 0;
    if (PyTuple_CheckExact(v)) return PyTuple_GET_SIZE(v) != 0;
    return PyObject_IsTrue(v);
}

/* `for setter in MANAGER.setters: setter(ctx)`: 0, or -1 with the exception. */
static int call_setters(PyObject *ctx) {
    PyObject *setters = PyObject_GetAttr(g.manager, g.s_setters);
    if (setters == NULL) return -1;
    PyObject *seq = PySequence_Fast(setters, "MANAGER.setters is not iterable");
    Py_DECREF(setters);
    if (seq == NULL) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && rc == 0; ++i) {
        PyObject *r = PyObject_CallOneArg(PySequence_Fast_GET_ITEM(seq, i), ctx);
        if (r == NULL) rc = -1;
        Py_XDECREF(r);
    }
    Py_DECREF(seq);
    return rc;
}

/* The id of the innermost scope of a stack list (borrowed), ROOT_ID for an empty one; NULL: not a plain entry. */
static PyObject *top_id(PyObject *stack) {
    Py_ssize_t n = PyList_GET_SIZE(stack);
    if (n == 0) return g.root;
    PyObject *top = PyList_GET_ITEM(stack, n - 1);
    return PyTuple_CheckExact(top) && PyTuple_GET_SIZE(top) == 3 ? PyTuple_GET_ITEM(top, 0) : NULL;
}

/* The thread's dict items this file reads, all borrowed from d (a new reference the caller releases). */
typedef struct {
    PyObject *d, *stack, *opened;
    int plain; /* no state and no op set */
} Thread;

/* 1: filled; 0: not the shapes expected (Python decides); -1: an exception. */
static int thread_get(Thread *t) {
    t->d = PyObject_GetAttr(g.thread, g.s_dict); /* the threading.local's own dict for this thread */
    if (t->d == NULL) return -1;
    if (!PyDict_CheckExact(t->d)) return 0;
    t->stack = PyDict_GetItemWithError(t->d, g.s_stack);
    t->opened = t->stack ? PyDict_GetItemWithError(t->d, g.s_opened) : NULL;
    PyObject *state = t->opened ? PyDict_GetItemWithError(t->d, g.s_state) : NULL;
    PyObject *op = state ? PyDict_GetItemWithError(t->d, g.s_op) : NULL;
    if (op == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!PyList_CheckExact(t->stack) || !PyList_CheckExact(t->opened)) return 0;
    t->plain = state == Py_None && op == Py_None;
    return 1;
}

/* `list.pop()` of the last item (n > 0), keeping the list's array: list_resize would free a short stack's
 * array when it empties (and shrink it below half), so every push/pop pair paid a malloc and a free. */
static void drop_last(PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *item = PyList_GET_ITEM(list, n - 1);
    Py_SET_SIZE(list, n - 1);
    Py_DECREF(item);
}

static PyObject *entry3(PyObject *a, PyObject *b, PyObject *c) { return PyTuple_Pack(3, a, b, c); }

static PyObject *monotonic_ns(void) { /* time.monotonic_ns()'s clock */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return PyLong_FromLongLong((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

/* ------------------------------------------------------------------ shared steps ---- */

/* `index.get((parent, SCOPE, name)) or TREE.child(parent, SCOPE, name)`: a new reference, or NULL. */
static PyObject *child_id(PyObject *parent, PyObject *name) {
    PyObject *key = entry3(parent, g.kind, name);
    PyObject *ctx = key ? PyDict_GetItemWithError(g.index, key) : NULL;
    Py_XDECREF(key);
    if (ctx != NULL && is_true(ctx) == 1) return Py_NewRef(ctx);
    if (PyErr_Occurred()) return NULL;
    return PyObject_CallFunctionObjArgs(g.child, parent, g.kind, name, NULL);
}

/* `_push`'s steps once the id is known: stack.append((ctx, name, now)); current = ctx; the setters. */
static int push_plain(Thread *t, PyObject *ctx, PyObject *name) {
    PyObject *now = monotonic_ns();
    PyObject *e = now ? entry3(ctx, name, now) : NULL;
    Py_XDECREF(now);
    int ok = e != NULL && PyList_Append(t->stack, e) == 0 && PyDict_SetItem(t->d, g.s_current, ctx) == 0 &&
             call_setters(ctx) == 0;
    Py_XDECREF(e);
    return ok ? 0 : -1;
}

/* `_pop`'s steps without tracing, state or op: stack.pop(); current = the new innermost id; the setters. */
static int pop_plain(Thread *t, Py_ssize_t depth) {
    drop_last(t->stack);
    PyObject *parent = top_id(t->stack);
    if (parent == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "proton: a scope stack entry is not (id, name, start)");
        return -1;
    }
    Py_INCREF(parent);
    int rc = PyDict_SetItem(t->d, g.s_current, parent) == 0 && call_setters(parent) == 0 ? 0 : -1;
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

/* MANAGER.<attr> (active, tracing: tuples of sessions) is non-empty: 1, 0, -1 with an exception. */
static int manager_has(PyObject *attr) {
    PyObject *v = PyObject_GetAttr(g.manager, attr);
    if (v == NULL) return -1;
    int yes = is_true(v);
    Py_DECREF(v);
    return yes;
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
    int on = manager_has(g.s_active);
    if (on < 0 || (on && run_settlers() < 0)) return NULL;
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
    PyObject *parent = top_id(t.stack);
    if (parent == NULL) {
        result = slow_enter(self);
        goto done;
    }
    Py_INCREF(parent);
    PyObject *ctx = NULL;
    if (self->parent != NULL && (self->parent == parent || (PyLong_CheckExact(parent) &&
                                 PyLong_CheckExact(self->parent) && PyObject_RichCompareBool(self->parent, parent, Py_EQ) == 1))) {
        ctx = Py_NewRef(self->ctx);
    } else if ((ctx = child_id(parent, self->name)) != NULL) {
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
        drop_last(t.opened);
        result = Py_NewRef(Py_None);
        g.n_exit_fast++;
        goto done;
    }
    int plain = t.plain && PyTuple_GET_ITEM(mine, 1) == Py_True && top_named(t.stack, depth, self->name);
    int traced = plain ? manager_has(g.s_tracing) : 1;
    if (traced < 0) goto done;
    if (traced) {
        result = slow_exit(self, args, nargs); /* a mismatch, a state or op, tracing: Python's steps */
        goto done;
    }
    drop_last(t.opened);
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
    int on = manager_has(g.s_active);
    if (on <= 0) {
        g.n_enter_fast += on == 0;
        return on < 0 ? NULL : PyLong_FromLong(-1);
    }
    if (run_settlers() < 0) return NULL;
    Thread t;
    int got = thread_get(&t);
    if (got <= 0 || !t.plain) {
        Py_XDECREF(t.d);
        return got < 0 ? NULL : slow_call(g.slow_enter_scope, args, nargsf, kwnames, &g.n_enter_slow);
    }
    PyObject *result = NULL;
    Py_INCREF(t.stack);
    PyObject *parent = top_id(t.stack);
    if (parent == NULL) {
        result = slow_call(g.slow_enter_scope, args, nargsf, kwnames, &g.n_enter_slow);
    } else {
        Py_INCREF(parent);
        PyObject *ctx = child_id(parent, args[0]);
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
    if (got <= 0 || !t.plain || depth == 0 || top_id(t.stack) == NULL ||
        (name != Py_None && !top_named(t.stack, depth, name))) {
        Py_XDECREF(t.d); /* no scope open, a mismatch, a state or op: Python raises or recomputes */
        return got < 0 ? NULL : slow_call(g.slow_exit_scope, args, nargsf, kwnames, &g.n_exit_slow);
    }
    int traced = manager_has(g.s_tracing);
    if (traced != 0) {
        Py_DECREF(t.d);
        return traced < 0 ? NULL : slow_call(g.slow_exit_scope, args, nargsf, kwnames, &g.n_exit_slow);
    }
    Py_INCREF(t.stack);
    PyObject *ctx = Py_NewRef(top_id(t.stack));
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

static void forget_protocol(void) {
    g.on = 0;
    Py_CLEAR(g.thread);
    Py_CLEAR(g.index);
    Py_CLEAR(g.child);
    Py_CLEAR(g.kind);
    Py_CLEAR(g.manager);
    Py_CLEAR(g.root);
    Py_CLEAR(g.plain_type);
    Py_CLEAR(g.slow_enter);
    Py_CLEAR(g.slow_exit);
    Py_CLEAR(g.check);
    Py_CLEAR(g.slow_enter_scope);
    Py_CLEAR(g.slow_exit_scope);
    Py_CLEAR(g.settlers);
}

static PyObject *configure(PyObject *mod, PyObject *protocol) {
    if (protocol == Py_None) { /* every call to the Python methods */
        g.on = 0;
        Py_RETURN_NONE;
    }
    PyObject *thread, *index, *child, *kind, *manager, *root, *plain, *enter, *exit_, *check, *enter_fn, *exit_fn;
    PyObject *settlers = NULL;
    int version;
    if (!PyTuple_Check(protocol) || PyTuple_GET_SIZE(protocol) < 1 ||
        !PyArg_ParseTuple(protocol, "iOO!OUOO!O!OOOOO|O!;proton_core._scope_fast.configure: a version-1 protocol tuple",
                          &version, &thread, &PyDict_Type, &index, &child, &kind, &manager, &PyLong_Type, &root,
                          &PyType_Type, &plain, &enter, &exit_, &check, &enter_fn, &exit_fn, &PyList_Type, &settlers))
        return NULL;
    if (version != PROTOCOL_VERSION) return PyErr_Format(PyExc_ValueError, "scope protocol version %d, not 1", version);
    forget_protocol();
    g.thread = Py_NewRef(thread);
    g.index = Py_NewRef(index);
    g.child = Py_NewRef(child);
    g.kind = Py_NewRef(kind);
    g.manager = Py_NewRef(manager);
    g.root = Py_NewRef(root);
    g.plain_type = Py_NewRef(plain);
    g.slow_enter = Py_NewRef(enter);
    g.slow_exit = Py_NewRef(exit_);
    g.check = Py_NewRef(check);
    g.slow_enter_scope = Py_NewRef(enter_fn);
    g.slow_exit_scope = Py_NewRef(exit_fn);
    g.settlers = settlers != NULL ? Py_NewRef(settlers) : NULL;
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
    {"configure", configure, METH_O, "configure(protocol tuple, version 1) or configure(None): Python only."},
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
    INTERN(s_dict, "__dict__");
    INTERN(s_stack, "stack");
    INTERN(s_opened, "opened");
    INTERN(s_current, "current");
    INTERN(s_state, "state");
    INTERN(s_op, "op");
    INTERN(s_active, "active");
    INTERN(s_setters, "setters");
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
