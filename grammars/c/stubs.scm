; What a body holds before anyone wrote it: nothing but comments and empty statements.
(comment) @stub
