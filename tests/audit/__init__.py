"""Statistical privacy audits: Monte-Carlo lower bounds on each mechanism's privacy loss."""
