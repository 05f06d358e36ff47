"""Command-line anonymization: the logic behind ``python manage.py anonymize`` (no Django here).

    anonymize INPUT --out OUT.csv [--report REPORT.json] --qi COL[=HIERARCHY.csv] ...
              [--sensitive COL ...] [--identifier COL ...]
              privacy models, at least one: an option per parameter of each model of
              :data:`.criteria.REGISTRY` (e.g. [--k N] [--l N --l-variant entropy];
              ``--help`` lists them all)
              [--population-size N | --sampling-fraction F] [--research-subset FILE]
              [--levels COL=N[,COL=N...]] [--sensitive-hierarchy COL=FILE ...]
              [--weights COL=W,...] [--level-limits COL=MIN:MAX,...]
              [--microaggregate COL=mean|median|mode|interval,...]
              [--suppression-limit F] [--algorithm optimal|heuristic|mondrian]
              [--time-limit S] [--step-limit N] [--delimiter D]
              [--seed N] [--row-order keyed-hash|permutation]
              [--earlier-report R.json ... [--protect-earlier]]
              [--attacker-file FILE] [--chunk-rows N] [--in-memory]

INPUT is read as text (every cell a string, an empty cell the value ""), UTF-8 (with or
without BOM) or else Latin-1; the delimiter is detected from the header line (``,`` ``;`` or
tab) unless given. A quasi-identifier without a hierarchy file gets ``Hierarchy.automatic``.
Columns not named are released unchanged; identifiers are dropped. A privacy model is asked
for by its first option (``--k``, ``--delta-disclosure``, ...); its other options refine it.
``--levels`` applies the given generalization levels (e.g. a candidate from an earlier
report) instead of the optimum; the report still shows the optimum to compare.

With ``--research-subset FILE`` (k-map counted in the population, δ-presence), INPUT is the
population table and FILE holds the rows to release, with INPUT's columns, each matched to a
row of INPUT with the same values in every column (as ARX's ``DataSubset.create``). Only
those rows are released; the suppression limit, the suppressed rows, the classes and the
metrics of the report refer to them.

Releases judged together (:mod:`.cross_release`): the report records what reproduces the
release (``"reproduction"``: the input's SHA-256, the hierarchy files with theirs, the model,
the levels, the seed, and the research subset's file with its SHA-256). ``--earlier-report``
(repeatable) re-applies each earlier release to INPUT (another input is refused) and writes
``"cross_release"``: per earlier report, the joint partition of the two extracts (smallest
joint class, rows in joint classes smaller than k, joint classes, and the evidence that the
rows can be linked). ``--protect-earlier`` makes "every joint class with each earlier extract
holds k rows" a criterion of the search. ``--attacker-file`` links an identified file to the
extract (:mod:`.linkage`) and writes ``"linkage"``. A research subset is not judged together
with earlier releases: ``--research-subset`` with ``--earlier-report`` is refused, and so is
an earlier report of a research subset (it is not re-applied).

The rows are written in a random order drawn from ``--seed`` (a fresh seed when omitted),
recorded in the report: the report is for whoever runs the release, not for a recipient (the
seed undoes the order). The order is a keyed hash of each row's input position
(:mod:`.shuffle`); ``--row-order permutation`` writes the order of releases made before it
(numpy's permutation), to reproduce one byte for byte. OUT is written with the input's
delimiter, UTF-8, with spreadsheet formulas neutralised. Both output files are first written
to temporary files in their folders and then renamed, so a failure leaves no (partial)
output. Any error prints one line on stderr and exits with 2; warnings (e.g. a hierarchy row
listed twice) print a line each on stderr.

Memory: INPUT is streamed (:mod:`.streaming`): read in batches (a few megabytes each), once
to count the distinct combinations of the quasi-identifiers and sensitive attributes (the
search runs on those), once more to release the rows, which go through temporary bucket files
of about ``--chunk-rows`` rows beside OUT to be written in their order. Memory then grows with
the chunk and the distinct combinations, not with the rows. What needs the rows themselves is
read into memory as before: ``--research-subset``, ``--earlier-report``, ``--protect-earlier``,
``--attacker-file``, ``--microaggregate``, ``--algorithm mondrian``, SafePub and
``--row-order permutation`` (and ``--in-memory``). Both ways write the same files.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

import numpy as np
import pandas as pd
import pyarrow as pa

from . import memory, safepub, spark, tabular
from .api import anonymize, parse_level_limits, parse_levels, parse_weights
from .arrays import IntArray
from .criteria import (
    POPULATION_PARAMS,
    REGISTRY,
    EarlierReleases,
    LDiversity,
    PrivacyModel,
    TCloseness,
)
from .cross_release import (
    ASSUMPTION,
    ReleasedColumns,
    cross_release_check,
    extract_membership,
    linking_evidence,
    sensitive_context,
    what_constrained,
)
from .export import write_csv
from .frequency import FrequencyTable, frequency_table
from .hierarchy import Hierarchy
from .linkage import ColumnRule, link
from .microaggregation import parse_microaggregate
from .reproduction import REPORT_KEY, Reproduction, file_sha256, record
from .risk import PopulationModel
from .shuffle import KEYED, PERMUTATION, SCHEMES, new_seed, order
from .streaming import (
    anonymize_frequencies,
    plan_release,
    streaming_refusal,
    write_released,
)
from .subset import ResearchSubset
from .types import AnonymizationConfig, AnonymizationResult, EngineError

EXIT_OK = 0
EXIT_ERROR = 2
#: Rows sorted at a time when the streamed release is written in its order.
DEFAULT_CHUNK_ROWS = 1_000_000
#: The text reader's block when the release is streamed: the reader reads several blocks
#: ahead, so a smaller block than the upload's keeps memory down (a row must fit in one).
STREAM_BLOCK_BYTES = 4 * 1024 * 1024


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
    p.add_argument(
        "--research-subset",
        metavar="FILE",
        help="the rows to release, INPUT being the population table they are drawn from "
        "(same columns; matched to INPUT's rows by content), for k-map and δ-presence",
    )
    p.add_argument(
        "--algorithm",
        choices=["optimal", "heuristic", "mondrian"],
        default="optimal",
        help="optimal: the whole lattice, exact; heuristic: best first from the bottom within "
        "--time-limit (for 15 or more quasi-identifiers); mondrian: local recoding",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        metavar="S",
        help="with --algorithm heuristic: seconds the search keeps improving (required unless "
        "--step-limit is given)",
    )
    p.add_argument(
        "--step-limit",
        type=int,
        metavar="N",
        help="with --algorithm heuristic: stop after N transformations evaluated (the same "
        "result on every machine)",
    )
    utility = p.add_argument_group("utility", "what the search keeps (optimal search)")
    utility.add_argument(
        "--weights",
        metavar="COL=W[,COL=W...]",
        help="attribute weights in the Loss (0 or more; a quasi-identifier without one weighs "
        "0.5, as in ARX, and each is divided by the largest)",
    )
    utility.add_argument(
        "--level-limits",
        metavar="COL=MIN:MAX[,...]",
        help="the lowest and highest generalization level the search may choose per "
        "quasi-identifier (either side may be left empty: COL=2: or COL=:3)",
    )
    utility.add_argument(
        "--microaggregate",
        metavar="COL=FUNCTION[,...]",
        help="replace a numeric quasi-identifier (named with --qi) by its class's mean, "
        "median, mode or interval [min, max] instead of generalizing it; the other "
        "quasi-identifiers form the classes (as ARX without clustering)",
    )
    p.add_argument("--delimiter", metavar="D", help="input delimiter (detected when omitted)")
    p.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="seed of the rows' random order (a fresh one when omitted; kept in the report)",
    )
    p.add_argument(
        "--row-order",
        choices=list(SCHEMES),
        default=KEYED,
        help=f"how the seed orders the rows: {KEYED} (by a keyed hash of each row's input "
        f"position; the default) or {PERMUTATION} (as releases before the keyed hash were "
        "written, to reproduce one; read in memory)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="print each stage's rows, time and peak memory on stderr (streamed release)",
    )
    p.add_argument(
        "--in-memory",
        action="store_true",
        help="read the whole input into memory instead of streaming it (the result is the "
        "same; what needs the rows is always read in memory)",
    )
    p.add_argument(
        "--chunk-rows",
        type=int,
        default=DEFAULT_CHUNK_ROWS,
        metavar="N",
        help="rows sorted at a time when the streamed release is written in its order (memory "
        f"grows with it; default {DEFAULT_CHUNK_ROWS:,})",
    )
    on_spark = p.add_argument_group(
        "Apache Spark",
        "what grows with the rows (reading, the frequency table, applying the transformation, "
        "the order, writing) on a Spark cluster; the search on this machine",
    )
    on_spark.add_argument(
        "--spark",
        metavar="MASTER",
        help="run on Spark: spark://HOST:PORT (a standalone master) or local[N]; INPUT is one "
        "CSV or Parquet file (or a URI Spark reads) that every executor can read",
    )
    on_spark.add_argument(
        "--spark-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds to wait for the Spark master to answer (default 10)",
    )
    together = p.add_argument_group(
        "releases judged together",
        "earlier extracts of the same rows, and an attacker's identified records",
    )
    together.add_argument(
        "--earlier-report",
        action="append",
        default=[],
        metavar="R.json",
        help="report of an earlier release of INPUT (repeatable): it is re-applied and the "
        "joint classes of the two extracts are measured",
    )
    together.add_argument(
        "--protect-earlier",
        action="store_true",
        help="every joint class with each earlier extract must hold k rows (a criterion of "
        "the search; needs --k and --earlier-report)",
    )
    together.add_argument(
        "--attacker-file",
        metavar="FILE",
        help="identified records (CSV, TSV, Excel or Parquet) to link to the extract on "
        "every column both have",
    )
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
                # An option carrying a second parameter ("DMIN,DMAX") is split in
                # _privacy_model; the model reads numbers from text.
                type=str if spec.pair else _TYPES.get(spec.kind, str),
                choices=[c for c, _ in spec.choices] or None,
                metavar=spec.metavar,
                help=help_text.replace("%", "%%"),
            )
    population = p.add_argument_group(
        "population",
        "for population uniqueness, estimated k-map and the journalist and marketer risk",
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
        for spec in kind.params:
            if spec.pair and isinstance(values[spec.name], str) and "," in values[spec.name]:
                first, _, second = values[spec.name].partition(",")
                paired = next(p for p in kind.params if p.name == spec.pair)
                if values[spec.pair] is not None:
                    raise CliError(
                        f"{spec.option(name)} {values[spec.name]} gives {paired.label} and so "
                        f"does {paired.option(name)}: give it once"
                    )
                values[spec.name], values[spec.pair] = first, second
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


def _load_hierarchy(column: str, file: str, values: pd.Series | Sequence[str]) -> Hierarchy:
    if not Path(file).is_file():
        raise CliError(f"hierarchy file {file} for {column!r} does not exist")
    hierarchy = Hierarchy.from_arx_csv(Path(file), attribute=column)
    hierarchy.validate_against(
        pd.unique(values) if isinstance(values, pd.Series) else list(dict.fromkeys(values))
    )
    return hierarchy


def build_config(args: argparse.Namespace, df: pd.DataFrame) -> AnonymizationConfig:
    """The engine configuration the arguments describe (raises CliError / EngineError)."""
    return config_for(args, [str(c) for c in df.columns], lambda name: df[name], df)


def config_for(
    args: argparse.Namespace,
    columns: Sequence[str],
    values: Callable[[str], pd.Series | Sequence[str]],
    df: pd.DataFrame | None,
) -> AnonymizationConfig:
    """:func:`build_config` for an input known by its ``columns`` and, per column, its values
    (every row's, or the distinct ones in order of first appearance: hierarchies are built and
    checked from them alike); ``df`` the whole input (needed for a research subset only)."""

    def check_column(name: str, role: str) -> None:
        if name not in columns:
            raise CliError(
                f"{role} column {name!r} is not in the input (columns: "
                f"{', '.join(map(repr, columns[:12]))}{' ...' if len(columns) > 12 else ''})"
            )

    def listed(name: str) -> list[str]:
        cells = values(name)
        return cells.tolist() if isinstance(cells, pd.Series) else list(cells)

    qis: dict[str, Any] = {}
    for item in args.qi:
        name, file = _split_pair(item, "--qi")
        check_column(name, "quasi-identifier")
        if name in qis:
            raise CliError(f"quasi-identifier {name!r} is given twice")
        qis[name] = (
            _load_hierarchy(name, file, values(name))
            if file
            else Hierarchy.automatic(listed(name), attribute=name)
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
        sensitive_hierarchies[name] = _load_hierarchy(name, file, values(name))
    if args.algorithm != "heuristic":
        for given, option in ((args.time_limit, "--time-limit"), (args.step_limit, "--step-limit")):
            if given is not None:
                raise CliError(f"{option} applies to --algorithm heuristic only")
    elif args.time_limit is None and args.step_limit is None:
        raise CliError("--algorithm heuristic needs --time-limit S (or --step-limit N)")
    model = _privacy_model(args)
    limits = parse_level_limits(args.level_limits) if args.level_limits else ({}, {})
    subset = None
    if args.research_subset:
        if df is None:
            raise CliError("a research subset is matched to the input's rows in memory")
        released, _ = read_table(args.research_subset, _delimiter_arg(args.delimiter))
        try:
            subset = ResearchSubset.match(df, released)
        except EngineError as exc:
            raise CliError(f"{args.research_subset}: {exc}") from None
    return AnonymizationConfig(
        quasi_identifiers=qis,
        model=model,
        sensitive=list(dict.fromkeys(args.sensitive)),
        identifiers=list(dict.fromkeys(args.identifier)),
        sensitive_hierarchies=sensitive_hierarchies,
        algorithm=args.algorithm,
        levels=parse_levels(args.levels) if args.levels else None,
        research_subset=subset,
        weights=parse_weights(args.weights) if args.weights else {},
        min_levels=limits[0],
        max_levels=limits[1],
        microaggregate=parse_microaggregate(args.microaggregate) if args.microaggregate else {},
        time_limit=args.time_limit,
        step_limit=args.step_limit,
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
    data: pd.DataFrame | None,
    summary: dict[str, Any],
    out: str,
    report: str | None,
    delimiter: str,
    write_extract: Callable[[Path], None] | None = None,
) -> None:
    """Write the extract (``data``, or what ``write_extract(path)`` writes) and the report
    ``summary`` to temporary files, then rename them into place."""
    targets = [Path(out)] + ([Path(report)] if report else [])
    if report and Path(report).resolve() == Path(out).resolve():
        raise CliError("--out and --report name the same file")
    temps: list[Path] = []
    try:
        for target in targets:
            temps.append(_temp_beside(target))
        if write_extract is not None:
            write_extract(temps[0])
        elif data is not None:
            with open(temps[0], "wb") as fh:
                write_csv(data, fh, delimiter)
        if report:
            with open(temps[1], "w", encoding="utf-8") as fh:
                json.dump(summary, fh, indent=2, default=_json_default)
                fh.write("\n")
        for temp, target in zip(temps, targets, strict=True):
            os.replace(temp, target)
    except OSError as exc:
        raise CliError(f"cannot write the output: {exc.strerror or exc}") from None
    finally:
        for temp in temps:
            with contextlib.suppress(OSError):
                temp.unlink()


# --------------------------------------------------------------------------- releases together


@dataclasses.dataclass
class EarlierRelease:
    """An earlier release of INPUT, re-applied: its report's path, its record and each input
    row's class in it."""

    name: str
    reproduction: Reproduction
    membership: IntArray


