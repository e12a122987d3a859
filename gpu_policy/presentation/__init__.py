"""What a person reads: plans and layouts as text (`render`), the fair-share report
(`report`), a cluster's queues and waiting jobs (`status`), why one job waits (`explain`),
a plan checked against a scenario's `expect:` block (`check`), and the demo (`demo`)."""
