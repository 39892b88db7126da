/* hook="triton"'s launch hooks in C: a repeated launch runs no Python frame of ours.
 *
 * Triton calls launch_enter(meta) before and launch_exit(meta) after every kernel launch.  These are
 * the same steps as proton_frameworks.triton_hook.launch_enter/launch_exit, in C:
 *
 *   enter  ACTIVITY.any false: nothing.  A kernel without launch_metadata (empty meta.extras, meta.data's
 *          keys all Triton's own): nothing.  Else data = meta.get(); items = tuple(data.items()) (the
 *          key the Python hook uses, so both share the core's cache); then the core's cached step
 *          (proton_core.launch_ops.open_counted_op(items)): with no op open on this thread, the entry
 *          _OPS[(thread.current, items)] of the current ACTIVITY.generation sets thread.op and
 *          thread.current, calls each of MANAGER.setters and advances each counter once.  Where that
 *          step declines, the Python remainder (triton_hook._enter_general(data, items)) runs, exactly
 *          as in the Python hook; where this file meets anything it does not handle itself (an
 *          attribute missing from the thread's dict, an odd cache entry) it calls open_counted_op.
 *   exit   thread.op None: nothing.  Else close_op_unchecked: op = None, current = the op's parent
 *          (entries[current] is an op entry), else the Python close_op (recomputes), then the setters.
 *
 * Remembered hits: building, hashing and comparing the key is most of a cached step's cost, so each
 * thread remembers its last few hits (items, thread.current, hit).  A launch whose data matches a
 * remembered items tuple item by item (keys and values each the same object, or equal values of the same
 * exact type among str/int/float: equal, with equal hashes, so the key Python would build is
 * interchangeable with the remembered one), at the same thread.current, while the hit's
 * generation is ACTIVITY.generation and _OPS was not emptied since (its clear count), gets exactly
 * the hit _OPS.get would return, without the key being built.
 *
 * Every Python-visible effect and exception is the Python hooks': the same reads and writes in the
 * same order, the same calls with the same arguments.  The core's internals come from
 * proton_core.plugin_api.launch_op_protocol() (version 1).
 *
 * The thread's state: the core's THREAD is a threading.local; its per-thread __dict__ is fetched once
 * per Python thread state and kept, with the remembered hits, in a capsule in that thread state's own
 * dict (PyThreadState_GetDict): it lives exactly as long as the thread state, and a new thread state
 * on the same OS thread gets its own.  Reading and writing "op"/"current" in that dict is what
 * attribute access on the threading.local does (configure refuses a class that defines either name).
 * Everything runs with the GIL held, as Triton calls its hooks; free-threaded builds are refused at
 * import (the Python hooks run there).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define PROTOCOL_VERSION 1

static struct {
    /* launch_op_protocol(): (1, thread, ops, activity, manager, entries, op_kind, close_op, open_counted_op,
     * clears[, settlers]) */
    PyObject *thread, *ops, *activity, *manager, *entries, *op_kind, *close_op, *open_counted_op, *clears;
    PyObject *settlers; /* callables run before "current" is read to open an op (usually none), or NULL */
    PyObject *reserved; /* frozenset of Triton's own keys */
    PyObject *general;  /* triton_hook._enter_general(data, items) */
    PyObject *tls_key;  /* our key in each thread state's dict: that thread's PerThread (a capsule) */
    PyObject *s_any, *s_generation, *s_setters, *s_extras, *s_data, *s_get, *s_items, *s_op, *s_current,
        *s_dict, *s_issuperset;
    unsigned long long configures;
    /* launches by path, for tests and benchmarks: enters done by the cached step here / by Python code;
     * exits done here / by the Python close_op */
    unsigned long long n_enter_recalled, n_enter_fast, n_enter_slow, n_exit_fast, n_exit_slow;
} g;

/* ------------------------------------------------------------------ helpers ---- */

/* What this module keeps per Python thread state, in a capsule in that thread state's dict: the thread's
 * THREAD.__dict__, and the last hits of the cached step (remember/recall below). */