def load_earlier(paths: Sequence[str], df: pd.DataFrame, input_sha256: str) -> list[EarlierRelease]:
    """Re-apply the release of each earlier report to INPUT (refusing another input)."""
    out: list[EarlierRelease] = []
    for path in paths:
        if path in {e.name for e in out}:
            raise CliError(f"--earlier-report {path} is given twice")
        try:
            with open(path, encoding="utf-8") as fh:
                report = json.load(fh)
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
        except ValueError:
            raise CliError(f"{path} is not a JSON report") from None
        if isinstance(report, dict) and (report.get("utility") or {}).get("microaggregate"):
            raise CliError(
                f"{path} is a release with microaggregated columns: it is not judged together "
                "with other releases"
            )
        try:
            reproduction = Reproduction.from_report(report)
            reproduction.check_input(input_sha256, len(df), path)
            membership = reproduction.membership(df, path)
        except EngineError as exc:
            message = str(exc)
            raise CliError(message if path in message else f"{path}: {message}") from None
        out.append(EarlierRelease(path, reproduction, membership))
    return out


def _hierarchy_files(args: argparse.Namespace) -> dict[str, str | None]:
    files: dict[str, str | None] = {}
    for item in [*args.qi, *args.sensitive_hierarchy]:
        name, file = _split_pair(item, "--qi")
        files[name] = file
    return files


