"""The documentation names only what exists: files, make targets, management commands, URLs,
settings; the README stays short; the lifecycle diagram is the one the code makes.

Reads files and Django's registries only: no process is started, no database is used.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from django.core.management import get_commands
from django.urls import Resolver404, resolve

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
README_MAX_LINES = 150

#: Top-level folders of the repository whose paths the documentation names.
REPO_FOLDERS = ("releases", "tests", "bench", "scripts", "docs", "templates", "anonymizer_site")
PATH_TOKEN = re.compile(r"(?<![\w./<>-])((?:" + "|".join(REPO_FOLDERS) + r")/[^\s`'\"(),;|]*)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)|\bsrc=\"([^\"]+)\"")


def code_of(text: str) -> list[str]:
    """The code a page holds: its fenced blocks, then its inline code spans."""
    blocks = FENCE.findall(text)
    prose = FENCE.sub("", text)
    return blocks + INLINE.findall(prose)


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def repo_paths(text: str) -> set[str]:
    found = set()
    for code in code_of(text):
        for token in PATH_TOKEN.findall(code):
            found.add(token.rstrip(".:"))
    return found


def exists(path: str) -> bool:
    """A path, where ``<name>`` stands for any part of a name (e.g. ``adult_hierarchy_<column>``)."""
    pattern = re.sub(r"<[^>]*>", "*", path).rstrip("/")
    if "*" in pattern:
        return any(ROOT.glob(pattern))
    return (ROOT / pattern).exists()


def test_the_scan_finds_paths_and_flags_missing_ones() -> None:
    text = "See `releases/views.py` and `tests/data/adult/adult_hierarchy_<column>.csv`.\n"
    text += "```sh\npython manage.py anonymize tests/data/adult/adult.csv --qi age=bench/nothing.csv\n```\n"
    paths = repo_paths(text)
    assert paths == {
        "releases/views.py",
        "tests/data/adult/adult_hierarchy_<column>.csv",
        "tests/data/adult/adult.csv",
        "bench/nothing.csv",
    }
    assert [p for p in sorted(paths) if not exists(p)] == ["bench/nothing.csv", "releases/views.py"]


def test_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; keep it to {README_MAX_LINES} and move the rest "
        "under docs/."
    )


def test_the_readme_links_every_docs_page() -> None:
    text = README.read_text()
    missing = [page_id(p) for p in DOCS if f"]({page_id(p)})" not in text]
    assert not missing, f"README.md's reading list lacks {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_named_repo_paths_exist(page: Path) -> None:
    missing = sorted(p for p in repo_paths(page.read_text()) if not exists(p))
    assert not missing, f"{page_id(page)} names paths that do not exist: {missing}"


def github_anchor(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {github_anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for groups in LINK.findall(page.read_text()):
        target = groups[0] or groups[1]
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: outside the repository
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            broken.append(target)
    assert not broken, f"{page_id(page)} links to what does not exist: {broken}"


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, re.M))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_make_targets_exist(page: Path) -> None:
    named = set()
    for code in code_of(page.read_text()):
        named |= set(re.findall(r"\bmake (?:[A-Z_]+=\S* )*([a-z][\w-]*)", code))
    missing = sorted(named - make_targets())
    assert not missing, f"{page_id(page)} names make targets the Makefile lacks: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_management_commands_exist(page: Path) -> None:
    named = set()
    for code in code_of(page.read_text()):
        named |= set(re.findall(r"\bmanage\.py (\w+)", code))
    missing = sorted(named - set(get_commands()))
    assert not missing, f"{page_id(page)} names management commands that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_urls_resolve(page: Path) -> None:
    broken = []
    for code in INLINE.findall(FENCE.sub("", page.read_text())):
        if not re.fullmatch(r"/[\w<>./-]*(\?\S*)?", code) or code.startswith("/tmp"):
            continue
        path = re.sub(r"<[^>]*>", "1", code.partition("?")[0])
        try:
            resolve(path)
        except Resolver404:
            broken.append(code)
    assert not broken, f"{page_id(page)} names URLs the app does not serve: {broken}"


# --- Settings ----------------------------------------------------------------------------------

SETTINGS = ROOT / "anonymizer_site" / "settings.py"
CONFIGURATION = ROOT / "docs" / "configuration.md"


def variables_settings_read() -> set[str]:
    text = SETTINGS.read_text()
    names = set(re.findall(r"os\.environ\.get\(\s*\"(\w+)\"", text))
    names |= set(re.findall(r"env_(?:bool|list)\(\s*\"(\w+)\"", text))
    if "dj_database_url.config(" in text:
        names.add("DATABASE_URL")  # dj-database-url reads it
    return names


def table_names(section: str) -> list[list[str]]:
    """The variables in the first column of each table row of ``section``."""
    rows = []
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            rows.append(re.findall(r"`([A-Z][A-Z0-9_]+)`", first))
    return rows


def configuration_sections() -> tuple[str, str]:
    text = CONFIGURATION.read_text()
    settings_part, _, around = text.partition("\n## Read by the commands around the app")
    assert around, "docs/configuration.md lost its section on the commands around the app"
    return settings_part, around


def test_configuration_lists_every_setting_and_only_those() -> None:
    settings_part, _ = configuration_sections()
    documented = {name for row in table_names(settings_part) for name in row}
    read = variables_settings_read()
    assert read, "no variable found in settings.py: the scan is broken"
    assert not read - documented, f"settings.py reads variables not documented: {read - documented}"
    assert not documented - read, f"documented but not read by settings.py: {documented - read}"


def test_variables_of_the_commands_are_read_where_the_table_says() -> None:
    _, around = configuration_sections()
    checked = 0
    for line in around.splitlines():
        if not line.startswith("| `"):
            continue
        cells = line.split("|")
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[1])
        files = re.findall(r"`([\w./-]+)`", cells[2])
        assert names and files, line
        text = "".join((ROOT / f).read_text() for f in files)
        for name in names:
            assert re.search(rf"\b{name}\b", text), f"{name} is not read by {files}"
            checked += 1
    assert checked >= 5


def code_corpus() -> str:
    files = [*ROOT.glob("releases/**/*.py"), *ROOT.glob("anonymizer_site/*.py")]
    files += [*ROOT.glob("scripts/*"), ROOT / "Makefile", ROOT / "docker-compose.yml"]
    files += [*ROOT.glob("docs/examples/*")]  # the worked examples' own variables
    return "\n".join(f.read_text() for f in files if f.is_file())


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_upper_case_names_are_settings_or_in_the_code(page: Path) -> None:
    """A name such as `MAX_ROWS` in code is a documented setting or appears in the code."""
    settings_part, around = configuration_sections()
    known = {n for row in table_names(settings_part) + table_names(around) for n in row}
    corpus = code_corpus()
    text = page.read_text()
    names = set()
    for code in INLINE.findall(FENCE.sub("", text)):
        names |= set(re.findall(r"(?<![\w./])[A-Z][A-Z0-9_]{2,}(?![\w./])", code))
    for block in FENCE.findall(text):  # in commands, the variables set before them
        names |= set(re.findall(r"(?<![\w./])([A-Z][A-Z0-9_]{2,})=", block))
    unknown = {n for n in names if n not in known and not re.search(rf"\b{n}\b", corpus)}
    assert not unknown, f"{page_id(page)} names what neither settings nor code define: {unknown}"


# --- The lifecycle diagram ---------------------------------------------------------------------


def load_diagram_script():
    spec = importlib.util.spec_from_file_location(
        "lifecycle_diagram", ROOT / "scripts" / "lifecycle_diagram.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lifecycle_diagram_is_current() -> None:
    script = load_diagram_script()
    expected = script.diagram(script.load_transitions(), script.initial_state())
    committed = script.committed_block(script.DOC.read_text())
    assert committed == expected, (
        "The lifecycle diagram in docs/architecture.md is stale: run "
        "`python scripts/lifecycle_diagram.py --write` and commit the result."
    )


def test_lifecycle_diagram_draws_every_transition() -> None:
    script = load_diagram_script()
    transitions = script.load_transitions()
    text = script.diagram(transitions, script.initial_state())
    for (state, action), transition in transitions.items():
        target = state if transition.target is None else transition.target
        edge = re.search(rf"^    {state} --> {target} : (.*)$", text, re.M)
        assert edge and f"{action} ({transition.who})" in edge.group(1), (state, action)
    assert f"    [*] --> {script.initial_state()}" in text
    # The states nothing leaves (no (state, action) in the table) are the diagram's ends.
    sources = {str(state) for state, _ in transitions}
    targets = {str(t.target) for t in transitions.values() if t.target is not None}
    ends = set(re.findall(r"^    (\w+) --> \[\*\]$", text, re.M))
    assert ends == targets - sources
    assert ends  # rejected, revoked, expired today: a release request does end
