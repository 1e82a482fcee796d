[
  (expression_statement)
  (return_statement)
  (if_statement)
  (for_statement)
  (enhanced_for_statement)
  (while_statement)
  (do_statement)
  (try_statement)
  (try_with_resources_statement)
  (throw_statement)
  (break_statement)
  (continue_statement)
  (yield_statement)
  (assert_statement)
  (synchronized_statement)
  (labeled_statement)
  (explicit_constructor_invocation)
] @statement

; A local variable is a statement in a block, not as a for loop's initializer; a switch
; in a block is a statement, one in an expression is not.
(block [(local_variable_declaration) (switch_expression)] @statement)
(constructor_body [(local_variable_declaration) (switch_expression)] @statement)
(switch_block_statement_group [(local_variable_declaration) (switch_expression)] @statement)
