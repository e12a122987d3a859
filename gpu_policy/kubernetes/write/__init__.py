"""Acting on a live cluster: the one actuator (`actuator`) and what it writes with: Events
(`events`), ComposabilityRequests (`attach`), evictions (`evict`), reservations
(`reservations`), releases of gated pods (`admit`, `release`); the planning Lease (`lease`);
and a pipeline step's own pod (`gated_step`, `own_pod`)."""
