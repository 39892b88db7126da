"""An example third-party sink: ``proton.finalize(output_format="csv")``.

Each node of the call tree becomes a row: its path, then every metric the
profile has, as exclusive (per node) values.
"""

import csv

import proton_core


def write_csv(profile, path):
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


@proton_core.hookimpl
def proton_register_sinks(register):
    register("csv", write_csv, extension="csv", data=("tree", "trace"), description="one CSV row per node")
