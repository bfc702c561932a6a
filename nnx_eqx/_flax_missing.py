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
      "nnx_eqx.pytreelib:PytreeState",
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
