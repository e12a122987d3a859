"""Reading a live cluster as a scenario: each object read once (`nodes`, `pods`, `queues`,
`dra`, `requests`, ...), one look mapped to a Snapshot (`look`, `snapshot`)."""
