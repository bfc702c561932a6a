"""``nnx.nn.dtypes`` (as flax.nnx.nn.dtypes): the dtype helpers the layers use to cast
their inputs and parameters, ``canonicalize_dtype`` and ``promote_dtype`` (defined in
``_common`` next to the layer errors they raise)."""

from ._common import canonicalize_dtype as canonicalize_dtype
from ._common import promote_dtype as promote_dtype
