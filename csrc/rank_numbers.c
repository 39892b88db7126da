/* proton_core._rank_numbers: the merged view's per-file hot path in C (decision 0275).
 *
 * Reader: a rank file of a shape already learnt (proton_core/viewer/sameshape.py) read by its numbers.
 *   Reader(learnt) cuts the learnt file's bytes the way sameshape._tokens does (at each `"metrics":{` and
 *   `},"children":[`) into a template: literal runs (the skeleton, the marks, each metric's `"key":` and
 *   commas) and holes (a JSON number; a kernel's `"N","device_type":"CUDA"` or HIP label; the root's
 *   metadata; the tail).  It refuses (ValueError) a file it cannot vouch for: keys with characters that the
 *   Python reader's text replacements could touch, values other than numbers and device labels, whitespace.
 *   parse(data) matches another file against the template: every literal byte for byte, every number in
 *   JSON's grammar (ints of at most 18 digits, floats by PyOS_string_to_double as json does, never infinite).
 *   Anything else and the answer is -1: the caller reads that file the Python way, which decides.  Values
 *   are numbered as sameshape._flat numbers them (each node's pairs, then a separator 0).
 *   Sums per value are kept as Python's `map(add)` keeps them: an exact int until a float comes, then a
 *   double (the int converted with correct rounding, as int + float does); an int sum that would pass
 *   int64 is -1 (the Python way, with Python ints, takes over).
 * over_ranks, subtree_sums, take: imbalance.py's passes with the same float operations in the same order
 *   (Python's sum(): plain adds before 3.12, Neumaier's compensated sum from 3.12; a stable sort so that
 *   -0.0 and 0.0 come out as sorted() leaves them).
 * Build with -ffp-contract=off: no fused multiply-add may change a rounding.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static const char MARK_M[] = "\"metrics\":{";
static const char MARK_C[] = "},\"children\":[";
#define LEN_M ((Py_ssize_t)(sizeof(MARK_M) - 1))
#define LEN_C ((Py_ssize_t)(sizeof(MARK_C) - 1))
static const char DEV_KEY[] = "\"device_id\"";
static const char DEV_TYPE[] = ",\"device_type\":\"";

enum { OP_LIT, OP_NUM, OP_DEV, OP_META, OP_END };

typedef struct {
    uint8_t kind;
    Py_ssize_t a;  /* LIT: offset in the learnt bytes; NUM/DEV: value index */
    Py_ssize_t b;  /* LIT: length */
} Op;

typedef struct {
    PyObject_HEAD
    char *learnt;
    Py_ssize_t learnt_len;
    Op *ops;
    Py_ssize_t nops;
    Py_ssize_t nvalues;
    Py_ssize_t *devpos;  /* value index of each device_id pair, in order */
    Py_ssize_t ndev;
    int64_t *dev_learnt;
    int has_dev_learnt;
    /* a parsed file, not yet committed */
    int64_t *pi;
    double *pd;
    uint8_t *pf;  /* 1: the value is a float */
    /* sums over committed files */
    int64_t *si;
    double *sd;
    uint8_t *sf;
    double *last;  /* the last committed file's values as doubles, plus a trailing 0.0 */
} Reader;

/* The earliest mark at or after pos: its offset and length; -1 where none. */
static Py_ssize_t next_mark(const char *s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t *len)
{
    for (Py_ssize_t at = pos; at < n; at++) {
        if (s[at] == '"' && n - at >= LEN_M && memcmp(s + at, MARK_M, LEN_M) == 0) {
            *len = LEN_M;
            return at;
        }
        if (s[at] == '}' && n - at >= LEN_C && memcmp(s + at, MARK_C, LEN_C) == 0) {
            *len = LEN_C;
            return at;
        }
    }
    return -1;
}

static int mark_at(const char *s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t *len)
{
    if (n - pos >= LEN_M && memcmp(s + pos, MARK_M, LEN_M) == 0) {
        *len = LEN_M;
        return 1;
    }
    if (n - pos >= LEN_C && memcmp(s + pos, MARK_C, LEN_C) == 0) {
        *len = LEN_C;
        return 1;
    }
    return 0;
}

