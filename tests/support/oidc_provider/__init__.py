"""A small, real OpenID provider for the single sign-on tests: django-oauth-toolkit's OIDC
provider in a Django project of its own, run as its own process on 127.0.0.1
(``tests/support/sso.py`` starts it). Its users' groups are a ``groups`` claim."""
