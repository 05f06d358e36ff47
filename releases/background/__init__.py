"""The machinery of background work, independent of any feature: the outbox that hands work to
the Celery workers by task name, the leases running work holds, and the sweeper that finishes
what dead workers and lost messages left behind (driven by what the features register)."""
