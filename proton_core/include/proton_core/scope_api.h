/* proton_core's scope engine, for other C/C++ extensions: one versioned table of functions.
 *
 * The core owns each thread's scope stack, its state and op, the interning of context ids and the
 * calls that tell the running backends the context current on a thread.  An extension that opens
 * scopes natively (NVTX ranges, torch modules, a Triton launch hook) goes through this table and
 * never reads a core Python object itself, so the core may change how it keeps that state.
 *
 * Use (with the GIL held, once, e.g. at module init or when configured):
 *
 *     #include <proton_core/scope_api.h>
 *     const ProtonScopeAPI *api = ProtonScopeAPI_Import(1);   // NULL with ImportError set
 *
 * The table lives in the capsule PROTON_SCOPE_API_CAPSULE ("proton_core._scope_fast._C_API", as
 * CPython's datetime and NumPy export theirs).  `version` grows when members are appended; a member
 * is never removed or changed while the major number stays, and `size` says how many bytes the core
 * filled, so an extension built against a newer header can tell which members exist.
 *
 * Every function needs the GIL.  Context ids are unsigned 64-bit; 0 is the root (no scope).
 * Unless said otherwise a function returns 0 on success and -1 with a Python exception set.
 *
 * Headers: this file includes <Python.h> (best first, as CPython asks).  proton_core.native_api.get_include()
 * returns the folder to add to the include path.
 */
#ifndef PROTON_CORE_SCOPE_API_H
#define PROTON_CORE_SCOPE_API_H

#include <Python.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PROTON_SCOPE_API_CAPSULE "proton_core._scope_fast._C_API"
#define PROTON_SCOPE_API_VERSION 1u

enum { PROTON_CONTEXT_SCOPE = 1, PROTON_CONTEXT_STATE = 2, PROTON_CONTEXT_OP = 3, PROTON_CONTEXT_FOREIGN = 4 };

typedef struct ProtonScopeAPI {
    uint32_t version; /* PROTON_SCOPE_API_VERSION of the core that filled the table */
    uint32_t size;    /* sizeof(ProtonScopeAPI) in that core: members past it are absent */

    /* Open scope `name` (an exact, non-empty str) on the calling thread under its innermost scope,
     * with any state or op kept on top; *id is the new scope's context id.  Opens while every
     * session is deactivated too (nothing is recorded then), so a later activate finds the nesting. */
    int (*open_scope)(PyObject *name, uint64_t *id);
    /* Close the calling thread's innermost scope if it is `id`: 1 closed, 0 another scope is
     * innermost (nothing changed), -1 an exception. */
    int (*close_scope)(uint64_t id);

    /* Open op `name` (an exact, non-empty str: it names the next kernel) at the calling thread's
     * context, replacing an op left open; *id is the op's context id. */
    int (*open_op)(PyObject *name, uint64_t *id);
    /* Close the calling thread's op (nothing if none is open). */
    int (*close_op)(void);
    /* The cached launch step: open the op and count the numbers that the launch metadata `data`
     * (an exact dict; the key is tuple(data.items())) stood for at this context the last time it
     * was opened the general way in this generation.  1 done; 0 not cached or an op already open
     * (nothing changed: open it the general way); -1 an exception (TypeError: an unhashable value). */
    int (*open_launch_op)(PyObject *data);

    /* The context published for the calling thread (innermost scope, state and op). */
    int (*current)(uint64_t *id);
    /* The innermost scope open on the calling thread (0: none); plugins' pending frames settle first. */
    int (*innermost_scope)(uint64_t *id);
    /* 1 while any session records, 0 otherwise (never fails): cheap, for per-event hooks. */
    int (*is_active)(void);

    /* What context `id` is: PROTON_CONTEXT_SCOPE, _STATE or _OP (the core's own ids), PROTON_CONTEXT_FOREIGN
     * (an id of a plugin's reserved range), or -1 with an exception (an id never handed out).  Ids never
     * change meaning: an answer may be cached. */
    int (*context_kind)(uint64_t id);

    /* Reserve the context ids a plugin interns itself (natively, on threads without the GIL):
     * *first is the first id of a range of 2**40 ids only `owner` uses; the same owner gets the same
     * range again.  `resolve(id)` (a callable, GIL held) names an id of the range: (parent id, name)
     * or None; profiles spell such ids like the core's own scopes. */
    int (*reserve_ids)(const char *owner, PyObject *resolve, uint64_t *first);
} ProtonScopeAPI;

/* The core's table, at least version `min_version`; NULL with ImportError set otherwise. */
static inline const ProtonScopeAPI *ProtonScopeAPI_Import(uint32_t min_version) {
    const ProtonScopeAPI *api = (const ProtonScopeAPI *)PyCapsule_Import(PROTON_SCOPE_API_CAPSULE, 0);
    if (api == NULL) return NULL;
    if (api->version < min_version || api->size < sizeof(uint32_t) * 2) {
        PyErr_Format(PyExc_ImportError,
                     "proton_core's scope API is version %u, this extension needs %u: upgrade proton-profiler",
                     (unsigned)api->version, (unsigned)min_version);
        return NULL;
    }
    return api;
}

#ifdef __cplusplus
}
#endif

#endif /* PROTON_CORE_SCOPE_API_H */
