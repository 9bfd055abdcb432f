"""The query pipeline every entry point uses: :mod:`.relation` (a plan and its facts, grown by
checked transformations), :mod:`.prepare` (an aggregation becomes a measurement), :mod:`.run`
(check, charge, cache, read and release) and :mod:`.answers` (the answer cache)."""
