"""Sources registered in place: a file in a server folder an administrator allows, an object in
S3-compatible storage, a PostgreSQL table or query. Nothing is copied: each read of the
original (profiling, a column store rebuilt) reads the source where it stays, in batches,
within the same bounds as an upload (``originals.read_limits``).

A source is pinned when it is registered, so that a later read never mixes two contents: a
folder file by its SHA-256 (checked before each read, as an upload's is), an S3 object by its
ETag (every ranged GET asks ``If-Match``: an object replaced meanwhile is refused, never read
half old and half new), a database source by a digest of its rows recorded by its first read
(a later read whose rows differ is refused when it ends).

This module reads and checks; ``registration`` writes the dataset.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any
from urllib.parse import unquote, unquote_plus, urlsplit

import boto3
import numpy as np
import pandas as pd
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from psycopg import sql

from releases.core import storage
from releases.core.errors import InvalidInput
from releases.engine import tabular
from releases.engine.tabular import ReadLimits, TableError, TableFormat, TableScan
from releases.models import Dataset

Kind = Dataset.SourceKind

#: Bytes fetched by one ranged GET of an S3 object.
RANGE_BYTES = 8 * 1024 * 1024
#: Rows fetched at a time from a database's server-side cursor.
DATABASE_BATCH_ROWS = 64 * 1024
#: A table's name: ``table`` or ``schema.table`` (unquoted identifiers).
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?$")
#: The format recorded for a database source (its cells come as PostgreSQL's text output).
DATABASE_FORMAT = Dataset.Format.DATABASE


@dataclass(frozen=True)
class Locator:
    """A parsed source: its kind, the text recorded for it, and its parts."""

    kind: str
    text: str
    path: Path | None = None
    bucket: str = ""
    key: str = ""
    database: str = ""
    table: str = ""
    query: str = ""

    @property
    def filename(self) -> str:
        """The name shown as the dataset's original file name."""
        if self.kind == Kind.FOLDER and self.path is not None:
            return self.path.name
        if self.kind == Kind.S3:
            return PurePosixPath(self.key).name or self.key
        return self.table or f"query on {self.database}"


@dataclass(frozen=True)
class Inspected:
    """What registering a source found out, cheaply: enough for the dataset's row."""

    locator: Locator
    file_format: str
    size_bytes: int
    sha256: str
    version: str = ""
    row_count: int = 0


def kind_of(text: str) -> str:
    """The kind of source ``text`` names, from its form alone (nothing is looked at)."""
    text = (text or "").strip()
    if text.startswith("s3://"):
        return Kind.S3
    if text.startswith(("postgres://", "postgresql://")):
        return Kind.POSTGRES
    return Kind.FOLDER


def parse(text: str) -> Locator:
    """``s3://bucket/key``, ``postgres://NAME?table=T`` or ``postgres://NAME?query=SELECT...``,
    else a path in a server folder. Raises ``InvalidInput`` for one that cannot be read."""
    text = (text or "").strip()
    if not text or not text.isprintable():
        raise InvalidInput("Name the source: a path, s3://bucket/key or postgres://NAME?table=T.")
    try:
        return _parse(text)
    except ValueError as exc:  # urlsplit's refusal of a malformed address
        raise InvalidInput(f"{text[:200]}: not a source that can be read ({exc}).") from None


def _parse(text: str) -> Locator:
    if text.startswith("s3://"):
        return _parse_s3(text)
    if text.startswith(("postgres://", "postgresql://")):
        return _parse_database(text)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise InvalidInput(
            f"Unknown source {scheme}://: register a server path, s3://bucket/key or "
            "postgres://NAME?table=T."
        )
    path = folder_file(text)
    return Locator(Kind.FOLDER, str(path), path=path)


def inspect(locator: Locator, limits: ReadLimits, max_bytes: int) -> Inspected:
    """The cheap checks of a registration (no dataset is written when one fails): the source is
    there and readable, within ``max_bytes`` (MAX_UPLOAD_BYTES), of a known format, with a header
    within the column bound (a Parquet file: its rows and size too; a database source: its rows
    counted). The rest (rows, cells, encoding) is checked while profiling reads it."""
    if locator.kind == Kind.FOLDER:
        assert locator.path is not None
        return _inspect_file(locator, _LocalFile(locator.path), limits, max_bytes)
    if locator.kind == Kind.S3:
        head = _s3_head(locator)
        found = S3Object(locator, head["ETag"], head["ContentLength"])
        version = head["ETag"] + (f" {head['VersionId']}" if head.get("VersionId") else "")
        return _inspect_file(locator, found, limits, max_bytes, version)
    return _inspect_database(locator, limits)


