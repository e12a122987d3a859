"""Talking to the API server: every request through the real `kubernetes` client, bounded.

`connect` (an ApiClient for a context or the pod's account), `sender` (one request, a LIST,
a WATCH: bounded, retried, worded), `client` (the calls gpu-policy makes, one method each),
`kinds` (the kinds it lists and watches), `permissions` (what each call needs),
`answers` (what the server said, in gpu-policy's terms), `bounded` (the bounded reader).
"""
