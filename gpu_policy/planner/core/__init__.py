"""The planner's core: what every rule reads and writes, and imports no rule. The program
and its parts (`program`), the context a rule reads (`context`), the queues' shares
(`fair_share`, `queues`), the scope (`scope`, `consolidation`), shapes of jobs and nodes
(`shapes`), the solver (`solve`), turning a solution into placements (`realize`, `packing`),
the state a reason is judged on (`judged`, `codes`), and the shape of a rule (`rule`)."""