# --- Server folders -----------------------------------------------------------------------


def allowed_dirs() -> list[Path]:
    return [Path(d).resolve() for d in settings.DATA_IMPORT_DIRS]


def folder_file(text: str) -> Path:
    """The file at ``text``, resolved (symbolic links and ".." followed), refused unless it is a
    regular file inside one of DATA_IMPORT_DIRS (resolved too)."""
    folders = allowed_dirs()
    if not folders:
        raise InvalidInput(
            "No server folder may be registered from: the administrators have not set "
            "DATA_IMPORT_DIRS."
        )
    path = Path(text).expanduser()
    if not path.is_absolute():
        raise InvalidInput(f"{text}: give the file's absolute path.")
    resolved = path.resolve()
    if not any(resolved.is_relative_to(folder) for folder in folders):
        raise InvalidInput(
            f"{text} is outside the folders data may be registered from (DATA_IMPORT_DIRS)."
        )
    if not resolved.is_file():
        raise InvalidInput(f"{text} is not a file.")
    return resolved


def recheck_folder_file(recorded: str) -> Path:
    """The recorded file, still inside an allowed folder and still itself (not a link placed
    since the registration)."""
    path = folder_file(recorded)
    if str(path) != recorded:
        raise InvalidInput(
            f"{recorded} now leads to {path}; register the file again if that is intended."
        )
    return path


class _LocalFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def open(self) -> IO[bytes]:
        return open(self.path, "rb")  # noqa: SIM115 - the caller closes it

    def size(self) -> int:
        return self.path.stat().st_size


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(storage.CHUNK_BYTES * 8):
            digest.update(chunk)
    return digest.hexdigest()


def _inspect_file(
    locator: Locator,
    source: tabular.StreamSource,
    limits: ReadLimits,
    max_bytes: int,
    version: str = "",
) -> Inspected:
    size = source.size()
    if size > max_bytes:
        raise InvalidInput(
            f"{locator.text} holds {size:,} bytes; the limit is {max_bytes:,} (MAX_UPLOAD_BYTES)."
        )
    with source.open() as handle:
        head = handle.read(tabular.SNIFF_BYTES * 2)
    try:
        file_format = tabular.sniff_format(head[: tabular.SNIFF_BYTES], locator.filename)
        if file_format == tabular.PARQUET:
            # The footer only: its rows, columns and expanded size against the bounds.
            tabular.open_table(source, None, locator.filename, limits)
        elif file_format in (tabular.CSV, tabular.TSV):
            _check_text_header(head, size, file_format, limits)
    except TableError as exc:
        raise InvalidInput(f"{locator.text}: {exc}") from None
    if locator.kind == Kind.FOLDER:
        assert locator.path is not None
        sha256 = sha256_of_file(locator.path)
    else:
        # The object's identity: its place and the ETag every read must find.
        sha256 = hashlib.sha256(f"{locator.text}\n{version}".encode()).hexdigest()
    return Inspected(locator, file_format, size, sha256, version)


def _check_text_header(head: bytes, size: int, file_format: str, limits: ReadLimits) -> None:
    """The header row, read from the first bytes, within the column bound."""
    encoding = tabular.detect_encoding(head)
    text = head.decode(encoding, errors="replace").removeprefix("\ufeff")
    if len(head) < size:
        if "\n" not in text:
            return  # a header longer than the first bytes: profiling reads it
        text = text[: text.index("\n") + 1]
    sample = text[: tabular.SNIFF_BYTES]
    delimiter = "\t" if file_format == tabular.TSV else tabular.detect_delimiter(sample)
    first = next((line for line in text.splitlines() if line.strip(delimiter + " ")), "")
    header = next(iter(csv.reader([first], delimiter=delimiter)), [])
    if limits.max_columns is not None and len(header) > limits.max_columns:
        raise TableError(
            f"The file has {len(header):,} columns; the limit is {limits.max_columns:,} "
            f"columns ({limits.setting('max_columns')})."
        )
    tabular.check_header(header)


# --- Object storage -----------------------------------------------------------------------


