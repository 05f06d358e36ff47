"""The shared kernel every feature uses: errors for the person who gave the input, the three
roles, the audit log, private storage and the review's pure figures. It imports no feature."""
