"""Suggested roles: direct identifiers and quasi-identifiers recognised by name and by content.

Names are read in the languages stewards use (English, French, German, Spanish, Italian and
Dutch) with accents folded (``Prénom`` reads as ``prenom``, ``Âge`` as ``age``) and German and
Dutch compounds matched on their stems (``Telefonnummer``, ``Geburtsdatum``, ``Achternaam``).
Values are read whatever the name: e-mail addresses, phone numbers, IBANs, national
identifiers, people's names, free text and mostly unique codes.

Each suggestion carries its reason, shown to the steward, who confirms or changes it. The
release gate leans on these suggestions: a column suggested as a direct identifier can be
released as is only with a written justification.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import pandas as pd

from releases.models import Role
from releases.models.datasets import ColumnType

SAMPLE = 2000


@dataclass(frozen=True)
class Suggestion:
    role: str
    reason: str


def fold(text: str) -> str:
    """A column name as lowercase ASCII words: 'Prénom' -> 'prenom', 'ZIPCode' -> 'zip code',
    'Date_of_Birth' -> 'date of birth', 'Straße' -> 'strasse'."""
    spaced = re.sub(r"([a-zà-ÿ])([A-ZÀ-Þ])", r"\1 \2", str(text))
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    decomposed = unicodedata.normalize("NFKD", spaced.replace("ß", "ss").replace("ẞ", "ss"))
    ascii_only = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return re.sub(r"[^a-z0-9]+", " ", ascii_only.casefold()).strip()


@dataclass(frozen=True)
class NameRule:
    """Words (regular expressions over whole folded words) and stems (found inside a word,
    for compounds) that point to a role."""

    role: str
    reason: str
    words: tuple[str, ...] = ()
    stems: tuple[str, ...] = ()
    #: Generic words ("name", "number", "address"): a column with few distinct values under
    #: such a name is a category ("product name"), not an identifier.
    category_guard: bool = False

    def matches(self, folded: str) -> bool:
        padded = f" {folded} "
        if any(re.search(rf"(?<![a-z0-9]){w}(?![a-z0-9])", padded) for w in self.words):
            return True
        return any(stem in folded for stem in self.stems)


# Most specific first: the first rule that matches gives the suggestion.
NAME_RULES: list[NameRule] = [
    NameRule(
        Role.IDENTIFIER,
        "the name says it holds e-mail addresses",
        words=(
            "e ?mail",
            "mail",
            "email address",
            "courriel",
            "adresse (electronique|mail|e mail)",
            "correo( electronico)?",
            "posta elettronica",
            "e ?mailadres",
        ),
        stems=("email", "courriel", "mailadres", "mailadresse"),
    ),
    NameRule(
        Role.IDENTIFIER,
        "the name says it holds phone numbers",
        words=(
            "phone",
            "tel",
            "mobile",
            "cell",
            "fax",
            "gsm",
            "portable",
            "movil",
            "cellulare",
            "mobiel",
            "handy",
            "numero de (telephone|telefono|portable)",
        ),
        stems=(
            "phone",
            "telephon",
            "telefon",
            "telefoon",
            "handynummer",
            "rufnummer",
            "mobilnummer",
        ),
    ),
    NameRule(
        Role.IDENTIFIER,
        "the name says it holds a national or personal identifier",
        words=(
            "ssn",
            "social security( number)?",
            "national (id|identifier|insurance)( number)?",
            "nin",
            "nino",
            "nhs( number)?",
            "passport( number)?",
            "insurance number",
            "tax (id|number)",
            "tin",
            "iban",
            "bsn",
            "sofinummer",
            "personnummer",
            "mrn",
            "medical record( number)?",
            "health insurance number",
            "driver s? licen[cs]e",
            "driving licen[cs]e",
            "id card",
            "identity card",
            # French
            "nir",
            "insee",
            "secu",
            "numero de securite sociale",
            "securite sociale",
            "carte (d )?identite",
            "cni",
            "permis de conduire",
            # Spanish
            "dni",
            "nie",
            "nif",
            "nuss",
            "numero de la seguridad social",
            "seguridad social",
            "documento de identidad",
            "pasaporte",
            # Italian
            "codice fiscale",
            "cf",
            "tessera sanitaria",
            "carta d identita",
            "passaporto",
            # German
            "steuer ?id",
            "steuer identifikationsnummer",
            "ahv( nummer)?",
            # Dutch / Belgian
            "paspoort",
            "rijksregisternummer",
        ),
        stems=(
            "passport",
            "passeport",
            "reisepass",
            "steuerid",
            "steuernummer",
            "steueridentifikation",
            "sozialversicherung",
            "versichertennummer",
            "personalausweis",
            "ausweisnummer",
            "fuhrerschein",
            "burgerservicenummer",
            "rijksregister",
            "codicefiscale",
        ),
    ),
    NameRule(
        Role.IDENTIFIER,
        "the name says it holds people's names",
        words=(
            "(first|last|given|family|full|middle|maiden|sur) ?names?",
            "forename",
            # French
            "prenoms?",
            "nom (de famille|complet|de naissance|d usage)",
            # Spanish
            "apellidos?",
            "nombre completo",
            # Italian
            "cognome",
            "nome completo",
            # Dutch
            "roepnaam",
            "tussenvoegsel",
            # German
            "geburtsname",
        ),
        stems=(
            "firstname",
            "lastname",
            "surname",
            "fullname",
            "vorname",
            "nachname",
            "familienname",
            "voornaam",
            "achternaam",
            "familienaam",
            "prenom",
            "cognome",
            "apellido",
        ),
    ),
    NameRule(
        Role.IDENTIFIER,
        "the name says it holds people's names",
        words=(
            "(user ?)?names?",
            # "patient" alone names someone; "patient age" is an age.
            "(patient|person|client|customer|klant|kunde)(?= $)",
            "noms?",
            # Spanish; "nombre de ..." is French for "number of ...".
            "nombre(?! de )",
            "nome",
            "naam",
        ),
        category_guard=True,
    ),
    NameRule(
        Role.IDENTIFIER,
        "the name says it holds street addresses",
        words=(
            "address",
            "street",
            "adresse",
            "rue",
            "domicile",
            "direccion",
            "calle",
            "domicilio",
            "indirizzo",
            "adres",
            "straat",
            "anschrift",
            "ip( address)?",
        ),
        stems=("address", "strasse", "straat", "hausnummer", "huisnummer", "anschrift"),
        category_guard=True,
    ),
    NameRule(
        Role.QUASI_IDENTIFIER,
        "birth dates single people out in combination with other attributes",
        words=(
            "(date of )?birth( date| year)?",
            "year of birth",
            "dob",
            "birthday",
            "birthdate",
            "born",
            "date de naissance",
            "ddn",
            "fecha de nacimiento",
            "f nac",
            "data (di )?nascita",
            "geboren",
        ),
        stems=("birth", "naissance", "nacimiento", "nascita", "geburt", "geboorte"),
    ),
    NameRule(
        Role.QUASI_IDENTIFIER,
        "the name says it holds ages",
        words=("age", "ages", "years old", "edad", "eta", "alter", "leeftijd"),
        stems=("leeftijd", "lebensalter", "altersgruppe", "tranche d age", "classe d age"),
    ),
    NameRule(
        Role.QUASI_IDENTIFIER,
        "the name says it holds ZIP or postal codes",
        words=(
            "zip( code)?",
            "zipcode",
            "postal( code)?",
            "post ?code",
            "plz",
            "code postal",
            "cp",
            "codigo postal",
            "cod postal",
            "cap",
            "codice postale",
        ),
        stems=("postleitzahl", "postcode", "zipcode", "postal", "postnummer"),
    ),
    NameRule(
        Role.QUASI_IDENTIFIER,
        "the name says it holds sex or gender",
        words=(
            "sex",
            "gender",
            "sexe",
            "genre",
            "sexo",
            "genero",
            "sesso",
            "genere",
            "geslacht",
            "geschlecht",
        ),
    ),
    NameRule(
        Role.QUASI_IDENTIFIER,
        "the name says it holds race or ethnicity",
        words=(
            "race",
            "ethnicity",
            "ethnic( group)?",
            "origine ethnique",
            "ethnie",
            "raza",
            "etnia",
            "razza",
            "etnicita",
            "etniciteit",
            "afkomst",
            "herkunft",
        ),
        stems=("ethnizitat", "ethnisch"),
    ),
    NameRule(
        Role.QUASI_IDENTIFIER,
        "the name says it holds marital status",
        words=(
            "marital( status)?",
            "civil status",
            "married",
            "etat civil",
            "situation (familiale|matrimoniale)",
            "estado civil",
            "stato civile",
            "burgerlijke sta(at|nd)",
        ),
        stems=("familienstand", "zivilstand"),
    ),
    NameRule(
        Role.QUASI_IDENTIFIER,
        "the name says it holds an occupation",
        words=(
            "occupation",
            "job( title)?",
            "profession",
            "employment",
            "metier",
            "emploi",
            "poste",
            "profesion",
            "ocupacion",
            "empleo",
            "puesto",
            "professione",
            "occupazione",
            "lavoro",
            "mestiere",
            "functie",
            "baan",
            "tatigkeit",
        ),
        stems=("beruf", "beroep"),
    ),
    NameRule(
        Role.QUASI_IDENTIFIER,
        "the name says it holds education, often public knowledge",
        words=(
            "education",
            "degree",
            "diplome",
            "niveau d etudes?",
            "formation",
            "educacion",
            "estudios",
            "nivel (educativo|de estudios)",
            "istruzione",
            "titolo di studio",
            "onderwijs",
            "abschluss",
        ),
        stems=("bildung", "opleiding", "schulabschluss"),
    ),
    NameRule(
        Role.QUASI_IDENTIFIER,
        "the name says it holds a location or nationality",
        words=(
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
            # French
            "pays",
            "nationalite",
            "ville",
            "commune",
            "departement",
            "lieu( de (residence|naissance))?",
            # Spanish
            "pais",
            "nacionalidad",
            "ciudad",
            "municipio",
            "provincia",
            "localidad",
            # Italian
            "paese",
            "nazionalita",
            "citta",
            "comune",
            "regione",
            "luogo",
            # Dutch
            "land",
            "nationaliteit",
            "stad",
            "gemeente",
            "provincie",
            # German
            "stadt",
            "ort",
            "gemeinde",
            "bundesland",
            "landkreis",
            "kanton",
        ),
        stems=("staatsangehorigkeit", "nationalit", "woonplaats", "wohnort", "herkunftsland"),
    ),
    NameRule(
        Role.QUASI_IDENTIFIER,
        "the name says it holds the date of an event",
        words=(
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
            "date d (admission|entree)",
            "date de (sortie|deces)",
            "deces",
            "fecha( de [a-z]+)?",
            "ingreso",
            "fallecimiento",
            "data (di|del|della) [a-z]+",
            "ricovero",
            "dimissione",
            "decesso",
            "opname",
            "ontslag",
            "overlijden",
            "aufnahme",
            "entlassung",
        ),
        stems=("datum", "todestag"),
    ),
    NameRule(
        Role.IDENTIFIER,
        "the name says it is an identifier",
        words=(
            "id",
            "ids",
            "identifier",
            "uuid",
            "guid",
            "record( id)?",
            "key",
            "account",
            "customer id",
            "patient id",
            "number",
            "no",
            "nr",
            "num",
            "numero",
            "identifiant",
            "dossier",
            "matricule",
            "expediente",
            "historia clinica",
            "matricola",
            "cartella clinica",
            "aktenzeichen",
        ),
        stems=("nummer", "identifiant", "kennung"),
        category_guard=True,
    ),
    NameRule(
        Role.SENSITIVE,
        "the name suggests a sensitive attribute",
        words=(
            "diagnos[ie]s",
            "disease",
            "condition",
            "icd",
            "salary( class)?",
            "income",
            "wage",
            "religion",
            "treatment",
            "medication",
            "hiv",
            "sexual orientation",
            "health",
            "blood type",
            # French
            "diagnostic",
            "maladie",
            "pathologie",
            "salaire",
            "revenus?",
            "traitement",
            "medicament",
            "orientation sexuelle",
            "sante",
            # Spanish
            "diagnostico",
            "enfermedad",
            "salario",
            "ingresos",
            "tratamiento",
            "medicamento",
            "salud",
            # Italian
            "diagnosi",
            "malattia",
            "stipendio",
            "reddito",
            "religione",
            "terapia",
            "farmaco",
            "salute",
            # Dutch
            "ziekte",
            "salaris",
            "inkomen",
            "religie",
            "geloof",
            "behandeling",
            "medicatie",
            "gezondheid",
            # German
            "diagnose",
            "krankheit",
            "gehalt",
            "einkommen",
            "lohn",
            "konfession",
            "behandlung",
            "medikament",
            "medikation",
            "gesundheit",
        ),
    ),
]


# --- Content ---------------------------------------------------------------------------------

EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
PHONE = re.compile(r"^\+?[\d\s().-]{7,20}$")
SSN = re.compile(r"^\d{3}-\d{2}-\d{4}$")
IBAN = re.compile(r"^[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}$")
NIR = re.compile(r"^[12] ?\d{2} ?(?:0[1-9]|1[0-2]|[2-9]\d) ?\d{2} ?\d{3} ?\d{3}(?: ?\d{2})?$")
DNI = re.compile(r"^[0-9XYZ]\d{7}-?[A-Z]$")
CODICE_FISCALE = re.compile(r"^[A-Z]{6}\d{2}[A-EHLMPRST]\d{2}[A-Z]\d{3}[A-Z]$")
# A capitalised name part: "Zoë", "O’Neill", "Jean-Pierre", "J."
_CAP = r"[A-ZÀ-ÖØ-ÞА-Я][a-zß-öø-ÿа-я.]*(?:[-'’][A-ZÀ-ÖØ-ÞА-Я]?[a-zß-öø-ÿа-я.]+)*"
_PARTICLE = r"(?:van|de|der|den|von|da|di|del|della|la|le|du|ten|ter|y|dos|das|zu|bin|al)"
PERSON_NAME = re.compile(
    rf"^(?=.{{5,}})(?:{_CAP}(?: (?:{_PARTICLE} )*{_CAP}){{1,3}}|{_CAP}, {_CAP}(?: {_CAP})?)$"
)
CODE = re.compile(r"^(?=.*\d)[A-Za-z0-9][A-Za-z0-9_./:-]{3,39}$")
ZIP = re.compile(r"^\d{5}(-\d{4})?$")
SEX_VALUES = {
    "m",
    "f",
    "male",
    "female",
    "man",
    "woman",
    "x",
    "other",
    "diverse",
    "non-binary",
    "h",
    "homme",
    "femme",
    "hombre",
    "mujer",
    "maschio",
    "femmina",
    "mann",
    "frau",
    "divers",
    "v",
    "vrouw",
    "w",
    "männlich",
    "weiblich",
    "masculin",
    "féminin",
    "masculino",
    "femenino",
    "maschile",
    "femminile",
    "mannelijk",
    "vrouwelijk",
}
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
    "marié",
    "mariée",
    "célibataire",
    "divorcé",
    "divorcée",
    "veuf",
    "veuve",
    "casado",
    "casada",
    "soltero",
    "soltera",
    "divorciado",
    "viudo",
    "sposato",
    "celibe",
    "nubile",
    "divorziato",
    "vedovo",
    "verheiratet",
    "ledig",
    "geschieden",
    "verwitwet",
    "gehuwd",
    "ongehuwd",
    "weduwe",
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
#: Free text: values of several words, mostly different from each other.
FREE_TEXT_WORDS = 4
MOSTLY_UNIQUE = 0.9


def _share(values: pd.Series, pattern: re.Pattern) -> float:
    return float(values.str.fullmatch(pattern.pattern).mean()) if len(values) else 0.0


def _iban_valid(value: str) -> bool:
    """ISO 13616 check digits (mod 97)."""
    compact = value.replace(" ", "")
    moved = compact[4:] + compact[:4]
    digits = "".join(str(int(ch, 36)) for ch in moved)
    return int(digits) % 97 == 1


def _share_valid(values: pd.Series, pattern: re.Pattern, valid) -> float:
    shaped = values[values.str.fullmatch(pattern.pattern)]
    if not len(values):
        return 0.0
    return sum(1 for v in shaped if valid(v)) / len(values)


@dataclass(frozen=True)
class _Content(Suggestion):
    #: Strong enough to outrank what the name suggests (e-mails, phones, national IDs, names,
    #: free text); a record ID or a code does not (a ZIP column of a small file is unique too).
    strong: bool = False


def _content_rules(series: pd.Series, profile: dict) -> _Content | None:
    present = series[series.str.strip() != ""].str.strip()
    if present.empty:
        return None
    sample = present.head(SAMPLE)
    rows = profile["rows"]
    column_type = profile["inferred_type"]
    distinct_share = profile["distinct"] / rows if rows else 0.0
    # A value of its own on every row of a table of some size: a record ID.
    unique_per_row = profile["distinct"] == rows and rows >= 20
    if _share(sample, EMAIL) >= 0.9:
        return _Content(Role.IDENTIFIER, "the values are e-mail addresses", strong=True)
    if _share(sample, SSN) >= 0.9:
        return _Content(
            Role.IDENTIFIER, "the values look like national identifiers (999-99-9999)", strong=True
        )
    if _share_valid(sample.str.upper(), IBAN, _iban_valid) >= 0.9:
        return _Content(Role.IDENTIFIER, "the values are bank account numbers (IBAN)", strong=True)
    if _share(sample.str.upper(), CODICE_FISCALE) >= 0.9:
        return _Content(
            Role.IDENTIFIER, "the values are Italian tax codes (codice fiscale)", strong=True
        )
    if _share(sample.str.upper(), DNI) >= 0.9:
        return _Content(
            Role.IDENTIFIER, "the values look like Spanish identity numbers (DNI)", strong=True
        )
    if _share(sample, NIR) >= 0.9 and distinct_share > 0.5:
        return _Content(
            Role.IDENTIFIER,
            "the values look like French social security numbers (NIR)",
            strong=True,
        )
    digits = sample.str.replace(r"\D", "", regex=True).str.len()
    if (
        column_type != ColumnType.DATE
        and _share(sample, PHONE) >= 0.9
        and (digits >= 7).mean() >= 0.9
        and not sample.str.fullmatch(r"\d+").all()
    ):
        return _Content(Role.IDENTIFIER, "the values look like phone numbers", strong=True)
    if _share(sample, PERSON_NAME) >= 0.8 and profile["unique_share"] > 0.5:
        return _Content(
            Role.IDENTIFIER, "the values look like people's full names, mostly unique", strong=True
        )
    if (
        unique_per_row
        and column_type in (ColumnType.INTEGER, ColumnType.TEXT, ColumnType.CATEGORICAL)
        and (column_type == ColumnType.INTEGER or sample.str.len().max() <= 40)
    ):
        return _Content(
            Role.IDENTIFIER, f"every one of the {rows} rows has its own value: a record ID"
        )
    if (
        rows >= 20
        and distinct_share >= MOSTLY_UNIQUE
        and column_type in (ColumnType.TEXT, ColumnType.CATEGORICAL)
        and _share(sample, CODE) >= 0.9
    ):
        return _Content(
            Role.IDENTIFIER,
            f"{distinct_share:.0%} of the values are different codes: an identifier",
        )
    words = sample.str.count(r"\S+")  # words per value
    if (
        rows >= 20
        and column_type in (ColumnType.TEXT, ColumnType.CATEGORICAL)
        and distinct_share > 0.5
        and words.mean() >= FREE_TEXT_WORDS
    ):
        return _Content(
            Role.IDENTIFIER,
            "the values are free text, mostly different: free text can name or describe people",
            strong=True,
        )
    lowered = set(present.str.lower().unique()[:100])
    if lowered and lowered <= SEX_VALUES and len(lowered) <= 4:
        return _Content(Role.QUASI_IDENTIFIER, "the values are sexes or genders")
    if lowered and len(lowered & MARITAL_VALUES) >= 2 and len(lowered - MARITAL_VALUES) <= 2:
        return _Content(Role.QUASI_IDENTIFIER, "the values are marital statuses")
    if lowered and len(lowered & RACE_VALUES) >= 2 and len(lowered - RACE_VALUES) <= 2:
        return _Content(Role.QUASI_IDENTIFIER, "the values are races or ethnicities")
    if column_type == ColumnType.DATE:
        return _Content(
            Role.QUASI_IDENTIFIER, "the values are dates: dates of events can be looked up"
        )
    if _share(sample, ZIP) >= 0.95 and profile["distinct"] > 2:
        return _Content(Role.QUASI_IDENTIFIER, "the values look like ZIP codes")
    return None


def suggest(name: str, series: pd.Series, profile: dict) -> Suggestion:
    """The suggested role of a column, from its name first and then from its values."""
    folded = fold(name)
    content = _content_rules(series, profile)
    strong = content is not None and content.strong
    for rule in NAME_RULES:
        if not rule.matches(folded):
            continue
        # Values that are e-mails, phone numbers, national IDs or names outrank the name.
        if strong and content is not None and rule.role != Role.IDENTIFIER:
            return Suggestion(
                content.role,
                f"{content.reason} (the name {name!r} suggested {Role(rule.role).label.lower()})",
            )
        if (
            rule.category_guard
            and profile["unique_share"] < 0.05
            and profile["rows"] > 20
            and (content is None or content.role != Role.IDENTIFIER)
        ):
            # "name"-like columns with few distinct values are categories, not identifiers.
            continue
        return Suggestion(rule.role, f"{rule.reason} (column {name!r})")
    if content is not None:
        return Suggestion(content.role, content.reason)
    if profile.get("single_value"):
        return Suggestion(Role.INSENSITIVE, "every row has the same value")
    return Suggestion(Role.INSENSITIVE, "nothing in its name or values points to a person")
