"""Acting on a live cluster: evictions (`evict`), ComposabilityRequests (`attach`),
reservations (`reservations`), the planning Lease (`lease`), and a pipeline step's own pod
(`gated_step`, `own_pod`)."""