/* The end of a JSON number at pos (JSON's grammar), -1 if none; *is_float where it has a fraction or exponent. */
static Py_ssize_t number_end(const char *s, Py_ssize_t n, Py_ssize_t pos, int *is_float)
{
    Py_ssize_t i = pos;
    *is_float = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n)
        return -1;
    if (s[i] == '0')
        i++;
    else if (s[i] >= '1' && s[i] <= '9')
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    else
        return -1;
    if (i < n && s[i] == '.') {
        Py_ssize_t j = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == j)
            return -1;
        *is_float = 1;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        Py_ssize_t j = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == j)
            return -1;
        *is_float = 1;
    }
    return i;
}

/* An int of at most 18 digits (optionally negative) in [a, b) */
static int small_int(const char *s, Py_ssize_t a, Py_ssize_t b, int64_t *out)
{
    int neg = s[a] == '-';
    Py_ssize_t i = a + neg;
    if (b - i > 18 || b - i < 1)
        return 0;
    int64_t v = 0;
    for (; i < b; i++)
        v = v * 10 + (s[i] - '0');
    *out = neg ? -v : v;
    return 1;
}

/* A number at *pos into value slot k; 0 where this reader does not take it. */
static int read_number(Reader *r, const char *s, Py_ssize_t n, Py_ssize_t *pos, Py_ssize_t k)
{
    int is_float;
    Py_ssize_t end = number_end(s, n, *pos, &is_float);
    if (end < 0)
        return 0;
    if (!is_float) {
        if (!small_int(s, *pos, end, &r->pi[k]))
            return 0;
        r->pf[k] = 0;
    }
    else {
        char buf[64];
        Py_ssize_t len = end - *pos;
        if (len >= (Py_ssize_t)sizeof(buf))
            return 0;
        memcpy(buf, s + *pos, (size_t)len);
        buf[len] = 0;
        char *stop = NULL;
        double d = PyOS_string_to_double(buf, &stop, NULL);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (stop != buf + len || !isfinite(d))
            return 0;
        r->pd[k] = d;
        r->pf[k] = 1;
    }
    *pos = end;
    return 1;
}

/* `"N","device_type":"CUDA"` (or HIP) at *pos: N (a JSON int) into slot k. */
static int read_device(Reader *r, const char *s, Py_ssize_t n, Py_ssize_t *pos, Py_ssize_t k)
{
    Py_ssize_t i = *pos;
    if (i >= n || s[i] != '"')
        return 0;
    int is_float;
    Py_ssize_t end = number_end(s, n, i + 1, &is_float);
    if (end < 0 || is_float || end >= n || s[end] != '"')
        return 0;
    if (!small_int(s, i + 1, end, &r->pi[k]))
        return 0;
    i = end + 1;
    Py_ssize_t lt = (Py_ssize_t)sizeof(DEV_TYPE) - 1;
    if (n - i < lt || memcmp(s + i, DEV_TYPE, (size_t)lt) != 0)
        return 0;
    i += lt;
    if (n - i >= 5 && memcmp(s + i, "CUDA\"", 5) == 0)
        i += 5;
    else if (n - i >= 4 && memcmp(s + i, "HIP\"", 4) == 0)
        i += 4;
    else
        return 0;
    r->pf[k] = 0;
    *pos = i;
    return 1;
}

/* ---------------------------------------------------------------- building the template */

typedef struct {
    Op *ops;
    Py_ssize_t n, cap;
} OpList;

static int push(OpList *l, uint8_t kind, Py_ssize_t a, Py_ssize_t b)
{
    if (kind == OP_LIT && b == 0)
        return 0;
    if (l->n == l->cap) {
        Py_ssize_t cap = l->cap ? l->cap * 2 : 1024;
        Op *ops = PyMem_Realloc(l->ops, (size_t)cap * sizeof(Op));
        if (!ops) {
            PyErr_NoMemory();
            return -1;
        }
        l->ops = ops;
        l->cap = cap;
    }
    l->ops[l->n++] = (Op){kind, a, b};
    return 0;
}