def _parse_s3(text: str) -> Locator:
    parts = urlsplit(text)
    bucket, key = parts.netloc, unquote(parts.path.lstrip("/"))
    if not bucket or not key or key.endswith("/"):
        raise InvalidInput(f"{text}: name an object, s3://bucket/path/to/file.csv.")
    if bucket not in settings.SOURCE_S3_BUCKETS:
        raise InvalidInput(
            f"The bucket {bucket} is not one data may be registered from (SOURCE_S3_BUCKETS)."
        )
    return Locator(Kind.S3, f"s3://{bucket}/{key}", bucket=bucket, key=key)


def s3_client() -> Any:
    return boto3.client(
        "s3",
        endpoint_url=settings.SOURCE_S3_ENDPOINT_URL,
        region_name=settings.SOURCE_S3_REGION,
        aws_access_key_id=settings.SOURCE_S3_ACCESS_KEY_ID,
        aws_secret_access_key=settings.SOURCE_S3_SECRET_ACCESS_KEY,
        config=Config(retries={"max_attempts": 3, "mode": "standard"}),
    )


def changed_message(locator: Locator) -> str:
    return (
        f"The object {locator.text} changed since it was registered; register it again "
        "(nothing read from the changed object was kept)."
    )


def _s3_error(exc: Exception, locator: Locator) -> TableError:
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "PreconditionFailed" or status == 412:
            return TableError(changed_message(locator))
        if code in ("NoSuchKey", "404", "NotFound") or status == 404:
            return TableError(f"The object {locator.text} is gone; register it again.")
        if code in ("AccessDenied", "403", "Forbidden") or status == 403:
            return TableError(f"Object storage refused to read {locator.text} (access denied).")
        return TableError(f"Object storage refused to read {locator.text} ({code or status}).")
    return TableError(f"Object storage could not be reached to read {locator.text} ({exc}).")


def _s3_head(locator: Locator) -> dict[str, Any]:
    try:
        head: dict[str, Any] = s3_client().head_object(Bucket=locator.bucket, Key=locator.key)
    except (ClientError, BotoCoreError) as exc:
        error = _s3_error(exc, locator)
        if "is gone" in str(error):
            raise InvalidInput(f"There is no object {locator.text}.") from None
        raise InvalidInput(str(error)) from None
    return head


class S3Object:
    """An object read in place by ranged GETs, each asking for the recorded ETag (a
    :class:`tabular.StreamSource`). ``failure`` keeps the first error, for a reader (pyarrow)
    that reports it in words of its own."""

    def __init__(self, locator: Locator, etag: str, size: int) -> None:
        self.locator = locator
        self.etag = etag
        self._size = size
        self.client = s3_client()
        self.failure: TableError | None = None

    def size(self) -> int:
        return self._size

    def open(self) -> IO[bytes]:
        return io.BufferedReader(_S3Stream(self), buffer_size=RANGE_BYTES)

    def get(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (inclusive), from the object as registered."""
        try:
            answer = self.client.get_object(
                Bucket=self.locator.bucket,
                Key=self.locator.key,
                Range=f"bytes={start}-{end}",
                IfMatch=self.etag,
            )
            data: bytes = answer["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            self.failure = self.failure or _s3_error(exc, self.locator)
            raise self.failure from None
        return data


class _S3Stream(io.RawIOBase):
    def __init__(self, source: S3Object) -> None:
        self.source = source
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.source.size()}
        self.position = max(0, base[whence] + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        # One GET of at most RANGE_BYTES: a large read is several (BufferedReader asks again).
        end = min(self.position + len(view), self.position + RANGE_BYTES, self.source.size())
        if end <= self.position:
            return 0
        data = self.source.get(self.position, end - 1)
        view[: len(data)] = data
        self.position += len(data)
        return len(data)


def s3_object(dataset: Dataset) -> S3Object:
    """The dataset's registered object, to be read as registered."""
    locator = _parse_s3(dataset.source_locator)
    return S3Object(locator, dataset.source_version.split(" ")[0], dataset.size_bytes)


# --- PostgreSQL ---------------------------------------------------------------------------


def _parse_database(text: str) -> Locator:
    parts = urlsplit(text)
    name = parts.netloc
    if name not in settings.SOURCE_DATABASES:
        known = ", ".join(sorted(settings.SOURCE_DATABASES)) or "none is configured"
        raise InvalidInput(
            f"No database named {name!r} may be registered from (SOURCE_DATABASES: {known})."
        )
    query = parts.query
    if query.startswith("table="):
        table = unquote_plus(query.removeprefix("table=")).strip()
        if not TABLE_NAME.match(table):
            raise InvalidInput(f"{table!r} is not a table name (table or schema.table).")
        return Locator(
            Kind.POSTGRES, f"postgres://{name}?table={table}", database=name, table=table
        )
    if query.startswith("query="):
        select = check_select(unquote_plus(query.removeprefix("query=")))
        return Locator(
            Kind.POSTGRES, f"postgres://{name}?query={select}", database=name, query=select
        )
    raise InvalidInput(f"{text}: name a table (?table=T) or a query (?query=SELECT ...).")


def check_select(query: str) -> str:
    """A single SELECT (or WITH ... SELECT), without its final semicolon; anything else is
    refused. (It also runs in a read-only transaction, wrapped as a subquery.)"""
    text = query.strip().rstrip(";").strip()
    first = text.split(None, 1)[0].lower() if text else ""
    if first not in ("select", "with") or ";" in text:
        shown = first.upper() or "an empty"
        raise InvalidInput(
            "Only a single SELECT statement may be registered"
            + (f"; this is {shown} statement." if ";" not in text else "; this holds several.")
        )
    return text


def _database_error(exc: psycopg.Error, locator: Locator) -> InvalidInput:
    what = f"the table {locator.table}" if locator.table else "the query"
    message = (exc.diag.message_primary or str(exc)).strip() if exc.diag else str(exc)
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return InvalidInput(
            f"The database {locator.database} refused to read {what} ({message}): the role it "
            "is registered with needs SELECT on it."
        )
    if isinstance(exc, psycopg.errors.UndefinedTable) and locator.table:
        return InvalidInput(f"The database {locator.database} has no table {locator.table}.")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction) or "data-modifying" in message:
        return InvalidInput(
            "Only a single SELECT statement may be registered; this one would write or lock "
            f"rows ({message})."
        )
    if isinstance(exc, psycopg.OperationalError) and not exc.diag.sqlstate:
        return InvalidInput(f"The database {locator.database} could not be reached ({message}).")
    return InvalidInput(f"The database {locator.database} refused {what}: {message}")


