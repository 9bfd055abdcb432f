"""The curator's server: ``pinqpy serve CONFIG`` answers untrusted analysts over HTTP."""
