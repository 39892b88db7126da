/* The scope engine's C API (proton_core/include/proton_core/scope_api.h): what other extensions call.
 *
 * Each function performs the steps of its Python counterpart in proton_core (scope.open_unchecked,
 * close_unchecked, open_op_unchecked, close_op_unchecked, launch_ops.open_counted_op) on the same objects
 * and in the same order, taking the plain cases here and handing every other case to that Python function,
 * which then does everything.  Extensions therefore never see how the core keeps a thread's scopes: before
 * this table, four of them read the core's threading.local and its dicts by attribute name.
 *
 * The objects come from proton_core.scope.engine_objects() through configure(); unconfigured (the Python
 * path forced, PROTON_PURE_PYTHON=1) every function calls the Python one.
 *
 * Per thread: the core's THREAD is a threading.local; its per-thread __dict__ is fetched once per Python
 * thread state and kept, with the last hits of the launch step, in a capsule in that thread state's own dict
 * (PyThreadState_GetDict): it lives exactly as long as the thread state.  Everything runs with the GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <structmember.h>
#include <time.h>

#include "engine.h"
#include "proton_core/scope_api.h"

static struct {
    int on, pure; /* configured; every call to the Python functions (PROTON_PURE_PYTHON) */
    PyObject *thread, *index, *child, *scope_kind, *op_kind, *manager, *activity, *entries, *settlers;
    PyObject *py_open_scope, *py_close_scope, *py_open_op, *py_close_op, *py_open_counted_op, *ops, *clears;
    PyObject *py_current, *py_innermost, *py_reserve;
    PyObject *tls_key, *s_dict, *s_stack, *s_current, *s_state, *s_op, *s_setters, *s_tracing, *s_any, *s_generation;
    PyObject *zero;
    Py_ssize_t any_offset; /* where ACTIVITY's `any` slot lies in the object (0: read it through getattr) */
    /* calls per function and path: taken here, handed to Python, answered from a remembered hit */
    unsigned long long scope_fast, scope_slow, op_close_fast, op_close_slow, launch_fast, launch_slow, launch_recalled;
} E;

/* ------------------------------------------------------------------ per thread ---- */

#define REMEMBERED 8
typedef struct { /* a hit of the launch step: ops[(base, items)] was `hit` while clears[0] was `clears` */
    PyObject *items, *base, *hit;
    Py_ssize_t clears;
} Remembered;

/* (parent id, name object) -> the id of that scope: ids are never reused, so an entry never goes stale; names
 * of per-event sources repeat as the same objects (the nvtx plugin keeps one str per name). */
#define SCOPE_SLOTS 16
typedef struct {
    uint64_t parent;
    PyObject *name, *ctx; /* strong references, or NULL */
} ScopeSlot;

typedef struct {
    PyObject *ldict; /* THREAD.__dict__ of this thread */
    unsigned next;   /* the slot replaced next when none is stale */
    Remembered slot[REMEMBERED];
    ScopeSlot scopes[SCOPE_SLOTS];
} PerThread;

/* The last PerThread this OS thread used, and the thread state it belongs to (ids are never reused within an
 * interpreter): while that thread state runs here, its dict holds the PerThread, so the pointer is valid and
 * the dict lookup below can be skipped (two of them per scope: about 25 ns each, measured on NVTX ranges). */
static _Thread_local struct {
    uint64_t id;
    PyInterpreterState *interp;
    PerThread *pt;
} tl;

static void forget(Remembered *r) {
    Py_CLEAR(r->items);
    Py_CLEAR(r->base);
    Py_CLEAR(r->hit);
}

static void per_thread_free(PyObject *capsule) { /* with the thread state's dict: the GIL is held */
    PerThread *t = (PerThread *)PyCapsule_GetPointer(capsule, NULL);
    if (t == NULL) {
        PyErr_Clear();
        return;
    }
    for (int i = 0; i < REMEMBERED; ++i) forget(&t->slot[i]);
    for (int i = 0; i < SCOPE_SLOTS; ++i) {
        Py_CLEAR(t->scopes[i].name);
        Py_CLEAR(t->scopes[i].ctx);
    }
    Py_CLEAR(t->ldict);
    if (tl.pt == t) tl.pt = NULL; /* freed on its own OS thread: forget it here too */
    PyMem_Free(t);
}

static PerThread *per_thread_slow(PyThreadState *ts);

/* The calling thread state's PerThread, or NULL with an exception set. */
static inline PerThread *per_thread(void) {
    PyThreadState *ts = PyThreadState_Get();
    if (tl.pt != NULL && tl.id == PyThreadState_GetID(ts) && tl.interp == PyThreadState_GetInterpreter(ts))
        return tl.pt;
    return per_thread_slow(ts);
}

