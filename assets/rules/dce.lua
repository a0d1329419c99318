-- dce.lua — dead-code elimination (lathe.rules.builtin("dce")).
--
-- Nothing to do, on purpose: a graph is its named outputs (and its declared inputs);
-- everything else is whatever those reach. A node a rewrite disconnects is simply no
-- longer reachable, so it leaves the graph at that very step (it shows up in the step's
-- `removed` list). Assign nodes are side effects and must be outputs (the verifier checks
-- it), so they are never dead. This empty set keeps `lathe.rules.builtin("dce")` working.
return lathe.ruleset("dce", {})
