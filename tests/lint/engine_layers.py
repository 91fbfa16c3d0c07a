#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The engine's parts depend on each other one way (docs/architecture.md,
"The engine"): a part's files include only the headers of parts on lower
layers (and their own), and no part includes the core (engine_core.h) or
the facade (cohort/engine/engine.h). Reads src/engine/ and fails naming each
include that breaks the order, or a part's file that is not in the table
below.

    engine_layers.py ENGINE_DIR
"""
import pathlib
import re
import sys

# Lowest first. A file is named by its stem (lifecycle.h and lifecycle.cpp
# are the part "lifecycle"); backfill.cpp is the planner's.
LAYERS = [
    ["engine_support"],
    ["quotas", "account_admin", "reservations"],
    ["pass_state", "steps", "job_book", "pass_triggers"],
    ["prioritizer"],
    ["lifecycle"],
    ["admission", "preemption", "node_book"],
    ["pass_planner", "backfill"],
]
PART_OF = {"backfill": "pass_planner"}
FACADE = {"engine_core", "engine", "engine_actions", "engine_reservations", "explain"}
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}
# A part's own headers are included as "engine/NAME.h"; the facade as
# "cohort/engine/engine.h".
INCLUDE = re.compile(r'^#include "(?:engine/)?([a-z_/]+)\.h"', re.MULTILINE)


def main() -> int:
    src = pathlib.Path(sys.argv[1])
    problems = []
    for path in sorted(src.glob("*.[hc]*")):
        stem = path.stem
        if stem not in LEVEL:
            continue
        me = PART_OF.get(stem, stem)
        for included in INCLUDE.findall(path.read_text()):
            if included in ("engine_core", "cohort/engine/engine"):
                problems.append(f"{path.name} includes {included}.h: a part is handed the parts "
                                "it uses, and speaks cohort/engine/engine_types.h, not the "
                                "facade")
                continue
            if included not in LEVEL:
                if included in FACADE:
                    problems.append(f"{path.name} includes the facade's {included}.h")
                continue
            other = PART_OF.get(included, included)
            if other == me or LEVEL[included] < LEVEL[stem]:
                continue
            problems.append(f"{path.name} (layer {LEVEL[stem]}) includes {included}.h "
                            f"(layer {LEVEL[included]}): a part may use only the layers below "
                            "its own; note a trigger or take a hook instead")
    # Every engine source is placed: a new part must be given a layer.
    known = set(LEVEL) | FACADE
    for path in sorted(src.glob("*.cpp")):
        text = path.read_text()
        if "namespace cohort::engine" in text and path.stem not in known:
            problems.append(f"{path.name} is in cohort::engine but has no layer in "
                            "tests/lint/engine_layers.py; add it to LAYERS")
    for problem in problems:
        print(problem)
    print(f"{len(problems)} failed" if problems else "engine layers: one way")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
