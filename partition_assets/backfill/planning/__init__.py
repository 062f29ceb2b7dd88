"""Planning a backfill: its spec (what to rewrite), the sparse (asset, partition) graph it
plans, and which assets outside it read what it rewrites."""
