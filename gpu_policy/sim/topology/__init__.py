"""`gpu-policy simulate topology`: gangs with required and preferred topology levels on a
cluster of blocks, racks and nodes, placed by gpu-policy's planner, by Kueue's Topology
Aware Scheduling (best fit) and by a topology-blind best fit by node (docs/simulate.md)."""
