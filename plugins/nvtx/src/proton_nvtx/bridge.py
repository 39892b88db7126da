"""The Python side of NVTX ranges pushed on threads that hold the GIL.

The injection library calls :func:`push` and :func:`pop` there (the core's least-cost
scope calls, nothing in between), so a range nests with ``proton.scope`` in program order:
it is a scope of the thread's stack.  Threads without the GIL never come here: the
library interns their ranges itself.  Each range's time, when asked, is summed natively.
"""

from __future__ import annotations

from proton_core.plugin_api import close_scope, open_scope

#: open_scope(name) -> context id
push = open_scope
#: close_scope(context id) -> False when a proton scope opened inside the range is still open
pop = close_scope