def _connect(locator: Locator) -> psycopg.Connection:
    url = settings.SOURCE_DATABASES[locator.database]
    try:
        connection = psycopg.connect(url.replace("postgres://", "postgresql://", 1))
    except psycopg.Error as exc:
        raise _database_error(exc, locator) from None
    connection.read_only = True
    return connection


def _inner(locator: Locator) -> sql.Composable:
    if locator.table:
        return sql.SQL("SELECT * FROM {}").format(sql.Identifier(*locator.table.split(".")))
    return sql.SQL(locator.query)  # type: ignore[arg-type]  # checked by check_select


def _columns(connection: psycopg.Connection, locator: Locator) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("SELECT * FROM ({}) AS source LIMIT 0").format(_inner(locator)))
        return [column.name for column in cursor.description or []]


def _check_columns(names: list[str], limits: ReadLimits) -> list[str]:
    if limits.max_columns is not None and len(names) > limits.max_columns:
        raise TableError(
            f"The table has {len(names):,} columns; the limit is {limits.max_columns:,} "
            f"columns ({limits.setting('max_columns')})."
        )
    return tabular.check_header(names)


def _rows_message(rows: int, limits: ReadLimits) -> str:
    return (
        f"The table has {rows:,} rows; the limit is {limits.max_rows:,} rows "
        f"({limits.setting('max_rows')})."
    )


def _inspect_database(locator: Locator, limits: ReadLimits) -> Inspected:
    try:
        with _connect(locator) as connection:
            names = _check_columns(_columns(connection, locator), limits)
            with connection.cursor() as cursor:
                cursor.execute(
                    sql.SQL("SELECT count(*) FROM ({}) AS source").format(_inner(locator))
                )
                row = cursor.fetchone()
            rows = int(row[0]) if row else 0
    except psycopg.Error as exc:
        raise _database_error(exc, locator) from None
    except TableError as exc:
        raise InvalidInput(f"{locator.text}: {exc}") from None
    if limits.max_rows is not None and rows > limits.max_rows:
        raise InvalidInput(f"{locator.text}: {_rows_message(rows, limits)}")
    if rows == 0:
        raise InvalidInput(f"{locator.text}: the table has columns ({len(names)}) but no rows.")
    identity = hashlib.sha256(locator.text.encode()).hexdigest()
    return Inspected(locator, DATABASE_FORMAT, 0, identity, row_count=rows)


