"""Remote tests: a real pinqpy server process on 127.0.0.1, reached over HTTP."""