static PerThread *per_thread_slow(PyThreadState *ts) {
    PyObject *tdict = PyThreadState_GetDict();
    if (tdict == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "proton: no Python thread state");
        return NULL;
    }
    PyObject *capsule = PyDict_GetItemWithError(tdict, E.tls_key);
    if (capsule != NULL) {
        PerThread *t = (PerThread *)PyCapsule_GetPointer(capsule, NULL);
        if (t != NULL) {
            tl.id = PyThreadState_GetID(ts);
            tl.interp = PyThreadState_GetInterpreter(ts);
            tl.pt = t;
        }
        return t;
    }
    if (PyErr_Occurred()) return NULL;
    PyObject *d = PyObject_GetAttr(E.thread, E.s_dict); /* runs the class's __init__ on this thread's first use */
    if (d == NULL) return NULL;
    if (!PyDict_CheckExact(d)) {
        Py_DECREF(d);
        PyErr_SetString(PyExc_TypeError, "proton: the core's thread state has no plain __dict__");
        return NULL;
    }
    PerThread *t = (PerThread *)PyMem_Calloc(1, sizeof(PerThread));
    if (t == NULL) {
        Py_DECREF(d);
        PyErr_NoMemory();
        return NULL;
    }
    t->ldict = d;
    capsule = PyCapsule_New(t, NULL, per_thread_free);
    if (capsule == NULL) {
        Py_DECREF(d);
        PyMem_Free(t);
        return NULL;
    }
    int rc = PyDict_SetItem(tdict, E.tls_key, capsule);
    Py_DECREF(capsule); /* the thread state's dict holds it now, and frees it with the thread state */
    if (rc < 0) return NULL;
    tl.id = PyThreadState_GetID(ts);
    tl.interp = PyThreadState_GetInterpreter(ts);
    tl.pt = t;
    return t;
}

/* ------------------------------------------------------------------ shared steps ---- */

static int not_configured(void) {
    PyErr_SetString(PyExc_RuntimeError, "proton_core's scope engine is not configured (import proton_core first)");
    return -1;
}

static inline int truth(PyObject *v) {
    if (v == Py_True) return 1;
    if (v == Py_False || v == Py_None) return 0;
    if (PyTuple_CheckExact(v)) return PyTuple_GET_SIZE(v) != 0;
    return PyObject_IsTrue(v);
}

