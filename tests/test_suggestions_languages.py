"""Suggested roles in the languages stewards use, accents and all, and from values whatever the
column is called: the identifier gate leans on them."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from releases.datasets.profiles import column_profile
from releases.datasets.suggestions import fold, suggest
from releases.models import Role

ID, QI, SENSITIVE, AS_IS = Role.IDENTIFIER, Role.QUASI_IDENTIFIER, Role.SENSITIVE, Role.INSENSITIVE


def suggested(name: str, values: list[str] | None = None):
    # Neutral values (a few repeated codes) leave the decision to the name.
    series = pd.Series(values or [f"v{i % 6}" for i in range(60)], dtype=str)
    return suggest(name, series, column_profile(series))


@pytest.mark.parametrize(
    ("name", "role"),
    [
        # French
        ("Prénom", ID),
        ("Nom de famille", ID),
        ("Numéro de téléphone", ID),
        ("Courriel", ID),
        ("Adresse", ID),
        ("Numéro de sécurité sociale", ID),
        ("NIR", ID),
        ("Âge", QI),
        ("Date de naissance", QI),
        ("Code postal", QI),
        ("Sexe", QI),
        ("Situation familiale", QI),
        ("Profession", QI),
        ("Nationalité", QI),
        ("Ville", QI),
        ("Diagnostic", SENSITIVE),
        ("Salaire", SENSITIVE),
        ("Nombre de visites", AS_IS),  # "nombre" is French for "number of", not a name
        # German
        ("Vorname", ID),
        ("Nachname", ID),
        ("Telefonnummer", ID),
        ("E-Mail-Adresse", ID),
        ("Straße", ID),
        ("Steuer-ID", ID),
        ("Sozialversicherungsnummer", ID),
        ("Kundennummer", ID),
        ("Geburtsdatum", QI),
        ("Alter", QI),
        ("Postleitzahl", QI),
        ("Geschlecht", QI),
        ("Familienstand", QI),
        ("Beruf", QI),
        ("Staatsangehörigkeit", QI),
        ("Wohnort", QI),
        ("Diagnose", SENSITIVE),
        ("Einkommen", SENSITIVE),
        # Spanish
        ("Nombre", ID),
        ("Apellidos", ID),
        ("Correo electrónico", ID),
        ("DNI", ID),
        ("Dirección", ID),
        ("Edad", QI),
        ("Fecha de nacimiento", QI),
        ("Código postal", QI),
        ("Sexo", QI),
        ("Estado civil", QI),
        ("Ocupación", QI),
        ("Nacionalidad", QI),
        ("Enfermedad", SENSITIVE),
        # Italian
        ("Nome", ID),
        ("Cognome", ID),
        ("Codice fiscale", ID),
        ("Indirizzo", ID),
        ("Età", QI),
        ("Data di nascita", QI),
        ("CAP", QI),
        ("Sesso", QI),
        ("Stato civile", QI),
        ("Professione", QI),
        ("Comune", QI),
        ("Diagnosi", SENSITIVE),
        ("Reddito", SENSITIVE),
        # Dutch
        ("Voornaam", ID),
        ("Achternaam", ID),
        ("Telefoonnummer", ID),
        ("BSN", ID),
        ("Burgerservicenummer", ID),
        ("Straatnaam", ID),
        ("Leeftijd", QI),
        ("Geboortedatum", QI),
        ("Postcode", QI),
        ("Geslacht", QI),
        ("Burgerlijke staat", QI),
        ("Beroep", QI),
        ("Woonplaats", QI),
        ("Opleiding", QI),
        ("Ziekte", SENSITIVE),
        # English, in the shapes exports use
        ("FirstName", ID),
        ("last_name", ID),
        ("patient", ID),
        ("patient_age", QI),
        ("DateOfBirth", QI),
        ("ZIPCode", QI),
        ("marital-status", QI),
        ("hours-per-week", AS_IS),
    ],
)
def test_names_in_six_languages(name, role):
    suggestion = suggested(name)
    assert suggestion.role == role, suggestion.reason
    if role != AS_IS:
        assert repr(name) in suggestion.reason  # the reason names the column


def test_names_are_read_without_accents_case_or_separators():
    assert fold("Prénom") == "prenom"
    assert fold("Âge") == "age"
    assert fold("Straße") == "strasse"
    assert fold("Código_Postal") == "codigo postal"
    assert fold("dateOfBirth") == "date of birth"
    assert fold("ZIPCode") == "zip code"


def _iban(rng: random.Random) -> str:
    bban = "".join(str(rng.randint(0, 9)) for _ in range(18))
    for check in range(100):
        candidate = f"DE{check:02d}{bban}"
        moved = candidate[4:] + candidate[:4]
        if int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1:
            return candidate
    raise AssertionError("no check digits")


def _dni(number: int) -> str:
    return f"{number:08d}{'TRWAGMYFPDXBNJZSQVHLCKE'[number % 23]}"


rng = random.Random(9)
FIRST = ["Zoë", "José", "Anne", "Jean-Pierre", "María", "Jan", "Giulia", "Sven", "Élodie"]
LAST = ["Müller", "de la Cruz", "van der Berg", "O’Neill", "Rossi", "Janssen", "Martin"]


@pytest.mark.parametrize(
    ("values", "role", "reason"),
    [
        ([f"p{i}@mail.example.org" for i in range(60)], ID, "e-mail"),
        ([f"+33 6 12 34 {i:02d} {i + 10:02d}" for i in range(60)], ID, "phone"),
        ([_iban(rng) for _ in range(60)], ID, "IBAN"),
        (
            [f"RSSMRA{80 + i % 10:02d}A{10 + i % 18:02d}H{500 + i:03d}Z" for i in range(60)],
            ID,
            "codice",
        ),
        ([_dni(12345670 + i) for i in range(60)], ID, "DNI"),
        (
            [
                f"{1 + i % 2}{80 + i % 10:02d}{1 + i % 12:02d}75{100 + i:03d}{200 + i:03d}"
                for i in range(60)
            ],
            ID,
            "NIR",
        ),
        ([f"{FIRST[i % 9]} {LAST[i % 7]}" for i in range(60)], ID, "names"),
        ([f"AB-{1000 + 7 * i}" for i in range(60)], ID, "record ID"),
        (
            [f"Fell at home on day {i} and was seen by the night nurse" for i in range(60)],
            ID,
            "free text",
        ),
        (["Männlich", "Weiblich"] * 30, QI, "sexes"),
        (["blue", "green", "red"] * 20, AS_IS, "nothing"),
        (["homme", "femme"] * 30, QI, "sexes"),
        (["verheiratet", "ledig", "geschieden"] * 20, QI, "marital"),
    ],
)
def test_values_say_what_they_are_whatever_the_column_is_called(values, role, reason):
    suggestion = suggested("c7", values)
    assert suggestion.role == role and reason in suggestion.reason, suggestion.reason


def test_values_that_identify_outrank_a_harmless_name():
    emails = [f"p{i}@mail.example.org" for i in range(60)]
    suggestion = suggested("Ville", emails)
    assert suggestion.role == ID and "e-mail" in suggestion.reason
    # A ZIP code column of a small file is unique too: the name stays in charge.
    zips = [f"{10000 + i}" for i in range(60)]
    assert suggested("Postleitzahl", zips).role == QI
