"""The flax-suite harness (tests/parity/flax_suite.py): import rewriting, exclusions, summary."""

import importlib.util
import pathlib

_PATH = pathlib.Path(__file__).parent / "parity" / "flax_suite.py"
_spec = importlib.util.spec_from_file_location("flax_suite", _PATH)
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)


def test_rewrite_imports_points_flax_nnx_at_nnx_eqx():
  src = (
    "from flax import nnx\n"
    "from flax import errors, nnx\n"
    "from flax import linen, struct\n"
    "from flax.nnx.nn import initializers\n"
    "from flax.typing import Dtype\n"
    "import flax.errors\n"
    "x = flax.errors.TraceContextError\n"
    "y = flax.nnx.Param\n"
  )
  out = suite.rewrite_imports(src)
  assert "import nnx_eqx as nnx" in out and "import nnx_eqx as errors" in out
  assert "from flax import linen as linen" in out and "from flax import struct as struct" in out
  assert "from nnx_eqx.nn import initializers" in out
  assert "from _parity_shim import Dtype" in out
  assert "x = nnx_eqx.TraceContextError" in out and "y = nnx.Param" in out
  assert "from flax import nnx" not in out


def test_exclusions_mark_internal_and_linen_tests():
  src = (
    "class T:\n"
    "  def test_a(self):\n"
    "    bridge.ToNNX(f)\n"
    "  def test_b(self):\n"
    "    linen.Dense(2)\n"
    "  def test_c(self):\n"
    "    pass\n"
  )
  assert suite.exclusions(src, with_linen=True) == {2: suite.EXCLUDED_TOKENS["bridge."]}
  without = suite.exclusions(src, with_linen=False)
  assert sorted(without) == [2, 4] and without[4] == suite.LINEN_REASON
  marked = suite.mark_excluded(src, without)
  assert marked.splitlines()[1].strip().startswith("@parity_excluded(")


def test_tests_reading_pytree_state_are_not_excluded():
  # nnx_eqx provides ``obj._pytree__state``; a test using it with the bridge stays excluded
  src = (
    "class T:\n"
    "  def test_a(self):\n"
    "    assert hasattr(foo, '_pytree__state')\n"
    "  def test_b(self):\n"
    "    foo._pytree__state.initializing\n"
    "    nnx.bridge.lazy_init(foo)\n"
  )
  assert suite.exclusions(src, with_linen=True) == {4: suite.EXCLUDED_TOKENS["bridge."]}


def test_shim_config_sets_the_nnx_eqx_settings():
  import nnx_eqx as nnx

  shim: dict = {}
  exec(compile(suite.SHIM, "_parity_shim.py", "exec"), shim)
  config = shim["config"]
  setting = nnx.set_sow_capture_noop
  old = setting.current_value()
  try:
    config.update("nnx_sow_capture_noop", not old)
    assert setting.current_value() is (not old)
    assert config._read("nnx_sow_capture_noop") is (not old)
    assert config.nnx_sow_capture_noop is (not old)
  finally:
    config.update("nnx_sow_capture_noop", old)
  assert setting.current_value() is old


def test_summary_counts_only_tests_that_pass_with_flax():
  ours = {
    "a_test.py": {
      "T.test_ok": {"outcome": "passed", "message": ""},
      "T.test_bad": {"outcome": "failed", "message": "AttributeError: x has no attribute 'foo'"},
      "T.test_flaky": {"outcome": "failed", "message": "boom"},
      "T.test_skip": {"outcome": "excluded", "message": ""},
    }
  }
  ref = {
    "a_test.py": {
      "T.test_ok": {"outcome": "passed"},
      "T.test_bad": {"outcome": "passed"},
      "T.test_flaky": {"outcome": "failed"},
      "T.test_skip": {"outcome": "excluded"},
      "T.test_missing": {"outcome": "passed"},
    }
  }
  s = suite.summarise(ours, ref)
  assert s["total"] == {
    "applicable": 3,
    "passed": 1,
    "failed": 1,
    "error": 1,
    "excluded": 1,
    "fails_with_flax": 1,
  }
  assert dict(s["reasons"])["missing attribute 'foo'"] == 1
  assert "**1 of 3 applicable tests pass" in suite.markdown(s, suite.EXCLUDED_FILES)


def test_every_failing_test_is_listed_under_its_explanation():
  explained = [("a_test.T.test_cap*", "capture is missing"), ("a_test.*", "other")]
  groups, unexplained = suite.explain(
    ["a_test.T.test_capture", "a_test.T.test_x", "b_test.T.test_y"], explained
  )
  assert groups == {"capture is missing": ["a_test.T.test_capture"], "other": ["a_test.T.test_x"]}
  assert unexplained == ["b_test.T.test_y"]
  ours = {"a_test.py": {"a_test.T.test_capture": {"outcome": "failed", "message": "x"}}}
  s = suite.summarise(ours, None)
  md = suite.markdown(s, suite.EXCLUDED_FILES, explained)
  assert "Unexplained: 0." in md and "**capture is missing** (1)" in md


def test_the_explanations_file_parses():
  explained = suite.load_explained(_PATH.parent / "flax_suite_explained.toml")
  assert explained and all(pat and why for pat, why in explained)
