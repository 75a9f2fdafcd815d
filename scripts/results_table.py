"""Print the markdown tables of the committed results, or write them into the README.

    scripts/results_table.py                      # print both sections
    scripts/results_table.py --update README.md   # replace the text between the markers

The models table (results/models/*.json) goes between <!-- results:start --> and
<!-- results:end -->, the benchmark tables (results/bench/*.json) between <!-- bench:start -->
and <!-- bench:end -->. The JSON formats are described in seq2seq/results.py.
"""

import argparse
from pathlib import Path

from seq2seq.cli import run_cli
from seq2seq.errors import UserError
from seq2seq.results import sections, update_sections


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=Path("results"), help="results folder")
    parser.add_argument("--update", type=Path, metavar="FILE", help="rewrite FILE's sections")
    args = parser.parse_args()
    bodies = sections(args.results)
    if not args.update:
        print("\n\n".join(bodies.values()))
        return
    try:
        text = args.update.read_text(encoding="utf-8")
    except OSError as err:
        raise UserError(f"--update {args.update}: cannot read it ({err.strerror})") from None
    try:
        updated = update_sections(text, bodies)
    except UserError as err:
        raise UserError(f"{args.update}: {err}") from None
    args.update.write_text(updated, encoding="utf-8")
    print(f"updated {args.update}")


if __name__ == "__main__":
    run_cli(main)
