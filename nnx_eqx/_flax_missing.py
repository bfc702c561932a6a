"""flax.nnx 0.12 names and module paths that nnx_eqx does not provide, by reason.

``nnx.<namespace>.<name>`` for one of these raises :class:`OutOfScopeError` with
the reason (see :mod:`._flax_names`); the docs list them (migration guide, "Names not
provided"), and ``tests/test_flax_surface.py`` checks that every entry is really missing
(delete it once it is provided) and that every other name of flax's public surface
imports from nnx_eqx. Entries are ``"module:name"``, or a module path alone when the
whole module is absent.
"""

from __future__ import annotations

MISSING: tuple[tuple[str, tuple[str, ...]], ...] = (
  (
    (
      "flax's graph-engine internals: node-implementation registries and classes, the graph "
      "context and static caches, flat-state records and hijax ArrayRef definitions. "
      "nnx_eqx's engine is built differently (nnx_eqx.graph.NodeImpl, "
      "register_graph_node_type with a NodeImpl); user code reaches it through "
      "split/merge/state/update. The predicates (is_node_leaf, is_node_type, is_node_module, "
      "is_pytree_node) and jax_to_nnx_path are provided."
    ),
    (
      "nnx_eqx.graphlib:ArrayRefDef",
      "nnx_eqx.graphlib:DataElem",
      "nnx_eqx.graphlib:GRAPH_CONTEXT",
      "nnx_eqx.graphlib:GRAPH_REGISTRY",
      "nnx_eqx.graphlib:GenericPytree",
      "nnx_eqx.graphlib:GraphContext",
      "nnx_eqx.graphlib:GraphFlatState",
      "nnx_eqx.graphlib:GraphNodeImpl",
      "nnx_eqx.graphlib:IndexesPytreeDef",
      "nnx_eqx.graphlib:LEAF_ATTR",
      "nnx_eqx.graphlib:LeafAttr",
      "nnx_eqx.graphlib:NODE_ATTR",
      "nnx_eqx.graphlib:NodeAttr",
      "nnx_eqx.graphlib:NodeImplBase",
      "nnx_eqx.graphlib:PYTREE_NODE_IMPL",
      "nnx_eqx.graphlib:PYTREE_REGISTRY",
      "nnx_eqx.graphlib:PythonRefMap",
      "nnx_eqx.graphlib:PytreeNodeImpl",
      "nnx_eqx.graphlib:REPEATED",
      "nnx_eqx.graphlib:Repeated",
      "nnx_eqx.graphlib:Static",
      "nnx_eqx.graphlib:StaticCache",
      "nnx_eqx.graphlib:StaticElem",
      "nnx_eqx.graphlib:UpdateContextManager",
      "nnx_eqx.graphlib:get_node_impl",
      "nnx_eqx.graphlib:get_node_impl_for_type",
      "nnx_eqx.graphlib:graph_pop",
      "nnx_eqx.graphlib:register_graph_node_type",
      "nnx_eqx.graphlib:register_pytree_node_type",
      "nnx_eqx.graphlib:static_cache",
      "nnx_eqx.graph:ArrayRefDef",
      "nnx_eqx.graph:ArrayRefOutput",
      "nnx_eqx.graph:DataElem",
      "nnx_eqx.graph:GRAPH_CONTEXT",
      "nnx_eqx.graph:GRAPH_REGISTRY",
      "nnx_eqx.graph:GenericPytree",
      "nnx_eqx.graph:GraphContext",
      "nnx_eqx.graph:GraphFlatState",
      "nnx_eqx.graph:GraphNodeImpl",
      "nnx_eqx.graph:IndexesPytreeDef",
      "nnx_eqx.graph:LEAF_ATTR",
      "nnx_eqx.graph:LeafAttr",
      "nnx_eqx.graph:NODE_ATTR",
      "nnx_eqx.graph:NO_UPDATE",
      "nnx_eqx.graph:NoUpdate",
      "nnx_eqx.graph:NodeAttr",
      "nnx_eqx.graph:NodeImplBase",
      "nnx_eqx.graph:PYTREE_NODE_IMPL",
      "nnx_eqx.graph:PYTREE_REGISTRY",
      "nnx_eqx.graph:PythonRefMap",
      "nnx_eqx.graph:PytreeNodeImpl",
      "nnx_eqx.graph:REPEATED",
      "nnx_eqx.graph:Repeated",
      "nnx_eqx.graph:Static",
      "nnx_eqx.graph:StaticCache",
      "nnx_eqx.graph:StaticElem",
      "nnx_eqx.graph:UpdateContextManager",
      "nnx_eqx.graph:get_node_impl",
      "nnx_eqx.graph:get_node_impl_for_type",
      "nnx_eqx.graph:graph_pop",
      "nnx_eqx.graph:register_pytree_node_type",
      "nnx_eqx.graph:static_cache",
    ),
  ),
  (
    (
      "flax.nnx.graph re-exports all of graphlib, including Module-level functions. In "
      "nnx_eqx, nnx_eqx.graph is the lowest layer (the engine package) and may not import the "
      "module layer; these names are at nnx_eqx.graphlib and the top level."
    ),
    (
      "nnx_eqx.graph:iter_children",
      "nnx_eqx.graph:iter_module_children",
      "nnx_eqx.graph:pure",
      "nnx_eqx.graph:recursive_map",
      "nnx_eqx.graph:vars_as",
      "nnx_eqx.graph:with_vars",
    ),
  ),
  (
    (
      "flax's helpers for writing its own transforms (prefix broadcasting, masks, snapshots, "
      "update records). nnx_eqx's transforms use their own (nnx_eqx.extract has "
      "to_tree/from_tree/prefix/TreeState/NodeStates; the user-facing "
      "split_inputs/merge_inputs are at nnx_eqx.transforms.general)."
    ),
    (
      "nnx_eqx.extract:ExtractIndex",
      "nnx_eqx.extract:GraphDefState",
      "nnx_eqx.extract:KeyPath",
      "nnx_eqx.extract:Mask",
      "nnx_eqx.extract:Opaque",
      "nnx_eqx.extract:OrderedDict",
      "nnx_eqx.extract:PrefixMapping",
      "nnx_eqx.extract:Updates",
      "nnx_eqx.extract:apply_updates",
      "nnx_eqx.extract:broadcast_prefix",
      "nnx_eqx.extract:broadcast_prefix2",
      "nnx_eqx.extract:broadcast_prefix_map",
      "nnx_eqx.extract:check_consistent_aliasing",
      "nnx_eqx.extract:check_consistent_aliasing2",
      "nnx_eqx.extract:check_no_aliases",
      "nnx_eqx.extract:check_prefix",
      "nnx_eqx.extract:check_same_variables",
      "nnx_eqx.extract:copy_var_structure",
      "nnx_eqx.extract:default_split_fn",
      "nnx_eqx.extract:extract",
      "nnx_eqx.extract:filter_kwargs",
      "nnx_eqx.extract:find",
      "nnx_eqx.extract:from_tree2",
      "nnx_eqx.extract:get_updates",
      "nnx_eqx.extract:insert",
      "nnx_eqx.extract:is_tree_node",
      "nnx_eqx.extract:labeled",
      "nnx_eqx.extract:mask_at",
      "nnx_eqx.extract:merge_tree_node",
      "nnx_eqx.extract:replace_at",
      "nnx_eqx.extract:slice_at",
      "nnx_eqx.extract:snapshot",
      "nnx_eqx.extract:to_masked",
      "nnx_eqx.extract:to_tree2",
      "nnx_eqx.extract:treemap_copy_args",
      "nnx_eqx.extract:update_carry_variables",
      "nnx_eqx.extract:variable_changed",
      "nnx_eqx.transforms.transforms:ValueMetadata",
      "nnx_eqx.transforms.transforms:LiftedModule",
    ),
  ),
  (
    (
      "Wrapper classes and call-signature records inside flax's transform implementations "
      "(Simple*Fn, *Fn, CustomVjp, the Stage/Traced/Lowered/Compiled objects of its jit, "
      "Broadcasted). nnx_eqx's transforms return jax's own stage objects "
      "(JitWrapped.lower/trace) and need none of these wrappers."
    ),
    (
      "nnx_eqx.transforms.autodiff:BwdFn",
      "nnx_eqx.transforms.autodiff:CustomVjp",
      "nnx_eqx.transforms.autodiff:CustomVjpFnWrapper",
      "nnx_eqx.transforms.autodiff:FwdFn",
      "nnx_eqx.transforms.autodiff:GradFn",
      "nnx_eqx.transforms.autodiff:SimpleBwdFn",
      "nnx_eqx.transforms.autodiff:SimpleCustomVjp",
      "nnx_eqx.transforms.autodiff:SimpleCustomVjpFn",
      "nnx_eqx.transforms.autodiff:SimpleFwdFn",
      "nnx_eqx.transforms.autodiff:SimpleGradFn",
      "nnx_eqx.transforms.autodiff:SimpleJvpFn",
      "nnx_eqx.transforms.autodiff:SimpleRematFn",
      "nnx_eqx.transforms.autodiff:SimpleVjpFn",
      "nnx_eqx.transforms.compilation:Compiled",
      "nnx_eqx.transforms.compilation:JitFn",
      "nnx_eqx.transforms.compilation:Lowered",
      "nnx_eqx.transforms.compilation:ShardMapFn",
      "nnx_eqx.transforms.compilation:SimpleCompiled",
      "nnx_eqx.transforms.compilation:SimpleJitFn",
      "nnx_eqx.transforms.compilation:SimpleJitPartialFn",
      "nnx_eqx.transforms.compilation:SimpleJitPartialWrapped",
      "nnx_eqx.transforms.compilation:SimpleJitWrapped",
      "nnx_eqx.transforms.compilation:SimpleLowered",
      "nnx_eqx.transforms.compilation:SimplePartialCompiled",
      "nnx_eqx.transforms.compilation:SimplePartialLowered",
      "nnx_eqx.transforms.compilation:SimplePartialTraced",
      "nnx_eqx.transforms.compilation:SimpleShardMapFn",
      "nnx_eqx.transforms.compilation:SimpleTraced",
      "nnx_eqx.transforms.compilation:Stage",
      "nnx_eqx.transforms.compilation:Traced",
      "nnx_eqx.transforms.iteration:Broadcasted",
      "nnx_eqx.transforms.iteration:ForiLoopBodyFn",
      "nnx_eqx.transforms.iteration:Leaves",
      "nnx_eqx.transforms.iteration:PmapFn",
      "nnx_eqx.transforms.iteration:ScanFn",
      "nnx_eqx.transforms.iteration:SimpleForiLoopBodyFn",
      "nnx_eqx.transforms.iteration:SimplePmapFn",
      "nnx_eqx.transforms.iteration:SimpleScanFn",
      "nnx_eqx.transforms.iteration:SimpleVmapFn",
      "nnx_eqx.transforms.iteration:SimpleWhileLoopBodyFn",
      "nnx_eqx.transforms.iteration:SimpleWhileLoopCondFn",
      "nnx_eqx.transforms.iteration:VmapFn",
      "nnx_eqx.transforms.iteration:WhileLoopBodyFn",
      "nnx_eqx.transforms.iteration:WhileLoopCondFn",
      "nnx_eqx.transforms.transforms:CheckifyFn",
      "nnx_eqx.transforms.transforms:Leaves",
      "nnx_eqx.transforms.transforms:SimpleCheckifyFn",
      "nnx_eqx.transforms.transforms:SimpleCondFn",
      "nnx_eqx.transforms.transforms:SimpleEvalShapeFn",
      "nnx_eqx.transforms.transforms:SimpleMakeJaxprFn",
    ),
  ),
  (
    (
      "flax's own machinery for hijax Variables (its jax primitives and their base HiPrim, "
      "effects, QDD types, AbstractVariable, metaclasses and contexts). nnx_eqx builds hijax "
      "Variables on its own hi-type cell and primitives instead (see "
      "nnx_eqx.variablelib.HijaxVariable)."
    ),
    (
      "nnx_eqx.variablelib:AbstractVariable",
      "nnx_eqx.variablelib:GetVariable",
      "nnx_eqx.variablelib:HiPrim",
      "nnx_eqx.variablelib:HijaxVariableMeta",
      "nnx_eqx.variablelib:NewVariable",
      "nnx_eqx.variablelib:SetVariable",
      "nnx_eqx.variablelib:VARIABLE_CONTEXT",
      "nnx_eqx.variablelib:VarDefaultsContext",
      "nnx_eqx.variablelib:VariableContext",
      "nnx_eqx.variablelib:VariableEffect",
      "nnx_eqx.variablelib:VariableMeta",
      "nnx_eqx.variablelib:VariableQDD",
      "nnx_eqx.variablelib:get_variable_p",
      "nnx_eqx.variablelib:is_array_ref",
      "nnx_eqx.variablelib:new_variable_p",
      "nnx_eqx.variablelib:set_variable_p",
      "nnx_eqx.variablelib:variable_effect",
    ),
  ),
  (
    (
      "flax's own repr, summary and bookkeeping machinery (the repr records of pytreelib and "
      "summary, Pytree attribute bookkeeping). nnx_eqx renders with its own repr, treescope "
      "and nnx.tabulate, and tracks attributes its own way; the reprlib, ids, tracers and "
      "proxy_caller modules themselves are provided."
    ),
    (
      "nnx_eqx.pytreelib:ArrayRepr",
      "nnx_eqx.pytreelib:AttributeStatus",
      "nnx_eqx.pytreelib:BUILDING_DOCS",
      "nnx_eqx.pytreelib:DATA_REGISTRY",
      "nnx_eqx.pytreelib:MutableArrayRepr",
      "nnx_eqx.pytreelib:OBJECT_CONTEXT",
      "nnx_eqx.pytreelib:ObjectContext",
      "nnx_eqx.pytreelib:VariableRepr",
      "nnx_eqx.summary:ArrayRepr",
      "nnx_eqx.summary:CallInfo",
      "nnx_eqx.summary:NodeStats",
      "nnx_eqx.summary:NoneDumper",
      "nnx_eqx.summary:ObjectInfo",
      "nnx_eqx.summary:SimpleObjectRepr",
      "nnx_eqx.summary:SizeBytes",
      "nnx_eqx.summary:filter_rng_streams",
      "nnx_eqx.visualization:render_object_constructor",
      "nnx_eqx.statelib:NestedStateRepr",
      "nnx_eqx.module:tuple_init",
      "nnx_eqx.module:tuple_reduce",
      "nnx_eqx.rnglib:Counts",
      "nnx_eqx.rnglib:NotKey",
      "nnx_eqx.training.optimizer:MISSING",
    ),
  ),
)