def _protecting(config: AnonymizationConfig, earlier: list[EarlierRelease]) -> AnonymizationConfig:
    """``config`` with "every joint class with each earlier extract holds k rows" added."""
    model = config.model
    if model.k <= 1:
        raise CliError("--protect-earlier needs --k: the size every joint class must reach")
    protected = PrivacyModel(
        criteria=[*model.criteria, EarlierReleases(k=model.k)],
        suppression_limit=model.suppression_limit,
        population=model.population,
    )
    return dataclasses.replace(
        config, model=protected, earlier_releases={e.name: e.membership for e in earlier}
    )


def _released_columns(
    data: pd.DataFrame, config: AnonymizationConfig, result: AnonymizationResult
) -> ReleasedColumns:
    levels = result.levels if result.algorithm != "mondrian" else None
    qis: dict[str, int | None] = {
        q: None if levels is None else levels[q] for q in config.quasi_identifiers
    }
    return ReleasedColumns(tuple(map(str, data.columns)), qis, tuple(config.sensitive))


def cross_release(
    df: pd.DataFrame,
    data: pd.DataFrame,
    source_rows: IntArray,
    config: AnonymizationConfig,
    result: AnonymizationResult,
    earlier: list[EarlierRelease],
) -> list[dict[str, Any]]:
    """The report's ``cross_release``: per earlier release, the joint partition measured and
    the evidence that the two extracts can be linked."""
    model = config.model
    ell = next((c for c in model.criteria if isinstance(c, LDiversity)), None)
    tee = next((c for c in model.criteria if isinstance(c, TCloseness)), None)
    context = None
    if config.sensitive and (ell is not None or tee is not None):
        context = sensitive_context(df, config.sensitive, config.sensitive_hierarchies)
    new = extract_membership(data, source_rows, len(df), list(config.quasi_identifiers))
    mine = _released_columns(data, config, result)
    entries = []
    for e in earlier:
        check = cross_release_check(
            new,
            e.membership,
            model.k,
            sensitive=context,
            entropy=ell is not None and ell.variant == "entropy",
            t_distance=None if tee is None else tee.distance,
            l_required=None if ell is None else ell.l,
            t_required=None if tee is None else tee.t,
        )
        evidence = linking_evidence(mine, e.reproduction.released_columns())
        entries.append(
            {"earlier_report": e.name, **check.as_dict(), "evidence": evidence.as_dict()}
        )
    return entries