/* A key's characters this reader vouches for: printable ASCII that no text replacement of _flat touches. */
static int plain_key_char(unsigned char c)
{
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '{' && c != '}' && c != '[' && c != ']' &&
           c != ',';
}

static int refuse(const char *why)
{
    PyErr_Format(PyExc_ValueError, "not a file this reader vouches for: %s", why);
    return -1;
}

/* The template of the learnt file's bytes s[0:n]; -1 with ValueError where it cannot be made. */
static int build(Reader *r, const char *s, Py_ssize_t n)
{
    OpList ops = {NULL, 0, 0}, dev = {NULL, 0, 0};
    Py_ssize_t pos = 0, lit = 0, k = 0, region = 0, mlen = 0;
    for (;;) {
        Py_ssize_t m = next_mark(s, n, pos, &mlen);
        if (m < 0)
            break;
        pos = m + mlen;
        /* a node's metrics: "key":value pairs */
        if (!mark_at(s, n, pos, &mlen) && !(region == 0 && pos < n && s[pos] == '}')) {
            for (;;) {
                if (pos >= n || s[pos] != '"')
                    goto bad;
                Py_ssize_t key = pos++;
                while (pos < n && plain_key_char((unsigned char)s[pos]))
                    pos++;
                if (pos + 1 >= n || s[pos] != '"' || s[pos + 1] != ':')
                    goto bad;
                pos += 2;
                int is_dev = pos - key == (Py_ssize_t)sizeof(DEV_KEY) &&
                             memcmp(s + key, DEV_KEY, sizeof(DEV_KEY) - 1) == 0;
                if (push(&ops, OP_LIT, lit, pos - lit) < 0)
                    goto fail;
                if (is_dev && pos < n && s[pos] == '"') {
                    Py_ssize_t i = pos + 1;
                    int f;
                    Py_ssize_t end = number_end(s, n, i, &f);
                    if (end < 0 || f || end >= n || s[end] != '"')
                        goto bad;
                    i = end + 1;
                    Py_ssize_t lt = (Py_ssize_t)sizeof(DEV_TYPE) - 1;
                    if (n - i < lt || memcmp(s + i, DEV_TYPE, (size_t)lt) != 0)
                        goto bad;
                    i += lt;
                    if (n - i >= 5 && memcmp(s + i, "CUDA\"", 5) == 0)
                        i += 5;
                    else if (n - i >= 4 && memcmp(s + i, "HIP\"", 4) == 0)
                        i += 4;
                    else
                        goto bad;
                    if (push(&ops, OP_DEV, k, 0) < 0)
                        goto fail;
                    pos = i;
                }
                else {
                    int f;
                    Py_ssize_t end = number_end(s, n, pos, &f);
                    if (end < 0)
                        goto bad;
                    if (push(&ops, OP_NUM, k, 0) < 0)
                        goto fail;
                    pos = end;
                }
                if (is_dev && push(&dev, OP_NUM, k, 0) < 0)
                    goto fail;
                k++;
                lit = pos;
                if (pos < n && s[pos] == ',') {
                    pos++;
                    continue;
                }
                break;
            }
        }
        k++;  /* the node's separator */
        if (region == 0 && !mark_at(s, n, pos, &mlen)) {
            /* the root: its metadata follows its metrics, up to the next mark */
            if (pos >= n || s[pos] != '}')
                goto bad;
            if (push(&ops, OP_LIT, lit, pos - lit) < 0 || push(&ops, OP_META, 0, 0) < 0)
                goto fail;
            Py_ssize_t m2 = next_mark(s, n, pos, &mlen);
            if (m2 < 0)
                goto bad;
            pos = lit = m2;
        }
        if (!mark_at(s, n, pos, &mlen))
            goto bad;
        pos += mlen;
        region++;
    }
    if (region == 0)
        goto bad;
    if (push(&ops, OP_LIT, lit, pos - lit) < 0 || push(&ops, OP_END, 0, 0) < 0)
        goto fail;
    r->ops = ops.ops;
    r->nops = ops.n;
    r->nvalues = k;
    r->ndev = dev.n;
    r->devpos = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(dev.n ? dev.n : 1));
    r->dev_learnt = PyMem_Malloc(sizeof(int64_t) * (size_t)(dev.n ? dev.n : 1));
    if (!r->devpos || !r->dev_learnt) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < dev.n; i++)
        r->devpos[i] = dev.ops[i].a;
    PyMem_Free(dev.ops);
    return 0;
