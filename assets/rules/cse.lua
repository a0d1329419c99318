-- cse.lua — common-subexpression elimination (lathe.rules.builtin("cse")).
--
-- Nothing to do, on purpose: nodes are hash-consed (core/ir/node.h). Building the same
-- (op, dtype, shape, inputs, attributes) twice returns the same node, and a rewrite
-- rebuilds users through the same store, so two equal subexpressions are always one node
-- — CSE holds for every graph at every step. This empty set exists so that scripts
-- written for compilers with an explicit CSE pass (and `lathe.rules.builtin("cse")`)
-- keep working. Provenance is not part of a node's identity: the first creator's
-- composite path and step are kept when two computations merge.
return lathe.ruleset("cse", {})
