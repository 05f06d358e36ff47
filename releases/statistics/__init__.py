"""Differentially private statistics releases: their queries checked against the dataset, the
request with its free preview, the run that spends the dataset's privacy budget and draws the
noise once, its checks and its part of the release report, and the budget pages. Imports the
requests and datasets features."""