bad:
    refuse("a layout the Python reader must read");
fail:
    PyMem_Free(ops.ops);
    PyMem_Free(dev.ops);
    return -1;
}

/* ---------------------------------------------------------------- reading a file */

/* Match data against the template into the pending values; the tail's offset, or -1 (not this reader's). */
static Py_ssize_t match(Reader *r, const char *s, Py_ssize_t n)
{
    Py_ssize_t pos = 0, mlen;
    const char *learnt = r->learnt;
    memset(r->pf, 0, (size_t)r->nvalues);
    memset(r->pi, 0, sizeof(int64_t) * (size_t)r->nvalues);  /* separators are int 0 */
    for (Py_ssize_t o = 0; o < r->nops; o++) {
        const Op *op = &r->ops[o];
        switch (op->kind) {
        case OP_LIT:
            if (n - pos < op->b || memcmp(s + pos, learnt + op->a, (size_t)op->b) != 0)
                return -1;
            pos += op->b;
            break;
        case OP_NUM:
            if (!read_number(r, s, n, &pos, op->a))
                return -1;
            break;
        case OP_DEV:
            if (!read_device(r, s, n, &pos, op->a))
                return -1;
            break;
        case OP_META: {
            Py_ssize_t m = next_mark(s, n, pos, &mlen);
            if (m < 0 || (m > pos && s[pos] != '}'))
                return -1;
            for (Py_ssize_t i = pos; i < m; i++)
                if ((unsigned char)s[i] >= 0x80)
                    return -1;  /* text the Python reader decodes (and may refuse) */
            pos = m;
            break;
        }
        case OP_END:
            if (next_mark(s, n, pos, &mlen) >= 0)
                return -1;
            return pos;
        }
    }
    return -1;
}