int engine_settle(void) {
    if (E.settlers == NULL) return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(E.settlers); ++i) {
        PyObject *settler = Py_NewRef(PyList_GET_ITEM(E.settlers, i));
        PyObject *r = PyObject_CallNoArgs(settler);
        Py_DECREF(settler);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* `for setter in MANAGER.setters: setter(ctx)`: 0, or -1 with the exception. */
int engine_call_setters(PyObject *ctx) {
    PyObject *setters = PyObject_GetAttr(E.manager, E.s_setters);
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

/* An id (a Python int) as uint64: 0, or -1 with an exception. */
static int as_id(PyObject *v, uint64_t *id) {
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "proton: a context id must be an int, not %.100s", Py_TYPE(v)->tp_name);
        return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *id = (uint64_t)x;
    return 0;
}

/* A Python function's result, an id, stored in *id: 0, or -1 with an exception. */
static int id_result(PyObject *r, uint64_t *id) {
    if (r == NULL) return -1;
    int rc = as_id(r, id);
    Py_DECREF(r);
    return rc;
}

/* The id of the innermost scope of a stack list (borrowed), zero for an empty one; NULL: not a plain entry. */
PyObject *engine_top(PyObject *stack) {
    Py_ssize_t n = PyList_GET_SIZE(stack);
    if (n == 0) return E.zero;
    PyObject *top = PyList_GET_ITEM(stack, n - 1);
    return PyTuple_CheckExact(top) && PyTuple_GET_SIZE(top) == 3 && PyLong_CheckExact(PyTuple_GET_ITEM(top, 0))
               ? PyTuple_GET_ITEM(top, 0)
               : NULL;
}

/* `list.pop()` of the last item (n > 0), keeping the list's array (no free and malloc per push/pop pair). */
void engine_drop_last(PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *item = PyList_GET_ITEM(list, n - 1);
    Py_SET_SIZE(list, n - 1);
    Py_DECREF(item);
}

PyObject *engine_now(void) { /* time.monotonic_ns()'s clock */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return PyLong_FromLongLong((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

/* `index.get((parent, SCOPE, name)) or TREE.child(parent, SCOPE, name)`: a new reference, or NULL. */
PyObject *engine_scope_child(PyObject *parent, PyObject *name) {
    PyObject *key = PyTuple_Pack(3, parent, E.scope_kind, name);
    PyObject *ctx = key ? PyDict_GetItemWithError(E.index, key) : NULL;
    Py_XDECREF(key);
    if (ctx != NULL && truth(ctx) == 1) return Py_NewRef(ctx);
    if (PyErr_Occurred()) return NULL;
    return PyObject_CallFunctionObjArgs(E.child, parent, E.scope_kind, name, NULL);
}

/* MANAGER.<attr> (active, tracing: tuples of sessions) is non-empty: 1, 0, -1 with an exception. */
int engine_manager_has(PyObject *attr) {
    PyObject *v = PyObject_GetAttr(E.manager, attr);
    if (v == NULL) return -1;
    int yes = truth(v);
    Py_DECREF(v);
    return yes;
}

/* The calling thread's THREAD.__dict__ (borrowed: kept with the thread state), or NULL with an exception. */
PyObject *engine_thread_dict(void) {
    if (!E.on) return not_configured(), NULL;
    PerThread *t = per_thread();
    return t == NULL ? NULL : t->ldict;
}

/* The thread's stack list and its innermost scope's id (both borrowed from d) when no state and no op sit on
 * on top: the context published is then that very id (a state or op publishes another).  1 plain; 0 not, or
 * not the shapes expected (Python decides); -1 an exception. */
static int plain_stack(PyObject *d, PyObject **stack, PyObject **top) {
    *stack = PyDict_GetItemWithError(d, E.s_stack);
    PyObject *current = *stack ? PyDict_GetItemWithError(d, E.s_current) : NULL;
    if (current == NULL) return PyErr_Occurred() ? -1 : 0;
    if (!PyList_CheckExact(*stack) || (*top = engine_top(*stack)) == NULL) return 0;
    return *top == current ? 1 : PyObject_RichCompareBool(current, *top, Py_EQ);
}

/* The id of scope `name` under `parent` (a new reference): the thread's slot, else the core's index. */
static PyObject *scope_child_cached(PerThread *t, PyObject *parent, PyObject *name) {
    uint64_t p;
    if (as_id(parent, &p) < 0) return NULL;
    ScopeSlot *slot = &t->scopes[(p * 0x9E3779B97F4A7C15ull ^ ((uintptr_t)name >> 4)) & (SCOPE_SLOTS - 1)];
    if (slot->name == name && slot->parent == p && slot->ctx != NULL) return Py_NewRef(slot->ctx);
    PyObject *ctx = engine_scope_child(parent, name);
    if (ctx != NULL && PyLong_CheckExact(ctx)) {
        PyObject *old_name = slot->name, *old_ctx = slot->ctx;
        slot->parent = p;
        slot->name = Py_NewRef(name);
        slot->ctx = Py_NewRef(ctx);
        Py_XDECREF(old_name); /* last: dropping them may run Python code */
        Py_XDECREF(old_ctx);
    }
    return ctx;
}

/* ------------------------------------------------------------------ scopes ---- */

static int api_open_scope(PyObject *name, uint64_t *id) {
    if (!E.on) return not_configured();
    if (E.pure) return id_result(PyObject_CallOneArg(E.py_open_scope, name), id);
    if (!PyUnicode_CheckExact(name) || PyUnicode_GET_LENGTH(name) == 0) {
        PyErr_SetString(PyExc_TypeError, "proton: a scope name must be a non-empty str");
        return -1;
    }
    if (engine_settle() < 0) return -1;
    PerThread *t = per_thread();
    if (t == NULL) return -1;
    PyObject *d = Py_NewRef(t->ldict), *stack = NULL, *parent = NULL;
    int plain = plain_stack(d, &stack, &parent), rc = -1;
    if (plain < 0) goto out;
    if (plain == 0) { /* a state or op on top, an odd entry: Python's steps */
        ++E.scope_slow;
        rc = id_result(PyObject_CallOneArg(E.py_open_scope, name), id);
        goto out;
    }
    Py_INCREF(stack);
    Py_INCREF(parent);
    PyObject *ctx = scope_child_cached(t, parent, name);
    Py_DECREF(parent);
    PyObject *now = ctx ? engine_now() : NULL;
    PyObject *entry = now ? PyTuple_Pack(3, ctx, name, now) : NULL;
    Py_XDECREF(now);
    if (entry != NULL && PyList_Append(stack, entry) == 0 && PyDict_SetItem(d, E.s_current, ctx) == 0 &&
        engine_call_setters(ctx) == 0 && as_id(ctx, id) == 0) {
        ++E.scope_fast;
        rc = 0;
    }
    Py_XDECREF(entry);
    Py_XDECREF(ctx);
    Py_DECREF(stack);
out:
    Py_DECREF(d);
    return rc;
}

/* close_unchecked's result (a bool) as 1/0, or -1. */
static int slow_close_scope(uint64_t id) {
    ++E.scope_slow;
    PyObject *arg = PyLong_FromUnsignedLongLong(id);
    PyObject *r = arg ? PyObject_CallOneArg(E.py_close_scope, arg) : NULL;
    Py_XDECREF(arg);
    if (r == NULL) return -1;
    int yes = truth(r);
    Py_DECREF(r);
    return yes;
}

static int api_close_scope(uint64_t id) {
    if (!E.on) return not_configured();
    if (E.pure) return slow_close_scope(id);
    PyObject *tracing = PyObject_GetAttr(E.manager, E.s_tracing);
    if (tracing == NULL) return -1;
    int traced = truth(tracing);
    Py_DECREF(tracing);
    if (traced != 0) return traced < 0 ? -1 : slow_close_scope(id);
    PerThread *t = per_thread();
    if (t == NULL) return -1;
    PyObject *d = Py_NewRef(t->ldict), *stack = NULL, *top = NULL;
    int plain = plain_stack(d, &stack, &top), rc = -1;
    uint64_t top_id = 0;
    if (plain <= 0 || PyList_GET_SIZE(stack) == 0 || as_id(top, &top_id) < 0) {
        PyErr_Clear();
        rc = slow_close_scope(id); /* a state or op on top, no scope, an odd entry: Python decides */
        goto out;
    }
    if (top_id != id) {
        rc = 0;
        goto out;
    }
    Py_INCREF(stack);
    engine_drop_last(stack);
    PyObject *parent = engine_top(stack);
    if (parent == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "proton: a scope stack entry is not (id, name, start)");
    } else {
        Py_INCREF(parent);
        if (PyDict_SetItem(d, E.s_current, parent) == 0 && engine_call_setters(parent) == 0) {
            ++E.scope_fast;
            rc = 1;
        }
        Py_DECREF(parent);
    }
    Py_DECREF(stack);
out:
    Py_DECREF(d);
    return rc;
}

/* ------------------------------------------------------------------ ops ---- */

static int api_open_op(PyObject *name, uint64_t *id) {
    if (!E.on) return not_configured();
    return id_result(PyObject_CallOneArg(E.py_open_op, name), id);
}

static int api_close_op(void) {
    if (!E.on) return not_configured();
    if (E.pure) { /* `if THREAD.op is not None: close_op()` */
        PyObject *op = PyObject_GetAttr(E.thread, E.s_op);
        if (op == NULL) return -1;
        int open = op != Py_None;
        Py_DECREF(op);
        PyObject *r = open ? PyObject_CallNoArgs(E.py_close_op) : Py_NewRef(Py_None);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    PerThread *t = per_thread();
    if (t == NULL) return -1;
    PyObject *d = Py_NewRef(t->ldict);
    int rc = -1;
    PyObject *op = PyDict_GetItemWithError(d, E.s_op);
    PyObject *current = op != NULL ? PyDict_GetItemWithError(d, E.s_current) : NULL;
    if (current == NULL) {
        if (!PyErr_Occurred()) rc = 0;
        goto out;
    }
    if (op == Py_None) { /* no op open: nothing to close */
        rc = 0;
        goto out;
    }
    Py_ssize_t i = PyLong_CheckExact(current) ? PyLong_AsSsize_t(current) : -1;
    if (i == -1) PyErr_Clear();
    PyObject *entry = i >= 0 && i < PyList_GET_SIZE(E.entries) ? PyList_GET_ITEM(E.entries, i) : NULL;
    if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3 ||
        PyTuple_GET_ITEM(entry, 1) != E.op_kind) { /* not an op entry: the Python close_op recomputes */
        ++E.op_close_slow;
        PyObject *r = PyObject_CallNoArgs(E.py_close_op);
        rc = r == NULL ? -1 : 0;
        Py_XDECREF(r);
        goto out;
    }
    /* an op is the innermost element of its context: back to what it was opened in */
    PyObject *parent = Py_NewRef(PyTuple_GET_ITEM(entry, 0));
    if (PyDict_SetItem(d, E.s_op, Py_None) == 0 && PyDict_SetItem(d, E.s_current, parent) == 0 &&
        engine_call_setters(parent) == 0) {
        ++E.op_close_fast;
        rc = 0;
    }
    Py_DECREF(parent);
out:
    Py_DECREF(d);
    return rc;
}

/* ------------------------------------------------------------------ the launch step ---- */

/* `next(counter)`, the value dropped: 0, or -1 with the exception builtins.next would raise. */
static int advance(PyObject *counter) {
    if (!PyIter_Check(counter)) {
        PyErr_Format(PyExc_TypeError, "'%.200s' object is not an iterator", Py_TYPE(counter)->tp_name);
        return -1;
    }
    PyObject *v = (*Py_TYPE(counter)->tp_iternext)(counter);
    if (v != NULL) {
        Py_DECREF(v);
        return 0;
    }
    if (!PyErr_Occurred()) PyErr_SetNone(PyExc_StopIteration);
    return -1;
}

/* A hit, done: op = name, current = ctx, the setters, each counter once.  1, or -1 with the exception. */
static int commit(PyObject *d, PyObject *hit) {
    PyObject *ctx = PyTuple_GET_ITEM(hit, 1), *counters = PyTuple_GET_ITEM(hit, 3);
    if (PyDict_SetItem(d, E.s_op, PyTuple_GET_ITEM(hit, 2)) < 0 || PyDict_SetItem(d, E.s_current, ctx) < 0 ||
        engine_call_setters(ctx) < 0 || !PyTuple_CheckExact(counters))
        return PyErr_Occurred() ? -1 : -1 + (PyErr_SetString(PyExc_TypeError, "proton: counters not a tuple"), 0);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(counters); ++i)
        if (advance(PyTuple_GET_ITEM(counters, i)) < 0) return -1;
    return 1;
}

/* Whether a and b are interchangeable inside a dict key: the same object, or equal values of the same exact
 * type among str, int and float (equal, with equal hashes, compared alike by anything else).  No Python runs. */
static int same_value(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    PyTypeObject *t = Py_TYPE(a);
    if (t != Py_TYPE(b)) return 0;
    if (t == &PyUnicode_Type)
        return PyUnicode_GET_LENGTH(a) == PyUnicode_GET_LENGTH(b) && PyUnicode_Compare(a, b) == 0;
    if (t == &PyLong_Type) return PyObject_RichCompareBool(a, b, Py_EQ) == 1;
    if (t == &PyFloat_Type) return PyFloat_AS_DOUBLE(a) == PyFloat_AS_DOUBLE(b);
    return 0;
}

/* Whether tuple(data.items()) (data an exact dict) would be a key interchangeable with ``items``. */
static int same_items(PyObject *items, PyObject *data) {
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    if (PyDict_GET_SIZE(data) != n) return 0;
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (i < n && PyDict_Next(data, &pos, &key, &value)) {
        PyObject *pair = PyTuple_GET_ITEM(items, i++);
        if (!same_value(key, PyTuple_GET_ITEM(pair, 0)) || !same_value(value, PyTuple_GET_ITEM(pair, 1))) return 0;
    }
    return i == n;
}

static Py_ssize_t clears_now(void) {
    PyObject *c = PyList_GET_SIZE(E.clears) > 0 ? PyList_GET_ITEM(E.clears, 0) : NULL;
    Py_ssize_t v = c != NULL && PyLong_CheckExact(c) ? PyLong_AsSsize_t(c) : -1;
    if (v == -1) PyErr_Clear();
    return v; /* -1: unknown, nothing is remembered */
}

enum { ASK_PYTHON = 2 };

/* The step from this thread's remembered hits, without building the key: a remembered (items, base, hit)
 * answers when no op is open, the current context is `base`, the hit is still what ops holds for
 * (base, items) (same generation, ops not emptied since) and tuple(data.items()) would be a key
 * interchangeable with items.  1 done, -1 an exception (from a setter or counter), ASK_PYTHON not remembered. */
static int recall(PerThread *t, PyObject *data) {
    PyObject *d = t->ldict;
    PyObject *op = PyDict_GetItemWithError(d, E.s_op);
    PyObject *base = op == Py_None ? PyDict_GetItemWithError(d, E.s_current) : NULL;
    PyObject *generation = base != NULL ? PyObject_GetAttr(E.activity, E.s_generation) : NULL;
    if (generation == NULL) {
        PyErr_Clear();
        return ASK_PYTHON;
    }
    Py_ssize_t clears = clears_now();
    int rc = ASK_PYTHON;
    for (int i = 0; i < REMEMBERED; ++i) {
        Remembered *r = &t->slot[i];
        if (r->hit == NULL || r->clears != clears || clears < 0 || !same_value(PyTuple_GET_ITEM(r->hit, 0), generation) ||
            !same_value(r->base, base) || !same_items(r->items, data))
            continue;
        PyObject *hit = Py_NewRef(r->hit); /* a setter may run Python code that changes the slots */
        Py_INCREF(d);
        rc = commit(d, hit);
        Py_DECREF(d);
        Py_DECREF(hit);
        break;
    }
    Py_DECREF(generation);
    return rc;
}

/* Remember that ops[(base, items)] is hit (just used, of the current generation). */
static void remember(PerThread *t, PyObject *items, PyObject *base, PyObject *hit) {
    Py_ssize_t clears = clears_now();
    if (clears < 0) return;
    Remembered *r = NULL;
    for (int i = 0; i < REMEMBERED && r == NULL; ++i) /* an empty slot, or one that can no longer answer */
        if (t->slot[i].hit == NULL || t->slot[i].clears != clears ||
            PyTuple_GET_ITEM(t->slot[i].hit, 0) != PyTuple_GET_ITEM(hit, 0))
            r = &t->slot[i];
    if (r == NULL) r = &t->slot[t->next++ % REMEMBERED];
    Remembered old = *r;
    r->items = Py_NewRef(items);
    r->base = Py_NewRef(base);
    r->hit = Py_NewRef(hit);
    r->clears = clears;
    forget(&old); /* last: dropping them may run Python code */
}

/* tuple(data.items()) of an exact dict: a new reference, or NULL with the exception. */
static PyObject *items_of(PyObject *data) {
    Py_ssize_t n = PyDict_GET_SIZE(data);
    PyObject *out = PyTuple_New(n);
    if (out == NULL || n == 0) return out;
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (i < n && PyDict_Next(data, &pos, &key, &value)) { /* no Python code runs: the dict stays as it is */
        PyObject *pair = PyTuple_Pack(2, key, value);
        if (pair == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i++, pair);
    }
    return out;
}

/* open_counted_op(items) with the key only, natively: 1 done, 0 declined (nothing changed), -1 an exception. */
static int cached_step(PerThread *t, PyObject *items) {
    PyObject *d = Py_NewRef(t->ldict);
    PyObject *base = NULL, *hit = NULL;
    int rc = ASK_PYTHON;
    PyObject *op = PyDict_GetItemWithError(d, E.s_op);
    if (op == NULL) {
        PyErr_Clear();
        goto out;
    }
    if (op != Py_None) { /* an op already open (a hook whose exit did not run): the general path */
        rc = 0;
        goto out;
    }
    base = PyDict_GetItemWithError(d, E.s_current);
    if (base == NULL) {
        PyErr_Clear();
        goto out;
    }
    Py_INCREF(base);
    PyObject *key = PyTuple_Pack(2, base, items);
    if (key == NULL) {
        rc = -1;
        goto out;
    }
    hit = PyDict_GetItemWithError(E.ops, key); /* hashes items: TypeError when unhashable */
    Py_DECREF(key);
    if (hit == NULL) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto out;
    }
    Py_INCREF(hit); /* a setter may clear the cache */
    if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 4) goto out;
    PyObject *generation = PyObject_GetAttr(E.activity, E.s_generation);
    int stale = generation ? PyObject_RichCompareBool(PyTuple_GET_ITEM(hit, 0), generation, Py_NE) : -1;
    Py_XDECREF(generation);
    if (stale != 0) {
        rc = stale < 0 ? -1 : 0;
        goto out;
    }
    rc = commit(d, hit);
    if (rc == 1) remember(t, items, base, hit);
out:
    Py_XDECREF(hit);
    Py_XDECREF(base);
    Py_DECREF(d);
    if (rc == ASK_PYTHON) { /* a state of the thread this code leaves to the Python step */
        ++E.launch_slow;
        PyObject *r = PyObject_CallOneArg(E.py_open_counted_op, items);
        rc = r == NULL ? -1 : truth(r);
        Py_XDECREF(r);
    }
    return rc;
}