# --- keyword arguments --------------------------------------------------------------------
# Parameters of flax.nnx 0.12 callables (recorded in tests/parity/flax_surface_<version>.json)
# that nnx_eqx's counterpart does not take under flax's name and kind, by callable
# ("module:name", "module:Class.__init__" or "module:Class.__call__") and parameter, with the
# reason. tests/test_flax_surface.py checks each is really not taken (delete it once it is)
# and that every other flax parameter is; the migration guide lists them (generated).

_INTERNAL_RECORD = (
  "the constructor of one of flax's graph-engine records; nnx_eqx's engine builds its own "
  "records (produced by nnx.split/nnx.graphdef, not constructed by user code)"
)
_ON_HOOKS = (
  "flax's Linen-era metadata callbacks (on_set_value, on_get_value, ...) are not "
  "supported; nnx_eqx's VariableMetadata holds the value and its metadata only"
)
_JIT_FUN = "nnx_eqx names the function parameter fn; pass the function positionally"
_PMAP_OPTS = (
  "nnx_eqx's nnx.pmap does not forward these jax.pmap options; use nnx.shard_map or "
  "nnx.jit with shardings (which JAX recommends over jax.pmap)"
)
_STATE_CLS = (
  "nnx_eqx always builds an nnx.State (there is no other state class to choose); "
  "convert the result yourself if you need another mapping type"
)


