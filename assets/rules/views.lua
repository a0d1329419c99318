-- views.lua — view merging (lathe.rules.builtin("views")).
--
-- The View builder already folds View(View(x)) into one View when that is exactly
-- representable, but a rewrite can create a View of a View anyway: when the node between
-- them is rewritten away (View(Copy(View(x))) after dropping the Copy, or
-- View(Add(View(x), 0)) after add-zero), users are rebuilt as they were, not re-folded.
-- These rules rebuild the outer View on the inner one, through the folding builder;
-- when the two views do not compose the result is the same node and nothing fires.
-- An identity view (it reads its input exactly as is) is dropped.
return lathe.ruleset("views", {
  lathe.rule("view-view", "View(View(x))",
             function(m) return m.root:with_inputs({ m.root.inputs[1] }) end),
  lathe.rule("view-identity", "View(x)",
             function(m) return m.root:with_inputs({ m.x }) end),
})
