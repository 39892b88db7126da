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

/* capi(function, argument=None, resolve=None): one call through the C API's table, for the contract tests. */
PyObject *engine_capi_call(PyObject *args);

#endif
