"""nnx.view keywords given as None keep the flag (flax.nnx's layers' ``set_view(flag=None)``)."""

import jax.numpy as jnp

import nnx_eqx as nnx


def _model():
  rngs = nnx.Rngs(0)
  return nnx.Sequential(
    nnx.Linear(2, 4, rngs=rngs), nnx.BatchNorm(4, rngs=rngs), nnx.Dropout(0.1, rngs=rngs)
  )


def test_none_keeps_the_flag_and_counts_as_used():
  model = _model()
  eval_model = nnx.view(model, deterministic=True, use_running_average=True)
  again = nnx.view(eval_model, deterministic=None, use_running_average=False)
  assert again.layers[2].deterministic is True
  assert again.layers[1].use_running_average is False
  assert model.layers[2].deterministic is False  # the original is untouched
  y = again(jnp.ones((3, 2)))
  assert y.shape == (3, 4)


def test_view_info_describes_flags_as_optional_keywords():
  info = nnx.view_info(_model())
  assert "BatchNorm:\n  use_running_average: bool | None = None\n" in info
  assert "Dropout:\n  deterministic: bool | None = None\n" in info
