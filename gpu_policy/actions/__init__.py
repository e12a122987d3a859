"""Observe -> decide -> act, as the CLI, the KFP components and the Airflow operators run it:
one round or a loop of them (`cycle`), and what one pipeline step gets (`step`)."""