static int api_open_launch_op(PyObject *data) {
    if (!E.on) return not_configured();
    if (!PyDict_CheckExact(data)) {
        PyErr_SetString(PyExc_TypeError, "proton: launch metadata must be a dict");
        return -1;
    }
    if (E.pure) {
        PyObject *items = items_of(data);
        PyObject *r = items ? PyObject_CallOneArg(E.py_open_counted_op, items) : NULL;
        Py_XDECREF(items);
        int yes = r ? truth(r) : -1;
        Py_XDECREF(r);
        return yes;
    }
    if (engine_settle() < 0) return -1;
    PerThread *t = per_thread();
    if (t == NULL) return -1;
    int rc = recall(t, data);
    if (rc != ASK_PYTHON) {
        E.launch_recalled += rc == 1;
        return rc;
    }
    PyObject *items = items_of(data);
    if (items == NULL) return -1;
    unsigned long long slow = E.launch_slow;
    rc = cached_step(t, items);
    E.launch_fast += rc == 1 && slow == E.launch_slow;
    Py_DECREF(items);
    return rc;
}

/* ------------------------------------------------------------------ reading ---- */

static int api_current(uint64_t *id) {
    if (!E.on) return not_configured();
    if (E.pure) return id_result(PyObject_CallNoArgs(E.py_current), id);
    PerThread *t = per_thread();
    if (t == NULL) return -1;
    PyObject *current = PyDict_GetItemWithError(t->ldict, E.s_current);
    if (current == NULL) return id_result(PyObject_CallNoArgs(E.py_current), id);
    return as_id(current, id);
}

