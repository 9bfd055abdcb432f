"""The logical plan: nodes, public facts, stability, canonical form and public snapshots."""
