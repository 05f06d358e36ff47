"""Names vulture cannot see used: Django (model fields and Meta options, admin options, form
fields and methods the templates call, attributes set for the templates), Celery, Python's
protocols, and the tests' hooks. Each line names one; `make lint` runs vulture with it."""
# ruff: noqa

_.tempdir  # attribute, anonymizer_site/celery.py
_.exc_text  # attribute, anonymizer_site/logging_filters.py
application  # variable, anonymizer_site/wsgi.py
list_display  # variable, releases/admin.py
readonly_fields  # variable, releases/admin.py
list_filter  # variable, releases/admin.py
_.has_change_permission  # method, releases/admin.py
obj  # variable, releases/admin.py
_.has_delete_permission  # method, releases/admin.py
_.has_add_permission  # method, releases/admin.py
default_auto_field  # variable, releases/apps.py
verbose_name  # variable, releases/apps.py
tb  # variable, releases/background/leases.py
_.temporary_file_path  # method, releases/core/storage.py
_.set_at  # attribute, releases/datasets/budget.py
_.distinct_percent  # attribute, releases/datasets/selectors.py
_.unique_row_percent  # attribute, releases/datasets/selectors.py
_.widths_text  # attribute, releases/datasets/selectors.py
_.dayfirst  # attribute, releases/datasets/selectors.py
_.run_from_argv  # method, releases/management/commands/anonymize.py
_.add_arguments  # method, releases/management/commands/anonymize.py
indexes  # variable, releases/models/audit.py
TSV  # variable, releases/models/datasets.py
profiled_at  # variable, releases/models/datasets.py
_.delimiter_name  # property, releases/models/datasets.py
_.progress_percent  # property, releases/models/datasets.py
constraints  # variable, releases/models/datasets.py
_.column_type_label  # property, releases/models/datasets.py
_.declared_domain_text  # property, releases/models/datasets.py
_.role_label  # property, releases/models/datasets.py
_.suggested_role_label  # property, releases/models/datasets.py
claimed_until  # variable, releases/models/outbox.py
work_key  # variable, releases/models/outbox.py
set_at  # variable, releases/models/privacy_budget.py
verbose_name_plural  # variable, releases/models/privacy_budget.py
rechecked_at  # variable, releases/models/requests.py
closed_at  # variable, releases/models/requests.py
_.model_groups  # method, releases/requests/forms.py
_.protection  # method, releases/requests/forms.py
_.population_fields  # method, releases/requests/forms.py
_.model_fields  # method, releases/requests/forms.py
_.justification_fields  # method, releases/requests/forms.py
_.utility_given  # method, releases/requests/forms.py
_.levels_text  # attribute, releases/requests/selectors.py
add_recipients  # variable, releases/review/forms.py
add_recipient_groups  # variable, releases/review/forms.py
column2  # variable, releases/statistics/forms.py
source2  # variable, releases/statistics/forms.py
level2  # variable, releases/statistics/forms.py
categories2  # variable, releases/statistics/forms.py
edges2  # variable, releases/statistics/forms.py
alphas  # variable, releases/statistics/forms.py
_.PASSWORD_HASHERS  # attribute, tests/conftest.py
_.monotone  # method, tests/support/added_model.py
_.class_columns  # method, tests/support/added_model.py
_.column_labels  # method, tests/support/added_model.py
_._producer_pool  # attribute, tests/support/processes.py
_.handle_starttag  # method, tests/test_privacy_models_web.py
_.handle_data  # method, tests/test_privacy_models_web.py
_.handle_endtag  # method, tests/test_privacy_models_web.py
# Asked by name (getattr(rules, f"can_{action}")) for every action a person takes: tests.
can_cancel  # function, releases/requests/rules.py
can_approve  # function, releases/requests/rules.py
check_approve  # function, releases/requests/rules.py
can_request_changes  # function, releases/requests/rules.py
check_request_changes  # function, releases/requests/rules.py
can_reject  # function, releases/requests/rules.py
check_reject  # function, releases/requests/rules.py
can_resubmit  # function, releases/requests/rules.py
can_rerun  # function, releases/requests/rules.py
can_revoke  # function, releases/requests/rules.py
can_download  # function, releases/requests/rules.py
check_download  # function, releases/requests/rules.py
can_reproduce  # function, releases/requests/rules.py
# Named in settings.MIDDLEWARE.
SessionLimitsMiddleware  # class, releases/core/sessions.py
# Read by django-ninja: the API's schemas' fields, its throttle's hooks; by Django: the
# flag that exempts the API from the login redirect, a form field's help.
id  # variable, releases/api/schemas.py
hierarchy_levels  # variable, releases/api/schemas.py
columns_without_role  # variable, releases/api/schemas.py
new_columns  # variable, releases/api/schemas.py
missing_columns  # variable, releases/api/schemas.py
retyped_columns  # variable, releases/api/schemas.py
source_request_id  # variable, releases/api/schemas.py
_.chain_entries  # attribute, releases/requests/lineage.py
state_label  # variable, releases/api/schemas.py
terms_accepted  # variable, releases/api/schemas.py
action_label  # variable, releases/api/schemas.py
_.duration  # attribute, releases/api/auth.py
_.num_requests  # attribute, releases/api/auth.py
_.get_cache_key  # method, releases/api/auth.py
_.login_required  # attribute, releases/api/urls.py
_.help_text  # attribute, releases/api/forms.py
# Named in settings (AXES_HANDLER, AXES_CLIENT_IP_CALLABLE, AXES_COOLOFF_TIME,
# AXES_LOCKOUT_CALLABLE) and called by django-axes; the admin's hooks.
ThrottleHandler  # class, releases/accounts/handler.py
_.get_failures  # method, releases/accounts/handler.py
_.is_locked  # method, releases/accounts/handler.py
_.axes_credentials  # attribute, releases/accounts/handler.py
_.reset_user_attempts  # method, releases/accounts/handler.py
_.clean_expired_user_attempts  # method, releases/accounts/handler.py
client_address  # function, releases/accounts/throttle.py
cool_off  # function, releases/accounts/throttle.py
locked_out  # function, releases/accounts/views.py
original_response  # variable, releases/accounts/views.py
search_fields  # variable, releases/admin.py
_.get_readonly_fields  # method, releases/admin.py
locked_at  # variable, releases/models/logins.py
# Webhooks and notifications: the API's operations (django-ninja), urllib's redirect hook,
# fields only named in queries, the test receiver's handler hooks (http.server).
delete_webhook  # function, releases/api/webhooks.py
_.redirect_request  # method, releases/events/webhooks.py
next_attempt_at  # variable, releases/models/events.py
mailed_at  # variable, releases/models/events.py
_.do_POST  # method, tests/support/webhook_receiver.py
_.log_message  # method, tests/support/webhook_receiver.py
_.OIDC_OP_AUTH_ENDPOINT  # attribute, releases/accounts/oidc.py (read by mozilla-django-oidc)
_.login_failure  # method, releases/accounts/oidc.py (called by mozilla-django-oidc)
Backend  # class, releases/accounts/oidc.py (AUTHENTICATION_BACKENDS, by name)
_.OIDC_OP_TOKEN_ENDPOINT  # attribute, releases/accounts/oidc.py (read by mozilla-django-oidc)
_.OIDC_OP_JWKS_ENDPOINT  # attribute, releases/accounts/oidc.py (read by mozilla-django-oidc)
_.get_or_create_user  # method, releases/accounts/oidc.py (called by mozilla-django-oidc)
http_method_names  # variable, releases/accounts/oidc.py (Django views)
_.readable  # method, releases/datasets/sources.py (io.RawIOBase)
_.seekable  # method, releases/datasets/sources.py (io.RawIOBase)
_.tell  # method, releases/datasets/sources.py (io.RawIOBase)
_.readinto  # method, releases/datasets/sources.py (io.RawIOBase)
