"""The code location of one generated DAG shape, for `partition-assets backfill run -f
bench/shape_location.py`: the shape of seed $DAG_SHAPE_SEED (bench/dag_shapes.py), as
bench/generated_shapes_bench.py runs it."""

import os

from bench.dag_shapes import SEED_ENV, definitions, generate

defs = definitions(generate(int(os.environ[SEED_ENV])))