def _each(names: tuple[str, ...], reason: str) -> dict[str, str]:
  return dict.fromkeys(names, reason)


MISSING_KEYWORDS: dict[str, dict[str, str]] = {
  **{
    f"nnx_eqx.{k}.__init__": _each(names, _INTERNAL_RECORD)
    for k, names in {
      "extract:NodeStates": ("_graphdef",),
      "extract:TreeState": ("__state__", "prefix_fn"),
      "graphlib:GraphDef": ("nodes", "attributes", "num_leaves"),
      "graphlib:GraphState": ("_graphdef", "_state"),
      "graphlib:MergeContext": ("ctxtag", "index_ref", "is_inner"),
      "graphlib:NodeDef": ("outer_index", "num_attributes", "metadata"),
      "graphlib:SplitContext": ("ctxtag", "ref_index", "is_inner"),
      "graphlib:TreeNodeDef": ("treedef",),
      "graphlib:UpdateContext": (
        "outer_ref_outer_index",
        "outer_index_inner_ref",
        "outer_index_outer_ref",
        "inner_ref_outer_index",
        "static_cache",
      ),
      "graphlib:VariableDef": ("outer_index", "array_refdef"),
    }.items()
  },
  "nnx_eqx.extract:from_tree": _each(
    ("is_node_leaf", "is_leaf", "map_non_graph_nodes"),
    "flax's hooks into its flattening (custom leaf predicates, mapping of non-graph nodes) "
    "are not offered; nnx_eqx's from_tree rebuilds the nodes of its own to_tree output",
  ),
  "nnx_eqx.graph:Key.__init__": _each(
    ("args", "kwargs"),
    "nnx.graph.Key is a type for annotations (collections.abc.Hashable), not constructed",
  ),
  "nnx_eqx.graphlib:is_pytree_node": {
    "check_graph_registry": "an option of flax's graph engine (whether to consult its "
    "graph-node registry); nnx_eqx's is_pytree_node has one fixed behaviour",
  },
  "nnx_eqx.graphlib:merge": {
    "recreate_variables": "an option of flax's graph engine (whether merge makes new Variable "
    "objects); nnx_eqx's merge has one fixed behaviour (copy= is offered)",
  },
  "nnx_eqx.graphlib:unflatten": _each(
    ("copy_variables", "recreate_variables"),
    "options of flax's graph engine (whether unflatten copies or makes new Variable "
    "objects); nnx_eqx's unflatten has one fixed behaviour",
  ),
  "nnx_eqx.helpers:Dict.__init__": {
    "args": "nnx_eqx takes the one positional argument dict() accepts (a mapping or "
    "iterable of pairs) as a positional-only parameter; dict() rejects more",
  },
  "nnx_eqx.helpers:TrainState.__init__": {
    **_each(
      ("params", "step", "tx"),
      "keyword-only in nnx_eqx (TrainState.create, the usual way to build one, takes them by name)",
    ),
    "opt_state": "TrainState.create computes it from tx and params (as flax's create "
    "does); nnx_eqx's constructor does not take a precomputed one",
  },
  "nnx_eqx.nn.recurrent:RNNCellBase.__call__": _each(
    ("carry", "inputs"),
    "nnx_eqx's RNNCellBase declares no `__call__`; each cell defines `__call__(carry, inputs)`",
  ),
  "nnx_eqx.statelib:State.__init__": {
    "_copy": "a private flag of flax's State (whether to copy the given mapping); not offered",
  },
  "nnx_eqx.statelib:from_flat_state": {"cls": _STATE_CLS},
  "nnx_eqx.statelib:merge_state": {"cls": _STATE_CLS},
  "nnx_eqx.summary:tabulate": {
    "obj": "nnx_eqx names the parameter model; pass it positionally",
    "method": "not offered: nnx_eqx tabulates the call model(*inputs); wrap another method in "
    "a small Module to tabulate it",
    "row_filter": "not offered: nnx_eqx's table has one row per module call",
  },
  "nnx_eqx.training.metrics:Accuracy.__init__": _each(
    ("args", "kwargs"),
    "flax forwards these to `Average.__init__`, whose one parameter (argname) nnx_eqx's "
    "Accuracy takes by name",
  ),
  "nnx_eqx.transforms.compilation:JitWrapped.__init__": _each(
    ("fun", "out_shardings", "keep_unused", "device", "backend", "inline"),
    "nnx_eqx's JitWrapped is built by nnx.jit (which takes these options) rather than "
    "constructed by user code",
  ),
  "nnx_eqx.transforms.compilation:jit": {"fun": _JIT_FUN},
  "nnx_eqx.compat:jit": {"fun": _JIT_FUN},
  "nnx_eqx.transforms.iteration:pmap": _each(
    ("static_broadcasted_argnums", "donate_argnums"), _PMAP_OPTS
  ),
  "nnx_eqx.compat:pmap": _each(("static_broadcasted_argnums", "donate_argnums"), _PMAP_OPTS),
  "nnx_eqx.transforms.iteration:scan": {
    "_split_transpose": "a private, experimental jax.lax.scan option; not forwarded",
  },
  "nnx_eqx.compat:scan": {
    "_split_transpose": "a private, experimental jax.lax.scan option; not forwarded",
  },
  "nnx_eqx.transforms.transforms:checkify": _each(
    ("graph", "graph_updates"),
    "keyword-only in nnx_eqx (as in every other transform); pass them by name",
  ),
  "nnx_eqx.transforms.transforms:make_jaxpr": {
    "static_argnums": "nnx_eqx's make_jaxpr traces with the Modules split out of the "
    "arguments, so jax.make_jaxpr's argument numbers do not apply; close over static "
    "values instead",
  },
  "nnx_eqx.variablelib:VarDefaults.__init__": _each(
    ("hijax", "ref"),
    "nnx_eqx's VarDefaults holds a dict of the flags (built by nnx.var_defaults(hijax=, "
    "ref=), which takes them by name)",
  ),
  "nnx_eqx.variablelib:VariableMetadata.__init__": {
    "raw_value": "nnx_eqx's VariableMetadata names it value",
    **_each(
      ("on_set_value", "on_get_value", "on_create_value", "on_add_axis", "on_remove_axis"),
      _ON_HOOKS,
    ),
  },
  "nnx_eqx.variablelib:with_metadata": _each(
    ("on_set_value", "on_get_value", "on_create_value", "on_add_axis", "on_remove_axis"),
    _ON_HOOKS,
  ),
}