static int alloc_values(Reader *r)
{
    size_t n = (size_t)r->nvalues;
    r->pi = PyMem_Calloc(n, sizeof(int64_t));
    r->pd = PyMem_Calloc(n, sizeof(double));
    r->pf = PyMem_Calloc(n, 1);
    r->si = PyMem_Calloc(n, sizeof(int64_t));
    r->sd = PyMem_Calloc(n, sizeof(double));
    r->sf = PyMem_Calloc(n, 1);
    r->last = PyMem_Calloc(n + 1, sizeof(double));
    if (!r->pi || !r->pd || !r->pf || !r->si || !r->sd || !r->sf || !r->last) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void Reader_dealloc(Reader *r)
{
    PyMem_Free(r->learnt);
    PyMem_Free(r->ops);
    PyMem_Free(r->devpos);
    PyMem_Free(r->dev_learnt);
    PyMem_Free(r->pi);
    PyMem_Free(r->pd);
    PyMem_Free(r->pf);
    PyMem_Free(r->si);
    PyMem_Free(r->sd);
    PyMem_Free(r->sf);
    PyMem_Free(r->last);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static int Reader_init(Reader *r, PyObject *args, PyObject *kw)
{
    Py_buffer b;
    if (r->learnt) {
        PyErr_SetString(PyExc_TypeError, "Reader is initialised once");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "y*:Reader", &b))
        return -1;
    r->learnt = PyMem_Malloc((size_t)(b.len ? b.len : 1));
    if (!r->learnt) {
        PyBuffer_Release(&b);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(r->learnt, b.buf, (size_t)b.len);
    r->learnt_len = b.len;
    PyBuffer_Release(&b);
    if (build(r, r->learnt, r->learnt_len) < 0 || alloc_values(r) < 0)
        return -1;
    if (match(r, r->learnt, r->learnt_len) < 0)
        return refuse("numbers the Python reader must read");
    for (Py_ssize_t i = 0; i < r->ndev; i++) {
        Py_ssize_t k = r->devpos[i];
        if (r->pf[k])
            return refuse("a device id that is not an int");
        r->dev_learnt[i] = r->pi[k];
    }
    return 0;
}

static PyObject *value_object(int64_t i, double d, uint8_t f)
{
    return f ? PyFloat_FromDouble(d) : PyLong_FromLongLong((long long)i);
}

static int ready(Reader *r)
{
    if (!r->last) {
        PyErr_SetString(PyExc_ValueError, "Reader was not made from a learnt file");
        return 0;
    }
    return 1;
}

/* values(data): the file's values (ints, floats) numbered as _flat numbers them; None where not this reader's. */
static PyObject *Reader_values(Reader *r, PyObject *arg)
{
    if (!ready(r))
        return NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t at = match(r, b.buf, b.len);
    PyBuffer_Release(&b);
    if (at < 0)
        Py_RETURN_NONE;
    PyObject *out = PyList_New(r->nvalues);
    if (!out)
        return NULL;
    for (Py_ssize_t k = 0; k < r->nvalues; k++) {
        PyObject *v = value_object(r->pi[k], r->pd[k], r->pf[k]);
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, v);
    }
    return out;
}

/* parse(data): the tail's offset where data has the learnt shape and its sums can be added, else -1. */
static PyObject *Reader_parse(Reader *r, PyObject *arg)
{
    if (!ready(r))
        return NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t at = match(r, b.buf, b.len);
    PyBuffer_Release(&b);
    if (at >= 0) {
        for (Py_ssize_t k = 0; k < r->nvalues; k++) {
            int64_t t;
            if (!r->pf[k] && !r->sf[k] && __builtin_add_overflow(r->si[k], r->pi[k], &t)) {
                at = -1;  /* past int64: Python ints take over */
                break;
            }
        }
    }
    return PyLong_FromSsize_t(at);
}

/* moved(): the indexes (in device_id pairs' order) whose device differs from the learnt file's. */
static PyObject *Reader_moved(Reader *r, PyObject *unused)
{
    if (!ready(r))
        return NULL;
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    for (Py_ssize_t i = 0; i < r->ndev; i++) {
        if (r->pi[r->devpos[i]] != r->dev_learnt[i]) {
            PyObject *v = PyLong_FromSsize_t(i);
            if (!v || PyList_Append(out, v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(v);
        }
    }
    return out;
}

/* commit(): the parsed file's values added to the sums (as Python adds int and float) and kept as the last. */
static PyObject *Reader_commit(Reader *r, PyObject *unused)
{
    if (!ready(r))
        return NULL;
    for (Py_ssize_t k = 0; k < r->nvalues; k++) {
        if (r->pf[k]) {
            double x = r->pd[k];
            if (!r->sf[k]) {
                r->sd[k] = (double)r->si[k];
                r->sf[k] = 1;
            }
            r->sd[k] = r->sd[k] + x;
            r->last[k] = x;
        }
        else {
            int64_t x = r->pi[k];
            if (r->sf[k])
                r->sd[k] = r->sd[k] + (double)x;
            else
                r->si[k] += x;
            r->last[k] = (double)x;
        }
    }
    r->last[r->nvalues] = 0.0;
    Py_RETURN_NONE;
}

/* sums(): the sums as a list of ints and floats (what map(add) would have given). */
static PyObject *Reader_sums(Reader *r, PyObject *unused)
{
    if (!ready(r))
        return NULL;
    PyObject *out = PyList_New(r->nvalues);
    if (!out)
        return NULL;
    for (Py_ssize_t k = 0; k < r->nvalues; k++) {
        PyObject *v = value_object(r->si[k], r->sd[k], r->sf[k]);
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, v);
    }
    return out;
}

/* last(): the last committed file's values as doubles (bytes), a trailing 0.0 after them. */
static PyObject *Reader_last(Reader *r, PyObject *unused)
{
    if (!ready(r))
        return NULL;
    return PyBytes_FromStringAndSize((const char *)r->last, (Py_ssize_t)sizeof(double) * (r->nvalues + 1));
}

static PyMethodDef Reader_methods[] = {
    {"values", (PyCFunction)Reader_values, METH_O, "the file's values as _flat gives them, or None"},
    {"parse", (PyCFunction)Reader_parse, METH_O, "match a file: the tail's offset, or -1"},
    {"moved", (PyCFunction)Reader_moved, METH_NOARGS, "device_id pairs whose device differs from the learnt file's"},
    {"commit", (PyCFunction)Reader_commit, METH_NOARGS, "add the parsed file into the sums"},
    {"sums", (PyCFunction)Reader_sums, METH_NOARGS, "the sums as a list of ints and floats"},
    {"last", (PyCFunction)Reader_last, METH_NOARGS, "the last committed file's values as doubles (bytes)"},
    {NULL, NULL, 0, NULL},
};

static PyObject *Reader_size(Reader *r, void *unused)
{
    return PyLong_FromSsize_t(r->nvalues);
}

static PyGetSetDef Reader_getset[] = {
    {"size", (getter)Reader_size, NULL, "how many values a file of this shape has", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "proton_core._rank_numbers.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A learnt rank file's template; reads files of its shape by their numbers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_methods = Reader_methods,
    .tp_getset = Reader_getset,
};

/* ---------------------------------------------------------------- imbalance passes */

static int get_doubles(PyObject *o, Py_buffer *b, const char *what)
{
    if (PyObject_GetBuffer(o, b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (b->itemsize != 8 || !b->format || strcmp(b->format, "d") != 0) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_TypeError, "%s: a buffer of doubles is needed", what);
        return -1;
    }
    return 0;
}

static int get_indexes(PyObject *o, Py_buffer *b, const char *what)
{
    if (PyObject_GetBuffer(o, b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (b->itemsize != 8 || !b->format || (strcmp(b->format, "q") != 0 && strcmp(b->format, "l") != 0)) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_TypeError, "%s: a buffer of int64 is needed", what);
        return -1;
    }
    return 0;
}

/* take(values, where): bytes of doubles, values[where[k]] for each k (IndexError out of range). */
static PyObject *take(PyObject *self, PyObject *args)
{
    PyObject *vo, *wo;
    if (!PyArg_ParseTuple(args, "OO:take", &vo, &wo))
        return NULL;
    Py_buffer v, w;
    if (get_doubles(vo, &v, "take") < 0)
        return NULL;
    if (get_indexes(wo, &w, "take") < 0) {
        PyBuffer_Release(&v);
        return NULL;
    }
    Py_ssize_t nv = v.len / 8, nw = w.len / 8;
    const double *src = v.buf;
    const int64_t *idx = w.buf;
    PyObject *out = PyBytes_FromStringAndSize(NULL, nw * 8);
    if (out) {
        double *dst = (double *)PyBytes_AS_STRING(out);
        for (Py_ssize_t k = 0; k < nw; k++) {
            if (idx[k] < 0 || idx[k] >= nv) {
                Py_CLEAR(out);
                PyErr_SetString(PyExc_IndexError, "take: index out of range");
                break;
            }
            dst[k] = src[idx[k]];
        }
    }
    PyBuffer_Release(&v);
    PyBuffer_Release(&w);
    return out;
}

/* subtree_sums(values, order, ends): per position k of order, values summed over its subtree: a prefix
 * sum over values[order] (its first item the first value, as itertools.accumulate gives it, after 0.0)
 * and prefix[ends[k]] - prefix[k]. */
static PyObject *subtree_sums(PyObject *self, PyObject *args)
{
    PyObject *vo, *oo, *eo;
    if (!PyArg_ParseTuple(args, "OOO:subtree_sums", &vo, &oo, &eo))
        return NULL;
    Py_buffer v, o, e;
    if (get_doubles(vo, &v, "subtree_sums") < 0)
        return NULL;
    if (get_indexes(oo, &o, "subtree_sums") < 0) {
        PyBuffer_Release(&v);
        return NULL;
    }
    if (get_indexes(eo, &e, "subtree_sums") < 0) {
        PyBuffer_Release(&v);
        PyBuffer_Release(&o);
        return NULL;
    }
    Py_ssize_t nv = v.len / 8, n = o.len / 8;
    const double *src = v.buf;
    const int64_t *order = o.buf, *ends = e.buf;
    PyObject *out = NULL;
    double *prefix = NULL;
    if (e.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "subtree_sums: order and ends differ in length");
        goto done;
    }
    prefix = PyMem_Malloc(sizeof(double) * (size_t)(n + 1));
    if (!prefix) {
        PyErr_NoMemory();
        goto done;
    }
    prefix[0] = 0.0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (order[k] < 0 || order[k] >= nv) {
            PyErr_SetString(PyExc_IndexError, "subtree_sums: index out of range");
            goto done;
        }
        double x = src[order[k]];
        prefix[k + 1] = k == 0 ? x : prefix[k] + x;
    }
    out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!out)
        goto done;
    double *dst = (double *)PyBytes_AS_STRING(out);
    for (Py_ssize_t k = 0; k < n; k++) {
        if (ends[k] < 0 || ends[k] > n) {
            Py_CLEAR(out);
            PyErr_SetString(PyExc_IndexError, "subtree_sums: end out of range");
            goto done;
        }
        dst[k] = prefix[ends[k]] - prefix[k];
    }
done:
    PyMem_Free(prefix);
    PyBuffer_Release(&v);
    PyBuffer_Release(&o);
    PyBuffer_Release(&e);
    return out;
}

