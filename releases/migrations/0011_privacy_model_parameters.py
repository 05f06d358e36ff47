"""A request's privacy model becomes one JSON value, the engine's, instead of one column per
parameter of k-anonymity, l-diversity and t-closeness.

``ReleaseRequest.parameters`` holds ``{"model": PrivacyModel.to_spec(), "algorithm": ...,
"levels": None}``; the rounds' ``parameters`` hold the same keys instead of the old ones. A
stored result made before the models had one definition gets the figures the review checks
read (``privacy_model`` and ``models``), taken from its ``achieved`` values, so that an old
round is checked model by model like a new one.

The conversion is written out here (not through the engine) because it converts exactly the
old columns. Reversing it works for the requests the old columns can hold (k-anonymity,
l-diversity, t-closeness, no population, no fixed levels) and refuses, naming the request,
otherwise.
"""

from django.db import migrations, models

OLD_KEYS = ("k", "suppression_limit", "l_diversity", "l_variant", "c", "t_closeness", "t_distance")


def _criteria(old: dict) -> list[dict]:
    out = []
    k = old.get("k")
    if k is not None and int(k) != 1:
        out.append({"model": "k-anonymity", "k": int(k)})
    if old.get("l_diversity") is not None:
        entry = {
            "model": "l-diversity",
            "l": float(old["l_diversity"]),
            "variant": old.get("l_variant") or "distinct",
        }
        if old.get("c") is not None:
            entry["c"] = float(old["c"])
        out.append(entry)
    if old.get("t_closeness") is not None:
        out.append(
            {
                "model": "t-closeness",
                "t": float(old["t_closeness"]),
                "distance": old.get("t_distance") or "equal",
            }
        )
    return out


def _model(old: dict) -> dict:
    return {
        "criteria": _criteria(old),
        "suppression_limit": float(old.get("suppression_limit") or 0.0),
        "population": None,
    }


def _description(entry: dict) -> str:
    if entry["model"] == "k-anonymity":
        return f"k={entry['k']}"
    if entry["model"] == "l-diversity":
        if entry["variant"] == "recursive":
            return f"recursive ({entry.get('c', 0):g},{entry['l']:g})-diversity"
        return f"{entry['variant']} {entry['l']:g}-diversity"
    return f"{entry['t']:g}-closeness ({entry['distance']} distance)"


def _summary_with_models(summary: dict, model: dict) -> dict:
    """An old result's figures in the form the checks read; a new result is left as it is."""
    if not summary or "models" in summary:
        return summary
    achieved = summary.get("achieved") or {}
    figures = {
        "k-anonymity": {"k": achieved.get("k") or 0},
        "l-diversity": {"l": achieved.get("l") or {}},
        "t-closeness": {"t": achieved.get("t") or {}},
    }
    return {
        **summary,
        "privacy_model": model,
        "models": [
            {
                "model": entry["model"],
                "spec": entry,
                "description": _description(entry),
                "achieved": figures[entry["model"]],
            }
            for entry in model["criteria"]
        ],
    }


def forwards(apps, schema_editor):
    ReleaseRequest = apps.get_model("releases", "ReleaseRequest")
    ReleaseRound = apps.get_model("releases", "ReleaseRound")
    for req in ReleaseRequest.objects.all().iterator():
        old = {key: getattr(req, key) for key in OLD_KEYS}
        model = _model(old)
        req.parameters = {"model": model, "algorithm": req.algorithm, "levels": None}
        req.summary = _summary_with_models(req.summary, model)
        req.save(update_fields=["parameters", "summary"])
    for round_ in ReleaseRound.objects.all().iterator():
        params = dict(round_.parameters or {})
        if "model" in params:
            continue
        model = _model(params)
        for key in OLD_KEYS:
            params.pop(key, None)
        params.update(model=model, algorithm=params.get("algorithm") or "optimal", levels=None)
        round_.parameters = params
        round_.summary = _summary_with_models(round_.summary, model)
        round_.save(update_fields=["parameters", "summary"])


def _old_fields(parameters: dict, what: str) -> dict:
    """The old columns of a stored model; ``RuntimeError`` when they cannot hold it."""
    model = parameters.get("model") or {}
    out = {
        "k": 1,
        "suppression_limit": float(model.get("suppression_limit") or 0.0),
        "l_diversity": None,
        "l_variant": "distinct",
        "c": None,
        "t_closeness": None,
        "t_distance": "equal",
    }
    if model.get("population") or parameters.get("levels"):
        raise RuntimeError(f"{what} has a population model or fixed levels: cannot go back.")
    for entry in model.get("criteria") or []:
        if entry["model"] == "k-anonymity":
            out["k"] = max(out["k"], int(entry["k"]))
        elif entry["model"] == "l-diversity":
            out.update(
                l_diversity=entry["l"], l_variant=entry.get("variant", "distinct"), c=entry.get("c")
            )
        elif entry["model"] == "t-closeness":
            out.update(t_closeness=entry["t"], t_distance=entry.get("distance", "equal"))
        else:
            raise RuntimeError(
                f"{what} uses {entry['model']}, which the earlier columns cannot hold: "
                "delete it before going back."
            )
    return out


def backwards(apps, schema_editor):
    ReleaseRequest = apps.get_model("releases", "ReleaseRequest")
    ReleaseRound = apps.get_model("releases", "ReleaseRound")
    for req in ReleaseRequest.objects.all().iterator():
        fields = _old_fields(req.parameters or {}, f"Release request #{req.pk}")
        for key, value in fields.items():
            setattr(req, key, value)
        req.algorithm = (req.parameters or {}).get("algorithm") or "optimal"
        req.save(update_fields=[*fields, "algorithm"])
    for round_ in ReleaseRound.objects.all().iterator():
        params = dict(round_.parameters or {})
        if "model" not in params:
            continue
        fields = _old_fields(params, f"Round {round_.number} of request #{round_.request_id}")
        params.pop("model")
        params.pop("levels", None)
        params.update(fields)
        round_.parameters = params
        round_.save(update_fields=["parameters"])


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0010_columns_without_an_explicit_role"),
    ]

    operations = [
        migrations.AddField(
            model_name="releaserequest",
            name="parameters",
            field=models.JSONField(default=dict),
        ),
        migrations.RunPython(forwards, backwards),
        # Defaults, so that going back can add the columns to rows that exist.
        migrations.AlterField(
            model_name="releaserequest",
            name="k",
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.AlterField(
            model_name="releaserequest",
            name="suppression_limit",
            field=models.FloatField(
                default=0.0, help_text="Share of rows (0 to 1) that may be removed."
            ),
        ),
        migrations.RemoveField(model_name="releaserequest", name="k"),
        migrations.RemoveField(model_name="releaserequest", name="suppression_limit"),
        migrations.RemoveField(model_name="releaserequest", name="l_diversity"),
        migrations.RemoveField(model_name="releaserequest", name="l_variant"),
        migrations.RemoveField(model_name="releaserequest", name="c"),
        migrations.RemoveField(model_name="releaserequest", name="t_closeness"),
        migrations.RemoveField(model_name="releaserequest", name="t_distance"),
        migrations.RemoveField(model_name="releaserequest", name="algorithm"),
    ]
