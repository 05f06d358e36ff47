"""Command-line anonymization: the logic behind ``python manage.py anonymize`` (no Django here).

    anonymize INPUT --out OUT.csv [--report REPORT.json] --qi COL[=HIERARCHY.csv] ...
              [--sensitive COL ...] [--identifier COL ...]
              privacy models, at least one: an option per parameter of each model of
              :data:`.criteria.REGISTRY` (e.g. [--k N] [--l N --l-variant entropy];
              ``--help`` lists them all)
              [--population-size N | --sampling-fraction F]
              [--levels COL=N[,COL=N...]] [--sensitive-hierarchy COL=FILE ...]
              [--suppression-limit F] [--algorithm optimal|mondrian] [--delimiter D]

INPUT is read as text (every cell a string, an empty cell the value ""), UTF-8 (with or
without BOM) or else Latin-1; the delimiter is detected from the header line (``,`` ``;`` or
tab) unless given. A quasi-identifier without a hierarchy file gets ``Hierarchy.automatic``.
Columns not named are released unchanged; identifiers are dropped. A privacy model is asked
for by its first option (``--k``, ``--delta-disclosure``, ...); its other options refine it.
``--levels`` applies the given generalization levels (e.g. a candidate from an earlier
report) instead of the optimum; the report still shows the optimum to compare.

OUT is written with the input's delimiter, UTF-8, with spreadsheet formulas neutralised. Both
output files are first written to temporary files in their folders and then renamed, so a
failure leaves no (partial) output. Any error prints one line on stderr and exits with 2;
warnings (e.g. a hierarchy row listed twice) print a line each on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

import numpy as np
import pandas as pd

from . import tabular
from .api import anonymize, parse_levels
from .criteria import POPULATION_PARAMS, REGISTRY, PrivacyModel
from .export import write_csv
from .hierarchy import Hierarchy
from .risk import PopulationModel
from .types import AnonymizationConfig, AnonymizationResult, EngineError

EXIT_OK = 0
EXIT_ERROR = 2


class CliError(Exception):
    """A problem with the arguments or the input; the message is for the person who ran it."""


class _Parser(argparse.ArgumentParser):
    # One line instead of argparse's usage + message, and no SystemExit from inside run().
    def error(self, message: str) -> NoReturn:
        raise CliError(message)


def build_parser(prog: str = "anonymize") -> argparse.ArgumentParser:
    p = _Parser(
        prog=prog,
        description=f"Anonymize a table ({', '.join(k.label for k in REGISTRY.values())}) "
        "and write the extract and a JSON report.",
    )
    p.add_argument("input", metavar="INPUT", help="CSV file to anonymize")
    p.add_argument("--out", required=True, metavar="OUT.csv", help="where to write the extract")
    p.add_argument("--report", metavar="REPORT.json", help="where to write the JSON report")
    p.add_argument(
        "--qi",
        action="extend",
        nargs="+",
        default=[],
        required=True,
        metavar="COL[=HIERARCHY.csv]",
        help="quasi-identifier (and its ARX hierarchy)",
    )
    p.add_argument("--sensitive", action="extend", nargs="+", default=[], metavar="COL")
    p.add_argument(
        "--identifier",
        action="extend",
        nargs="+",
        default=[],
        metavar="COL",
        help="direct identifier: dropped from the extract",
    )
    _add_model_options(p)
    p.add_argument(
        "--levels",
        metavar="COL=N[,COL=N...]",
        help="apply these generalization levels (the others are searched) instead of the "
        "optimum, e.g. a candidate of an earlier report",
    )
    p.add_argument(
        "--sensitive-hierarchy", action="extend", nargs="+", default=[], metavar="COL=FILE"
    )
    p.add_argument(
        "--suppression-limit",
        type=float,
        default=0.0,
        metavar="F",
        help="share of rows (0 to 1) that may be suppressed",
    )
    p.add_argument("--algorithm", choices=["optimal", "mondrian"], default="optimal")
    p.add_argument("--delimiter", metavar="D", help="input delimiter (detected when omitted)")
    return p


_TYPES = {"int": int, "float": float}


def _add_model_options(p: argparse.ArgumentParser) -> None:
    """One option per parameter of every privacy model, and the population model's."""
    group = p.add_argument_group(
        "privacy models", "at least one; a model is asked for by its first option"
    )
    for name, kind in REGISTRY.items():
        for i, spec in enumerate(kind.params):
            help_text = (spec.help or spec.label).rstrip(".")
            if i == 0:
                help_text = f"{kind.label}: {help_text[:1].lower()}{help_text[1:]}"
            elif spec.default is not None:
                help_text = f"{help_text} (default {spec.default})"
            group.add_argument(
                spec.option(name),
                dest=spec.key(name),
                type=_TYPES.get(spec.kind, str),
                choices=[c for c, _ in spec.choices] or None,
                metavar=spec.metavar,
                help=help_text.replace("%", "%%"),
            )
    population = p.add_argument_group(
        "population", "for population uniqueness and the journalist and marketer risk"
    )
    for spec in POPULATION_PARAMS:
        population.add_argument(
            spec.option("population"),
            dest=spec.name,
            type=_TYPES[spec.kind],
            metavar=spec.metavar,
            help=spec.help.replace("%", "%%"),
        )


