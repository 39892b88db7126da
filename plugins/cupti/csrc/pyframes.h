// The calling thread's Python frames, read without the GIL (see pyframes.c).
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  void* code;  // the frame's code object, borrowed: alive as long as the frame runs
  int lasti;   // byte offset of the instruction running in that frame
} proton_frame;

// 1 when this build reads the interpreter's frames directly (CPython 3.11-3.13
// with the GIL); 0 when callers must use the public, GIL-holding frame API.
int proton_raw_frames_supported(void);

// Fills `out` innermost frame first with at most `max` frames of the calling
// thread and returns how many; 0 for a thread Python does not know.  The
// thread need not hold the GIL: only its own frames are read, and those cannot
// change while it is inside this call.
int proton_raw_frames(proton_frame* out, int max);

#ifdef __cplusplus
}
#endif
