"""Release requests: the lifecycle (one transition table), the kinds of request, asking for a
release and its rounds, the extract's run and package, sharing (recipients, terms, revocation,
expiry), downloads and reproductions. Imports the datasets feature only."""
