"""An example third-party sink: ``proton.finalize(output_format="csv")``.

Each node of the call tree becomes a row: its path, then every metric the
profile has, as exclusive (per node) values.  Written against the public
contract alone: ``proton_core.plugin_api`` and ``proton_core.hookimpl``.
"""

import csv

from proton_core import hookimpl
from proton_core.plugin_api import Profile


def write_csv(profile: Profile, path: str) -> None:
    rows = []
    for names, node in profile.tree.root.walk():
        if names:
            rows.append(("/".join(names), {**node.metrics, "time (ns)": node.value("time (ns)"),
                                           "count": node.value("count")}))
    columns = sorted({key for _, metrics in rows for key in metrics})
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["path", *columns])
        for name, metrics in rows:
            writer.writerow([name, *(metrics.get(c, "") for c in columns)])


@hookimpl
def proton_register_sinks(register) -> None:
    register("csv", write_csv, extension="csv", data=("tree", "trace"), description="one CSV row per node")