/* Python's sum() of floats, started from the int 0. */
static double python_sum(const double *x, Py_ssize_t n)
{
    if (n == 0)
        return 0.0;
    double f = 0.0 + x[0];
#if PY_VERSION_HEX >= 0x030C0000
    double c = 0.0;
    for (Py_ssize_t i = 1; i < n; i++) {
        double t = f + x[i];
        if (fabs(f) >= fabs(x[i]))
            c += (f - t) + x[i];
        else
            c += (x[i] - t) + f;
        f = t;
    }
    if (c && isfinite(c))
        f += c;
#else
    for (Py_ssize_t i = 1; i < n; i++)
        f += x[i];
#endif
    return f;
}

/* over_ranks(columns, ranks, order, size, scale, shown, nan): imbalance.over_ranks for columns of doubles
 * without NaN (None where one has a NaN: the Python way decides); shown a sequence of numbers or None. */
static PyObject *over_ranks(PyObject *self, PyObject *args)
{
    PyObject *cols, *ranks, *oo, *shown, *nan;
    Py_ssize_t size;
    double scale;
    if (!PyArg_ParseTuple(args, "O!O!OndOO:over_ranks", &PyList_Type, &cols, &PyList_Type, &ranks, &oo, &size,
                          &scale, &shown, &nan))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(cols);
    if (count == 0 || PyList_GET_SIZE(ranks) != count) {
        PyErr_SetString(PyExc_ValueError, "over_ranks: one rank number per column is needed");
        return NULL;
    }
    Py_buffer o;
    if (get_indexes(oo, &o, "over_ranks") < 0)
        return NULL;
    Py_ssize_t n = o.len / 8;
    const int64_t *order = o.buf;
    Py_buffer *bufs = PyMem_Calloc((size_t)count, sizeof(Py_buffer));
    double *row = PyMem_Malloc(sizeof(double) * (size_t)count * 2);
    PyObject *lists[5] = {NULL, NULL, NULL, NULL, NULL}, *result = NULL, *fast_shown = NULL;
    Py_ssize_t got = 0;
    if (!bufs || !row) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < count; got++) {
        if (get_doubles(PyList_GET_ITEM(cols, got), &bufs[got], "over_ranks") < 0)
            goto done;
        if (bufs[got].len / 8 != n) {
            got++;
            PyErr_SetString(PyExc_ValueError, "over_ranks: a column's length is not the order's");
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (order[k] < 0 || order[k] >= size) {
            PyErr_SetString(PyExc_IndexError, "over_ranks: a node out of range");
            goto done;
        }
        for (Py_ssize_t r = 0; r < count; r++) {
            double x = ((const double *)bufs[r].buf)[k];
            if (x != x) {
                result = Py_None;  /* NaN: sorted() and tuple.index have Python's answer */
                Py_INCREF(result);
                goto done;
            }
        }
    }
    if (shown != Py_None) {
        fast_shown = PySequence_Fast(shown, "over_ranks: shown must be a sequence");
        if (!fast_shown)
            goto done;
        if (PySequence_Fast_GET_SIZE(fast_shown) < size) {
            PyErr_SetString(PyExc_ValueError, "over_ranks: shown is shorter than the table");
            goto done;
        }
    }
    for (int j = 0; j < 5; j++) {
        lists[j] = PyList_New(size);
        if (!lists[j])
            goto done;
        PyObject *fill = j == 3 ? Py_None : nan;
        for (Py_ssize_t i = 0; i < size; i++) {
            Py_INCREF(fill);
            PyList_SET_ITEM(lists[j], i, fill);
        }
    }
    double *sorted = row + count;
    Py_ssize_t mid = count / 2;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = order[k];
        if (fast_shown) {
            double d = PyFloat_AsDouble(PySequence_Fast_ITEMS(fast_shown)[i]);
            if (d == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();  /* not a number: the Python way compares it as it is */
                result = Py_None;
                Py_INCREF(result);
                goto done;
            }
            if (d != d)
                continue;
        }
        for (Py_ssize_t r = 0; r < count; r++)
            row[r] = ((const double *)bufs[r].buf)[k];
        /* a stable insertion sort, as sorted() is stable (-0.0 == 0.0 keep their order) */
        for (Py_ssize_t r = 0; r < count; r++) {
            double x = row[r];
            Py_ssize_t j = r;
            while (j > 0 && sorted[j - 1] > x) {
                sorted[j] = sorted[j - 1];
                j--;
            }
            sorted[j] = x;
        }
        double lo = sorted[0], hi = sorted[count - 1];
        double med = count % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
        Py_ssize_t top = 0;
        while (row[top] != hi)
            top++;
        double total = python_sum(row, count);
        double imb = hi > 0 ? (hi - total / count) / hi : 0.0;
        double vals[5] = {lo * scale, med * scale, hi * scale, 0.0, imb};
        for (int j = 0; j < 5; j++) {
            PyObject *v;
            if (j == 3) {
                v = PyList_GET_ITEM(ranks, top);
                Py_INCREF(v);
            }
            else if (!(v = PyFloat_FromDouble(vals[j])))
                goto done;
            PyObject *old = PyList_GET_ITEM(lists[j], i);
            PyList_SET_ITEM(lists[j], i, v);
            Py_DECREF(old);
        }
    }
    result = PyTuple_Pack(5, lists[0], lists[1], lists[2], lists[3], lists[4]);
done:
    for (int j = 0; j < 5; j++)
        Py_XDECREF(lists[j]);
    Py_XDECREF(fast_shown);
    for (Py_ssize_t r = 0; r < got; r++)
        PyBuffer_Release(&bufs[r]);
    PyMem_Free(bufs);
    PyMem_Free(row);
    PyBuffer_Release(&o);
    return result;
}

static PyMethodDef module_methods[] = {
    {"take", take, METH_VARARGS, "take(values, where): bytes of doubles values[where[k]]"},
    {"subtree_sums", subtree_sums, METH_VARARGS, "subtree_sums(values, order, ends): bytes of doubles"},
    {"over_ranks", over_ranks, METH_VARARGS,
     "over_ranks(columns, ranks, order, size, scale, shown, nan): (low, median, high, slowest, imbalance) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "proton_core._rank_numbers",
    "The merged view's per-file hot path (proton_core/viewer/sameshape.py, imbalance.py) in C.", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__rank_numbers(void)
{
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&ReaderType);
    if (PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(&ReaderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