#define REMEMBERED 8
typedef struct {
    PyObject *items;   /* the key's items tuple (tuple(data.items()) of that launch) */
    PyObject *base;    /* thread.current it was looked up at */
    PyObject *hit;     /* ops[(base, items)] */
    Py_ssize_t clears; /* clears[0] then */
} Remembered;

typedef struct {
    PyObject *ldict; /* THREAD.__dict__ of this thread */
    unsigned next;   /* the slot replaced next when none is stale */
    Remembered slot[REMEMBERED];
} PerThread;

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
    Py_CLEAR(t->ldict);
    PyMem_Free(t);
}

/* The calling thread state's PerThread, or NULL with an exception set. */
static PerThread *per_thread(void) {
    PyObject *tdict = PyThreadState_GetDict();
    if (tdict == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no Python thread state");
        return NULL;
    }
    PyObject *capsule = PyDict_GetItemWithError(tdict, g.tls_key);
    if (capsule != NULL) return (PerThread *)PyCapsule_GetPointer(capsule, NULL);
    if (PyErr_Occurred()) return NULL;
    PyObject *d = PyObject_GetAttr(g.thread, g.s_dict); /* runs the class's __init__ on this thread's first use */
    if (d == NULL) return NULL;
    if (!PyDict_CheckExact(d)) {
        Py_DECREF(d);
        PyErr_SetString(PyExc_TypeError, "the core's thread state has no plain __dict__");
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
    int rc = PyDict_SetItem(tdict, g.tls_key, capsule);
    Py_DECREF(capsule); /* the thread state's dict holds it now, and frees it with the thread state */
    return rc < 0 ? NULL : t;
}

/* The calling thread's THREAD.__dict__ (borrowed: kept by the thread state's dict), or NULL with an exception. */
static PyObject *thread_dict(void) {
    PerThread *t = per_thread();
    return t == NULL ? NULL : t->ldict;
}

/* Truth of a value as Python's `if` sees it: 1, 0, or -1 with an exception. */
static inline int truth(PyObject *v) {
    if (v == Py_True) return 1;
    if (v == Py_False || v == Py_None) return 0;
    return PyObject_IsTrue(v);
}

/* `for setter in MANAGER.setters: setter(ctx)`: 0, or -1 with the exception. */
static int call_setters(PyObject *ctx) {
    PyObject *setters = PyObject_GetAttr(g.manager, g.s_setters);
    if (setters == NULL) return -1;
    int rc = 0;
    if (PyTuple_CheckExact(setters)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(setters); ++i) {
            PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM(setters, i), ctx);
            if (r == NULL) {
                rc = -1;
                break;
            }
            Py_DECREF(r);
        }
    } else {
        PyObject *it = PyObject_GetIter(setters);
        PyObject *f;
        if (it == NULL) rc = -1;
        while (rc == 0 && (f = PyIter_Next(it)) != NULL) {
            PyObject *r = PyObject_CallOneArg(f, ctx);
            Py_DECREF(f);
            if (r == NULL) rc = -1;
            Py_XDECREF(r);
        }
        if (it != NULL && rc == 0 && PyErr_Occurred()) rc = -1;
        Py_XDECREF(it);
    }
    Py_DECREF(setters);
    return rc;
}

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

/* `for counter in counters: next(counter)` */
static int advance_all(PyObject *counters) {
    if (PyTuple_CheckExact(counters)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(counters); ++i)
            if (advance(PyTuple_GET_ITEM(counters, i)) < 0) return -1;
        return 0;
    }
    PyObject *it = PyObject_GetIter(counters);
    if (it == NULL) return -1;
    PyObject *c;
    int rc = 0;
    while (rc == 0 && (c = PyIter_Next(it)) != NULL) {
        rc = advance(c);
        Py_DECREF(c);
    }
    if (rc == 0 && PyErr_Occurred()) rc = -1;
    Py_DECREF(it);
    return rc;
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

