"""Planning a backfill: its spec (what to rewrite), the sparse (asset, partition) graph it
plans, and which assets outside it read what it rewrites.

- spec.py: the BackfillSpec every surface builds, and how each surface names its fields;
- graph.py: the graph (Node, AssetSlice, BackfillGraph) and `plan`, which builds it from the rest;
- selection.py: the spec's selection and static filter, checked against the code location;
- keys.py: each asset's partition keys; windows.py: the windows of time partitions;
- lineage.py: the downstream cascade, and `impact` on assets outside the backfill;
- history.py: plans the instance's history picks (`produced_by`, `stale`); reasons.py: why each node is in them;
- edges.py: the edges between two assets' partitions, as index arrays.
"""
