/* The scope engine's side of proton_core._scope_fast (csrc/engine.c), for the module (csrc/scope_fast.c). */
#ifndef PROTON_CORE_ENGINE_H
#define PROTON_CORE_ENGINE_H

#include <Python.h>

/* Adds the C API capsule (_C_API) to the module: 0, or -1 with an exception. */
int engine_init(PyObject *module);
/* Takes the core's objects (a dict, proton_core.scope.engine_objects()): 0, or -1 with an exception. */
int engine_configure(PyObject *objects);
/* Calls per function of the C API: taken natively (_fast), handed to Python (_slow), answered from a remembered hit. */
PyObject *engine_counts(void);

/* Steps shared by the module's scope type and the C API (all need the GIL, and a configured engine). */
PyObject *engine_thread_dict(void);                          /* THREAD.__dict__ of this thread, borrowed */
int engine_settle(void);                                     /* the settlers: 0, -1 */
int engine_call_setters(PyObject *ctx);                      /* each of MANAGER.setters(ctx): 0, -1 */
int engine_manager_has(PyObject *attr);                      /* MANAGER.<attr> non-empty: 1, 0, -1 */
PyObject *engine_scope_child(PyObject *parent, PyObject *name); /* the id of scope name under parent: new ref */
PyObject *engine_top(PyObject *stack);                       /* innermost id of a stack list (borrowed), NULL: odd */
void engine_drop_last(PyObject *list);                       /* list.pop() of the last item, keeping the array */
PyObject *engine_now(void);                                  /* time.monotonic_ns() */

/* capi(function, argument=None, resolve=None): one call through the C API's table, for the contract tests. */
PyObject *engine_capi_call(PyObject *args);

#endif
