"""The public API: PrivateFrame, Partition, Session and expression builders."""
