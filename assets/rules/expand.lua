-- expand.lua — composite expansion (lathe.rules.builtin("expand")).
--
-- A placeholder, on purpose: the frontend already emits composites (matmul, softmax,
-- gelu, …) as their primitives, recording the composite's name in each node's
-- provenance (the "tensor graph" level groups nodes by it). Rewrite rules act on
-- primitive graphs, so there is nothing left to expand. If composites ever become nodes
-- of their own, their expansion rules belong here, one per composite.
return lathe.ruleset("expand", {})