static int api_innermost_scope(uint64_t *id) {
    if (!E.on) return not_configured();
    return id_result(PyObject_CallNoArgs(E.py_innermost), id);
}

static int api_is_active(void) {
    if (!E.on) return 0;
    if (E.any_offset > 0) { /* ACTIVITY is a __slots__ object: its slot read where it lies */
        PyObject *v = *(PyObject **)((char *)E.activity + E.any_offset);
        if (v == Py_True) return 1;
        if (v == Py_False) return 0;
    }
    PyObject *any = PyObject_GetAttr(E.activity, E.s_any);
    int on = any ? truth(any) : -1;
    Py_XDECREF(any);
    if (on < 0) {
        PyErr_Clear();
        return 0;
    }
    return on;
}

static int api_context_kind(uint64_t id) {
    if (!E.on) return not_configured();
    if (id < (uint64_t)PyList_GET_SIZE(E.entries)) {
        PyObject *entry = PyList_GET_ITEM(E.entries, (Py_ssize_t)id);
        if (id == 0) return PROTON_CONTEXT_SCOPE; /* the root: what scopes open under */
        PyObject *kind = PyTuple_CheckExact(entry) && PyTuple_GET_SIZE(entry) == 3 ? PyTuple_GET_ITEM(entry, 1) : NULL;
        if (kind != NULL && PyUnicode_Check(kind)) {
            if (PyUnicode_Compare(kind, E.scope_kind) == 0) return PROTON_CONTEXT_SCOPE;
            if (PyUnicode_Compare(kind, E.op_kind) == 0) return PROTON_CONTEXT_OP;
            return PROTON_CONTEXT_STATE;
        }
    } else if (id >= ((uint64_t)1 << 40)) {
        return PROTON_CONTEXT_FOREIGN;
    }
    PyErr_Format(PyExc_ValueError, "proton: context id %llu was never handed out", (unsigned long long)id);
    return -1;
}

