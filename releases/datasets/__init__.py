"""Datasets: upload and profiling, the column store, tagging of columns, hierarchies, the risk
before release, and each dataset's privacy budget with its ledger. Imports no other feature."""
