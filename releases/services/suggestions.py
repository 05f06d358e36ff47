"""Suggested roles: direct identifiers and quasi-identifiers recognised by name and by content.

Each suggestion carries its reason, shown to the steward, who confirms or changes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from ..models import Role
from ..models.datasets import ColumnType

SAMPLE = 2000


@dataclass(frozen=True)
class Suggestion:
    role: str
    reason: str


def _words(name: str) -> str:
    """'Date_of_Birth' -> 'date of birth'; 'ZIPCode' -> 'zip code'."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)
    return " " + re.sub(r"[^a-z0-9]+", " ", spaced.lower()).strip() + " "


def _has(words: str, *patterns: str) -> bool:
    return any(re.search(rf" {p} ", words) for p in patterns)


# Name rules, most specific first: (patterns, role, reason).
NAME_RULES: list[tuple[tuple[str, ...], str, str]] = [
    (
        ("e ?mail", "email address", "mail"),
        Role.IDENTIFIER,
        "the name says it holds e-mail addresses",
    ),
    (
        ("phone", "telephone", "mobile", "cell", "fax", "tel"),
        Role.IDENTIFIER,
        "the name says it holds phone numbers",
    ),
    (
        (
            "ssn",
            "social security( number)?",
            "national id",
            "nin",
            "nhs( number)?",
            "passport( number)?",
            "insurance number",
            "tax id",
            "iban",
            "bsn",
            "personnummer",
            "mrn",
            "medical record( number)?",
        ),
        Role.IDENTIFIER,
        "the name says it holds a national or personal identifier",
    ),
    (
        (
            "(first |last |given |family |full |sur)?name",
            "surname",
            "forename",
            "patient",
            "person",
        ),
        Role.IDENTIFIER,
        "the name says it holds people's names",
    ),
    (("address", "street"), Role.IDENTIFIER, "the name says it holds street addresses"),
    (
        ("(date of )?birth( date)?", "dob", "birthday", "birthdate", "born"),
        Role.QUASI_IDENTIFIER,
        "birth dates single people out in combination with other attributes",
    ),
    (("age", "age years", "years old"), Role.QUASI_IDENTIFIER, "the name says it holds ages"),
    (
        ("zip( code)?", "zipcode", "postal( code)?", "postcode", "post code", "plz"),
        Role.QUASI_IDENTIFIER,
        "the name says it holds ZIP or postal codes",
    ),
    (("sex", "gender"), Role.QUASI_IDENTIFIER, "the name says it holds sex or gender"),
    (
        ("race", "ethnicity", "ethnic( group)?"),
        Role.QUASI_IDENTIFIER,
        "the name says it holds race or ethnicity",
    ),
    (
        ("marital( status)?", "civil status", "married"),
        Role.QUASI_IDENTIFIER,
        "the name says it holds marital status",
    ),
    (
        ("occupation", "job", "profession", "employment", "job title"),
        Role.QUASI_IDENTIFIER,
        "the name says it holds an occupation",
    ),
    (
        ("education", "degree"),
        Role.QUASI_IDENTIFIER,
        "the name says it holds education, often public knowledge",
    ),
    (
        (
            "country",
            "native country",
            "nationality",
            "city",
            "town",
            "county",
            "state",
            "region",
            "province",
            "municipality",
            "district",
            "location",
            "place",
            "residence",
            "lat",
            "latitude",
            "lon",
            "lng",
            "longitude",
        ),
        Role.QUASI_IDENTIFIER,
        "the name says it holds a location",
    ),
    (
        (
            "date",
            "admission",
            "admitted",
            "discharge",
            "discharged",
            "visit",
            "death",
            "event date",
            "onset",
            "timestamp",
        ),
        Role.QUASI_IDENTIFIER,
        "the name says it holds the date of an event",
    ),
    (
        (
            "id",
            "identifier",
            "uuid",
            "guid",
            "record",
            "record id",
            "key",
            "account",
            "customer id",
            "patient id",
            "number",
            "no",
        ),
        Role.IDENTIFIER,
        "the name says it is an identifier",
    ),
    (
        (
            "diagnosis",
            "disease",
            "condition",
            "icd",
            "salary",
            "income",
            "salary class",
            "wage",
            "religion",
            "treatment",
            "medication",
            "hiv",
            "sexual orientation",
        ),
        Role.SENSITIVE,
        "the name suggests a sensitive attribute",
    ),
]

EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
PHONE = re.compile(r"^\+?[\d\s().-]{7,20}$")
SSN = re.compile(r"^\d{3}-\d{2}-\d{4}$")
NHS = re.compile(r"^\d{3} ?\d{3} ?\d{4}$")
PERSON_NAME = re.compile(r"^[A-Z][a-zà-ÿ'’-]+(?: [A-Z][a-zà-ÿ'’.-]+){1,3}$")
ZIP = re.compile(r"^\d{5}(-\d{4})?$")
SEX_VALUES = {"m", "f", "male", "female", "man", "woman", "x", "other", "diverse", "non-binary"}
MARITAL_VALUES = {
    "married",
    "single",
    "divorced",
    "widowed",
    "separated",
    "never-married",
    "married-civ-spouse",
    "married-spouse-absent",
    "married-af-spouse",
    "never married",
}
RACE_VALUES = {
    "white",
    "black",
    "asian",
    "asian-pac-islander",
    "amer-indian-eskimo",
    "hispanic",
    "latino",
    "other",
    "native american",
    "pacific islander",
}


def _share(values: pd.Series, pattern: re.Pattern) -> float:
    return float(values.str.fullmatch(pattern.pattern).mean()) if len(values) else 0.0


def _by_content(series: pd.Series, profile: dict) -> tuple[Suggestion, bool] | None:
    """The suggestion the values make, and whether it is strong enough to outrank the name."""
    found = _content_rules(series, profile)
    if found is None:
        return None
    strong = found.role == Role.IDENTIFIER and "record ID" not in found.reason
    return found, strong


def _content_rules(series: pd.Series, profile: dict) -> Suggestion | None:
    present = series[series.str.strip() != ""].str.strip()
    if present.empty:
        return None
    sample = present.head(SAMPLE)
    rows = profile["rows"]
    # A value of its own on every row of a table of some size: a record ID.
    unique_per_row = profile["distinct"] == rows and rows >= 20
    if _share(sample, EMAIL) >= 0.9:
        return Suggestion(Role.IDENTIFIER, "the values are e-mail addresses")
    if _share(sample, SSN) >= 0.9:
        return Suggestion(
            Role.IDENTIFIER, "the values look like national identifiers (999-99-9999)"
        )
    digits = sample.str.replace(r"\D", "", regex=True).str.len()
    if (
        profile["inferred_type"] != ColumnType.DATE
        and _share(sample, PHONE) >= 0.9
        and (digits >= 7).mean() >= 0.9
        and not sample.str.fullmatch(r"\d+").all()
    ):
        return Suggestion(Role.IDENTIFIER, "the values look like phone numbers")
    if _share(sample, PERSON_NAME) >= 0.8 and profile["unique_share"] > 0.5:
        return Suggestion(
            Role.IDENTIFIER, "the values look like people's full names, mostly unique"
        )
    column_type = profile["inferred_type"]
    if (
        unique_per_row
        and column_type in (ColumnType.INTEGER, ColumnType.TEXT, ColumnType.CATEGORICAL)
        and (column_type == ColumnType.INTEGER or sample.str.len().max() <= 40)
    ):
        return Suggestion(
            Role.IDENTIFIER, f"every one of the {rows} rows has its own value: a record ID"
        )
    lowered = set(present.str.lower().unique()[:100])
    if lowered and lowered <= SEX_VALUES and len(lowered) <= 4:
        return Suggestion(Role.QUASI_IDENTIFIER, "the values are sexes or genders")
    if lowered and len(lowered & MARITAL_VALUES) >= 2 and len(lowered - MARITAL_VALUES) <= 2:
        return Suggestion(Role.QUASI_IDENTIFIER, "the values are marital statuses")
    if lowered and len(lowered & RACE_VALUES) >= 2 and len(lowered - RACE_VALUES) <= 2:
        return Suggestion(Role.QUASI_IDENTIFIER, "the values are races or ethnicities")
    if column_type == ColumnType.DATE:
        return Suggestion(
            Role.QUASI_IDENTIFIER, "the values are dates: dates of events can be looked up"
        )
    if _share(sample, ZIP) >= 0.95 and profile["distinct"] > 2:
        return Suggestion(Role.QUASI_IDENTIFIER, "the values look like ZIP codes")
    return None


def suggest(name: str, series: pd.Series, profile: dict) -> Suggestion:
    """The suggested role of a column, from its name first and then from its values."""
    words = _words(name)
    found = _by_content(series, profile)
    content, strong = found if found is not None else (None, False)
    for patterns, role, reason in NAME_RULES:
        if _has(words, *patterns):
            # Values that are e-mails, phone numbers, national IDs or names outrank the name.
            if strong and role != Role.IDENTIFIER:
                return Suggestion(
                    content.role,
                    f"{content.reason} (the name {name!r} suggested {Role(role).label.lower()})",
                )
            if (
                role == Role.IDENTIFIER
                and profile["unique_share"] < 0.05
                and profile["rows"] > 20
                and (content is None or content.role != Role.IDENTIFIER)
            ):
                # "name"-like columns with few distinct values are categories, not identifiers.
                continue
            return Suggestion(role, f"{reason} (column {name!r})")
    if content is not None:
        return content
    if profile.get("single_value"):
        return Suggestion(Role.INSENSITIVE, "every row has the same value")
    return Suggestion(Role.INSENSITIVE, "nothing in its name or values points to a person")