/* tuple(data.items()): a new reference, or NULL with the exception. */
static PyObject *items_of(PyObject *data) {
    if (PyDict_CheckExact(data)) {
        Py_ssize_t n = PyDict_GET_SIZE(data);
        PyObject *out = PyTuple_New(n);
        if (out == NULL || n == 0) return out;
        Py_ssize_t pos = 0, i = 0;
        PyObject *key, *value;
        /* No Python code runs while walking: the dict cannot change under us. */
        while (i < n && PyDict_Next(data, &pos, &key, &value)) {
            PyObject *pair = PyTuple_Pack(2, key, value);
            if (pair == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            PyTuple_SET_ITEM(out, i++, pair);
        }
        return out;
    }
    PyObject *view = PyObject_CallMethodNoArgs(data, g.s_items);
    if (view == NULL) return NULL;
    PyObject *out = PySequence_Tuple(view);
    Py_DECREF(view);
    return out;
}

/* ----------------------------------------------------------------- the hooks ---- */

enum { STEP_ERROR = -1, STEP_DECLINED = 0, STEP_DONE = 1, STEP_ASK_PYTHON = 2 };

/* The cached step's hit, done: op = name, current = ctx, the setters, the counters.  STEP_DONE or STEP_ERROR. */
static int commit(PyObject *d, PyObject *hit) {
    PyObject *ctx = PyTuple_GET_ITEM(hit, 1);
    if (PyDict_SetItem(d, g.s_op, PyTuple_GET_ITEM(hit, 2)) == 0 && PyDict_SetItem(d, g.s_current, ctx) == 0 &&
        call_setters(ctx) == 0 && advance_all(PyTuple_GET_ITEM(hit, 3)) == 0)
        return STEP_DONE;
    return STEP_ERROR;
}

/* Whether a and b are interchangeable inside a dict key: the same object, or equal values of the same exact
 * type among str, int and float (equal, with equal hashes, and compared alike by anything else).  Runs no
 * Python code. */
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
    while (i < n && PyDict_Next(data, &pos, &key, &value)) { /* no Python code runs: data stays as it is */
        PyObject *pair = PyTuple_GET_ITEM(items, i++);
        if (!same_value(key, PyTuple_GET_ITEM(pair, 0)) || !same_value(value, PyTuple_GET_ITEM(pair, 1))) return 0;
    }
    return i == n;
}

static Py_ssize_t clears_now(void) {
    PyObject *c = PyList_GET_SIZE(g.clears) > 0 ? PyList_GET_ITEM(g.clears, 0) : NULL;
    Py_ssize_t v = c != NULL && PyLong_CheckExact(c) ? PyLong_AsSsize_t(c) : -1;
    if (v == -1) PyErr_Clear();
    return v; /* -1: unknown, nothing is remembered */
}

/* The cached step for data (an exact dict) from this thread's remembered hits, without building the key:
 * a remembered (items, base, hit) answers for this launch when the thread has no op open, its current
 * context is ``base``, the hit is still what ops holds for (base, items) (same generation, ops not
 * emptied since) and tuple(data.items()) would be a key interchangeable with items -- then
 * ops.get((current, tuple(data.items()))) is that hit.  STEP_DONE, STEP_ERROR (raised by a setter or a
 * counter, as open_counted_op would), or STEP_ASK_PYTHON (not remembered: take the full step). */
static int recall(PerThread *t, PyObject *data) {
    PyObject *d = t->ldict;
    PyObject *op = PyDict_GetItemWithError(d, g.s_op);
    PyObject *base = op == Py_None ? PyDict_GetItemWithError(d, g.s_current) : NULL;
    PyObject *generation = base != NULL ? PyObject_GetAttr(g.activity, g.s_generation) : NULL;
    if (generation == NULL) {
        PyErr_Clear();
        return STEP_ASK_PYTHON;
    }
    Py_ssize_t clears = clears_now();
    int rc = STEP_ASK_PYTHON;
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
    if (clears < 0 || !PyTuple_CheckExact(items)) return;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); ++i) { /* pairs only: same_items reads them as such */
        PyObject *pair = PyTuple_GET_ITEM(items, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) return;
    }
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

/* open_counted_op(items), key only: STEP_DONE (the op is open and counted), STEP_DECLINED (what
 * open_counted_op would answer False for, nothing changed), STEP_ASK_PYTHON (a state this code leaves to
 * open_counted_op; nothing changed, no exception) or STEP_ERROR (the exception open_counted_op raises). */