def _privacy_model(args: argparse.Namespace) -> PrivacyModel:
    criteria = []
    for name, kind in REGISTRY.items():
        values = {spec.name: getattr(args, spec.key(name)) for spec in kind.params}
        main = kind.params[0]
        if values[main.name] is None:
            extra = [s.option(name) for s in kind.params[1:] if values[s.name] is not None]
            if extra:
                raise CliError(f"{extra[0]} refines {kind.label}: give {main.option(name)} too")
            continue
        criteria.append(kind(**values))
    if not criteria:
        flags = ", ".join(kind.params[0].option(name) for name, kind in REGISTRY.items())
        raise CliError(f"choose at least one privacy model: {flags}")
    population = None
    if args.population_size is not None or args.sampling_fraction is not None:
        population = PopulationModel(args.population_size, args.sampling_fraction)
    model = PrivacyModel(
        criteria=criteria, suppression_limit=args.suppression_limit, population=population
    )
    model.validate()
    return model


# --------------------------------------------------------------------------- reading


def _delimiter_arg(value: str | None) -> str | None:
    if value is None:
        return None
    named = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";"}
    value = named.get(value.lower(), value)
    if len(value) != 1:
        raise CliError(f"the delimiter must be one character, not {value!r}")
    return value


def read_table(path: str, delimiter: str | None = None) -> tuple[pd.DataFrame, str]:
    """Read a CSV, TSV, Excel or Parquet file as strings ("" for an empty cell) with the web
    upload's streaming reader; returns the table (repeating columns as Categoricals) and the
    delimiter to write the extract with."""
    try:
        with open(path, "rb"):
            pass
        table, fmt = tabular.read_table_file(path, filename=Path(path).name, delimiter=delimiter)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except tabular.TableError as exc:
        raise CliError(f"{path}: {exc}") from None
    return tabular.to_frame(table), fmt.delimiter if fmt.file_format in ("csv", "tsv") else ","


def _split_pair(item: str, option: str) -> tuple[str, str | None]:
    name, sep, file = item.partition("=")
    if not name:
        raise CliError(f"{option} {item!r}: the column name is missing")
    if sep and not file:
        raise CliError(f"{option} {item!r}: the hierarchy file is missing after '='")
    return name, (file if sep else None)


def _load_hierarchy(column: str, file: str, values: pd.Series) -> Hierarchy:
    if not Path(file).is_file():
        raise CliError(f"hierarchy file {file} for {column!r} does not exist")
    hierarchy = Hierarchy.from_arx_csv(Path(file), attribute=column)
    hierarchy.validate_against(pd.unique(values))
    return hierarchy


def build_config(args: argparse.Namespace, df: pd.DataFrame) -> AnonymizationConfig:
    """The engine configuration the arguments describe (raises CliError / EngineError)."""

    def check_column(name: str, role: str) -> None:
        if name not in df.columns:
            raise CliError(
                f"{role} column {name!r} is not in the input (columns: "
                f"{', '.join(map(repr, df.columns[:12]))}{' ...' if len(df.columns) > 12 else ''})"
            )

    qis: dict[str, Any] = {}
    for item in args.qi:
        name, file = _split_pair(item, "--qi")
        check_column(name, "quasi-identifier")
        if name in qis:
            raise CliError(f"quasi-identifier {name!r} is given twice")
        qis[name] = (
            _load_hierarchy(name, file, df[name])
            if file
            else Hierarchy.automatic(df[name].tolist(), attribute=name)
        )
    for name in args.sensitive:
        check_column(name, "sensitive")
    for name in args.identifier:
        check_column(name, "identifier")
    sensitive_hierarchies = {}
    for item in args.sensitive_hierarchy:
        name, file = _split_pair(item, "--sensitive-hierarchy")
        if file is None:
            raise CliError(f"--sensitive-hierarchy {item!r}: expected COL=FILE")
        if name not in args.sensitive:
            raise CliError(f"--sensitive-hierarchy {name!r}: not named with --sensitive")
        sensitive_hierarchies[name] = _load_hierarchy(name, file, df[name])
    model = _privacy_model(args)
    return AnonymizationConfig(
        quasi_identifiers=qis,
        model=model,
        sensitive=list(dict.fromkeys(args.sensitive)),
        identifiers=list(dict.fromkeys(args.identifier)),
        sensitive_hierarchies=sensitive_hierarchies,
        algorithm=args.algorithm,
        levels=parse_levels(args.levels) if args.levels else None,
    )


