[
  (expression_statement)
  (return_statement)
  (if_statement)
  (for_statement)
  (for_range_loop)
  (while_statement)
  (do_statement)
  (switch_statement)
  (case_statement)
  (break_statement)
  (continue_statement)
  (goto_statement)
  (labeled_statement)
  (attributed_statement)
  (try_statement)
  (throw_statement)
  (co_return_statement)
  (co_yield_statement)
  (seh_try_statement)
  (seh_leave_statement)
] @statement

; A declaration is a statement in a block, not at namespace scope or as a for loop's
; initializer.
(compound_statement
  [
    (declaration)
    (type_definition)
    (alias_declaration)
    (using_declaration)
    (static_assert_declaration)
  ] @statement)
