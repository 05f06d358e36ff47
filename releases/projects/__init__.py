"""Projects: their settings, their members and roles, and moving a dataset between them."""