# --------------------------------------------------------------------------- writing


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _temp_beside(target: Path) -> Path:
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise CliError(f"the folder of {target} does not exist")
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    os.close(fd)
    return Path(name)


def write_outputs(
    result: AnonymizationResult, out: str, report: str | None, delimiter: str
) -> None:
    """Write the extract (and report) to temporary files, then rename them into place."""
    targets = [Path(out)] + ([Path(report)] if report else [])
    if report and Path(report).resolve() == Path(out).resolve():
        raise CliError("--out and --report name the same file")
    temps: list[Path] = []
    try:
        for target in targets:
            temps.append(_temp_beside(target))
        with open(temps[0], "wb") as fh:
            write_csv(result.data, fh, delimiter)
        if report:
            with open(temps[1], "w", encoding="utf-8") as fh:
                json.dump(result.report(), fh, indent=2, default=_json_default)
                fh.write("\n")
        for temp, target in zip(temps, targets, strict=True):
            os.replace(temp, target)
    except OSError as exc:
        raise CliError(f"cannot write the output: {exc.strerror or exc}") from None
    finally:
        for temp in temps:
            with contextlib.suppress(OSError):
                temp.unlink()


# --------------------------------------------------------------------------- entry points


def execute(
    argv: Sequence[str],
    stdout: TextIO | None = None,
    prog: str = "anonymize",
    stderr: TextIO | None = None,
) -> None:
    """Parse ``argv``, anonymize, write the files. Raises :class:`CliError` on any problem.
    Warnings (e.g. a hierarchy row listed twice) go to ``stderr``, one line each."""
    args = build_parser(prog).parse_args(list(argv))
    try:
        df, sep = read_table(args.input, _delimiter_arg(args.delimiter))
        config = build_config(args, df)
        hierarchies = [*config.quasi_identifiers.values(), *config.sensitive_hierarchies.values()]
        for warning in (w for h in hierarchies for w in h.warnings):
            (stderr or sys.stderr).write(f"{prog}: warning: {' '.join(warning.split())}\n")
        result = anonymize(df, config)
    except EngineError as exc:
        raise CliError(str(exc)) from None
    write_outputs(result, args.out, args.report, sep)
    if stdout is not None:
        how = result.algorithm
        if result.levels is not None:
            chosen = ",".join(f"{q}={v}" for q, v in result.levels.items())
            how = f"levels {chosen}" + (" as given" if result.levels_fixed else ", the optimum")
        stdout.write(
            f"{result.rows_out} of {result.rows_in} rows released in {len(result.classes)} "
            f"classes (k={result.achieved_k}; {config.model.describe_criteria()}; {how}; "
            f"{result.seconds:.2f} s) -> {args.out}\n"
        )


def run(
    argv: Sequence[str],
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    prog: str = "anonymize",
) -> int:
    """Run the command line ``argv`` (without the program name); returns the exit status.

    0 on success; 2 (after one line on stderr) for bad arguments, unreadable or invalid input,
    or a model that cannot be satisfied. ``--help`` prints the help and returns 0.
    """
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    try:
        with contextlib.redirect_stdout(stdout):
            execute(argv, stdout=stdout, prog=prog, stderr=stderr)
    except CliError as exc:
        message = " ".join(str(exc).split())  # one line, whatever the message holds
        stderr.write(f"{prog}: error: {message}\n")
        return EXIT_ERROR
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    return EXIT_OK


def main() -> None:  # pragma: no cover - `python -m releases.engine.cli`
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":  # pragma: no cover
    main()