# flax parameters nnx_eqx takes through a ``**kwargs`` of its own that really handles the
# name (where, in the reason); the test checks the ``**kwargs`` is there.
_JAX_JIT = "passed on to jax.jit through **jit_kwargs"
_VARIABLE_KW = (
  "taken through **metadata, recorded as the Variable's storage flags (get_metadata() "
  "reports them, as flax's)"
)
KEYWORDS_VIA_KWARGS: dict[str, dict[str, str]] = {
  **{
    f"nnx_eqx.{k}:{cls}.__init__": _each(("hijax", "ref", "eager_sharding"), _VARIABLE_KW)
    for k, classes in {
      "variablelib": ("Variable", "Param", "BatchStat", "Cache", "Intermediate", "Perturbation"),
      "rnglib": ("RngState", "RngKey", "RngCount"),
      "nn.lora": ("LoRAParam",),
      "training.metrics": ("MetricState",),
      "training.optimizer": ("OptState", "OptArray", "OptVariable"),
    }.items()
    for cls in classes
  },
  "nnx_eqx.transforms.compilation:jit": _each(
    ("donate_argnames", "keep_unused", "device", "backend", "inline"), _JAX_JIT
  ),
  "nnx_eqx.compat:jit": _each(
    ("donate_argnames", "keep_unused", "device", "backend", "inline"), _JAX_JIT
  ),
  "nnx_eqx.transforms.compilation:jit_partial": _each(
    (
      "in_shardings",
      "out_shardings",
      "static_argnums",
      "static_argnames",
      "donate_argnums",
      "donate_argnames",
      "keep_unused",
      "device",
      "backend",
      "inline",
    ),
    "passed on to nnx.jit through **jit_options",
  ),
  "nnx_eqx.helpers:Sequential.__call__": {
    "rngs": "passed on through **kwargs to the layers (as flax 0.12.8's Sequential did)",
  },
  "nnx_eqx.pytreelib:dataclass": _each(
    ("init", "eq", "order", "unsafe_hash", "match_args", "kw_only", "slots", "weakref_slot"),
    "passed on to dataclasses.dataclass through **kwargs",
  ),
  "nnx_eqx.rnglib:Rngs.__init__": {
    "default": "Rngs(default=...) arrives in **streams as the stream named default, the "
    "same stream the positional argument makes",
  },
}
