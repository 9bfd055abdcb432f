"""What a noisy aggregation returns: values that carry their accuracy, and their HTML views."""
