"""Records the scenarios' results with flax.nnx (run in an environment with flax).

PYTHONPATH=tests/parity python tests/parity/generate.py
"""

import json
import pathlib

import flax
from flax import nnx
from scenarios import run

result = run(nnx)
result["_flax_version"] = flax.__version__
path = pathlib.Path(__file__).with_name("flax_reference.json")
path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
print(f"wrote {path}")
