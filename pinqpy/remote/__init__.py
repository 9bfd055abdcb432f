"""Remote use: the curator's server (:mod:`pinqpy.remote.server`) and the analyst's client
(:mod:`pinqpy.remote.client`), which share only the wire format (:mod:`pinqpy.remote.protocol`)."""
