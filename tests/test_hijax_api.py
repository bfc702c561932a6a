"""Which JAX hi-type API hijax Variables use: chosen at import by feature detection,
public ``jax.experimental.hijax`` first, private ``jax._src`` as the fallback."""

import importlib
import types

import jax
import pytest

from nnx_eqx.graph.variables import _hijax_api


class _NewPrim:  # the rules of jax >= 0.10: vjp_fwd(nzs_in, ...) and transpose
  def vjp_fwd(self, nzs_in, /, *args): ...

  def transpose(self, out_ct, *accums): ...


class _OldPrim:  # jax 0.8's VJPHiPrimitive: vjp_fwd(*args), no transpose
  def vjp_fwd(self, *args): ...


def _module(**names):
  return types.SimpleNamespace(HiType=object, register_hitype=print, **names)


def _zeros(x):
  return x


def test_public_module_is_preferred_and_hiprim_over_vjphiprimitive():
  public = _module(HiPrim=_NewPrim, VJPHiPrimitive=_OldPrim, instantiate_zeros=_zeros)
  private = _module(HiPrim=_NewPrim, instantiate_zeros=_zeros)
  api = _hijax_api.resolve(public, private, None)
  assert api is not None and api.source == "jax.experimental.hijax" and api.HiPrim is _NewPrim


def test_private_module_is_the_fallback_and_ad_supplies_instantiate_zeros():
  ad = types.SimpleNamespace(instantiate_zeros=_zeros)
  api = _hijax_api.resolve(None, _module(VJPHiPrimitive=_NewPrim), ad)
  assert api is not None and api.source == "jax._src.hijax"
  assert api.HiPrim is _NewPrim and api.instantiate_zeros is _zeros
  # a public module lacking instantiate_zeros (jax 0.8) takes it from ad as well
  api = _hijax_api.resolve(_module(VJPHiPrimitive=_NewPrim), None, ad)
  assert api is not None and api.source == "jax.experimental.hijax"


@pytest.mark.parametrize(
  "public",
  [
    None,
    _module(VJPHiPrimitive=_OldPrim, instantiate_zeros=_zeros),  # jax 0.8 rules
    types.SimpleNamespace(HiPrim=_NewPrim, instantiate_zeros=_zeros),  # no HiType
  ],
)
def test_no_usable_api_gives_none(public):
  assert _hijax_api.resolve(public, None, None) is None


@pytest.mark.skipif(_hijax_api.API is None, reason="this jax has no hi-type API (jax < 0.10)")
def test_this_jax_resolves_and_the_private_fallback_gives_the_same_classes():
  public = importlib.import_module("jax.experimental.hijax")
  private = importlib.import_module("jax._src.hijax")
  ad = importlib.import_module("jax._src.interpreters.ad")
  api = _hijax_api.API
  assert api is not None and api.source == "jax.experimental.hijax"
  fallback = _hijax_api.resolve(None, private, ad)
  assert fallback is not None and fallback.source == "jax._src.hijax"
  assert (fallback.HiType, fallback.HiPrim) == (api.HiType, api.HiPrim)
  assert _hijax_api.resolve(public, None, None) == api


def test_unavailable_message_names_the_jax_needed_and_the_fix():
  msg = _hijax_api.UNAVAILABLE
  assert f"jax>={_hijax_api.OLDEST_JAX}" in msg and jax.__version__ in msg
  assert "hijax=False" in msg


def test_box_is_used_only_where_jax_has_it_and_the_hitype_api():
  class Box: ...

  api = _hijax_api.resolve(_module(HiPrim=_NewPrim, instantiate_zeros=_zeros), None, None)
  assert _hijax_api.find_box(types.SimpleNamespace(Box=Box), api) is Box  # jax <= 0.11.0
  assert _hijax_api.find_box(types.SimpleNamespace(), api) is None  # jax >= 0.11.1: cells
  assert _hijax_api.find_box(types.SimpleNamespace(Box=Box), None) is None  # no hi-type API
  assert _hijax_api.find_box(None, api) is None


def test_this_jax_box_choice_matches_its_private_module():
  private = pytest.importorskip("jax._src.hijax") if _hijax_api.API is not None else None
  expected = getattr(private, "Box", None)
  assert _hijax_api.BOX is expected
