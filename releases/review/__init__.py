"""The review: officers' votes (four eyes, blind until one votes, bound to the package digest),
the decision e-mails, the review queue and a request's pages, and the release report (one
builder for every kind of request). Imports the requests and datasets features."""
