"""The tests that run only in the full tier because they are long, not because they start a
process: ``conftest.py`` gives each of them the ``slow`` marker, so ``pytest --fast`` leaves
them out and ``make test`` runs them. docs/testing.md says why, area by area.

They are the tests that took longest in a measured fast-tier run (``--durations=0``), each about
0.4 s of CPU or more, so that the fast tier fits in a minute on 2 cores. Every area keeps
faster tests of the same code in the fast tier (docs/testing.md names them).

Keys are test modules; values are the reason and the tests, each named as in its node id after
the module: ``name`` (every parametrization of that function), ``name[id]`` (one), or a prefix
ending in ``*`` (``name[k2-*`` is every case of one model). An entry that names no test fails
``tests/test_tiers.py`` whenever the whole suite is collected (both tiers), so the list cannot go
stale.
"""

from __future__ import annotations

import pytest

#: The node ids of every test collected, before a tier selects (set by ``conftest.py``).
COLLECTED = pytest.StashKey[list[str]]()

#: module -> (why it is long, the tests)
SLOW: dict[str, tuple[str, tuple[str, ...]]] = {
    "tests/engine/test_adult_arx.py": (
        "the Adult optimum at k=10 against ARX's recorded answer",
        ("test_adult_optimum_matches_arx[k=10, 0.05]",),
    ),
    "tests/engine/test_arx_integer_table.py": (
        "Adult recoded to integer ranks, each model's optimum against ARX's",
        (
            "test_the_result_is_arxs[integer-adult-delta-presence]",
            "test_the_result_is_arxs[integer-adult-heuristic-steps]",
            "test_the_result_is_arxs[integer-adult-k-map-poisson]",
            "test_the_result_is_arxs[integer-adult-k-map-subset]",
            "test_the_result_is_arxs[integer-adult-microaggregation-interval]",
            "test_the_result_is_arxs[integer-adult-microaggregation-mean]",
            "test_the_table_is_adult_recoded_to_ranks",
        ),
    ),
    "tests/engine/test_arx_models.py": (
        "each model's optimum on Adult against ARX's recorded answer",
        (
            "test_derived_k_is_arxs_over_a_grid",
            "test_the_optimum_is_arxs[adult-delta-presence]",
            "test_the_optimum_is_arxs[adult-k-anonymity-level-limits]",
            "test_the_optimum_is_arxs[adult-k-anonymity-weights-and-limits]",
            "test_the_optimum_is_arxs[adult-k-anonymity-weights]",
            "test_the_optimum_is_arxs[adult-k-anonymity]",
            "test_the_optimum_is_arxs[adult-k-map-poisson]",
            "test_the_optimum_is_arxs[adult-k-map-subset]",
            "test_the_optimum_is_arxs[adult-k-map-zero-truncated-poisson]",
            "test_the_research_subset_matched_by_content_gives_the_same_release",
            "test_weights_choose_the_optimum_of_the_weighted_loss[adult-k-anonymity-weights]",
            "test_where_arx_ignores_delta_min_the_engine_does_not",
        ),
    ),
    "tests/engine/test_attribute_risk.py": (
        "every combination of Adult's quasi-identifiers against a group-by",
        ("test_every_combination_matches_a_group_by",),
    ),
    "tests/engine/test_cli.py": (
        "the command line on Adult with weights and level limits",
        ("test_weights_and_level_limits_give_arxs_optimum_on_adult",),
    ),
    "tests/engine/test_cli_releases.py": (
        "the command line's earlier-release checks on Adult, each several searches",
        (
            "test_a_changed_hierarchy_file_is_refused",
            "test_another_input_is_refused_in_one_line_and_nothing_is_written",
            "test_complementary_extracts_are_reported_together",
            "test_l_and_t_of_the_joint_classes",
            "test_rows_are_written_in_the_seeded_order",
            "test_the_attacker_file_is_linked_to_the_extract",
            "test_the_protected_search_is_safe_with_the_earlier_extract",
        ),
    ),
    "tests/engine/test_criteria.py": (
        "the whole lattice's valid transformations for the Pareto front",
        ("test_candidates_are_the_pareto_front_of_valid_transformations",),
    ),
    "tests/engine/test_heuristic.py": (
        "a greedy search over twenty quasi-identifiers",
        ("test_twenty_quasi_identifiers_beyond_the_optimal_search",),
    ),
    "tests/engine/test_layers.py": (
        "parses every engine module (make lint's import-linter checks the same layers)",
        ("test_engine_modules_import_one_way", "test_no_function_imports_an_engine_module"),
    ),
    "tests/engine/test_linkage.py": (
        "Adult extracts linked row by row",
        (
            "test_an_unchanged_quasi_identifier_re_identifies_records_found_by_a_pandas_join",
            "test_full_domain_extract_matches_a_row_by_row_comparison",
            "test_mondrian_extract_matches_by_interval_and_hierarchy_node",
        ),
    ),
    "tests/engine/test_microaggregation.py": (
        "Adult microaggregated against ARX and against the written file",
        (
            "test_every_class_of_the_written_file_holds_the_aggregate_of_its_rows",
            "test_the_release_is_arxs",
        ),
    ),
    "tests/engine/test_mondrian.py": (
        "generated tables through Mondrian with l-diversity and t-closeness",
        ("test_generated_ordered_t_closeness", "test_generated_recursive_cl_diversity"),
    ),
    "tests/engine/test_research_subset.py": (
        "k-map over the whole lattice by brute force, and the command line on Adult",
        (
            "test_search_with_a_research_subset_matches_brute_force[k-map-3-0.05]",
            "test_search_with_a_research_subset_matches_brute_force[k-map-3-0.0]",
            "test_the_command_line_estimates_k_map",
            "test_the_command_line_releases_the_research_subset",
        ),
    ),
    "tests/engine/test_risk.py": (
        "population uniqueness on Adult",
        ("test_population_uniqueness_on_adult",),
    ),
    "tests/engine/test_safepub.py": (
        "ARX's loop over every class size at the smallest delta",
        ("test_k_equals_arxs_loop_over_every_class_size[1e-05-*",),
    ),
    "tests/engine/test_search.py": (
        "the optimal search against the brute force over the whole lattice, for the models "
        "whose brute force is longest (the others stay in the fast tier)",
        (
            "test_optimal_search_matches_brute_force[average-risk-*",
            "test_optimal_search_matches_brute_force[distinct-l2-*",
            "test_optimal_search_matches_brute_force[entropy-l2-*",
            "test_optimal_search_matches_brute_force[k2-0*",
            "test_optimal_search_matches_brute_force[k2-delta-two-sensitive-*",
            "test_optimal_search_matches_brute_force[k2-l2-t-two-sensitive-*",
            "test_optimal_search_matches_brute_force[recursive-c3-l2-*",
            "test_optimal_search_matches_brute_force[t-equal-*",
            "test_optimal_search_matches_brute_force[t-hierarchical-*",
            "test_optimal_search_matches_brute_force[t-ordered-*",
            "test_other_random_tables_match_brute_force_for_k",
        ),
    ),
    "tests/engine/test_streaming.py": (
        "Adult and FARS streamed batch by batch against the run in memory",
        (
            "test_adult_streamed_equals_in_memory",
            "test_adult_utility_controls_and_heuristic_stream_alike",
            "test_fars_streamed_equals_in_memory_and_the_file_holds_k_and_l[0.3-closeness]",
            "test_fars_streamed_equals_in_memory_and_the_file_holds_k_and_l[k=2, 2-diversity]",
            "test_parquet_holds_the_csv_rows",
        ),
    ),
    "tests/test_access_matrix.py": (
        "the longest cases of the access matrix (the others stay)",
        (
            "test_an_officer_names_recipients_and_the_expiry_date_when_approving",
            "test_every_person_against_every_page_and_file[ready-requester]",
        ),
    ),
    "tests/test_api_access.py": (
        "the longest cases of the API's access matrix (the others stay)",
        (
            "test_api_writes_leave_the_same_audit_rows_as_the_pages",
            "test_every_person_against_every_write[approved-accepted_recipient-request]",
        ),
    ),
    "tests/test_api_pipeline.py": (
        "the whole path over the API: upload, tag, request, run, approve, download",
        ("test_upload_tag_request_approve_download_over_the_api",),
    ),
    "tests/test_api_schema.py": (
        "property-based calls of every API operation against its OpenAPI schema",
        ("test_the_api_conforms_to_its_schema",),
    ),
    "tests/test_column_roles.py": (
        "releases run to judge a column released unchanged",
        (
            "test_a_column_released_unchanged_that_is_mostly_unique_cannot_be_approved",
            "test_a_suggested_identifier_released_as_is_needs_a_written_justification",
        ),
    ),
    "tests/test_cross_release_versions.py": (
        "two Adult versions (20,000 and 22,162 rows) judged together",
        (
            "test_releases_of_two_versions_are_judged_together_through_the_key",
            "test_without_a_key_column_other_versions_are_not_linked",
        ),
    ),
    "tests/test_cross_release_web.py": (
        "two or three runs each, on the web path (two cases stay in the fast tier)",
        (
            "test_a_failing_cross_release_check_is_approved_only_with_a_written_justification",
            "test_a_passing_check_needs_no_justification",
            "test_a_recipient_and_another_steward_see_neither_history_nor_joint_classes",
            "test_comparable_levels_without_suppression_are_safe_together",
            "test_complementary_extracts_fail_the_check_with_the_figures_of_a_pandas_group_by",
            "test_history_lists_the_approved_extract_with_the_sha256_of_its_bytes",
            "test_the_protected_search_is_safe_with_the_earlier_release_and_names_it",
        ),
    ),
    "tests/test_docs.py": (
        "the longest pages' upper-case names searched in the code",
        (
            "test_upper_case_names_are_settings_or_in_the_code[docs/architecture.md]",
            "test_upper_case_names_are_settings_or_in_the_code[docs/pipeline.md]",
        ),
    ),
    "tests/test_events.py": (
        "a digest over many notifications",
        ("test_a_digest_groups_the_unsent_notifications_once",),
    ),
    "tests/test_faults.py": (
        "large hostile inputs and a busy release's activity",
        (
            "test_a_hostile_upload_name_never_reaches_a_download_header",
            "test_a_million_row_hierarchy_is_refused_by_a_named_limit_before_it_is_parsed"
            "[20971520-MAX_HIERARCHY_BYTES]",
            "test_the_activity_list_of_a_busy_release_is_paged_latest_first",
        ),
    ),
    "tests/test_get_reads_only.py": (
        "every address as every role, every table compared (a world of three runs)",
        ("test_no_get_changes_a_row",),
    ),
    "tests/test_heuristic_web.py": (
        "searches over fifteen quasi-identifiers on the web path",
        (
            "test_a_reproduction_applies_the_levels_the_search_chose",
            "test_suggested_from_fifteen_quasi_identifiers",
        ),
    ),
    "tests/test_io.py": (
        "a wide file and files built to exceed the limits",
        (
            "test_a_wide_dataset_page_shows_one_page_of_columns",
            "test_hostile_files_are_refused_naming_the_limit[giant field]",
            "test_hostile_files_are_refused_naming_the_limit[zip bomb]",
        ),
    ),
    "tests/test_privacy_models_web.py": (
        "runs of each model on the web path (the form's checks stay)",
        (
            "test_a_failed_models_check_refuses_approval",
            "test_a_hierarchy_with_a_repeated_identical_row_is_accepted_with_a_warning",
            "test_a_model_added_to_the_registry_reaches_the_form_the_run_the_classes_and_the_review",
            "test_the_classes_table_shows_each_models_measures_and_flags",
        ),
    ),
    "tests/test_projects.py": (
        "several runs in two projects, and the projects' migration back and forth",
        (
            "test_a_dataset_moves_only_while_no_request_on_it_is_open",
            "test_a_project_admin_adds_a_member_changes_their_roles_and_the_change_takes_effect",
            "test_a_projects_settings_feed_its_requests",
            "test_the_migration_puts_everything_into_the_default_project_with_the_same_access",
        ),
    ),
    "tests/test_projects_access.py": (
        "every page, fragment, file and download asked by another project's people "
        "(the API's matrix stays)",
        ("test_another_projects_people_reach_no_page_fragment_file_or_download",),
    ),
    "tests/test_recipes.py": (
        "recipes saved and applied through the pages, each a run",
        (
            "test_only_the_owner_saves_sees_or_applies_a_recipe",
            "test_the_page_says_why_a_recipe_was_refused",
            "test_the_pages_save_and_apply_a_recipe",
        ),
    ),
    "tests/test_recovery.py": (
        "runs stopped at each stage and recovered",
        (
            "test_a_dataset_deleted_while_its_run_writes_cancels_the_run_and_nothing_comes_back",
            "test_a_run_cancelled_before_its_result_is_recorded_keeps_nothing",
            "test_a_run_lost_on_its_last_attempt_fails_with_a_reason_and_can_be_resubmitted",
            "test_a_run_past_its_time_or_memory_fails_naming_the_limit",
            "test_a_run_past_the_hard_time_limit_says_so",
            "test_a_run_whose_worker_died_gets_another_attempt_and_then_finishes",
            "test_work_whose_message_was_lost_is_sent_again_with_a_backoff",
        ),
    ),
    "tests/test_seed_demo.py": (
        "the demo seeded with its releases",
        (
            "test_seed_demo_links_a_demo_voter_list_to_the_demo_release",
            "test_seed_demo_with_release_makes_an_approved_release_for_the_recipient",
        ),
    ),
    "tests/test_sessions.py": (
        "a session walked through twelve hours of requests",
        ("test_a_session_ends_12_hours_after_sign_in_however_active",),
    ),
    "tests/test_shuffle_scheme.py": (
        "rounds reproduced byte for byte, and the migration back and forth",
        (
            "test_a_round_written_with_numpys_permutation_reproduces_byte_for_byte",
            "test_the_keyed_order_places_each_row_by_its_input_row_and_the_seed",
            "test_the_migration_gives_rounds_run_before_numpys_permutation",
        ),
    ),
    "tests/test_statistics_release.py": (
        "statistics releases run and approved, seen by every role",
        (
            "test_an_approved_extract_is_recorded_in_the_ledger_outside_the_budget",
            "test_the_form_adds_queries_and_fills_labels_from_public_sources_for_its_steward_only",
            "test_who_sees_what_of_a_statistics_release",
        ),
    ),
    "tests/test_streamed_run.py": (
        "runs batch by batch against the run in memory, on Adult",
        (
            "test_a_configuration_that_needs_the_rows_runs_in_memory",
            "test_k_anonymity_released_batch_by_batch_equals_the_run_in_memory",
            "test_l_diversity_with_adult_hierarchies_equals_the_run_in_memory",
        ),
    ),
    "tests/test_utility_web.py": (
        "searches with limits and weights on the web path",
        (
            "test_limits_and_weights_posted_bound_the_search_and_show_on_the_page",
            "test_wrong_limits_are_refused_with_a_sentence_and_nothing_is_requested",
        ),
    ),
}


def reason(module: str, name: str) -> str | None:
    """Why the test ``name`` of ``module`` (its node id after the module) is in the full tier
    only, or None."""
    entry = SLOW.get(module)
    if entry is None:
        return None
    why, tests = entry
    return why if any(matches(pattern, name) for pattern in tests) else None


def matches(pattern: str, name: str) -> bool:
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern or name.startswith(pattern + "[")


def stale(nodeids: list[str]) -> list[str]:
    """The entries of ``SLOW`` that match none of ``nodeids`` (the whole suite's)."""
    names: dict[str, list[str]] = {}
    for nodeid in nodeids:
        module, _, name = nodeid.partition("::")
        names.setdefault(module, []).append(name)
    return [
        f"{module}::{pattern}"
        for module, (_, tests) in SLOW.items()
        for pattern in tests
        if not any(matches(pattern, name) for name in names.get(module, ()))
    ]