static int cached_step(PyObject *items) {
    PerThread *t = per_thread();
    if (t == NULL) {
        PyErr_Clear(); /* open_counted_op's own attribute reads say what is wrong */
        return STEP_ASK_PYTHON;
    }
    PyObject *d = Py_NewRef(t->ldict);
    PyObject *base = NULL, *hit = NULL;
    int rc = STEP_ASK_PYTHON;
    PyObject *op = PyDict_GetItemWithError(d, g.s_op);
    if (op == NULL) {
        PyErr_Clear();
        goto out;
    }
    if (op != Py_None) { /* an op already open (a hook whose exit did not run): the general path */
        rc = STEP_DECLINED;
        goto out;
    }
    base = PyDict_GetItemWithError(d, g.s_current);
    if (base == NULL) {
        PyErr_Clear();
        goto out;
    }
    Py_INCREF(base);
    PyObject *key = PyTuple_Pack(2, base, items);
    if (key == NULL) {
        rc = STEP_ERROR;
        goto out;
    }
    hit = PyDict_GetItemWithError(g.ops, key); /* hashes items: TypeError when unhashable */
    Py_DECREF(key);
    if (hit == NULL) {
        rc = PyErr_Occurred() ? STEP_ERROR : STEP_DECLINED;
        goto out;
    }
    Py_INCREF(hit); /* a setter may clear the cache */
    if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 4) goto out;
    PyObject *generation = PyObject_GetAttr(g.activity, g.s_generation);
    int stale = generation ? PyObject_RichCompareBool(PyTuple_GET_ITEM(hit, 0), generation, Py_NE) : -1;
    Py_XDECREF(generation);
    if (stale != 0) {
        rc = stale < 0 ? STEP_ERROR : STEP_DECLINED;
        goto out;
    }
    rc = commit(d, hit);
    if (rc == STEP_DONE) remember(t, items, base, hit);
out:
    Py_XDECREF(hit);
    Py_XDECREF(base);
    Py_DECREF(d);
    return rc;
}

static PyObject *not_configured(void) {
    PyErr_SetString(PyExc_RuntimeError, "proton_frameworks._triton_fast: configure() was not called");
    return NULL;
}

static PyObject *launch_enter(PyObject *self, PyObject *meta) {
    if (g.thread == NULL) return not_configured();
    /* if not ACTIVITY.any: return */
    PyObject *any = PyObject_GetAttr(g.activity, g.s_any);
    if (any == NULL) return NULL;
    int on = truth(any);
    Py_DECREF(any);
    if (on <= 0) return on < 0 ? NULL : Py_NewRef(Py_None);
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
    /* the settlers (plugins' own frames become the core's scopes), before "current" is read */
    for (Py_ssize_t i = 0; g.settlers != NULL && i < PyList_GET_SIZE(g.settlers); ++i) {
        PyObject *settler = Py_NewRef(PyList_GET_ITEM(g.settlers, i));
        PyObject *r = PyObject_CallNoArgs(settler);
        Py_DECREF(settler);
        if (r == NULL) return NULL;
        Py_DECREF(r);
    }
    /* data = meta.get(); items = tuple(data.items()) */
    PyObject *data = PyObject_CallMethodNoArgs(meta, g.s_get);
    if (data == NULL) return NULL;
    if (PyDict_CheckExact(data)) { /* a launch like a recent one: the same step without building the key */
        PerThread *t = per_thread();
        int step = t != NULL ? recall(t, data) : STEP_ASK_PYTHON;
        if (t == NULL) PyErr_Clear();
        if (step == STEP_DONE) {
            ++g.n_enter_recalled;
            Py_DECREF(data);
            Py_RETURN_NONE;
        }
        if (step == STEP_ERROR) { /* as the Python hook: a TypeError from the step sends it to the general path */
            PyObject *r = NULL;
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                ++g.n_enter_slow;
                PyObject *args[2] = {data, Py_None};
                r = PyObject_Vectorcall(g.general, args, 2, NULL);
            }
            Py_DECREF(data);
            if (r == NULL) return NULL;
            Py_DECREF(r);
            Py_RETURN_NONE;
        }
    }
    PyObject *items = items_of(data);
    if (items == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    /* try: if open_counted_op(items): return / except TypeError: items = None */
    int step = cached_step(items);
    if (step == STEP_DONE) {
        ++g.n_enter_fast;
    } else {
        ++g.n_enter_slow;
        if (step == STEP_ASK_PYTHON) {
            PyObject *r = PyObject_CallOneArg(g.open_counted_op, items);
            step = r ? truth(r) : STEP_ERROR; /* inside the try, as the Python hook's `if` is */
            Py_XDECREF(r);
        }
    }
    PyObject *result = NULL;
    if (step == STEP_DONE) {
        result = Py_NewRef(Py_None);
        goto out;
    }
    if (step == STEP_ERROR) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) goto out;
        PyErr_Clear();
        Py_SETREF(items, Py_NewRef(Py_None));
    }
    /* _enter_general(data, items) */
    PyObject *args[2] = {data, items};
    PyObject *r = PyObject_Vectorcall(g.general, args, 2, NULL);
    if (r != NULL) {
        Py_DECREF(r);
        result = Py_NewRef(Py_None);
    }
