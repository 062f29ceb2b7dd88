"""A `dg`-scaffolded project: `definitions.py` loads the `defs/` folder."""
