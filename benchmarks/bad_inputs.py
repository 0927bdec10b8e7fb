"""Counts of the bad-input suite (tests/bad_inputs.py, issue 12 item 10): every input run
through its command's main() in this process, as tests/test_bad_inputs.py runs it.

    inputs tried   distinct command lines
    clean          one error line, the documented exit status, no traceback, nothing written
    tracebacks     an exception escaped main()
    leaks          a file written or changed (an artifact, a plot, a store, a store's rows)
    rows lost      rows of the measurement store the cases share, before minus after

Usage: python benchmarks/bad_inputs.py [--show-problems]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from bad_inputs import cases, make_files, run  # noqa: E402


def row_count(store: Path) -> int:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE "
                                                  "type='table' AND name NOT LIKE 'sqlite_%'")]
        return sum(db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-problems", action="store_true",
                        help="print each input that is not handled cleanly, and why")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        files = make_files(workdir)
        rows_before = row_count(files["store"])
        counts: Counter = Counter()
        per_command: Counter = Counter()
        all_cases = cases()
        for case in all_cases:
            outcome = run(case, files, workdir)
            problems = outcome.problems(case)
            counts["clean"] += not problems
            counts[outcome.kind] += outcome.kind != "handled"
            per_command[f"{case.app} {case.args[0]}"] += 1
            if problems and args.show_problems:
                print(f"{case.id}: {'; '.join(problems)}")
        rows_lost = rows_before - row_count(files["store"])
    print(f"inputs tried {len(all_cases)}, clean {counts['clean']}, tracebacks "
          f"{counts['traceback']}, leaks {counts['leak']}, rows lost {rows_lost}")
    print("by command: " + ", ".join(f"{name} {n}" for name, n in sorted(per_command.items())))


if __name__ == "__main__":
    main()