def _failure(entry: dict[str, Any]) -> str:
    """One line saying why a cross-release check failed."""
    reasons = []
    if entry["rows_below_k"]:
        reasons.append(
            f"{entry['rows_below_k']} rows are in joint classes smaller than k={entry['k']} "
            f"(smallest {entry['smallest_joint_class']})"
        )
    ells = entry.get("entropy_l") or entry.get("l") or {}
    required = entry.get("l_required")
    for name, value in ells.items():
        if required is not None and value < required:
            reasons.append(f"a joint class has l={value:.3g} of {name}, l={required:g} asked")
    for name, value in (entry.get("t") or {}).items():
        required = entry.get("t_required")
        if required is not None and value > required:
            reasons.append(f"a joint class has t={value:.3g} of {name}, t={required:g} asked")
    return f"together with {entry['earlier_report']}, " + "; ".join(reasons)


# --------------------------------------------------------------------------- streamed


def streamed(args: argparse.Namespace) -> bool:
    """Whether the release is streamed (read in batches twice, never held whole): not for
    what needs the rows in memory (:data:`.streaming.UNSUPPORTED`), nor for the earlier
    row order (a permutation of all released rows)."""
    if (
        args.in_memory
        or args.research_subset
        or args.earlier_report
        or args.protect_earlier
        or args.attacker_file
        or args.microaggregate
        or args.algorithm == "mondrian"
        or args.row_order != KEYED
    ):
        return False
    return safepub.find(_privacy_model(args)) is None