out:
    Py_DECREF(items);
    Py_DECREF(data);
    return result;
}

/* close_op(), the Python one */
static PyObject *close_in_python(void) {
    ++g.n_exit_slow;
    PyObject *r = PyObject_CallNoArgs(g.close_op);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static PyObject *launch_exit(PyObject *self, PyObject *meta) {
    if (g.thread == NULL) return not_configured();
    PyObject *d = thread_dict();
    PyObject *op = d ? PyDict_GetItemWithError(d, g.s_op) : NULL;
    if (op == NULL) { /* whatever THREAD.op does here (creates the thread's state, raises) */
        PyErr_Clear();
        op = PyObject_GetAttr(g.thread, g.s_op);
        if (op == NULL) return NULL;
        int open = op != Py_None;
        Py_DECREF(op);
        if (!open) Py_RETURN_NONE;
        return close_in_python();
    }
    if (op == Py_None) Py_RETURN_NONE;
    /* close_op_unchecked(), where the current context is an op entry of the core's */
    Py_INCREF(d);
    PyObject *result = NULL;
    PyObject *parent = NULL;
    PyObject *ctx = PyDict_GetItemWithError(d, g.s_current);
    if (ctx != NULL && PyLong_CheckExact(ctx) && PyList_CheckExact(g.entries)) {
        Py_ssize_t i = PyLong_AsSsize_t(ctx);
        if (i >= 0 && i < PyList_GET_SIZE(g.entries)) {
            PyObject *entry = PyList_GET_ITEM(g.entries, i);
            if (PyTuple_CheckExact(entry) && PyTuple_GET_SIZE(entry) >= 2) {
                PyObject *kind = PyTuple_GET_ITEM(entry, 1);
                int is_op = kind == g.op_kind ? 1
                            : PyUnicode_CheckExact(kind) && PyUnicode_CheckExact(g.op_kind)
                                ? PyUnicode_Compare(kind, g.op_kind) == 0
                                : 0;
                if (is_op) parent = Py_NewRef(PyTuple_GET_ITEM(entry, 0));
            }
        }
    }
    PyErr_Clear(); /* a failed read above only means: not this case */
    if (parent == NULL) {
        result = close_in_python();
    } else {
        if (PyDict_SetItem(d, g.s_op, Py_None) == 0 && PyDict_SetItem(d, g.s_current, parent) == 0 &&
            call_setters(parent) == 0) {
            ++g.n_exit_fast;
            result = Py_NewRef(Py_None);
        }
        Py_DECREF(parent);
    }
    Py_DECREF(d);
    return result;
}

/* ---------------------------------------------------------------- configure ---- */

static int intern(PyObject **slot, const char *text) {
    if (*slot == NULL) *slot = PyUnicode_InternFromString(text);
    return *slot == NULL ? -1 : 0;
}

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *protocol, *reserved, *general;
    if (!PyArg_ParseTuple(args, "OOO:configure", &protocol, &reserved, &general)) return NULL;
    if (!PyTuple_Check(protocol) || PyTuple_GET_SIZE(protocol) < 10 || !PyLong_Check(PyTuple_GET_ITEM(protocol, 0)) ||
        PyLong_AsLong(PyTuple_GET_ITEM(protocol, 0)) != PROTOCOL_VERSION) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "unknown launch op protocol (proton_core is newer than this extension)");
        return NULL;
    }
    PyObject *thread = PyTuple_GET_ITEM(protocol, 1), *ops = PyTuple_GET_ITEM(protocol, 2);
    PyObject *entries = PyTuple_GET_ITEM(protocol, 5), *clears = PyTuple_GET_ITEM(protocol, 9);
    if (!PyDict_CheckExact(ops) || !PyList_CheckExact(entries) || !PyList_CheckExact(clears)) {
        PyErr_SetString(PyExc_TypeError,
                        "launch op protocol: the op cache must be a dict, the entries and the clear count lists");
        return NULL;
    }
    if (!PyAnySet_Check(reserved) || !PyCallable_Check(general)) {
        PyErr_SetString(PyExc_TypeError, "configure(protocol, reserved keys (a set), general enter (callable))");
        return NULL;
    }
    if (intern(&g.s_any, "any") || intern(&g.s_generation, "generation") || intern(&g.s_setters, "setters") ||
        intern(&g.s_extras, "extras") || intern(&g.s_data, "data") || intern(&g.s_get, "get") ||
        intern(&g.s_items, "items") || intern(&g.s_op, "op") || intern(&g.s_current, "current") ||
        intern(&g.s_dict, "__dict__") || intern(&g.s_issuperset, "issuperset"))
        return NULL;
    /* "op"/"current" are read and written in the thread's __dict__: no class attribute may stand in between */
    PyObject *cls = (PyObject *)Py_TYPE(thread);
    PyObject *names[] = {g.s_op, g.s_current};
    for (int i = 0; i < 2; ++i) {
        int has = PyObject_HasAttr(cls, names[i]);
        if (has) {
            PyErr_Format(PyExc_TypeError, "launch op protocol: %.100s defines %R: not a plain per-thread attribute",
                         Py_TYPE(thread)->tp_name, names[i]);
            return NULL;
        }
    }
    PyObject *key = PyUnicode_FromFormat("proton_frameworks._triton_fast.thread.%llu", ++g.configures);
    if (key == NULL) return NULL;
    PyObject **slots[] = {&g.thread, &g.ops, &g.activity, &g.manager, &g.entries, &g.op_kind, &g.close_op,
                          &g.open_counted_op, &g.clears};
    for (int i = 0; i < 9; ++i) Py_XSETREF(*slots[i], Py_NewRef(PyTuple_GET_ITEM(protocol, i + 1)));
    PyObject *settlers = PyTuple_GET_SIZE(protocol) >= 11 ? PyTuple_GET_ITEM(protocol, 10) : NULL;
    Py_XSETREF(g.settlers, settlers != NULL && PyList_Check(settlers) ? Py_NewRef(settlers) : NULL);
    Py_XSETREF(g.reserved, Py_NewRef(reserved));
    Py_XSETREF(g.general, Py_NewRef(general));
    Py_XSETREF(g.tls_key, key); /* a new key: no thread keeps the state of an earlier configuration */
    Py_RETURN_NONE;
}

static PyObject *stats(PyObject *self, PyObject *unused) {
    return Py_BuildValue("{sKsKsKsKsK}", "enter_recalled", g.n_enter_recalled, "enter_fast", g.n_enter_fast,
                         "enter_slow", g.n_enter_slow, "exit_fast", g.n_exit_fast, "exit_slow", g.n_exit_slow);
}

static PyMethodDef methods[] = {
    {"launch_enter", launch_enter, METH_O, "Triton's enter hook (triton_hook.launch_enter, natively)."},
    {"launch_exit", launch_exit, METH_O, "Triton's exit hook (triton_hook.launch_exit, natively)."},
    {"configure", configure, METH_VARARGS,
     "configure(launch_op_protocol(), reserved_keys, general_enter): what the hooks act on."},
    {"stats", stats, METH_NOARGS,
     "Hook calls per path since import: enter_recalled (the cached step from a remembered hit, here), "
     "enter_fast (the cached step, here), enter_slow (Python code), "
     "exit_fast (closed here), exit_slow (the Python close_op)."},
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
