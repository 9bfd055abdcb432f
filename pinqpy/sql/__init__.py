"""The SQL dialect: statement syntax tree (:mod:`.ast`), its parser (:mod:`.parser`), the
compiler to pipeline measurements (:mod:`.compiler`, one module a pass), EXPLAIN
(:mod:`.explain`) and the runner of a compiled release (:mod:`.run`)."""
