"""Privacy models: each one defined once, in a module of this package.

A privacy model (a *criterion*, as ARX calls it) is one class deriving from
:class:`.base.Criterion`: its parameters and their validation, its description, how it
evaluates equivalence classes (vectorised over all classes at once), whether it is monotone
(for pruning the search), what it achieved on a release and the check line a privacy officer
reads. The optimal search, Mondrian, the result's classes table, the command line, the request
form and the review checks all work from these definitions.

The package, bottom to top:

* :mod:`.base`: :class:`ParamSpec`, :class:`Check`, :class:`Classes`, :class:`DataContext`
  and :class:`Criterion`, the protocol every model implements;
* one module per model: :mod:`.k_anonymity`, :mod:`.l_diversity` (distinct, entropy and
  recursive), :mod:`.t_closeness`, :mod:`.delta_disclosure`, :mod:`.beta_likeness`,
  :mod:`.highest_risk`, :mod:`.average_risk`, :mod:`.population_uniqueness`,
  :mod:`.k_map`, :mod:`.delta_presence`, :mod:`.safepub` ((ε, δ)-differential privacy by
  sampling, generalization and k-suppression; the engine's :mod:`..safepub` runs it), and :mod:`.earlier_releases` (every joint class with
  each earlier extract holds k records; it needs the earlier releases' classes, so it is
  listed in :data:`LINKED`, not offered);
* :mod:`.registry`: :data:`REGISTRY`, every model by name (adding a model is adding its module,
  its tests and its line there);
* :mod:`.model`: :class:`PrivacyModel` (the criteria of a release, the suppression limit and
  the population), its evaluation of a candidate release and :func:`checks`.

Interface for the web layer
---------------------------

* Listing models for a form: ``for c in REGISTRY.values()`` gives ``c.name`` (stable slug, used
  in storage and on the command line), ``c.label``, ``c.summary`` (one sentence for the page),
  ``c.needs_sensitive``, ``c.needs_population`` and ``c.params``: :class:`ParamSpec` with
  ``name``, ``kind`` ("int" / "float" / "choice"), ``label``, ``help``, ``minimum`` /
  ``maximum`` (and whether they are exclusive), ``choices`` (value, label), ``default``,
  ``required`` and ``flag`` (the command-line option). A form field's name is
  ``spec.key(c.name)`` (``"<model>__<param>"``); a model is requested when its first
  parameter (``c.params[0]``, the threshold) has a value. :data:`POPULATION_PARAMS` are the
  fields of the population model (``population_size``, ``sampling_fraction``).
* Building a model: ``PrivacyModel.from_fields(form.cleaned_data, suppression_limit=...)``
  from such fields, or ``PrivacyModel.from_spec(json)`` from the stored JSON, which
  ``model.to_spec()`` writes::

      {"criteria": [{"model": "k-anonymity", "k": 5},
                    {"model": "l-diversity", "variant": "entropy", "l": 2}],
       "suppression_limit": 0.05, "population": {"sampling_fraction": 0.01}}

  Both raise :class:`EngineError` with a sentence for the person; ``model.fields()`` gives the
  flat fields back (to fill the form from a stored model). ``model.describe()`` is the
  one-line description ("k=5, entropy 2-diversity, at most 5% of rows suppressed").
* The classes table: ``result.classes`` has a column per quasi-identifier, ``size``, then for
  each sensitive attribute S the columns ``S:distinct_l``, ``S:entropy_l``, ``S:t`` and each
  criterion's own (``S:recursive_l``, ``S:delta``, ``S:beta``), then ``fails`` (names of the
  models a class fails) and ``borderline`` (those it only just passes:
  :meth:`Criterion.class_borderline`). ``model.class_column_labels(sensitive)`` lists (column, label) pairs.
* Check lines from a stored summary: ``checks(summary)`` with ``summary = result.report()``
  (JSON-serialisable; its ``"privacy_model"`` holds the spec and ``"models"`` each criterion's
  achieved values) returns :class:`Check` (name, passed, detail) per model and attribute, and
  the suppression limit's.
* Candidates: ``report["candidates"]`` (``result.candidates``) is the Pareto front of the
  valid transformations evaluated, each ``{"levels", "loss", "highest_risk", "suppressed",
  "optimum"}``; re-running with ``AnonymizationConfig(levels=candidate["levels"])`` applies
  one (``report["levels_fixed"]`` is then true and ``report["optimum"]`` still names the
  optimum, to compare).
* Research subsets: ``c.uses_research_subset`` is "required" (δ-presence: the request needs
  the population table and the released rows), "optional" (k-map: counted in the population
  table when one is given, else estimated from ``POPULATION_PARAMS``) or "". The engine takes
  the population as its input and ``AnonymizationConfig(research_subset=...)``
  (:class:`..subset.ResearchSubset`, ``ResearchSubset.match(population, released)`` pairs rows
  by content); ``c.data_problem(DataContext(n, population_size=..., population_rows=...))``
  says, before a run, why a model cannot judge such an input. The classes table then has
  ``population`` (people of the population table per class) and, with δ-presence,
  ``presence``; ``report["population_rows"]`` is the population table's size.
* Risk: ``report["risk_before"]`` / ``["risk_after"]`` keep the prosecutor figures at the top
  (``highest``, ``average``, ``records_at_risk``, ``sample_uniques``) and add ``journalist``,
  ``marketer`` and, with a population model, ``population`` (each estimator's share of
  population uniques, ``dankar`` and ``dankar_model``; ``None`` for an estimate that failed).
"""

from .average_risk import AverageRisk
from .base import BORDERLINE_SHARE, Check, Classes, Criterion, DataContext, ParamSpec
from .beta_likeness import BetaLikeness
from .delta_disclosure import DeltaDisclosure
from .delta_presence import DeltaPresence
from .earlier_releases import EarlierReleases
from .highest_risk import HighestRisk, size_threshold
from .k_anonymity import KAnonymity
from .k_map import KMap
from .l_diversity import LDiversity
from .model import POPULATION_PARAMS, Evaluation, PrivacyModel, checks
from .population_uniqueness import PopulationUniqueness
from .registry import LINKED, REGISTRY, criterion_from_spec
from .t_closeness import TCloseness

__all__ = [
    "BORDERLINE_SHARE",
    "LINKED",
    "POPULATION_PARAMS",
    "REGISTRY",
    "AverageRisk",
    "BetaLikeness",
    "Check",
    "Classes",
    "Criterion",
    "DataContext",
    "DeltaDisclosure",
    "DeltaPresence",
    "EarlierReleases",
    "Evaluation",
    "HighestRisk",
    "KAnonymity",
    "KMap",
    "LDiversity",
    "ParamSpec",
    "PopulationUniqueness",
    "PrivacyModel",
    "TCloseness",
    "checks",
    "criterion_from_spec",
    "size_threshold",
]