static int api_reserve_ids(const char *owner, PyObject *resolve, uint64_t *first) {
    if (!E.on) return not_configured();
    PyObject *name = PyUnicode_FromString(owner);
    if (name == NULL) return -1;
    PyObject *r = PyObject_CallFunctionObjArgs(E.py_reserve, name, resolve, NULL);
    Py_DECREF(name);
    return id_result(r, first);
}

static const ProtonScopeAPI api_table = {
    PROTON_SCOPE_API_VERSION, sizeof(ProtonScopeAPI),
    api_open_scope, api_close_scope, api_open_op, api_close_op, api_open_launch_op,
    api_current, api_innermost_scope, api_is_active, api_context_kind, api_reserve_ids,
};

/* ------------------------------------------------------------------ through the table, from Python ---- */

/* capi(function name, argument=None): one call through the table, as an extension makes it (the contract
 * tests run the same scenarios through this and through the Python functions).  Returns what the function
 * gives back: an id, 1/0, or None. */
PyObject *engine_capi_call(PyObject *args) {
    const char *fn;
    PyObject *arg = Py_None, *resolve = Py_None;
    if (!PyArg_ParseTuple(args, "s|OO:capi", &fn, &arg, &resolve)) return NULL;
    const ProtonScopeAPI *api = (const ProtonScopeAPI *)PyCapsule_Import(PROTON_SCOPE_API_CAPSULE, 0);
    if (api == NULL) return NULL;
    uint64_t id = 0;
    int rc;
    if (strcmp(fn, "open_scope") == 0 || strcmp(fn, "open_op") == 0) {
        rc = (fn[5] == 's' ? api->open_scope : api->open_op)(arg, &id);
        return rc < 0 ? NULL : PyLong_FromUnsignedLongLong(id);
    }
    if (strcmp(fn, "close_scope") == 0) {
        unsigned long long x = PyLong_AsUnsignedLongLong(arg);
        if (PyErr_Occurred()) return NULL;
        rc = api->close_scope(x);
        return rc < 0 ? NULL : PyBool_FromLong(rc);
    }
    if (strcmp(fn, "close_op") == 0) return api->close_op() < 0 ? NULL : Py_NewRef(Py_None);
    if (strcmp(fn, "open_launch_op") == 0) {
        rc = api->open_launch_op(arg);
        return rc < 0 ? NULL : PyBool_FromLong(rc);
    }
    if (strcmp(fn, "current") == 0 || strcmp(fn, "innermost_scope") == 0) {
        rc = (fn[0] == 'c' ? api->current : api->innermost_scope)(&id);
        return rc < 0 ? NULL : PyLong_FromUnsignedLongLong(id);
    }
    if (strcmp(fn, "is_active") == 0) return PyBool_FromLong(api->is_active());
    if (strcmp(fn, "context_kind") == 0) {
        unsigned long long x = PyLong_AsUnsignedLongLong(arg);
        if (PyErr_Occurred()) return NULL;
        rc = api->context_kind(x);
        return rc < 0 ? NULL : PyLong_FromLong(rc);
    }
    if (strcmp(fn, "reserve_ids") == 0) {
        if (!PyUnicode_Check(arg)) return PyErr_Format(PyExc_TypeError, "reserve_ids takes an owner name");
        rc = api->reserve_ids(PyUnicode_AsUTF8(arg), resolve, &id);
        return rc < 0 ? NULL : PyLong_FromUnsignedLongLong(id);
    }
    return PyErr_Format(PyExc_ValueError, "no function %s in the scope API", fn);
}

