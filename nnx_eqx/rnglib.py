"""``nnx.rnglib`` (flax.nnx's module path): ``Rngs``, its streams and the tools that
split, fork, reseed and restore them.

A re-export namespace (see ``nnx_eqx/__init__.py``, "flax 0.12 import surface").
"""

from .module._rngs import RngCount as RngCount
from .module._rngs import RngKey as RngKey
from .module._rngs import Rngs as Rngs
from .module._rngs import RngState as RngState
from .module._rngs import RngStream as RngStream
from .transforms.rngs._split import SplitBackups as SplitBackups
from .transforms.rngs._split import backup_keys as backup_keys
from .transforms.rngs._split import restore_rngs as restore_rngs
from .transforms.rngs._tools import fork_rngs as fork_rngs
from .transforms.rngs._tools import reseed as reseed
from .transforms.rngs._tools import split_rngs as split_rngs
from .transforms.rngs._tools import with_rngs as with_rngs
