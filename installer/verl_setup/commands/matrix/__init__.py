"""`verl-setup matrix list|show|validate|prove|check|propose`: the compatibility data itself."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.errors import BadInputError
from verl_setup.matrix.load import default_matrix_path, load_matrix, validate
from verl_setup.output import emit, envelope


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The matrix subcommands and their flags."""
    msub = p.add_subparsers(
        dest="matrix_cmd", required=True, metavar="list|show|validate|prove|check|propose"
    )
    ls = msub.add_parser("list", help="every row, one line each")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--matrix", type=Path, metavar="FILE")
    ls.set_defaults(run=run_list)
    show = msub.add_parser("show", help="one row with its evidence")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    show.add_argument("--matrix", type=Path, metavar="FILE")
    show.set_defaults(run=run_show)
    val = msub.add_parser("validate", help="check a rows file; report file, line, row and key")
    val.add_argument("file", nargs="?", type=Path)
    val.add_argument("--json", action="store_true")
    val.set_defaults(run=run_validate)
    prove = msub.add_parser(
        "prove", help="resolve, install and import-probe rows for real; record proof.yaml"
    )
    prove.add_argument("ids", nargs="*", metavar="ROW", help="rows to prove (default: every row)")
    prove.add_argument("--matrix", type=Path, metavar="FILE")
    prove.add_argument("--json", action="store_true", help="machine-readable results")
    prove.add_argument("--no-record", action="store_true", help="do not write proof.yaml")
    prove.set_defaults(run=run_prove)
    check_p = msub.add_parser(
        "check",
        help="re-resolve rows against the index today; what moved and why (exit 5: a regression)",
        description=(
            "Re-resolve rows against the index today and compare them with matrices/resolved.yaml. "
            "Exit 0: every row still resolves, drift included (newer releases inside the pins' "
            "ranges, a dependency added or dropped, a re-upload: reported under `drifted`, not a "
            "failure). Exit 5: a regression (a row no longer resolves; a pin or a distribution it "
            "resolved to is yanked or deleted; a package installed last is gone; its wheels' glibc "
            "floor is above the row's; a wheel that an enabled wheel source is said to serve is "
            "missing from its world, or changed its sha256 under the same name). Exit 4: the index "
            "or a wheel source could not be read. Wheel sources are read for the worlds the named "
            "rows use (all, with no row named)."
        ),
    )
    check_p.add_argument("ids", nargs="*", metavar="ROW", help="rows to check (default: every row)")
    check_p.add_argument("--matrix", type=Path, metavar="FILE")
    check_p.add_argument("--json", action="store_true", help="machine-readable results")
    check_p.add_argument(
        "--record",
        action="store_true",
        help="record today's resolutions as the baseline (resolved.yaml) and what each wheel source "
        "holds, dated (wheel-sources-seen.yaml)",
    )
    check_p.set_defaults(run=run_check)
    propose = msub.add_parser(
        "propose", help="candidate rows for releases newer than the matrix, from their metadata"
    )
    propose.add_argument(
        "--since",
        metavar="DATE",
        help="releases uploaded after DATE (default: the newest pinned release's date)",
    )
    propose.add_argument("--out", type=Path, metavar="FILE", help="write the candidates here (a new file)")
    propose.add_argument("--matrix", type=Path, metavar="FILE")
    propose.add_argument("--json", action="store_true", help="machine-readable results")
    propose.set_defaults(run=run_propose)


def run_list(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:  # noqa: ARG001  # every command's signature
    """Every row, one line each (or JSON)."""
    from verl_setup.commands.text_output import matrix_list_text  # noqa: PLC0415

    matrix = load_matrix(args.matrix)
    if args.json:
        rows = [{**r.to_dict(), "proof": matrix.proof_json(r)} for r in matrix.rows]
        out.write(
            envelope("matrix list", {"matrix": str(matrix.path), "sha256": matrix.sha256, "rows": rows})
        )
    else:
        out.write(matrix_list_text(matrix))
    return 0


def run_show(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:  # noqa: ARG001  # every command's signature
    """One row with its evidence and proof."""
    from verl_setup.commands.text_output import row_text  # noqa: PLC0415

    matrix = load_matrix(args.matrix)
    row = matrix.row(args.id)
    if args.json:
        out.write(envelope("matrix show", {"row": row.to_dict(), "proof": matrix.proof_json(row)}))
    else:
        out.write(row_text(row, matrix))
    return 0


def run_validate(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:  # noqa: ARG001  # every command's signature
    """Every problem of a rows file as file:line: row: key: message; exit 2 when there is one."""
    path = (args.file or default_matrix_path()).resolve()
    problems, matrix = validate(path)
    if args.json:
        error = BadInputError(f"{path}: {len(problems)} problems") if problems else None
        emit(out, "matrix validate", {"file": str(path), "ok": not problems, "problems": problems}, error)
    elif problems:
        out.write("".join(f"{p}\n" for p in problems))
    else:
        assert matrix is not None  # noqa: S101  # check() returns a matrix when there are no problems
        out.write(f"{path}: {len(matrix.rows)} rows, no problems\n")
    return 2 if problems else 0


def run_prove(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:  # noqa: ARG001  # every command's signature
    """`matrix prove` (maintenance/prove.py)."""
    from verl_setup.maintenance.prove import command  # noqa: PLC0415  # only this subcommand needs it

    matrix = load_matrix(args.matrix)
    return command(
        args.ids, matrix, json_out=args.json, keep_record=not args.no_record, out=out, quiet=args.quiet
    )


def run_check(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`matrix check` (commands/matrix/check_rows.py)."""
    from verl_setup.commands.matrix.check_rows import command  # noqa: PLC0415

    matrix = load_matrix(args.matrix)
    return command(
        args.ids, matrix, json_out=args.json, record=args.record, env=env, out=out, quiet=args.quiet
    )


def run_propose(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """`matrix propose` (commands/matrix/propose_rows.py)."""
    from verl_setup.commands.matrix.propose_rows import command  # noqa: PLC0415

    matrix = load_matrix(args.matrix)
    return command(
        matrix, since=args.since, out_file=args.out, json_out=args.json, env=env, out=out, quiet=args.quiet
    )