/* ------------------------------------------------------------------ module side ---- */

static void engine_forget(void) {
    E.on = 0;
    PyObject **slots[] = {&E.thread, &E.index, &E.child, &E.scope_kind, &E.op_kind, &E.manager, &E.activity,
                          &E.entries, &E.settlers, &E.py_open_scope, &E.py_close_scope, &E.py_open_op,
                          &E.py_close_op, &E.py_open_counted_op, &E.ops, &E.clears, &E.py_current,
                          &E.py_innermost, &E.py_reserve};
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); ++i) Py_CLEAR(*slots[i]);
}

/* configure(objects): a dict from proton_core.scope.engine_objects(); None switches the engine off. */
int engine_configure(PyObject *objects) {
    if (objects == Py_None) {
        E.on = 0;
        return 0;
    }
    if (!PyDict_Check(objects)) {
        PyErr_SetString(PyExc_TypeError, "proton_core._scope_fast: engine objects must be a dict");
        return -1;
    }
    static const char *names[] = {"thread", "index", "child", "scope_kind", "op_kind", "manager", "activity",
                                  "entries", "settlers", "open_scope", "close_scope", "open_op", "close_op",
                                  "open_counted_op", "ops", "clears", "current", "innermost_scope", "reserve_ids"};
    PyObject *found[sizeof(names) / sizeof(names[0])];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
        found[i] = PyDict_GetItemString(objects, names[i]);
        if (found[i] == NULL) {
            PyErr_Format(PyExc_KeyError, "proton_core._scope_fast: engine object %s missing", names[i]);
            return -1;
        }
    }
    if (!PyDict_Check(found[1]) || !PyList_Check(found[7]) || !PyList_Check(found[8]) || !PyDict_Check(found[14]) ||
        !PyList_Check(found[15])) {
        PyErr_SetString(PyExc_TypeError, "proton_core._scope_fast: engine objects of unexpected types");
        return -1;
    }
    engine_forget();
    PyObject **slots[] = {&E.thread, &E.index, &E.child, &E.scope_kind, &E.op_kind, &E.manager, &E.activity,
                          &E.entries, &E.settlers, &E.py_open_scope, &E.py_close_scope, &E.py_open_op,
                          &E.py_close_op, &E.py_open_counted_op, &E.ops, &E.clears, &E.py_current,
                          &E.py_innermost, &E.py_reserve};
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); ++i) *slots[i] = Py_NewRef(found[i]);
    E.any_offset = 0; /* ACTIVITY.any as a plain __slots__ member: read in place */
    PyObject *descr = _PyType_Lookup(Py_TYPE(E.activity), E.s_any);
    if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX || member->type == T_OBJECT) E.any_offset = member->offset;
    }
    PyObject *pure = PyDict_GetItemString(objects, "pure");
    E.pure = pure != NULL && PyObject_IsTrue(pure) == 1;
    E.on = 1;
    return 0;
}