def _scan(
    path: str, delimiter: str | None, fmt: tabular.TableFormat | None = None
) -> tabular.TableScan:
    try:
        with open(path, "rb"):
            pass
        return tabular.open_table(
            path, fmt, filename=Path(path).name, delimiter=delimiter, block_bytes=STREAM_BLOCK_BYTES
        )
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except tabular.TableError as exc:
        raise CliError(f"{path}: {exc}") from None


def _batches(
    scan: tabular.TableScan, path: str, columns: Sequence[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The scan's batches as read (only ``columns``, when given); a problem with the file is a
    :class:`CliError`. Arrow's pool gives each batch's memory back once it is used."""
    try:
        for batch in scan.batches():
            yield batch if columns is None else batch.select(list(columns))
            pa.default_memory_pool().release_unused()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except tabular.TableError as exc:
        raise CliError(f"{path}: {exc}") from None


class Stages:
    """Each stage's rows, time and peak memory, one line on ``err`` as it ends (``--verbose``).
    The peak is the process's resident set's (:mod:`.memory`: Linux's VmHWM, reset at each
    stage; elsewhere the peak so far)."""

    def __init__(self, err: TextIO, prog: str, verbose: bool) -> None:
        self.err, self.prog, self.verbose = err, prog, verbose
        self.name = ""
        self.started = time.perf_counter()
        memory.reset_peak()

    def start(self, name: str) -> None:
        self.name, self.started = name, time.perf_counter()
        memory.reset_peak()

    def end(self, rows: int) -> None:
        seconds = time.perf_counter() - self.started
        if self.verbose:
            self.err.write(
                f"{self.prog}: stage {self.name}: {rows:,} rows in {seconds:.1f} s "
                f"({rows / max(seconds, 1e-9):,.0f} rows/s), peak RSS {memory.peak_mb():,.0f} MB\n"
            )
            self.err.flush()


def execute_streamed(
    args: argparse.Namespace, stdout: TextIO | None, prog: str, err: TextIO
) -> None:
    """:func:`execute` in bounded memory: a first reading of INPUT counts the distinct
    combinations of the quasi-identifiers and sensitive attributes (the frequency table), the
    search runs on them, and a second reading releases the rows batch by batch into OUT, in
    the keyed hash order (:mod:`.streaming`). The same files as the in-memory engine's."""
    stages = Stages(err, prog, args.verbose)
    stages.start("read + frequency table")
    delimiter = _delimiter_arg(args.delimiter)
    scan = _scan(args.input, delimiter)
    header = list(scan.columns)
    named = [_split_pair(q, "--qi")[0] for q in args.qi] + list(args.sensitive)
    counted = [c for c in dict.fromkeys(named) if c in header]
    try:
        table = frequency_table(_batches(scan, args.input, counted), counted)
        config = config_for(args, header, _distinct_values(table), None)
        hierarchies = [*config.quasi_identifiers.values(), *config.sensitive_hierarchies.values()]
        for warning in (w for h in hierarchies for w in h.warnings):
            err.write(f"{prog}: warning: {' '.join(warning.split())}\n")
        refusal = streaming_refusal(config)
        if refusal is not None:  # decided from the arguments already: a safeguard
            raise CliError(refusal)
        stages.end(table.rows)
        stages.start("search")
        result, enc, chosen = anonymize_frequencies(table, header, config)
        stages.end(table.rows)
        del table
        seed = new_seed() if args.seed is None else int(args.seed)
        sep = scan.format.delimiter if scan.format.file_format in ("csv", "tsv") else ","
        plan = plan_release(enc, chosen, config, header, seed, sep)
        columns = list(plan.columns)
        summary = result.report()
        summary[REPORT_KEY] = record(
            config,
            _hierarchy_files(args),
            file_sha256(args.input),
            int(enc.n),
            result.levels,
            result.algorithm,
            seed,
            columns,
            result.rows_out,
            row_order=KEYED,
        ).as_dict()
    except EngineError as exc:
        raise CliError(str(exc)) from None

    def write_extract(target: Path) -> None:
        stages.start("release + write")
        again = _scan(args.input, delimiter, scan.format)
        try:
            written = write_released(
                plan, _batches(again, args.input), target, None, args.chunk_rows
            )
        except EngineError as exc:
            raise CliError(str(exc)) from None
        stages.end(written.rows)

    write_outputs(None, summary, args.out, args.report, sep, write_extract)
    if stdout is not None:
        _tell(stdout, result, config, args.out, summary)


def _distinct_values(table: FrequencyTable) -> Callable[[str], list[str]]:
    """Per counted column, its distinct values in order of first appearance."""
    return lambda name: table.distinct(name)


# --------------------------------------------------------------------------- entry points


def execute(
    argv: Sequence[str],
    stdout: TextIO | None = None,
    prog: str = "anonymize",
    stderr: TextIO | None = None,
) -> None:
    """Parse ``argv``, anonymize, write the files. Raises :class:`CliError` on any problem.
    Warnings (e.g. a hierarchy row listed twice, a failing cross-release check) go to
    ``stderr``, one line each."""
    args = build_parser(prog).parse_args(list(argv))
    err = stderr or sys.stderr
    if args.protect_earlier and not args.earlier_report:
        raise CliError("--protect-earlier needs at least one --earlier-report")
    if args.research_subset and args.earlier_report:
        # The joint classes would have to be measured in the subset's rows (its sensitive
        # distribution, its classes): not done, so refused rather than measured wrongly.
        raise CliError(
            "--research-subset cannot be combined with --earlier-report or --protect-earlier: "
            "a research subset is not judged together with earlier releases"
        )
    if args.microaggregate and args.earlier_report:
        raise CliError(
            "--microaggregate cannot be combined with --earlier-report or --protect-earlier: "
            "a microaggregated release is not judged together with earlier releases"
        )
    if args.seed is not None and args.seed < 0:
        raise CliError(f"--seed must be a whole number of at least 0, not {args.seed}")
    if args.spark:
        _execute_spark(args, stdout, prog, err)
        return
    if args.chunk_rows < 1:
        raise CliError(f"--chunk-rows must be a whole number of at least 1, not {args.chunk_rows}")
    try:
        stream = streamed(args)
    except EngineError as exc:
        raise CliError(str(exc)) from None
    if stream:
        execute_streamed(args, stdout, prog, err)
        return
    try:
        df, sep = read_table(args.input, _delimiter_arg(args.delimiter))
        config = build_config(args, df)
        hierarchies = [*config.quasi_identifiers.values(), *config.sensitive_hierarchies.values()]
        for warning in (w for h in hierarchies for w in h.warnings):
            err.write(f"{prog}: warning: {' '.join(warning.split())}\n")
        input_sha256 = file_sha256(args.input)
        earlier = load_earlier(args.earlier_report, df, input_sha256)
        if args.protect_earlier:
            config = _protecting(config, earlier)
        attacker = read_table(args.attacker_file)[0] if args.attacker_file else None
        result = anonymize(df, config)
        if result.source_rows is None:
            raise CliError("the engine did not say which input rows it released")
        # Rows in a random order: the input's order must not link the extract to anything.
        seed = new_seed() if args.seed is None else int(args.seed)
        in_order = np.asarray(result.source_rows, dtype=np.int64)
        rows = order(in_order, seed, args.row_order)
        data = result.data.iloc[rows].reset_index(drop=True)
        source_rows = in_order[rows]
        summary = result.report()
        summary[REPORT_KEY] = record(
            config,
            _hierarchy_files(args),
            input_sha256,
            len(df),
            result.levels if result.algorithm != "mondrian" else None,
            result.algorithm,
            seed,
            [str(c) for c in data.columns],
            result.rows_out,
            [e.reproduction for e in earlier] if args.protect_earlier else (),
            args.research_subset,
            args.row_order,
        ).as_dict()
        if args.protect_earlier:
            summary["protection"] = what_constrained(df, config).as_dict()
        if earlier:
            summary["cross_release_assumption"] = ASSUMPTION
            summary["cross_release"] = cross_release(df, data, source_rows, config, result, earlier)
        if attacker is not None:
            levels = result.levels if result.algorithm != "mondrian" else None
            rules = {
                q: ColumnRule(h, None if levels is None else levels[q])
                for q, h in config.quasi_identifiers.items()
            }
            linkage = link(attacker, data, config.model.k, rules)
            summary["linkage"] = {"attacker_file": args.attacker_file, **linkage.as_dict()}
    except EngineError as exc:
        raise CliError(str(exc)) from None
    write_outputs(data, summary, args.out, args.report, sep)
    for entry in summary.get("cross_release", []):
        if not entry["passed"]:
            err.write(f"{prog}: warning: {_failure(entry)}\n")
    if stdout is not None:
        _tell(stdout, result, config, args.out, summary)


def _tell(
    stdout: TextIO,
    result: AnonymizationResult,
    config: AnonymizationConfig,
    out: str,
    summary: dict[str, Any],
) -> None:
    """What was released, on standard output."""
    how = result.algorithm
    if result.levels is not None:
        chosen = ",".join(f"{q}={v}" for q, v in result.levels.items())
        how = f"levels {chosen}" + (" as given" if result.levels_fixed else ", the optimum")
        if result.search:
            how = (
                f"levels {chosen}, the best the heuristic search found in "
                f"{result.search['steps']} steps; {result.search['statement']}"
            )
    stdout.write(
        f"{result.rows_out} of {result.rows_in} rows released in {len(result.classes)} "
        f"classes (k={result.achieved_k}; {config.model.describe_criteria()}; {how}; "
        f"{result.seconds:.2f} s) -> {out}\n"
    )
    for entry in summary.get("cross_release", []):
        stdout.write(
            f"with {entry['earlier_report']}: {entry['joint_classes']} joint classes, the "
            f"smallest of {entry['smallest_joint_class']}, {entry['rows_below_k']} rows "
            f"below k={entry['k']}\n"
        )
    if "protection" in summary:
        names = summary["protection"]["constrained_by"]
        stdout.write(
            "protecting the earlier releases changed nothing\n"
            if not names
            else f"the search was constrained by {', '.join(names)}\n"
        )
    if "linkage" in summary:
        found = summary["linkage"]
        stdout.write(
            f"attacker file: {found['matched_one']} of {found['attacker_records']} records "
            f"matched by exactly one released record, {found['matched_below_k']} by fewer "
            f"than k={found['k']}, on {', '.join(found['matched_columns'])}\n"
        )


def _execute_spark(args: argparse.Namespace, stdout: TextIO | None, prog: str, err: TextIO) -> None:
    """``execute`` with ``--spark``: the rows stay on the cluster (:mod:`.spark`); the driver
    (this process) searches on the frequency table and writes the report."""
    unsupported = [
        option
        for option, given in (
            ("--research-subset", args.research_subset),
            ("--earlier-report", args.earlier_report),
            ("--attacker-file", args.attacker_file),
            ("--microaggregate", args.microaggregate),
            ("--algorithm mondrian", args.algorithm == "mondrian"),
            (f"--row-order {args.row_order}", args.row_order != KEYED),
            ("--in-memory", args.in_memory),
        )
        if given
    ]
    if unsupported:
        raise CliError(
            f"{unsupported[0]} cannot be combined with --spark: it needs the rows in memory "
            "(run without --spark)"
        )
    seed = new_seed() if args.seed is None else int(args.seed)
    sensitive = list(dict.fromkeys(args.sensitive))
    qis = [_split_pair(item, "--qi")[0] for item in args.qi]
    configured: list[AnonymizationConfig] = []

    def configure(table: FrequencyTable, columns: list[str]) -> AnonymizationConfig:
        config = config_for(args, columns, _distinct_values(table), None)
        configured.append(config)
        return config

    stages = Stages(err, prog, args.verbose)

    def stage_done(name: str, rows: int) -> None:
        # The driver's own peak (its JVM and the executors are other processes).
        stages.name = name
        stages.end(rows)
        stages.start("")

    targets = [Path(args.out)] + ([Path(args.report)] if args.report else [])
    if args.report and targets[1].resolve() == targets[0].resolve():
        raise CliError("--out and --report name the same file")
    temps: list[Path] = []
    try:
        temps = [_temp_beside(target) for target in targets]
        made = spark.release_on_spark(
            args.spark,
            args.input,
            list(dict.fromkeys([*qis, *sensitive])),
            configure,
            temps[0],
            seed,
            delimiter=_delimiter_arg(args.delimiter),
            connect_seconds=args.spark_timeout,
            stage_done=stage_done,
        )
        config, result = configured[0], made.result
        for warning in result.warnings:
            err.write(f"{prog}: warning: {' '.join(warning.split())}\n")
        summary = result.report()
        local = spark.local_file(args.input)
        summary[REPORT_KEY] = record(
            config,
            _hierarchy_files(args),
            file_sha256(str(local)) if local is not None else "",
            result.rows_in,
            result.levels,
            result.algorithm,
            seed,
            made.plan.columns,
            result.rows_out,
            row_order=KEYED,
        ).as_dict()
        summary["spark"] = {
            "master": args.spark,
            "buckets": made.written.buckets,
            "sha256": made.written.sha256,
        }
        if args.report:
            with open(temps[1], "w", encoding="utf-8") as fh:
                json.dump(summary, fh, indent=2, default=_json_default)
                fh.write("\n")
        for temp, target in zip(temps, targets, strict=True):
            os.replace(temp, target)
    except EngineError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot write the output: {exc.strerror or exc}") from None
    finally:
        for temp in temps:
            with contextlib.suppress(OSError):
                temp.unlink()
    if stdout is not None:
        chosen = ",".join(f"{q}={v}" for q, v in (result.levels or {}).items())
        stdout.write(
            f"{result.rows_out} of {result.rows_in} rows released in {len(result.classes)} "
            f"classes (k={result.achieved_k}; {config.model.describe_criteria()}; levels "
            f"{chosen}; on Spark {args.spark}, {made.written.buckets} buckets) "
            f"-> {args.out}\n"
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


def main(argv: Sequence[str] | None = None) -> int:
    """The command line's entry point: runs ``argv`` (the process's arguments when None) and
    returns the exit status."""
    return run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":  # pragma: no cover - `python -m releases.engine.cli`
    sys.exit(main())
