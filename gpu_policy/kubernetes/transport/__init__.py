"""Talking to the API server: every request through the real `kubernetes` client, bounded
(`client`, `bounded`)."""