class DatabaseScan(TableScan):
    """A database source read in batches; ``digest`` is the digest of its rows once read."""

    digest = ""


def rows_digest_update(state: np.ndarray, batch: pa.RecordBatch) -> None:
    """Add a batch's rows to ``state`` (two running sums of 64-bit row hashes, and the row
    count): the digest does not depend on the rows' order, which a query need not fix."""
    frame = batch.to_pandas()
    for slot, key in enumerate(("anonymizer-rows-1", "anonymizer-rows-2")):
        hashes = pd.util.hash_pandas_object(frame, index=False, hash_key=key[:16].ljust(16, "0"))
        state[slot] += np.sum(hashes.to_numpy(dtype=np.uint64), dtype=np.uint64)
    state[2] += np.uint64(batch.num_rows)


def rows_digest(state: np.ndarray, columns: list[str]) -> str:
    text = "\n".join([*columns, *(str(int(v)) for v in state)])
    return hashlib.sha256(text.encode()).hexdigest()


def scan_database(dataset: Dataset, limits: ReadLimits) -> DatabaseScan:
    """The dataset's table or query, read with a server-side cursor in a read-only transaction,
    every cell as PostgreSQL's text ("" for NULL). A read whose rows differ from those of the
    first read (``dataset.source_version``) is refused when it ends."""
    locator = _parse_database(dataset.source_locator)
    connection = _connect(locator)
    try:
        names = _check_columns(_columns(connection, locator), limits)
    except psycopg.Error as exc:
        connection.close()
        raise _database_error(exc, locator) from None
    except BaseException:
        connection.close()
        raise
    selected = sql.SQL(", ").join(
        sql.SQL("source.{}::text").format(sql.Identifier(name)) for name in names
    )
    query = sql.SQL("SELECT {} FROM ({}) AS source").format(selected, _inner(locator))
    expected = max(1, dataset.row_count)

    def batches() -> Iterator[pa.RecordBatch]:
        state = np.zeros(3, dtype=np.uint64)
        rows = 0
        text_bytes = 0
        try:
            with connection.cursor(name="anonymizer_source") as cursor:
                cursor.execute(query)
                while fetched := cursor.fetchmany(DATABASE_BATCH_ROWS):
                    columns = list(zip(*fetched, strict=True))
                    arrays = [pc.fill_null(pa.array(c, type=pa.string()), "") for c in columns]
                    batch = pa.RecordBatch.from_arrays(arrays, names=names)
                    rows += batch.num_rows
                    if limits.max_rows is not None and rows > limits.max_rows:
                        raise TableError(_rows_message(rows, limits))
                    text_bytes += _check_cells(batch, limits, rows - batch.num_rows)
                    if limits.max_bytes is not None and text_bytes > limits.max_bytes:
                        raise TableError(
                            f"The table holds more than {limits.max_bytes:,} bytes of text; "
                            f"the limit is {limits.max_bytes:,} ({limits.setting('max_bytes')})."
                        )
                    rows_digest_update(state, batch)
                    yield batch
        except psycopg.Error as exc:
            raise TableError(str(_database_error(exc, locator))) from None
        finally:
            connection.close()
        scan.digest = rows_digest(state, names)
        if dataset.source_version and scan.digest != dataset.source_version:
            raise TableError(
                f"The rows of {locator.text} changed since it was first read; register it again."
            )

    fmt = TableFormat(file_format=DATABASE_FORMAT)
    scan = DatabaseScan(fmt, names, batches(), lambda: scan.rows / expected)
    return scan


def _check_cells(batch: pa.RecordBatch, limits: ReadLimits, before: int) -> int:
    """The batch's bytes of text, refused when a cell passes the cell bound."""
    total = 0
    for position, column in enumerate(batch.columns):
        lengths = pc.binary_length(column)
        total += pc.sum(lengths).as_py() or 0
        longest = pc.max(lengths).as_py()
        if limits.max_cell_bytes is not None and longest and longest > limits.max_cell_bytes:
            index = pc.index(pc.greater(lengths, limits.max_cell_bytes), True).as_py()
            raise TableError(
                f"Row {before + index + 1:,}, column {position + 1} "
                f"({batch.schema.names[position]!r}) holds a cell of {longest:,} bytes; the "
                f"limit is {limits.max_cell_bytes:,} bytes a cell "
                f"({limits.setting('max_cell_bytes')})."
            )
    return total