PyObject *engine_counts(void) {
    return Py_BuildValue("{sKsKsKsKsKsKsK}", "scope_fast", E.scope_fast, "scope_slow", E.scope_slow, "close_op_fast",
                         E.op_close_fast, "close_op_slow", E.op_close_slow, "launch_fast", E.launch_fast,
                         "launch_slow", E.launch_slow, "launch_recalled", E.launch_recalled);
}

#define INTERN(field, text) \
    if ((E.field = PyUnicode_InternFromString(text)) == NULL) return -1

int engine_init(PyObject *module) {
    INTERN(tls_key, "proton_core._scope_fast.per_thread");
    INTERN(s_dict, "__dict__");
    INTERN(s_stack, "stack");
    INTERN(s_current, "current");
    INTERN(s_state, "state");
    INTERN(s_op, "op");
    INTERN(s_setters, "setters");
    INTERN(s_tracing, "tracing");
    INTERN(s_any, "any");
    INTERN(s_generation, "generation");
    if ((E.zero = PyLong_FromLong(0)) == NULL) return -1;
    PyObject *capsule = PyCapsule_New((void *)&api_table, PROTON_SCOPE_API_CAPSULE, NULL);
    if (capsule == NULL) return -1;
    if (PyModule_AddObject(module, "_C_API", capsule) < 0) {
        Py_DECREF(capsule);
        return -1;
    }
    return 0;
}
