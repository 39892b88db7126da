/* Reading the calling thread's Python stack straight from the interpreter's
 * frame structs.
 *
 * A launch callback runs on the thread that launched, often after a framework
 * released the GIL around its C++ work.  The public frame API would have to
 * take the GIL back and materialise a frame object per level; reading the
 * interpreter frames instead costs a few loads per level and no locking.  It
 * is safe because a thread's own frames change only when that thread runs
 * Python, which it cannot do while it is inside this call, and each frame
 * keeps its code object alive.  The layout is private to each CPython minor
 * version, hence the version gate; elsewhere the caller falls back. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "pyframes.h"

/* Some distributions ship Python headers without the internal ones: then
 * this file compiles to the fallback. */
#if defined(__has_include)
#if __has_include(<internal/pycore_frame.h>)
#define PROTON_HAVE_INTERNAL_FRAME_H 1
#endif
#endif

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED) && \
    defined(PROTON_HAVE_INTERNAL_FRAME_H)
#define PROTON_RAW_FRAMES 1
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include <internal/pycore_frame.h>
#endif

int proton_raw_frames_supported(void) {
#ifdef PROTON_RAW_FRAMES
  return 1;
#else
  return 0;
#endif
}

int proton_raw_frames(proton_frame* out, int max) {
#ifdef PROTON_RAW_FRAMES
  PyThreadState* ts = PyGILState_GetThisThreadState();
  if (ts == NULL) return 0;
#if PY_VERSION_HEX >= 0x030D0000
  _PyInterpreterFrame* f = ts->current_frame;
#else
  _PyInterpreterFrame* f = ts->cframe ? ts->cframe->current_frame : NULL;
#endif
  int n = 0;
  for (; f != NULL && n < max; f = f->previous) {
#if PY_VERSION_HEX >= 0x030C0000
    if (f->owner == FRAME_OWNED_BY_CSTACK) continue; /* the eval loop's entry shim */
#endif
#if PY_VERSION_HEX >= 0x030D0000
    if (f->f_executable == NULL || !PyCode_Check(f->f_executable)) continue;
    PyObject* code = f->f_executable;
#else
    PyObject* code = (PyObject*)f->f_code;
#endif
    if (_PyFrame_IsIncomplete(f)) continue; /* still being set up: no line yet */
    out[n].code = code;
    out[n].lasti = _PyInterpreterFrame_LASTI(f) * (int)sizeof(_Py_CODEUNIT);
    ++n;
  }
  return n;
#else
  (void)out;
  (void)max;
  return 0;
#endif
}
